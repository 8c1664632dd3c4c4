"""The CUDA backend on CuPy: `get_backend("cupy")`, `Session(device="cuda")`.

Invariants:
- No silent CPU fallback: `cupy_backend()` raises `TorchLeanError` when CuPy cannot be
  imported or no CUDA device is usable; nothing in this module computes on the host
  instead of the device except what `runtime.engine.context` documents (the `ordered` profile's
  transcendental functions, which need MPFR for their hard cases).
- IEEE arithmetic without flush-to-zero: CuPy appends `-ftz=true` to every kernel it
  compiles (`cupy.cuda.compiler`), which flushes binary32 and float16 subnormals to zero.
  `cupy_backend()` installs, once per process and before it runs any kernel, a wrapper of
  CuPy's NVRTC entry that drops that flag (and adds a marker define to the compile options,
  so CuPy's disk cache never serves a flushed binary compiled earlier). It then *probes*
  the device: subnormal add, subtract, multiply, divide, sqrt, abs and compare in binary32
  and float16, and the ordered fold and matmul kernels, must give the IEEE results. The
  probe's outcome is `backend.info["ieee_probe"]`; if it fails, the `ordered` profile is
  refused with the probe's report (kernels memoised by CuPy before the wrapper was
  installed, e.g. by user code that ran first, can make it fail).
- TF32: `ordered` sessions and the conformance bound checks are refused when `CUPY_TF32`
  or `NVIDIA_TF32_OVERRIDE` is set to anything but "0" or empty (`tf32_enabled`).
- `ordered` fold (sum over axis 0) and matmul run as device kernels for binary64 and
  binary32: one thread per output element, a left fold in index order with explicit
  round-to-nearest intrinsics (`__dadd_rn`/`__fadd_rn`, `__dmul_rn`/`__fmul_rn`; no FMA
  contraction, and `-fmad=false` besides). float16 uses the generic per-step loop of CuPy
  operations (float16 arithmetic computed in binary32 and rounded once to float16, which is
  exact rounding since 24 >= 2*11 + 2).
- dtypes: float64, float32, float16. bfloat16 is refused (CuPy has no bfloat16 dtype);
  exact and symbolic dtypes are host-only.
- Registration: importing this module registers `cupy_backend` as "cupy" and "cuda" with
  `runtime.backends.registry`; CuPy is imported only when the backend is made.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .base import Backend, np_dtype
from .registry import register_backend

__all__ = [
    "CUDA_DTYPES",
    "FOLD_SOURCE",
    "MATMUL_SOURCE",
    "cupy_backend",
    "kernel_source",
    "tf32_enabled",
]

CUDA_DTYPES = ("float64", "float32", "float16")
_MARK = "-DTORCHLEAN_IEEE_NO_FTZ=2"  # bump when the wrapper changes: new cache keys
_OPTIONS = ("-fmad=false",)

FOLD_SOURCE = r"""
extern "C" __global__ void tl_fold0_{T}(const {T}* x, {T}* out, long long k, long long m) {
  long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= m) return;
  {T} acc = x[j];
  for (long long i = 1; i < k; ++i) acc = {ADD}(acc, x[i * m + j]);
  out[j] = acc;
}
"""

MATMUL_SOURCE = r"""
extern "C" __global__ void tl_matmul_{T}(const {T}* a, const {T}* b, {T}* c,
                                         long long nb, long long m, long long k, long long n) {
  long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (t >= nb * m * n) return;
  long long j = t % n;
  long long i = (t / n) % m;
  long long q = t / (m * n);
  const {T}* ar = a + (q * m + i) * k;
  const {T}* bc = b + q * k * n + j;
  {T} acc = {MUL}(ar[0], bc[0]);
  for (long long p = 1; p < k; ++p) acc = {ADD}(acc, {MUL}(ar[p], bc[p * n]));
  c[t] = acc;
}
"""

_CTYPE = {
    "float64": ("double", "__dadd_rn", "__dmul_rn"),
    "float32": ("float", "__fadd_rn", "__fmul_rn"),
}


def kernel_source(which: str, dtype: str) -> str:
    """The CUDA C source of the `ordered` fold or matmul kernel for a dtype (testable
    without a GPU)."""
    if dtype not in _CTYPE:
        raise TorchLeanError(f"no device {which} kernel for dtype {dtype!r} (float64, float32)")
    t, add, mul = _CTYPE[dtype]
    src = {"fold": FOLD_SOURCE, "matmul": MATMUL_SOURCE}[which]
    return src.replace("{T}", t).replace("{ADD}", add).replace("{MUL}", mul)


def tf32_enabled(environ: Mapping[str, str] | None = None) -> str | None:
    """The variable that enables TF32 tensor-core math, or None. Any value other than
    empty or "0" counts as enabling (conservative: NVIDIA_TF32_OVERRIDE=0 is the only
    documented way to force TF32 off)."""
    env = os.environ if environ is None else environ
    for var in ("CUPY_TF32", "NVIDIA_TF32_OVERRIDE"):
        v = env.get(var, "").strip()
        if v not in ("", "0"):
            return f"{var}={v}"
    return None


def _import_cupy() -> Any:
    try:
        import cupy
    except Exception as e:  # ImportError, or a CUDA library that fails to load
        raise TorchLeanError(
            f"device 'cuda' needs CuPy (pip install 'torchlean[cuda]'); import failed: {e}"
        ) from None
    try:
        n = int(cupy.cuda.runtime.getDeviceCount())
    except Exception as e:
        raise TorchLeanError(
            f"device 'cuda': no usable CUDA device ({type(e).__name__}: {e}); "
            "torchlean never falls back to the CPU silently"
        ) from None
    if n < 1:
        raise TorchLeanError("device 'cuda': CuPy reports no CUDA device")
    return cupy


_NVRTC_ENTRIES = ("_compile_using_nvrtc_no_warning", "compile_using_nvrtc")


def _install_ieee_compile(cupy: Any) -> str:
    """Wrap CuPy's NVRTC compile so that kernels are built without -ftz=true.

    `_compile_with_cache_cuda` appends -ftz=true and then calls an NVRTC entry by its module
    name (`_compile_using_nvrtc_no_warning` in CuPy 14, `compile_using_nvrtc` before), so
    both entries are wrapped to drop the flag; the cache step gets a marker define, so the
    disk cache key differs from that of flushed binaries."""
    from cupy.cuda import compiler

    if getattr(compiler, "_torchlean_ieee", False):
        return "installed earlier in this process"
    cwc = getattr(compiler, "_compile_with_cache_cuda", None)
    entries = [n for n in _NVRTC_ENTRIES if getattr(compiler, n, None) is not None]
    if cwc is None or not entries:
        return "not installed: cupy.cuda.compiler lacks _compile_with_cache_cuda or an NVRTC entry"

    def cwc_ieee(source: Any, options: Any = (), *args: Any, **kwargs: Any) -> Any:
        return cwc(source, (*tuple(options), _MARK), *args, **kwargs)

    def strip(fn: Any) -> Any:
        def nvrtc_ieee(source: Any, options: Any = (), *args: Any, **kwargs: Any) -> Any:
            opts = tuple(o for o in tuple(options) if o not in ("-ftz=true", "--ftz=true"))
            if "-ftz=false" not in opts:  # entries may call each other: add it once
                opts = (*opts, "-ftz=false")
            return fn(source, opts, *args, **kwargs)

        return nvrtc_ieee

    for n in entries:
        setattr(compiler, n, strip(getattr(compiler, n)))
    compiler._compile_with_cache_cuda = cwc_ieee
    compiler._torchlean_ieee = True
    return "installed (" + ", ".join(entries) + ")"


class _DeviceKernels:
    """The compiled `ordered` fold and matmul kernels (compiled on first use)."""

    def __init__(self, cupy: Any) -> None:
        self.cp = cupy
        self._fns: dict[tuple[str, str], Any] = {}

    def _fn(self, which: str, dtype: str) -> Any:
        key = (which, dtype)
        f = self._fns.get(key)
        if f is None:
            t = _CTYPE[dtype][0]
            mod = self.cp.RawModule(code=kernel_source(which, dtype), options=_OPTIONS)
            f = mod.get_function(f"tl_{'fold0' if which == 'fold' else 'matmul'}_{t}")
            self._fns[key] = f
        return f

    def fold(self, x: Any) -> Any:
        cp = self.cp
        dtype = str(x.dtype)
        k = int(x.shape[0])
        rest = tuple(int(d) for d in x.shape[1:])
        if dtype not in _CTYPE:
            return None  # no device kernel: the context's generic left fold
        m = 1
        for d in rest:
            m *= d
        out = cp.empty(rest, dtype=x.dtype)
        if m == 0:
            return out
        xc = cp.ascontiguousarray(x).reshape(k, m)
        self._fn("fold", dtype)(((m + 255) // 256,), (256,), (xc, out, np.int64(k), np.int64(m)))
        return out

    def matmul(self, a: Any, b: Any) -> Any:
        cp = self.cp
        dtype = str(a.dtype)
        batch = tuple(int(d) for d in a.shape[:-2])
        m, k, n = int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1])
        if dtype not in _CTYPE:
            return None  # no device kernel: the context's generic k-loop
        nb = 1
        for d in batch:
            nb *= d
        out = cp.empty((*batch, m, n), dtype=a.dtype)
        total = nb * m * n
        if total == 0:
            return out
        ac = cp.ascontiguousarray(a).reshape(nb, m, k)
        bc = cp.ascontiguousarray(b).reshape(nb, k, n)
        self._fn("matmul", dtype)(
            ((total + 255) // 256,),
            (256,),
            (ac, bc, out, np.int64(nb), np.int64(m), np.int64(k), np.int64(n)),
        )
        return out


def _bits(cp: Any, a: Any) -> list[int]:
    h = cp.asnumpy(a)
    return [int(v) for v in h.view({2: np.uint16, 4: np.uint32, 8: np.uint64}[h.itemsize])]


def _probe(cp: Any, dk: _DeviceKernels) -> list[str]:
    """IEEE behaviour of the device arithmetic the kernels use; returns the failures."""
    bad: list[str] = []

    def expect(what: str, got: list[int], want: list[int]) -> None:
        if got != want:
            bad.append(f"{what}: bits {got} (expected {want})")

    for dtype in ("float64", "float32", "float16"):
        dt = np_dtype(dtype)
        negz = _bit_upload(cp)(np.array(-0.0, dtype=dt))
        expect(f"{dtype} -0 upload", _bits(cp, negz.reshape(1)), [1 << (8 * dt.itemsize - 1)])
        expect(
            f"{dtype} -0 + -0", _bits(cp, (negz + negz).reshape(1)), [1 << (8 * dt.itemsize - 1)]
        )
    for dtype, uint in (("float32", np.uint32), ("float16", np.uint16)):
        dt = np_dtype(dtype)
        tiny = cp.asarray(np.array([1], dtype=uint).view(dt))  # the smallest subnormal
        one = cp.ones(1, dtype=dt)
        two = cp.full(1, 2, dtype=dt)
        zero = cp.zeros(1, dtype=dt)
        expect(f"{dtype} subnormal add", _bits(cp, tiny + tiny), [2])
        expect(f"{dtype} subnormal sub", _bits(cp, (tiny + tiny) - tiny), [1])
        expect(f"{dtype} subnormal mul", _bits(cp, tiny * one), [1])
        expect(f"{dtype} subnormal div", _bits(cp, (tiny * two) / two), [1])
        expect(f"{dtype} subnormal abs", _bits(cp, cp.abs(-tiny)), [1])
        four = cp.asarray(np.array([4], dtype=uint).view(dt))
        root = np.sqrt(np.array([4], dtype=uint).view(dt).astype(np.float64)).astype(dt)
        expect(
            f"{dtype} sqrt of a subnormal", _bits(cp, cp.sqrt(four)), _bits(cp, cp.asarray(root))
        )
        if not bool((zero < tiny).all()):
            bad.append(f"{dtype} subnormal compare: 0 < smallest subnormal is false")
        if dtype in _CTYPE:  # the device kernels (float16 uses the operations above)
            pair = cp.concatenate([tiny, tiny]).reshape(2, 1)
            expect(f"{dtype} ordered fold of subnormals", _bits(cp, dk.fold(pair)), [2])
            half = cp.asarray(np.array([0.5], dtype=dt))
            mm = dk.matmul(tiny.reshape(1, 1, 1) * two.reshape(1, 1, 1), half.reshape(1, 1, 1))
            expect(f"{dtype} ordered matmul of subnormals", _bits(cp, mm.reshape(1)), [1])
    # No FMA contraction in the matmul kernel: -1 + (1 + 2^-12)^2 in binary32 rounds the
    # product first (1 + 2^-11 + 2^-24 is a tie, to even: 1 + 2^-11), giving 2^-11; an FMA
    # would keep the 2^-24 term.
    e = np.float32(2.0**-12)
    a = cp.asarray(np.array([[[-1.0, 1 + e]]], dtype=np.float32))
    b = cp.asarray(np.array([[[1.0], [1 + e]]], dtype=np.float32))
    p = np.float32(np.float32(1 + e) * np.float32(1 + e))
    want = np.array([np.float32(np.float32(-1.0) + p)], dtype=np.float32)
    expect(
        "float32 ordered matmul without FMA",
        _bits(cp, dk.matmul(a, b).reshape(1)),
        [int(want.view(np.uint32)[0])],
    )
    return bad


def _bit_upload(cp: Any) -> Any:
    """Host -> device by bit pattern. `cupy.asarray` of a 0-d host array fills the device
    buffer from the value, and a fill with 0 is a memset, which turns -0 into +0 (seen on
    the first GPU runs); moving the integer bits keeps -0, NaN payloads and subnormals."""

    def upload(a: Any) -> Any:
        a = np.asarray(a)
        if not a.flags.c_contiguous:
            a = a.copy(order="C")  # (np.ascontiguousarray would turn 0-d into 1-d)
        if a.dtype.kind != "f":
            return cp.asarray(a)
        u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
        return cp.asarray(a.view(u)).view(a.dtype)

    return upload


_BACKEND: list[Backend] = []  # the process's CuPy backend (immutable once made)


def cupy_backend() -> Backend:
    """The CuPy backend (made once per process; raises without a usable GPU)."""
    if _BACKEND:
        return _BACKEND[0]
    cp = _import_cupy()
    patch = _install_ieee_compile(cp)
    dk = _DeviceKernels(cp)
    try:
        failures = _probe(cp, dk)
    except Exception as e:  # a compile or launch failure is a probe failure
        failures = [f"probe raised {type(e).__name__}: {e}"]
    import array_api_compat

    xp = array_api_compat.array_namespace(cp.zeros(1))
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.runtime.getDevice())
    name = props.get("name", b"?")
    info = {
        "device": name.decode() if isinstance(name, bytes) else str(name),
        "cupy": cp.__version__,
        "cuda_runtime": int(cp.cuda.runtime.runtimeGetVersion()),
        "ftz_patch": patch,
        "ieee_probe": failures,
    }

    def guard(profile: str) -> None:
        tf32 = tf32_enabled()
        if profile in ("ordered", "bounds") and tf32:
            raise TorchLeanError(
                f"cupy backend: {tf32} enables TF32 matrix products; the {profile} "
                "profile needs IEEE binary32 (unset it or set it to 0)"
            )
        if profile in ("ordered", "bounds") and failures:
            raise TorchLeanError(
                f"cupy backend: the device arithmetic is not IEEE here, so the {profile} "
                f"profile is refused ({patch}; probe failures: {'; '.join(failures)})"
            )

    b = Backend(
        name="cupy",
        xp=xp,
        device="cuda",
        dtypes=CUDA_DTYPES,
        capabilities=frozenset({"cuda"}),
        array_type=cp.ndarray,
        dtype_map={d: np_dtype(d) for d in CUDA_DTYPES},
        to_host_fn=cp.asnumpy,
        from_host_fn=_bit_upload(cp),
        ordered_fold=dk.fold,
        ordered_matmul=dk.matmul,
        guard=guard,
        info=info,
    )
    _BACKEND.append(b)
    return b


# `get_backend("cupy")` / `get_backend("cuda")` (CuPy is imported when the backend is made)
register_backend("cupy", cupy_backend)
register_backend("cuda", cupy_backend)
