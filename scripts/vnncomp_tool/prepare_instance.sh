#!/usr/bin/env bash
# VNN-COMP tool interface: prepare_instance.sh v1 CATEGORY ONNX VNNLIB
# Nothing to prepare per instance (the model is read by run_instance.sh); checks that the
# files exist and that the interface version is v1. Exit 0 when ready.
set -u
if [ "$#" -ne 4 ] || [ "$1" != "v1" ]; then
  echo "usage: prepare_instance.sh v1 CATEGORY ONNX VNNLIB" >&2
  exit 1
fi
[ -f "$3" ] && [ -f "$4" ] || { echo "missing $3 or $4" >&2; exit 1; }
exit 0
