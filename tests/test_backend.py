"""runtime.backends (base and registry): dtypes, lossless spec conversions, no silent casts,
single rounding.

Oracles: the spec domains (MPFR, rounded once), hand-worked bit patterns and IEEE layouts.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.backends.base import (
    DTYPE_DOMAIN,
    DTYPES,
    NUMPY,
    Backend,
    from_spec,
    np_dtype,
    round_f64,
    to_spec,
)
from runtime.backends.registry import get_backend
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, RATIONAL, IEEEDomain
from spec.errors import DomainError, TorchLeanError
from spec.tensor import Tensor

IEEE = ("float64", "float32", "bfloat16", "float16")
WIDTH = {"float64": 64, "float32": 32, "bfloat16": 16, "float16": 16}
UINT = {64: np.uint64, 32: np.uint32, 16: np.uint16}


def bits_of(a: np.ndarray) -> list[int]:
    return [int(b) for b in np.ascontiguousarray(a).view(UINT[a.dtype.itemsize * 8]).ravel()]


def array_of_bits(bits: list[int], dtype: str) -> np.ndarray:
    return np.array(bits, dtype=UINT[WIDTH[dtype]]).view(np_dtype(dtype))


def is_nan_bits(b: int, dtype: str) -> bool:
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    exp_all_ones = ((b >> D.mbits) & ((1 << D.ebits) - 1)) == (1 << D.ebits) - 1
    return exp_all_ones and (b & ((1 << D.mbits) - 1)) != 0


def special_bits(dtype: str) -> list[int]:
    """+-0, +-inf, a quiet and a signalling NaN of both signs, min/max subnormals, min
    normal, 1.0 and max finite, both signs."""
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    sign = 1 << (D.width - 1)
    inf = ((1 << D.ebits) - 1) << D.mbits
    mant = (1 << D.mbits) - 1
    one = D.bias << D.mbits
    pos = [0, inf, inf | (1 << (D.mbits - 1)), inf | 1, 1, mant, 1 << D.mbits, one, inf - 1]
    return pos + [sign | b for b in pos]


# --------------------------------------------------------------------------- dtype mapping


def test_dtype_mapping() -> None:
    assert np_dtype("float64") == np.dtype(np.float64)
    assert np_dtype("float32") == np.dtype(np.float32)
    assert np_dtype("bfloat16") == np.dtype(ml_dtypes.bfloat16)
    assert np_dtype("float16") == np.dtype(np.float16)
    assert np_dtype("exact") == np.dtype(object)
    assert DTYPE_DOMAIN["float64"] is FLOAT64
    assert DTYPE_DOMAIN["float32"] is BINARY32
    assert DTYPE_DOMAIN["bfloat16"] is BFLOAT16
    assert DTYPE_DOMAIN["float16"] is FLOAT16
    assert DTYPE_DOMAIN["exact"] is RATIONAL
    for dt in IEEE:
        D = DTYPE_DOMAIN[dt]
        assert isinstance(D, IEEEDomain)
        assert D.width == np_dtype(dt).itemsize * 8 == WIDTH[dt]
        # precision of the NumPy dtype (ml_dtypes.finfo knows bfloat16) equals the domain's
        fi = ml_dtypes.finfo(np_dtype(dt))
        assert fi.nmant + 1 == D.precision
    for dt in DTYPES:
        assert NUMPY.dtype(dt) == np_dtype(dt)


def test_unknown_dtype_is_a_clear_error() -> None:
    with pytest.raises(TorchLeanError, match="unknown runtime dtype 'float8'"):
        np_dtype("float8")
    with pytest.raises(TorchLeanError, match="float8"):
        NUMPY.asarray([1.0], "float8")


def test_backend_without_dtype_refuses_it() -> None:
    b = Backend("tiny", NUMPY.xp, "cpu", ("float32",))
    with pytest.raises(TorchLeanError, match="does not support dtype 'float64'"):
        b.dtype("float64")


def test_get_backend() -> None:
    assert get_backend() is NUMPY
    assert get_backend("numpy") is NUMPY
    assert NUMPY.is_numpy and NUMPY.device == "cpu"
    try:
        import cupy  # noqa: F401
    except ImportError:
        # No silent CPU fallback: asking for CUDA without CuPy is a clear error.
        with pytest.raises(TorchLeanError, match="device 'cuda' needs CuPy"):
            get_backend("cupy")
    with pytest.raises(TorchLeanError, match="cannot import 'no_such_array_lib'"):
        get_backend("no_such_array_lib:xp")
    with pytest.raises(TorchLeanError, match="not an array namespace"):
        get_backend("json")
    with pytest.raises(TorchLeanError, match="has no 'nothing'"):
        get_backend("numpy:nothing")


# --------------------------------------------------------------------------- to_spec / from_spec


@pytest.mark.parametrize("dtype", IEEE)
def test_special_values_convert_by_bit_pattern(dtype: str) -> None:
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    bits = special_bits(dtype)
    a = array_of_bits(bits, dtype)
    t = to_spec(a, dtype)
    assert t.shape == (len(bits),)
    for i, (b, v) in enumerate(zip(bits, t.data, strict=True)):
        if is_nan_bits(b, dtype):
            assert D.is_nan(v)
            continue
        # the value equals the binary64 value of the element (exact), rounded by spec
        f = float(a[i])
        assert D.same(v, D.from_float(f)), (dtype, hex(b))
        assert D.to_bits(v) == b
    back = from_spec(t, dtype)
    assert back.dtype == np_dtype(dtype) and back.shape == a.shape
    for b, r in zip(bits, bits_of(back), strict=True):
        if is_nan_bits(b, dtype):
            assert is_nan_bits(r, dtype)  # the NaN class survives (payload canonicalised)
        else:
            assert r == b  # -0, inf, subnormals: the same bits


def test_negative_zero_and_subnormal_by_hand() -> None:
    t = to_spec(np.array([-0.0, 5e-324, -(2.0**-1074) * 3], dtype=np.float64), "float64")
    z, tiny, neg = t.data
    assert FLOAT64.to_bits(z) == 1 << 63
    assert FLOAT64.to_rational(tiny) == Fraction(1, 2**1074)
    assert FLOAT64.to_rational(neg) == Fraction(-3, 2**1074)
    t16 = to_spec(np.array([2.0**-24, -0.0], dtype=np.float16), "float16")
    assert FLOAT16.to_rational(t16.data[0]) == Fraction(1, 2**24)  # smallest subnormal
    assert FLOAT16.to_bits(t16.data[1]) == 0x8000


@pytest.mark.parametrize("dtype", IEEE)
@given(data=st.data())
def test_bits_round_trip(dtype: str, data: st.DataObject) -> None:
    w = WIDTH[dtype]
    bits = data.draw(st.lists(st.integers(0, 2**w - 1), min_size=0, max_size=12))
    shape = data.draw(st.sampled_from([(len(bits),), (1, len(bits))]))
    a = array_of_bits(bits, dtype).reshape(shape)
    t = to_spec(a, dtype)
    assert t.shape == shape
    back = from_spec(t, dtype)
    assert back.shape == shape and back.dtype == a.dtype
    for b, r in zip(bits, bits_of(back), strict=True):
        assert r == b or (is_nan_bits(b, dtype) and is_nan_bits(r, dtype))


@pytest.mark.parametrize("dtype", IEEE)
@given(f=st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))
def test_spec_values_round_trip(dtype: str, f: float) -> None:
    D = DTYPE_DOMAIN[dtype]
    v = D.from_float(f)
    t = Tensor((2,), (v, D.neg(v)))
    a = from_spec(t, dtype)
    assert a.dtype == np_dtype(dtype)
    back = to_spec(a, dtype)
    assert back.same(D, t)
    # the NumPy element holds the same number as the spec value
    if not D.is_nan(v):
        assert struct.pack(">d", float(a[0])) == struct.pack(">d", float(v))


def test_exact_round_trip() -> None:
    vals = [Fraction(0), Fraction(-7, 3), Fraction(1, 2**80), Fraction(10**30 + 1, 7)]
    t = Tensor((2, 2), tuple(vals))
    a = from_spec(t, "exact")
    assert a.dtype == object and a.shape == (2, 2)
    assert all(type(x) is Fraction for x in a.ravel())
    back = to_spec(a, "exact")
    assert back.shape == (2, 2) and back.data == tuple(vals)
    assert all(type(x) is Fraction for x in back.data)


def test_to_spec_refuses_the_wrong_dtype() -> None:
    with pytest.raises(DomainError, match="float64 is not float32"):
        to_spec(np.zeros(2), "float32")


# --------------------------------------------------------------------------- asarray


@pytest.mark.parametrize("dtype", IEEE)
def test_asarray_refuses_other_dtypes(dtype: str) -> None:
    for other in IEEE:
        if other == dtype:
            continue
        arr = np.zeros(3, dtype=np_dtype(other))
        with pytest.raises(TorchLeanError, match="no silent casts"):
            NUMPY.asarray(arr, dtype)
    with pytest.raises(TorchLeanError, match="no silent casts"):
        NUMPY.asarray(np.zeros(2, dtype=object), dtype)
    with pytest.raises(TorchLeanError, match="no silent casts"):
        NUMPY.asarray(np.zeros(2, dtype=np_dtype(dtype)), "exact")
    same = np.ones(2, dtype=np_dtype(dtype))
    assert NUMPY.asarray(same, dtype) is same  # the right dtype passes through untouched


@pytest.mark.parametrize("dtype", IEEE)
@given(fs=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=6))
def test_asarray_rounds_python_floats_once(dtype: str, fs: list[float]) -> None:
    D = DTYPE_DOMAIN[dtype]
    a = NUMPY.asarray(fs, dtype)
    assert a.dtype == np_dtype(dtype) and a.shape == (len(fs),)
    assert to_spec(a, dtype).same(D, Tensor((len(fs),), tuple(D.from_float(f) for f in fs)))
    s = NUMPY.asarray(fs[0], dtype)
    assert s.shape == () and to_spec(s, dtype).same(D, Tensor((), (D.from_float(fs[0]),)))


def test_asarray_single_rounding_by_hand() -> None:
    # 1 + 2**-8 + 2**-30: float32 would round it to 1 + 2**-8, a bfloat16 tie (-> 1.0);
    # rounded once it is above the midpoint, so 1 + 2**-7.
    x = 1 + 2**-8 + 2**-30
    assert float(NUMPY.asarray(x, "bfloat16")) == 1 + 2**-7
    assert float(NUMPY.asarray(-x, "bfloat16")) == -(1 + 2**-7)
    # float16: 1 + 2**-11 + 2**-40 rounds up to 1 + 2**-10 (once, not via a tie)
    assert float(NUMPY.asarray(1 + 2**-11 + 2**-40, "float16")) == 1 + 2**-10


def test_asarray_exact() -> None:
    a = NUMPY.asarray([0.1, 3, Fraction(1, 3)], "exact")
    assert a.dtype == object
    assert list(a) == [Fraction(0.1), Fraction(3), Fraction(1, 3)]
    assert Fraction(0.1) != Fraction(1, 10)  # the binary64 value, exactly, not 1/10
    with pytest.raises(DomainError):
        NUMPY.asarray([math.inf], "exact")
    with pytest.raises(DomainError):
        NUMPY.asarray([math.nan], "exact")


# --------------------------------------------------------------------------- round_f64


def _near_bf16_midpoints() -> st.SearchStrategy[float]:
    """float64 values within a few float64 ulps of a bfloat16 midpoint (where a float32
    intermediate lands on the midpoint and double rounding would go wrong)."""

    def build(b: int, k: int) -> float:
        lo = BFLOAT16.to_rational(BFLOAT16.from_bits(b))
        hi = BFLOAT16.to_rational(BFLOAT16.from_bits(b + 1))
        mid = float((lo + hi) / 2)  # exact: 9 significant bits
        return mid + k * math.ulp(mid)

    finite = st.integers(0, 0x7F7E)  # b and b + 1 both finite and non-negative
    return st.builds(build, finite, st.integers(-4, 4)) | st.builds(
        lambda b, k: -build(b, k), finite, st.integers(-4, 4)
    )


@given(
    fs=st.lists(
        st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
        | _near_bf16_midpoints()
        | st.floats(min_value=3.3e38, max_value=3.5e38),  # around bfloat16 overflow
        min_size=1,
        max_size=8,
    )
)
def test_round_f64_bfloat16_matches_spec(fs: list[float]) -> None:
    got = round_f64(np.array(fs, dtype=np.float64), "bfloat16")
    assert got.dtype == np_dtype("bfloat16")
    for f, r in zip(fs, bits_of(got), strict=True):
        want = BFLOAT16.from_float(f)
        if BFLOAT16.is_nan(want):
            assert is_nan_bits(r, "bfloat16")
        else:
            assert r == BFLOAT16.to_bits(want), (f.hex(), hex(r))


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
@given(fs=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=8))
def test_round_f64_other_dtypes_match_spec(dtype: str, fs: list[float]) -> None:
    D = DTYPE_DOMAIN[dtype]
    got = round_f64(np.array(fs, dtype=np.float64), dtype)
    assert to_spec(got, dtype).same(D, Tensor((len(fs),), tuple(D.from_float(f) for f in fs)))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_double_rounding_case_and_why_not_ml_dtypes(sign: float) -> None:
    x = sign * (1 + 2**-8 + 2**-30)
    want = BFLOAT16.from_float(x)
    assert BFLOAT16.to_rational(want) == Fraction(int(sign)) * (1 + Fraction(1, 2**7))
    got = round_f64(np.array([x]), "bfloat16")
    assert bits_of(got) == [BFLOAT16.to_bits(want)]
    # A float64 -> bfloat16 cast through float32 lands on the tie 1 + 2**-8 and rounds to
    # even, 1.0 -- the wrong answer. ml_dtypes before 0.7 cast that way; that is why
    # round_f64 exists (and why it does not depend on which ml_dtypes is installed).
    assert float(np.float32(x)) == sign * (1 + 2**-8)
    via_f32 = np.array([x], dtype=np.float32).astype(ml_dtypes.bfloat16)
    assert float(via_f32[0]) == sign * 1.0
    assert bits_of(via_f32) != bits_of(got)
    direct = np.array([x], dtype=np.float64).astype(ml_dtypes.bfloat16)
    assert bits_of(direct) in (bits_of(via_f32), bits_of(got))


def test_round_f64_exact_ties_still_go_to_even() -> None:
    # exactly on the midpoint (no double rounding involved): ties to even
    xs = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)], dtype=np.float64)
    got = round_f64(xs, "bfloat16")
    assert [float(v) for v in got] == [1.0, 1 + 2**-6, -1.0]


@pytest.mark.parametrize("dtype", IEEE)
def test_overflow_rounds_to_inf_without_warnings(dtype: str) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a = NUMPY.asarray([1e300, -1e300, 1e308 * 10], dtype)
    want = [math.inf, -math.inf, math.inf] if dtype != "float64" else [1e300, -1e300, math.inf]
    assert [float(v) for v in a] == want
