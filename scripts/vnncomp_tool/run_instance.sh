#!/usr/bin/env bash
# VNN-COMP tool interface: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS_FILE TIMEOUT
# Writes `sat` (then the counterexample ((X_0 v) ... (Y_0 v))), `unsat`, `unknown` or
# `timeout` to RESULTS_FILE; a file the verifier cannot read gives `error` (the reason on
# stderr). TORCHLEAN_ROOT: the checkout (default: two levels above this script);
# TORCHLEAN_PYTHON: the interpreter (default: python3).
set -u
if [ "$#" -ne 6 ] || [ "$1" != "v1" ]; then
  echo "usage: run_instance.sh v1 CATEGORY ONNX VNNLIB RESULTS_FILE TIMEOUT" >&2
  exit 1
fi
ROOT="${TORCHLEAN_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}"
PY="${TORCHLEAN_PYTHON:-python3}"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
model="$(realpath "$3")"; prop="$(realpath "$4")"
out="$(cd "$ROOT" && PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m runtime.verification \
  "$model" "$prop" --timeout "$6")" || out="error"
printf '%s\n' "$out" > "$5"
