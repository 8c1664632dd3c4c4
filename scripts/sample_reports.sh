#!/bin/sh
# The sample HTML reports linked from README ("Reports"): the default conformance run and
# the autograd engine, each page beside its JSON and Markdown reports, and the screenshot
# README shows (Debian: apt-get install chromium). Run from anywhere; PYTHON picks the
# interpreter (default: python).
set -u
cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
mkdir -p docs/reports/conformance docs/reports/engine-autograd
"$PY" -m conformance --report docs/reports/conformance/report --html docs/reports/conformance
"$PY" -m conformance --engine autograd --report docs/reports/engine-autograd/report \
    --html docs/reports/engine-autograd
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,1400 \
    --screenshot=docs/reports/report.png "file://$PWD/docs/reports/conformance/index.html"
