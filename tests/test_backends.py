"""Backends other than NumPy, without a GPU: array-API namespaces (array_api_strict), the
vectorised RNG, parameter device mirrors, the differential runner, and the pieces of the
CUDA backend that can be checked on the host (kernel sources, TF32 detection, errors)."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.__main__ import main as conformance_main
from conformance.suite import Case, default_properties, differential_check, run_property
from runtime.backends.base import NUMPY, Backend
from runtime.backends.cuda import kernel_source, tf32_enabled
from runtime.backends.registry import get_backend, namespace_backend
from runtime.engine.rng import keep_mask, sample_nat, uniform01
from runtime.session import Session
from spec import rng as srng
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64
from spec.errors import TorchLeanError
from spec.graph import GraphBuilder
from spec.tensor import Tensor, TensorPack

strict = pytest.importorskip("array_api_strict")
STRICT = get_backend("array_api_strict")
DOMAINS = {"float64": FLOAT64, "float32": BINARY32, "bfloat16": BFLOAT16, "float16": FLOAT16}


def test_namespace_backend_shape() -> None:
    assert STRICT.dtypes == ("float64", "float32")  # array_api_strict has no float16
    assert not STRICT.is_numpy and STRICT.device == "cpu"
    a = STRICT.asarray([1.5, -0.0], "float32")
    assert isinstance(a, STRICT.array_type)
    h = STRICT.to_host(a)
    assert h.dtype == np.float32 and h.view(np.uint32).tolist() == [0x3FC00000, 0x80000000]
    with pytest.raises(TorchLeanError, match="no silent casts"):
        STRICT.asarray(np.zeros(2, dtype=np.float64), "float32")
    with pytest.raises(TorchLeanError, match="does not support dtype 'float16'"):
        STRICT.dtype("float16")


HARD_PROPERTIES = ("link_hard", "sparse_backward")
"""The hard-case properties: the same kernels as `link` on pooled values and sparse seeds."""


def test_array_api_strict_runs_the_suite(tmp_path: Any) -> None:
    """The kernels use only the array-API standard: the whole IEEE suite (link, special
    values, hard cases, node bounds) and the differential property against NumPy pass on
    array_api_strict, which rejects anything outside the standard — in float32 through the
    CLI (every property), in float64 every property but the hard-case ones (their kernels
    and code paths are those float32 ran)."""
    rc = conformance_main(
        [
            "--backend",
            "array_api_strict",
            "--against",
            "numpy",
            "--dtype",
            "float32",
            "--max-examples",
            "6",
            "--per-op",
            "1",
            "--report",
            str(tmp_path / "strict"),
        ]
    )
    assert rc == 0
    text = (tmp_path / "strict.md").read_text()
    assert '"backend": "array_api_strict"' in text and "differential_numpy" in text
    assert all(name in text for name in HARD_PROPERTIES)
    props = default_properties(["float64"], ["fast", "ordered"], "array_api_strict", "numpy")
    rows = [run_property(p, 6, per_op=1) for p in props if p.name not in HARD_PROPERTIES]
    assert {r.property for r in rows} == {
        "differential_numpy",
        "link",
        "link_special_values",
        "node_bounds",
        "derivative_bounds",
    }
    assert all(r.failed == 0 and r.cases > 6 and r.backend == "array_api_strict" for r in rows)


def test_conformance_cli_refuses_unknown_backend_and_dtype(capsys: Any) -> None:
    assert conformance_main(["--backend", "no_such_array_lib"]) == 2
    assert "cannot import 'no_such_array_lib'" in capsys.readouterr().err
    assert conformance_main(["--backend", "array_api_strict", "--dtype", "float16"]) == 2
    assert "does not support dtype 'float16'" in capsys.readouterr().err


# --------------------------------------------------------------------------- RNG


@given(
    key=st.integers(0, 2**64 - 1),
    n=st.integers(0, 40),
    start=st.integers(0, 2**64 - 1),
)
def test_sample_nat_matches_spec(key: int, n: int, start: int) -> None:
    for b in (NUMPY, STRICT):
        got = [int(v) for v in b.to_host(sample_nat(b, key, n, start))]
        assert got == [srng.sample_nat(key, (start + i) % 2**64) for i in range(n)]


@given(
    key=st.integers(0, 2**64 - 1),
    num=st.integers(0, 64),
    dtype=st.sampled_from(["float64", "float32", "bfloat16", "float16"]),
)
def test_uniform_and_mask_match_spec(key: int, num: int, dtype: str) -> None:
    n = 24
    p = Fraction(num, 64)
    D = DOMAINS[dtype]
    want_u = [D.to_bits(srng.uniform(D, key, i)) for i in range(n)]
    want_m = [srng.mask(key, i, p) for i in range(n)]
    for b in (NUMPY, STRICT):
        if dtype not in b.dtypes:
            continue
        u = b.to_host(uniform01(b, key, n, dtype))
        assert [D.to_bits(v) for v in _spec_values(u, dtype)] == want_u
        assert b.to_host(keep_mask(b, key, n, p)).tolist() == want_m


def _spec_values(a: Any, dtype: str) -> list[Any]:
    from runtime.backends.base import to_spec

    return list(to_spec(np.asarray(a), dtype).data)


def test_mask_threshold_edges() -> None:
    # p = 0 keeps everything, p = 1 drops everything, exactly as spec.rng.mask
    for p in (Fraction(0), Fraction(1)):
        m = NUMPY.to_host(keep_mask(NUMPY, 7, 100, p)).tolist()
        assert m == [srng.mask(7, i, p) for i in range(100)]


def test_session_random_tensors_are_spec_bits() -> None:
    s = Session(dtype="float32", seed=11)
    key = srng.key_of(11, 0)
    u = s.get_value(s.rand_uniform((3, 4)))
    want = [BINARY32.to_bits(srng.uniform(BINARY32, key, i)) for i in range(12)]
    assert u.view(np.uint32).reshape(-1).tolist() == want
    key2 = srng.key_of(11, 1)
    m = s.get_value(s.bernoulli_mask((50,), Fraction(1, 3)))
    assert m.tolist() == [1.0 if srng.mask(key2, i, Fraction(1, 3)) else 0.0 for i in range(50)]


# --------------------------------------------------------------------------- mirrors


def test_param_host_device_mirror_invariant() -> None:
    """At least one copy is current; a device update marks the host stale; a public read
    synchronises; a host write invalidates the mirror."""
    s = Session(dtype="float32")
    p = s.param(np.array([1.0, 2.0], dtype=np.float32))
    assert p.host_current is not None and p.device_cell is not None
    dev = p.device_value(STRICT)  # upload
    assert isinstance(dev, STRICT.array_type) and p.host_current.value is True
    assert p.device_value(STRICT) is dev  # no second upload while current
    new = STRICT.asarray([5.0, -0.0], "float32")
    p.set_device(STRICT, new)
    assert p.host_current.value is False  # host stale, device current
    h = p.get()  # public read synchronises
    assert h.view(np.uint32).tolist() == [0x40A00000, 0x80000000]
    assert p.host_current.value is True
    p.set(np.array([7.0, 8.0], dtype=np.float32))
    assert p.device_cell.value is None  # the mirror is stale after a host write
    assert STRICT.to_host(p.device_value(STRICT)).tolist() == [7.0, 8.0]
    alias = p.renamed("alias")  # aliases share the cells, so the mirror too
    p.set_device(STRICT, STRICT.asarray([3.0, 3.0], "float32"))
    assert alias.get().tolist() == [3.0, 3.0]


# --------------------------------------------------------------------------- differential


def _sum_graph() -> tuple[Any, tuple[Tensor, ...], TensorPack]:
    b = GraphBuilder()
    x = b.input((3,))
    b.node("sum", x)
    g = b.build()
    D = BINARY32
    xs = (Tensor((3,), tuple(D.from_rational(Fraction(v)) for v in (2**24, 1, 1))),)
    seed = TensorPack.of([Tensor((3,), (D.zero(),) * 3), Tensor((), (D.one(),))])
    return g, xs, seed


def test_differential_names_the_first_diverging_node() -> None:
    """A backend whose ordered fold runs right to left differs from NumPy on
    2**24 + 1 + 1 in binary32 (left fold: 2**24; right fold: 2**24 + 2): the differential
    check fails and names value %1 (the sum node), not the input."""

    def reversed_fold(x: Any) -> Any:
        acc = x[-1, ...]
        for i in range(x.shape[0] - 2, -1, -1):
            acc = acc + x[i, ...]
        return np.asarray(acc)

    bad = dataclasses.replace(
        namespace_backend("numpy", np),
        name="reversed",
        is_numpy=False,
        ordered_fold=reversed_fold,
    )
    g, xs, seed = _sum_graph()
    ok = differential_check("float32", "ordered", STRICT, NUMPY)(Case(g, xs, seed))
    assert ok.ok, ok.message
    out = differential_check("float32", "ordered", bad, NUMPY)(Case(g, xs, seed))
    assert not out.ok
    assert out.message is not None and out.message.startswith("value of value %1")
    assert "reversed" in out.message and "numpy" in out.message


# --------------------------------------------------------------------------- CUDA on the host


def test_cuda_kernel_sources_use_rounded_intrinsics() -> None:
    for which in ("fold", "matmul"):
        f32 = kernel_source(which, "float32")
        f64 = kernel_source(which, "float64")
        assert "__fadd_rn" in f32 and "double" not in f32
        assert "__dadd_rn" in f64 and "float" not in f64
        assert "{" in f32 and "{T}" not in f32 and "{ADD}" not in f32
    assert "__fmul_rn" in kernel_source("matmul", "float32")
    assert "__dmul_rn" in kernel_source("matmul", "float64")
    # the fold reads x[i * m + j] for i = 1, 2, ... in order: a left fold
    assert "for (long long i = 1; i < k; ++i) acc = __fadd_rn(acc, x[i * m + j]);" in (
        kernel_source("fold", "float32")
    )
    with pytest.raises(TorchLeanError, match="no device fold kernel for dtype 'float16'"):
        kernel_source("fold", "float16")


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, None),
        ({"CUPY_TF32": "0"}, None),
        ({"CUPY_TF32": ""}, None),
        ({"CUPY_TF32": "1"}, "CUPY_TF32=1"),
        ({"NVIDIA_TF32_OVERRIDE": "0"}, None),
        ({"NVIDIA_TF32_OVERRIDE": "1"}, "NVIDIA_TF32_OVERRIDE=1"),
    ],
)
def test_tf32_detection(env: dict[str, str], want: str | None) -> None:
    assert tf32_enabled(env) == want


def test_backend_guard_refuses_profiles() -> None:
    """A backend's guard runs when a kernel context is made (e.g. CuPy under TF32)."""
    from runtime.engine.context import KernelContext

    def guard(profile: str) -> None:
        if profile == "ordered":
            raise TorchLeanError("refused: ordered")

    b: Backend = dataclasses.replace(STRICT, guard=guard)
    KernelContext("float32", "fast", b)
    with pytest.raises(TorchLeanError, match="refused: ordered"):
        KernelContext("float32", "ordered", b)


def test_cuda_session_dtype_errors() -> None:
    with pytest.raises(TorchLeanError, match="native float dtype"):
        Session(device="cuda", dtype="exact")
    with pytest.raises(TorchLeanError, match="device must be 'cpu' or 'cuda'"):
        Session(device="tpu")


@pytest.mark.parametrize(
    ("call", "err"),
    [
        (lambda s: s.rand_uniform((-1, 2)), "rand_uniform: dims must be non-negative"),
        (lambda s: s.rand_uniform((1.5,)), "rand_uniform: dims must be non-negative"),
        (lambda s: s.bernoulli_mask((2, -1), 0.5), "bernoulli_mask: dims"),
        (lambda s: s.bernoulli_mask((2,), float("nan")), "bernoulli_mask: p must be a number"),
        (lambda s: s.bernoulli_mask((2,), 1.5), r"bernoulli_mask: p must be in \[0, 1\]"),
    ],
)
def test_random_tensors_validate_before_the_rng_moves(call: Any, err: str) -> None:
    from spec.errors import DomainError, ShapeError

    s = Session(dtype="float32", seed=1)
    before = s.rng.counter
    with pytest.raises((ShapeError, DomainError), match=err):
        call(s)
    assert s.rng.counter == before and len(s.tape) == 0
    x = s.input(np.ones(2, dtype=np.float32))
    with pytest.raises(DomainError, match="dropout: p must be a number"):
        s.dropout(None, x, float("nan"))
    assert s.rng.counter == before
