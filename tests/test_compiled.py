"""The compiled `ordered` kernels (`runtime.engine.compiled`) against the NumPy reference.

- Bitwise (NaN equals NaN, signed zeros and subnormals exact) over random shapes, both
  compiled dtypes, with ±0, ±inf, NaN, subnormals and overflow in the data.
- No fused multiply-add: on inputs chosen so that a fused a*b + c rounds differently from
  the rounded product plus the rounded sum (worked out exactly with Fractions), the
  compiled matmul gives the unfused bits; the generated LLVM IR and machine code have no
  fma/contract.
- The double-rounding argument for 16-bit formats (their + and * computed in float32 and
  rounded again are correctly rounded), checked exactly with Fractions.
"""

from __future__ import annotations

import platform
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from runtime.engine import compiled
from runtime.engine.context import KernelContext, fp_quiet

pytest.importorskip("numba", reason="the compiled ordered kernels need numba")

DTYPES = ("float64", "float32")
_SPECIAL = {
    "float64": [0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 1e308, -1.5e308],
    "float32": [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -3e-39, 3e38, -3.4e38],
}


def _ctxs(dtype: str) -> tuple[KernelContext, KernelContext]:
    fast = KernelContext(dtype, "ordered", compiled=True)  # every size compiled
    ref = KernelContext(dtype, "ordered", compiled=False)
    assert fast.compiled and not ref.compiled
    return fast, ref


def _same(x: np.ndarray, y: np.ndarray) -> None:
    x, y = np.asarray(x), np.asarray(y)
    assert x.shape == y.shape and x.dtype == y.dtype
    nan = np.isnan(x)
    assert np.array_equal(nan, np.isnan(y))
    bits = x.dtype.itemsize * 8
    it = {32: np.uint32, 64: np.uint64}[bits]
    assert np.array_equal(x.view(it)[~nan], y.view(it)[~nan])


def _arrays(dtype: str, shape: st.SearchStrategy) -> st.SearchStrategy:
    dt = np.dtype(dtype)
    width = dt.itemsize * 8
    elems = st.one_of(
        st.floats(width=width, allow_nan=True, allow_infinity=True, allow_subnormal=True),
        st.floats(-4, 4, width=width),
        st.sampled_from([dt.type(v) for v in _SPECIAL[dtype]]),
    )
    return hnp.arrays(dt, shape, elements=elems)


@st.composite
def _fold_case(draw: st.DrawFn) -> tuple[str, np.ndarray, int]:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5))
    x = draw(_arrays(dtype, st.just(shape)))
    if draw(st.booleans()) and x.ndim >= 2:
        x = np.swapaxes(x, 0, -1)  # a non-contiguous view
    return dtype, x, draw(st.integers(0, x.ndim - 1))


@given(_fold_case())
def test_folds_equal_reference(case: tuple[str, np.ndarray, int]) -> None:
    dtype, x, axis = case
    fast, ref = _ctxs(dtype)
    with fp_quiet():
        _same(fast.sum_axis(x, axis), ref.sum_axis(x, axis))
        _same(fast.fold0(x), ref.fold0(x))
        _same(fast.sum_all(x), ref.sum_all(x))
        target = tuple(1 if i % 2 else d for i, d in enumerate(x.shape[1:]))
        _same(fast.unbroadcast(x, target), ref.unbroadcast(x, target))


@st.composite
def _mm_case(draw: st.DrawFn) -> tuple[str, np.ndarray, np.ndarray]:
    dtype = draw(st.sampled_from(DTYPES))
    batch = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    m, k, n = (draw(st.integers(1, 6)) for _ in range(3))
    a = draw(_arrays(dtype, st.just((*batch, m, k))))
    if draw(st.booleans()):  # B as a transposed view, as linear's forward passes it
        b = np.swapaxes(draw(_arrays(dtype, st.just((*batch, n, k)))), -1, -2)
    else:
        b = draw(_arrays(dtype, st.just((*batch, k, n))))
    return dtype, a, b


@given(_mm_case())
def test_matmul_equals_reference(case: tuple[str, np.ndarray, np.ndarray]) -> None:
    dtype, a, b = case
    fast, ref = _ctxs(dtype)
    with fp_quiet():
        _same(fast.matmul(a, b), ref.matmul(a, b))


def test_matmul_larger_and_broadcast_batch_fallback() -> None:
    rng = np.random.default_rng(7)
    for dtype in DTYPES:
        fast, ref = _ctxs(dtype)
        a = rng.standard_normal((33, 70)).astype(dtype)
        b = rng.standard_normal((70, 41)).astype(dtype)
        _same(fast.matmul(a, b), ref.matmul(a, b))
        a3 = rng.standard_normal((1, 4, 5)).astype(dtype)  # batch 1 against 3: broadcast
        b3 = rng.standard_normal((3, 5, 2)).astype(dtype)
        assert compiled.matmul(a3, b3) is None  # not served: the reference path runs
        _same(fast.matmul(a3, b3), ref.matmul(a3, b3))


def _unfused(x: Fraction, dtype: str) -> np.ndarray:
    v = np.asarray(float(x), dtype=dtype)
    assert Fraction(float(v)) == x  # chosen exactly representable
    return v


@pytest.mark.parametrize(("dtype", "e"), [("float64", 30), ("float32", 13)])
def test_no_fused_multiply_add(dtype: str, e: int) -> None:
    # out = fl(fl(a0*b0) + fl(a1*b1)) with a0*b0 = -1 and a1*b1 = 1 - 2^(-2e): the rounded
    # product is 1, so the unfused result is +0; a fused fma(a1, b1, -1) is -2^(-2e).
    fast, _ = _ctxs(dtype)
    a1, b1 = 1 + Fraction(1, 2**e), 1 - Fraction(1, 2**e)
    a = np.array([[-1.0, float(a1)]], dtype=dtype)
    b = np.array([[1.0], [float(b1)]], dtype=dtype)
    fused = _unfused(Fraction(-1) + a1 * b1, dtype)  # one rounding of the exact value
    assert fused != 0.0
    got = fast.matmul(a, b)
    assert got.tobytes() == np.zeros((1, 1), dtype=dtype).tobytes()  # +0: not fused
    assert got.tobytes() != fused.reshape(1, 1).tobytes()
    # Control: the same loop compiled with contraction allowed does fuse on this machine
    # (when the CPU has FMA), and then gives the fused bits: the inputs tell them apart.
    import numba

    from runtime.engine import compiled_kernels as ck

    opts = {**ck.JIT_OPTIONS, "cache": False, "fastmath": {"contract"}}
    contracted = numba.njit(**opts)(ck.matmul3.py_func)
    out = np.empty((1, 1, 1), dtype=dtype)
    contracted(a[None], b[None], out)
    if any("vfmadd" in s or "fmadd" in s for s in contracted.inspect_asm().values()):
        assert out.tobytes() == fused.tobytes()
    # and the folds: acc + x, no product to fuse, but the same check of order
    x = np.array([1.0, 2.0 ** (-2 * e), -1.0], dtype=dtype)
    assert fast.sum_all(x).tobytes() == np.zeros((), dtype=dtype).tobytes()


def test_generated_code_has_no_fma() -> None:
    # numba cannot show the code of a cached function: compile the same Python functions
    # again with the module's options, cache off, for both dtypes, and read that.
    import numba

    from runtime.engine import compiled_kernels as ck

    opts = {**ck.JIT_OPTIONS, "cache": False}
    for name, nd in (("matmul3", (3, 3, 3)), ("fold_mid", (3, 2))):
        fn = numba.njit(**opts)(getattr(ck, name).py_func)
        for t in (numba.float64, numba.float32):
            fn.compile(tuple(t[:, :, :] if d == 3 else t[:, :] for d in nd))
        assert len(fn.signatures) == 2
        irs = list(fn.inspect_llvm().values())
        assert all(" fmul " in ir or " fadd " in ir for ir in irs)
        for ir in irs:
            body = ir.lower()
            assert "llvm.fma" not in body and "fmuladd" not in body
            assert " contract " not in body and " fast " not in body
        if platform.machine().lower() in ("x86_64", "amd64"):
            for asm in fn.inspect_asm().values():
                assert "vfmadd" not in asm and "vfmsub" not in asm and "vfnmadd" not in asm


def test_switch_forces_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.ENV_SWITCH, "0")
    assert not KernelContext("float32", "ordered").compiled
    monkeypatch.setenv(compiled.ENV_SWITCH, "1")
    auto = KernelContext("float32", "ordered")
    assert auto.compiled and auto.compiled_min_work == compiled.MIN_WORK
    monkeypatch.setenv(compiled.ENV_SWITCH, "force")
    assert KernelContext("float32", "ordered").compiled_min_work == 0
    # auto: small problems take the reference path, large ones the compiled loops
    x = np.ones((3, 4), dtype=np.float32)
    assert compiled.fold_axis(x, 0, compiled.MIN_WORK) is None
    assert compiled.matmul(x, x.T.copy(), compiled.MIN_WORK) is None
    big = np.ones((64, 64), dtype=np.float32)
    assert compiled.matmul(big, big, compiled.MIN_WORK) is not None
    assert compiled.fold_axis(big, 0, compiled.MIN_WORK) is not None
    assert not KernelContext("float32", "fast").compiled
    for dtype in ("float16", "bfloat16", "exact"):  # keep the NumPy path
        assert not KernelContext(dtype, "ordered").compiled


_P = {"float16": 11, "bfloat16": 8}
_NP16 = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def _round_exact(q: Fraction, dtype: str) -> np.ndarray:
    """Round-to-nearest-even of a nonzero q inside the 16-bit format's range, exactly."""
    dt = _NP16[dtype]
    lo = dt.type(float(q))  # a neighbour candidate; then pick the nearest exactly
    cands = {float(lo)}
    for _ in range(2):
        cands |= {float(np.nextafter(dt.type(c), dt.type(np.inf))) for c in cands}
        cands |= {float(np.nextafter(dt.type(c), dt.type(-np.inf))) for c in cands}
    best = min(cands, key=lambda c: (abs(Fraction(c) - q), _odd(c, dt)))
    return np.asarray(best, dtype=dt)


def _odd(c: float, dt: np.dtype) -> int:
    return int(np.asarray(c, dtype=dt).view(np.uint16)) & 1


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@given(data=st.data())
def test_float32_double_rounding_is_innocuous(dtype: str, data: st.DataObject) -> None:
    # float32 has 24 >= 2p + 2 bits (p = 11, 8): rounding the float32-rounded sum or
    # product of two p-bit values to p bits equals rounding the exact value once.
    dt = _NP16[dtype]
    bits = st.integers(0, 0xFFFF).map(lambda u: np.array(u, dtype=np.uint16).view(dt))
    x, y = data.draw(bits), data.draw(bits)
    with fp_quiet():
        for op, exact in ((np.add, Fraction.__add__), (np.multiply, Fraction.__mul__)):
            via32 = np.asarray(op(np.float32(x), np.float32(y))).astype(dt)
            direct = np.asarray(op(x, y))
            assert direct.tobytes() == via32.tobytes()  # NumPy/ml_dtypes do this
            if not (np.isfinite(x) and np.isfinite(y) and np.isfinite(via32)):
                continue
            q = exact(Fraction(float(x)), Fraction(float(y)))
            if q == 0 or abs(q) > Fraction(float(np.finfo(dt).max)):
                continue
            assert via32.tobytes() == _round_exact(q, dtype).tobytes(), (x, y, op)
