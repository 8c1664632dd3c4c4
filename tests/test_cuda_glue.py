"""The CUDA backend's host-side glue, without a GPU: a NumPy stand-in for CuPy (its
`RawModule` runs the reference loops of the kernel sources) drives `runtime.backends.cuda`'s
compile wrapper, probe, kernel launches, guard and the Session's device paths. This tests
wiring (argument order, shapes, reshapes, empty cases, the compile-option rewrite), not
the GPU: `tests/test_cuda.py` does that where a GPU exists."""

from __future__ import annotations

import sys
import types
from typing import Any

import numpy as np
import pytest

import runtime.backends.cuda as rcuda
from runtime.backends.base import NUMPY
from runtime.engine.context import KernelContext
from runtime.session import Session
from spec.errors import TorchLeanError
from tests.device_workloads import model_bits, train_bits


def _launch(name: str) -> Any:
    """A kernel of `runtime.backends.cuda`'s sources, run elementwise with NumPy scalars."""

    def fold(grid: Any, block: Any, args: Any) -> None:
        x, out, k, m = args
        flat = out.reshape(-1)
        for j in range(int(m)):
            acc = x[0, j]
            for i in range(1, int(k)):
                acc = acc + x[i, j]
            flat[j] = acc

    def matmul(grid: Any, block: Any, args: Any) -> None:
        a, b, c, nb, m, k, n = args
        flat = c.reshape(-1)
        for t in range(int(nb) * int(m) * int(n)):
            j, i, q = t % n, (t // n) % m, t // (m * n)
            acc = a[q, i, 0] * b[q, 0, j]
            for p in range(1, int(k)):
                acc = acc + a[q, i, p] * b[q, p, j]
            flat[t] = acc

    return fold if "fold0" in name else matmul


class _Module:
    def __init__(self, code: str, options: tuple[str, ...] = ()) -> None:
        assert "-fmad=false" in options
        self.code = code

    def get_function(self, name: str) -> Any:
        assert name in self.code
        return _launch(name)


def _fake_cupy(devices: int = 1) -> types.ModuleType:
    cp: Any = types.ModuleType("cupy")
    for f in ("empty", "ones", "full", "zeros", "concatenate", "abs", "sqrt"):
        setattr(cp, f, getattr(np, f))

    def asarray(a: Any, dtype: Any = None) -> Any:
        # CuPy fills a device array from a 0-d host value, and a fill with 0 is a memset:
        # -0 arrives as +0 (observed on an H200 with CuPy 14.2); the stand-in does the same
        out = np.array(a, dtype=dtype, copy=True)
        if out.ndim == 0 and out.dtype.kind == "f" and out == 0:
            out = np.zeros((), dtype=out.dtype)
        return out

    cp.asarray = asarray
    cp.ascontiguousarray = np.ascontiguousarray
    cp.asnumpy = lambda a: np.array(a, copy=True)
    cp.ndarray = np.ndarray
    cp.__version__ = "fake"
    cp.RawModule = _Module
    runtime_mod = types.SimpleNamespace(
        getDeviceCount=lambda: devices,
        getDevice=lambda: 0,
        getDeviceProperties=lambda i: {"name": b"NumPy stand-in"},
        runtimeGetVersion=lambda: 0,
    )
    compiler: Any = types.ModuleType("cupy.cuda.compiler")
    compiler.calls = []

    def nvrtc(source: Any, options: Any = (), *a: Any, **k: Any) -> Any:
        compiler.calls.append(("nvrtc", tuple(options)))

    def cwc(source: Any, options: Any, *a: Any, **k: Any) -> Any:
        compiler.calls.append(("cache", tuple(options)))
        # CuPy 14 calls this entry by its module name (earlier versions compile_using_nvrtc)
        return compiler._compile_using_nvrtc_no_warning(source, (*tuple(options), "-ftz=true"))

    compiler.compile_using_nvrtc = nvrtc
    compiler._compile_using_nvrtc_no_warning = nvrtc
    compiler._compile_with_cache_cuda = cwc
    cuda: Any = types.ModuleType("cupy.cuda")
    cuda.runtime = runtime_mod
    cuda.compiler = compiler
    cp.cuda = cuda
    return cp


@pytest.fixture
def fake_cupy(monkeypatch: Any) -> Any:
    cp = _fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setitem(sys.modules, "cupy.cuda", cp.cuda)
    monkeypatch.setitem(sys.modules, "cupy.cuda.compiler", cp.cuda.compiler)
    monkeypatch.setattr(rcuda, "_BACKEND", [])
    return cp


def test_backend_wiring_and_probe(fake_cupy: Any) -> None:
    b = rcuda.cupy_backend()
    assert b.name == "cupy" and b.device == "cuda" and b.info["ieee_probe"] == []
    assert b.info["ftz_patch"].startswith("installed (_compile_using_nvrtc_no_warning")
    assert rcuda.cupy_backend() is b
    # the compile wrapper: the cache key gets the marker, NVRTC never sees -ftz=true
    comp = fake_cupy.cuda.compiler
    comp.calls.clear()
    comp._compile_with_cache_cuda("src", ("-std=c++17",))
    (cache, nvrtc) = comp.calls
    assert "-DTORCHLEAN_IEEE_NO_FTZ=2" in cache[1]
    assert "-ftz=true" not in nvrtc[1] and nvrtc[1][-1] == "-ftz=false"


def test_no_device_is_a_clear_error(monkeypatch: Any) -> None:
    cp = _fake_cupy(devices=0)
    monkeypatch.setitem(sys.modules, "cupy", cp)
    monkeypatch.setattr(rcuda, "_BACKEND", [])
    with pytest.raises(TorchLeanError, match="CuPy reports no CUDA device"):
        Session(device="cuda")


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_kernels_agree_with_numpy_ordered(fake_cupy: Any, dtype: str) -> None:
    b = rcuda.cupy_backend()
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 3, 5)).astype(dtype)
    w = rng.standard_normal((2, 5, 4)).astype(dtype)
    x = rng.standard_normal((7, 2, 3)).astype(dtype)
    cpu, gpu = KernelContext(dtype, "ordered", NUMPY), KernelContext(dtype, "ordered", b)
    assert np.array_equal(gpu.matmul(a, w), cpu.matmul(a, w))
    assert np.array_equal(gpu.fold0(x), cpu.fold0(x))
    assert gpu.fold0(np.zeros((3, 0), dtype=dtype)).shape == (0,)
    assert gpu.matmul(np.zeros((0, 2), dtype=dtype), np.zeros((2, 3), dtype=dtype)).shape == (
        0,
        3,
    )


def test_guard_refuses_ordered_under_tf32(fake_cupy: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "1")
    with pytest.raises(TorchLeanError, match="NVIDIA_TF32_OVERRIDE=1 enables TF32"):
        Session(device="cuda", kernels="ordered")
    Session(device="cuda", kernels="fast")


def test_guard_refuses_ordered_when_probe_fails(fake_cupy: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(rcuda, "_probe", lambda cp, dk: ["float32 subnormal add: bits [0]"])
    with pytest.raises(TorchLeanError, match=r"not IEEE here.*subnormal add"):
        Session(device="cuda", kernels="ordered")


def test_device_session_matches_cpu(fake_cupy: Any) -> None:
    """An ordered device session (stand-in) gives the CPU session's bits, and its
    parameters follow the mirror protocol."""

    def run(device: str) -> list[Any]:
        s = Session(device=device, dtype="float32", kernels="ordered", seed=3)
        p = s.param(np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32))
        x = s.input(np.array([[1.0], [3.0]], dtype=np.float32))
        y = s.sum(s.tanh(s.matmul(s.use(p), x)))
        s.sgd_step_all(0.125, s.backward_scalar_dense_all(y))
        if device == "cuda":
            assert p.host_current is not None and p.host_current.value is False
        return [s.get_value(y), p.get(), s.get_value(s.rand_uniform((5,)))]

    for got, want in zip(run("cuda"), run("cpu"), strict=True):
        assert got.tobytes() == want.tobytes()


def test_negative_zero_survives_upload(fake_cupy: Any) -> None:
    s = Session(device="cuda", dtype="float32", kernels="ordered")
    x = s.input(np.array(-0.0, dtype=np.float32))
    y = s.add(x, x)
    assert s.get_value(y).view(np.uint32) == 0x80000000
    assert s.get_value(s.neg(s.const(0.0))).view(np.uint32) == 0x80000000


def test_cuda_trainer_matches_cpu(fake_cupy: Any) -> None:
    assert train_bits("cuda") == train_bits("cpu")


def test_cuda_model_layers_match_cpu(fake_cupy: Any) -> None:
    assert model_bits("cuda") == model_bits("cpu")
