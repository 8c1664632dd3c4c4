"""The CUDA backend on a GPU (marked `cuda`; skipped with the reason when CuPy or a GPU is
missing). `scripts/gpu-check.sh` runs these together with the differential suite."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from runtime.backends.base import NUMPY
from runtime.backends.registry import get_backend
from runtime.engine.context import KernelContext
from runtime.engine.rng import keep_mask, sample_nat, uniform01
from runtime.session import Session
from spec.errors import TorchLeanError
from tests.device_workloads import model_bits, train_bits


def _gpu() -> tuple[Any, str]:
    try:
        return get_backend("cupy"), ""
    except TorchLeanError as e:
        return None, str(e)


CUDA, _WHY = _gpu()
pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(CUDA is None, reason=f"no CUDA backend here: {_WHY}"),
]
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a: Any) -> list[int]:
    h = np.ascontiguousarray(CUDA.to_host(a))
    return h.view(UINT[h.itemsize]).reshape(-1).tolist()


def test_device_is_ieee() -> None:
    assert CUDA.info["ieee_probe"] == [], CUDA.info
    assert CUDA.device == "cuda" and "bfloat16" not in CUDA.dtypes


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_ordered_fold_and_matmul_match_numpy_bits(dtype: str) -> None:
    rng = np.random.default_rng(0)
    dt = np.dtype(dtype)
    span = 3 if dtype == "float16" else 6
    scale = 10.0 ** rng.integers(-span, span, (3, 17, 33))
    a = (rng.standard_normal((3, 17, 33)) * scale).astype(dt)
    b = rng.standard_normal((3, 33, 9)).astype(dt)
    x = rng.standard_normal((41, 5, 3)).astype(dt)
    cpu = KernelContext(dtype, "ordered", NUMPY)
    gpu = KernelContext(dtype, "ordered", CUDA)
    with np.errstate(all="ignore"):
        assert _bits(gpu.matmul(CUDA.from_host(a), CUDA.from_host(b))) == _bits(cpu.matmul(a, b))
        assert _bits(gpu.fold0(CUDA.from_host(x))) == _bits(cpu.fold0(x))
        assert _bits(gpu.sum_axis(CUDA.from_host(x), 1)) == _bits(cpu.sum_axis(x, 1))


def test_subnormals_survive_in_binary32_sessions() -> None:
    s = Session(device="cuda", dtype="float32", kernels="ordered")
    tiny = np.array([1, 2, 3], dtype=np.uint32).view(np.float32)
    x = s.input(tiny)
    y = s.add(x, x)
    assert s.get_value(y).view(np.uint32).tolist() == [2, 4, 6]
    r = s.relu(x)
    assert s.get_value(r).view(np.uint32).tolist() == [1, 2, 3]


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_rng_same_bits_on_device(dtype: str) -> None:
    key, n = 0x1234_5678_9ABC_DEF0, 100_003
    assert _bits(sample_nat(CUDA, key, n)) == _bits(sample_nat(NUMPY, key, n))
    assert _bits(uniform01(CUDA, key, n, dtype)) == _bits(uniform01(NUMPY, key, n, dtype))
    p = Fraction(3, 10)
    assert CUDA.to_host(keep_mask(CUDA, key, n, p)).tolist() == (
        keep_mask(NUMPY, key, n, p).tolist()
    )


def _mlp_run(device: str, kernels: str, dtype: str = "float32") -> list[list[int]]:
    """Three SGD steps of a 2-layer MLP with tied use of one parameter; every value the
    session exposes, as bits."""
    rng = np.random.default_rng(1)
    s = Session(device=device, dtype=dtype, kernels=kernels, seed=5)
    w1 = s.param(rng.standard_normal((16, 8)).astype(dtype), name="w1")
    b1 = s.param(np.zeros(16, dtype=dtype), name="b1")
    w2 = s.param(rng.standard_normal((4, 16)).astype(dtype), name="w2")
    b2 = s.param(np.zeros(4, dtype=dtype), name="b2")
    xs = rng.standard_normal((6, 8)).astype(dtype)
    ys = rng.standard_normal((6, 4)).astype(dtype)
    out: list[list[int]] = []
    for _ in range(3):
        s.reset_tape()
        x = s.input(xs)
        h = s.tanh(s.linear(x, s.use(w1), s.use(b1)))
        h = s.dropout(None, h, Fraction(1, 4))
        y = s.linear(h, s.use(w2), s.use(b2))
        loss = s.mse_loss(y, s.input(ys))
        grads = s.backward_scalar_dense_all(loss)
        out.append(_bits(s.get_value(loss)))
        s.sgd_step_all(Fraction(1, 10), grads)
    out += [_bits(p.get()) for p in (w1, b1, w2, b2)]
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_ordered_session_is_bit_identical_to_cpu(dtype: str) -> None:
    assert _mlp_run("cuda", "ordered", dtype) == _mlp_run("cpu", "ordered", dtype)


def test_fast_session_is_close_to_cpu() -> None:
    gpu, cpu = _mlp_run("cuda", "fast"), _mlp_run("cpu", "fast")
    a = np.array(gpu[-4], dtype=np.uint32).view(np.float32)
    b = np.array(cpu[-4], dtype=np.uint32).view(np.float32)
    assert np.allclose(a, b, rtol=1e-4, atol=1e-5)


def test_param_mirror_on_device() -> None:
    s = Session(device="cuda", dtype="float32")
    p = s.param(np.ones(3, dtype=np.float32))
    x = s.use(p)
    loss = s.sum(s.mul(x, x))
    s.sgd_step_all(0.5, s.backward_scalar_dense_all(loss))
    assert p.host_current is not None and p.host_current.value is False  # device current
    assert p.get().tolist() == [0.0, 0.0, 0.0]  # the read synchronises
    assert p.host_current.value is True


def test_tf32_refuses_ordered(monkeypatch: Any) -> None:
    monkeypatch.setenv("CUPY_TF32", "1")
    with pytest.raises(TorchLeanError, match="TF32"):
        Session(device="cuda", dtype="float32", kernels="ordered")
    Session(device="cuda", dtype="float32", kernels="fast")  # fast may use TF32 if asked


def test_bfloat16_is_refused_on_cuda() -> None:
    with pytest.raises(TorchLeanError, match="does not support dtype 'bfloat16'"):
        Session(device="cuda", dtype="bfloat16")


def test_transcendentals_ordered_match_cpu() -> None:
    rng = np.random.default_rng(2)
    x = (rng.standard_normal(4096) * 4).astype(np.float32)
    cpu = KernelContext("float32", "ordered", NUMPY)
    gpu = KernelContext("float32", "ordered", CUDA)
    for fn in ("exp", "tanh", "sin", "cos"):
        assert _bits(gpu.unary(fn, CUDA.from_host(x))) == _bits(cpu.unary(fn, x))


def test_cuda_trainer_is_bit_identical_to_cpu() -> None:
    assert train_bits("cuda") == train_bits("cpu")


def test_cuda_model_layers_are_bit_identical_to_cpu() -> None:
    assert model_bits("cuda") == model_bits("cpu")
