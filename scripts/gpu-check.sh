#!/usr/bin/env bash
# The GPU check (issue: CUDA runtime on CuPy). Installs nothing and reaches no network; it
# needs CuPy, a CUDA GPU and torchlean's dependencies already importable (installed, or on
# PYTHONPATH). Runs, in about 5 minutes on one GPU:
#   1. the CUDA unit tests (tests/test_cuda.py, marker `cuda`);
#   2. the differential suite on CuPy against NumPy, ordered and fast kernels, binary64,
#      binary32 and float16 (bfloat16 is attempted and refused: CuPy has no bfloat16);
#   3. the GPU benchmarks (python -m benchmarks.gpu).
# Results go to the folder given as $1 (default gpu-check-out): env.txt, cuda-tests.txt,
# conformance-cupy.{json,md}, conformance.txt, gpu-benchmarks.json, bench.txt, summary.txt.
# Exit status: non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-gpu-check-out}
mkdir -p "$OUT"
PY=${PYTHON:-python3}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
unset CUPY_TF32 NVIDIA_TF32_OVERRIDE
status=0
step() {  # step NAME LOGFILE TIMEOUT CMD...
    local name=$1 log=$2 limit=$3
    shift 3
    local t0=$SECONDS
    timeout "$limit" "$@" >"$OUT/$log" 2>&1
    local rc=$?
    echo "$name: rc=$rc in $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
    tail -n 25 "$OUT/$log"
    [ "$rc" -eq 0 ] || status=1
}
: >"$OUT/summary.txt"
{
    date -u
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    "$PY" - <<'PY'
import platform, numpy, cupy
print("python", platform.python_version(), "numpy", numpy.__version__, "cupy", cupy.__version__)
print("cuda runtime", cupy.cuda.runtime.runtimeGetVersion())
import inspect
import cupy.cuda.compiler as cc
src = inspect.getsource(cc).splitlines()
print("cupy compiler lines mentioning ftz:", [l.strip() for l in src if "ftz" in l])
from runtime.backends.registry import get_backend
print("backend info", get_backend("cupy").info)
PY
} >"$OUT/env.txt" 2>&1
cat "$OUT/env.txt"
step "cuda unit tests" cuda-tests.txt 240 "$PY" -m pytest -rfEs -p no:cacheprovider -m cuda tests/test_cuda.py
step "differential suite (cupy vs numpy)" conformance.txt 270 "$PY" -m conformance \
    --backend cupy --against numpy --dtype float64,float32,float16 --kernels all \
    --max-examples 20 --per-op 1 --report "$OUT/conformance-cupy"
# bfloat16 must be refused with a clear message (exit status 2), never run on the host
timeout 60 "$PY" -m conformance --backend cupy --dtype bfloat16 >"$OUT/bfloat16.txt" 2>&1
echo "bfloat16 on cupy: rc=$? ($(tail -n 1 "$OUT/bfloat16.txt"))" | tee -a "$OUT/summary.txt"
step "gpu benchmarks" bench.txt 150 "$PY" -m benchmarks.gpu --rounds 10 --out "$OUT/gpu-benchmarks.json"
echo "overall: $([ $status -eq 0 ] && echo PASS || echo FAIL)" | tee -a "$OUT/summary.txt"
exit $status
