"""Scalar domains: IEEE emulations against NumPy / ml_dtypes / mpmath, conversions against the
integer rounding oracle, the equality policy, RATIONAL and SYMBOLIC.

Oracles: NumPy (float64/float32/float16 hardware or correctly rounded software arithmetic),
ml_dtypes (bfloat16), mpmath at 300 bits for transcendentals, and the integer oracle
`round_rational_to_format` (itself checked against NumPy casts and hand-worked values below).

ml_dtypes computes bfloat16 + - * / sqrt in float32 and rounds the float32 result to
bfloat16. That double rounding is innocuous: float32 carries 24 >= 2*8 + 2 bits, so for these
five correctly rounded operations the result equals single rounding (Figueroa's theorem; it
also holds on the subnormal range, where float32's quantum is 2**16 times finer). NumPy's
float16 arithmetic likewise goes through float32 (24 >= 2*11 + 2). A sampled cross-check of
30,000 operand pairs per op and all 65,536 sqrt inputs agreed bit for bit when this file was
written. ml_dtypes' float64 -> bfloat16 *conversion* is not single-rounded (it goes through
float32); see `test_bfloat16_from_float_single_rounding`.
"""

from __future__ import annotations

import math
import operator
import struct
import warnings
from fractions import Fraction

import gmpy2
import ml_dtypes
import numpy as np
import pytest
import sympy
from hypothesis import assume, given
from hypothesis import strategies as st

from spec.domains import (
    BFLOAT16,
    BINARY32,
    DOMAINS,
    FLOAT16,
    FLOAT64,
    RATIONAL,
    SYMBOLIC,
    IEEEDomain,
    domain_by_name,
    round_rational_to_format,
)
from spec.errors import DomainError

BF16 = ml_dtypes.bfloat16

# domain, numpy dtype, unsigned int dtype of the same width
IEEE = [
    (FLOAT64, np.float64, np.uint64),
    (BINARY32, np.float32, np.uint32),
    (FLOAT16, np.float16, np.uint16),
    (BFLOAT16, BF16, np.uint16),
]
IEEE_IDS = [d.name for d, _, _ in IEEE]

# Hand-written canonical quiet NaNs (sign 0, exponent all ones, top mantissa bit only).
CANONICAL_NAN = {
    "float64": 0x7FF8000000000000,
    "binary32": 0x7FC00000,
    "float16": 0x7E00,
    "bfloat16": 0x7FC0,
}
# Hand-written bit patterns of 1.0.
ONE_BITS = {
    "float64": 0x3FF0000000000000,
    "binary32": 0x3F800000,
    "float16": 0x3C00,
    "bfloat16": 0x3F80,
}


def np_bits(x, ut) -> int:
    """The bit pattern of a NumPy / ml_dtypes scalar or 0-d array."""
    return int(np.asarray(x).view(ut))


def np_from_bits(bits: int, dt, ut):
    return np.array(bits, dtype=ut).view(dt)


def np_isnan(x) -> bool:
    with np.errstate(all="ignore"):
        return bool(np.isnan(np.asarray(x).astype(np.float64)))


def oracle(D: IEEEDomain, q: Fraction):
    return round_rational_to_format(q, D.precision, D.emin, D.emax)


def value_of(D: IEEEDomain, a):
    """Exact value of a domain element: a Fraction, or +-inf as float."""
    if gmpy2.is_infinite(a):
        return -math.inf if gmpy2.is_signed(a) else math.inf
    return D.to_rational(a)


def is_negative_zero(a) -> bool:
    return bool(gmpy2.is_zero(a) and gmpy2.is_signed(a))


def bits_strategy(D: IEEEDomain, dt, ut):
    """Bit patterns of the format: Hypothesis floats of the right width, or for bfloat16
    raw 16-bit patterns (biased towards special values)."""
    if D is FLOAT64:
        return st.floats().map(lambda f: struct.unpack("<Q", struct.pack("<d", f))[0])
    if D is BINARY32:
        return st.floats(width=32).map(lambda f: np_bits(np.float32(f), ut))
    if D is FLOAT16:
        return st.floats(width=16).map(lambda f: np_bits(np.float16(f), ut))
    specials = [
        0x0000,
        0x8000,
        0x0001,
        0x8001,
        0x007F,
        0x0080,
        0x7F7F,
        0xFF7F,
        0x7F80,
        0xFF80,
        0x7FC0,
        0x3F80,
        0xBF80,
        0x7F81,
    ]
    return st.one_of(st.sampled_from(specials), st.integers(0, 0xFFFF))


def finite_bits_strategy(D: IEEEDomain, dt, ut):
    if D is FLOAT64:
        return st.floats(allow_nan=False, allow_infinity=False).map(
            lambda f: struct.unpack("<Q", struct.pack("<d", f))[0]
        )
    if D is BINARY32:
        return st.floats(width=32, allow_nan=False, allow_infinity=False).map(
            lambda f: np_bits(np.float32(f), ut)
        )
    if D is FLOAT16:
        return st.floats(width=16, allow_nan=False, allow_infinity=False).map(
            lambda f: np_bits(np.float16(f), ut)
        )
    exp_mask = 0x7F80
    return st.integers(0, 0xFFFF).filter(lambda b: (b & exp_mask) != exp_mask)


def assert_same_as_numpy(D: IEEEDomain, got, want, ut) -> None:
    if np_isnan(want):
        assert D.is_nan(got), f"expected NaN, got {got}"
        assert D.to_bits(got) == D.canonical_nan_bits
        return
    assert not D.is_nan(got)
    assert D.to_bits(got) == np_bits(want, ut), (got, want)


# --------------------------------------------------------------------------- format parameters


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_format_parameters_match_numpy_finfo(D, dt, ut):
    fi = ml_dtypes.finfo(dt) if dt is BF16 else np.finfo(dt)
    assert 2.0 ** (D.emin - 1) == float(fi.smallest_subnormal)
    assert float(fi.max) == float(Fraction(2) ** D.emax * (1 - Fraction(1, 2**D.precision)))
    assert D.width == np.dtype(dt).itemsize * 8
    assert D.to_rational(D.default_epsilon()) == Fraction(float(fi.eps))
    assert D.to_bits(D.one()) == ONE_BITS[D.name]
    assert D.to_bits(D.zero()) == 0


def test_domain_by_name_and_aliases():
    assert domain_by_name("float32") is BINARY32
    assert domain_by_name("binary64") is FLOAT64
    assert domain_by_name("fraction") is RATIONAL
    for name, d in DOMAINS.items():
        assert domain_by_name(name) is d
    with pytest.raises(DomainError):
        domain_by_name("float8")


# --------------------------------------------------------------------------- arithmetic


BINOPS = [
    ("add", operator.add),
    ("sub", operator.sub),
    ("mul", operator.mul),
    ("div", operator.truediv),
]


@pytest.mark.parametrize(("name", "npop"), BINOPS, ids=[n for n, _ in BINOPS])
@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_binary_ops_bit_equal_numpy(D, dt, ut, name, npop, data):
    strat = bits_strategy(D, dt, ut)
    a, b = data.draw(strat, label="a"), data.draw(strat, label="b")
    with np.errstate(all="ignore"):
        want = npop(np_from_bits(a, dt, ut), np_from_bits(b, dt, ut))
    got = getattr(D, name)(D.from_bits(a), D.from_bits(b))
    assert_same_as_numpy(D, got, want, ut)


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_sub_close_operands_bit_equal_numpy(D, dt, ut, data):
    """Cancellation: operands a few ulps apart (including across the subnormal boundary)."""
    a = data.draw(finite_bits_strategy(D, dt, ut), label="a")
    delta = data.draw(st.integers(-70, 70), label="delta")
    sign = a & (1 << (D.width - 1))
    mag = (a & ~(1 << (D.width - 1))) + delta
    assume(0 <= mag < (2**D.ebits - 1) << D.mbits)
    b = sign | mag
    with np.errstate(all="ignore"):
        want = np_from_bits(a, dt, ut) - np_from_bits(b, dt, ut)
        want_add = np_from_bits(a, dt, ut) + np_from_bits(b ^ (1 << (D.width - 1)), dt, ut)
    assert_same_as_numpy(D, D.sub(D.from_bits(a), D.from_bits(b)), want, ut)
    assert_same_as_numpy(
        D, D.add(D.from_bits(a), D.from_bits(b ^ (1 << (D.width - 1)))), want_add, ut
    )


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_sqrt_and_neg_abs_bit_equal_numpy(D, dt, ut, data):
    a = data.draw(bits_strategy(D, dt, ut), label="a")
    x = np_from_bits(a, dt, ut)
    with np.errstate(all="ignore"):
        assert_same_as_numpy(D, D.sqrt(D.from_bits(a)), np.sqrt(x), ut)
        assert_same_as_numpy(D, D.neg(D.from_bits(a)), np.negative(x), ut)
        assert_same_as_numpy(D, D.abs(D.from_bits(a)), np.abs(x), ut)


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_comparisons_match_numpy(D, dt, ut, data):
    strat = bits_strategy(D, dt, ut)
    a, b = data.draw(strat, label="a"), data.draw(strat, label="b")
    x, y = np_from_bits(a, dt, ut), np_from_bits(b, dt, ut)
    xa, yb = D.from_bits(a), D.from_bits(b)
    with np.errstate(all="ignore"):
        lt, gt, le, ge, eq = bool(x < y), bool(x > y), bool(x <= y), bool(x >= y), bool(x == y)
    assert D.lt(xa, yb) == lt
    assert D.gt(xa, yb) == gt
    assert D.le(xa, yb) == le
    assert D.ge(xa, yb) == ge
    assert D.eq(xa, yb) == eq


def test_hand_worked_arithmetic():
    # binary32: 1 + 2**-24 is a tie between 1 and 1 + 2**-23 -> even (1).
    one = BINARY32.one()
    half_ulp = BINARY32.from_rational(Fraction(1, 2**24))
    assert BINARY32.to_bits(BINARY32.add(one, half_ulp)) == 0x3F800000
    # 1 + 3*2**-24 is a tie between 1 + 2**-23 and 1 + 2**-22 -> even (1 + 2**-22).
    x = BINARY32.from_rational(1 + Fraction(1, 2**23))
    assert BINARY32.to_bits(BINARY32.add(x, half_ulp)) == 0x3F800002
    # float16: 65504 + 16 is the overflow tie -> inf; 65504 + 15 stays finite.
    m = FLOAT16.from_rational(65504)
    assert FLOAT16.to_bits(FLOAT16.add(m, FLOAT16.from_rational(16))) == 0x7C00
    assert FLOAT16.to_bits(FLOAT16.add(m, FLOAT16.from_rational(15))) == 0x7BFF
    # gradual underflow: min normal / 2 is a subnormal, min subnormal / 2 ties to +0.
    assert FLOAT16.to_bits(FLOAT16.div(FLOAT16.from_bits(0x0400), FLOAT16.from_rational(2))) == (
        0x0200
    )
    assert FLOAT16.to_bits(FLOAT16.div(FLOAT16.from_bits(0x0001), FLOAT16.from_rational(2))) == 0
    assert (
        FLOAT16.to_bits(
            FLOAT16.mul(FLOAT16.from_bits(0x8001), FLOAT16.from_rational(Fraction(3, 4)))
        )
        == 0x8001
    )
    # bfloat16: 1/3 = 0.0101010101..b -> 8 significant bits 1.0101011 * 2**-2
    third = BFLOAT16.div(BFLOAT16.one(), BFLOAT16.from_rational(3))
    assert BFLOAT16.to_rational(third) == Fraction(0b10101011, 2**9)
    # signed zeros
    assert is_negative_zero(BINARY32.mul(BINARY32.from_rational(-1), BINARY32.zero()))
    assert not is_negative_zero(BINARY32.add(BINARY32.from_float(-0.0), BINARY32.zero()))
    assert BINARY32.to_bits(BINARY32.div(one, BINARY32.from_float(-0.0))) == 0xFF800000


# --------------------------------------------------------------------------- conversions


def test_oracle_hand_worked():
    # float16: p=11, emin=-23, emax=16
    p, lo, hi = 11, -23, 16
    assert round_rational_to_format(1 + Fraction(1, 2**11), p, lo, hi) == 1
    assert round_rational_to_format(1 + Fraction(3, 2**11), p, lo, hi) == 1 + Fraction(1, 2**9)
    assert round_rational_to_format(1 + Fraction(1, 2**11) + Fraction(1, 2**40), p, lo, hi) == (
        1 + Fraction(1, 2**10)
    )
    assert round_rational_to_format(Fraction(65519), p, lo, hi) == 65504
    assert round_rational_to_format(Fraction(65520), p, lo, hi) == math.inf
    assert round_rational_to_format(Fraction(-65520), p, lo, hi) == -math.inf
    assert round_rational_to_format(Fraction(1, 2**25), p, lo, hi) == 0  # tie with 2**-24 -> 0
    assert round_rational_to_format(Fraction(3, 2**26), p, lo, hi) == Fraction(1, 2**24)
    assert round_rational_to_format(Fraction(3, 2**25), p, lo, hi) == Fraction(2, 2**24)
    assert round_rational_to_format(Fraction(-1, 3), p, lo, hi) == Fraction(-1365, 4096)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_oracle_matches_numpy_casts(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        f32, f16 = float(np.float32(f)), float(np.float16(f))
    q = Fraction(f)
    assert round_rational_to_format(q, 24, -148, 128) == (f32 if math.isinf(f32) else Fraction(f32))
    assert round_rational_to_format(q, 11, -23, 16) == (f16 if math.isinf(f16) else Fraction(f16))
    assert round_rational_to_format(q, 53, -1073, 1024) == q


def rationals_for(D: IEEEDomain):
    """General fractions across the whole range of D, plus exact ties (normal and subnormal)."""
    general = st.builds(
        lambda n, d, k: Fraction(n, d) * Fraction(2) ** k,
        st.integers(-(2**80), 2**80),
        st.integers(1, 2**80),
        st.integers(D.emin - D.precision - 10, D.emax + 10),
    )
    # a tie: an odd multiple of half a quantum, (2m + 1) * 2**(k - 1) with 2m+1 < 2**(p+1)
    normal_tie = st.builds(
        lambda m, k, s: s * Fraction(2 * m + 1) * Fraction(2) ** k,
        st.integers(2 ** (D.precision - 1), 2**D.precision - 1),
        st.integers(D.emin - D.precision - 1, D.emax - D.precision - 1),
        st.sampled_from([1, -1]),
    )
    subnormal_tie = st.builds(
        lambda m, s: s * Fraction(2 * m + 1) * Fraction(2) ** (D.emin - 2),
        st.integers(0, 2 ** (D.precision - 1)),
        st.sampled_from([1, -1]),
    )
    extreme = st.builds(
        lambda n, k: Fraction(n) * Fraction(2) ** k,
        st.integers(-(2**200), 2**200).filter(bool),
        st.integers(-3 * abs(D.emin), 3 * D.emax),
    )
    return st.one_of(general, normal_tie, subnormal_tie, extreme, st.fractions())


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_from_rational_matches_oracle(D, dt, ut, data):
    q = data.draw(rationals_for(D), label="q")
    got = D.from_rational(q)
    want = oracle(D, q)
    assert value_of(D, got) == want
    if want == 0:  # the sign of an underflowed value is the sign of q
        assert is_negative_zero(got) == (q < 0)


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_from_rational_edges(D, dt, ut):
    top = Fraction(2) ** D.emax
    ulp_top = Fraction(2) ** (D.emax - D.precision)
    maxf = top - ulp_top
    assert D.to_rational(D.from_rational(maxf)) == maxf
    assert D.to_rational(D.from_rational(maxf + ulp_top / 2 - Fraction(1, 10**9))) == maxf
    assert value_of(D, D.from_rational(maxf + ulp_top / 2)) == math.inf
    assert value_of(D, D.from_rational(-maxf - ulp_top / 2)) == -math.inf
    tiny = Fraction(2) ** (D.emin - 1)
    assert D.to_rational(D.from_rational(tiny)) == tiny
    assert D.to_bits(D.from_rational(tiny / 2)) == 0
    assert D.to_bits(D.from_rational(-tiny / 2)) == 1 << (D.width - 1)
    assert D.to_rational(D.from_rational(tiny / 2 + Fraction(1, 2**3000))) == tiny
    assert D.to_bits(D.from_rational(0)) == 0
    assert D.to_bits(D.from_rational(1)) == ONE_BITS[D.name]


@pytest.mark.parametrize(("D", "dt"), [(BINARY32, np.float32), (FLOAT16, np.float16)])
@given(f=st.floats())
def test_from_float_matches_numpy_cast(D, dt, f):
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = np.float64(f).astype(dt)
    ut = np.uint32 if dt is np.float32 else np.uint16
    assert_same_as_numpy(D, D.from_float(f), want, ut)


@given(f=st.floats())
def test_float64_from_float_is_exact(f):
    bits = struct.unpack("<Q", struct.pack("<d", f))[0]
    got = FLOAT64.from_float(f)
    if math.isnan(f):
        assert FLOAT64.is_nan(got)
    else:
        assert FLOAT64.to_bits(got) == bits


@given(f=st.floats(allow_nan=False))
def test_bfloat16_from_float_matches_oracle(f):
    got = BFLOAT16.from_float(f)
    if math.isinf(f):
        assert value_of(BFLOAT16, got) == f
    else:
        assert value_of(BFLOAT16, got) == oracle(BFLOAT16, Fraction(f))


@given(f=st.floats(width=32))
def test_bfloat16_from_binary32_value_matches_ml_dtypes(f):
    # a float32 -> bfloat16 cast is a single rounding in ml_dtypes
    want = np.float32(f).astype(BF16)
    assert_same_as_numpy(BFLOAT16, BFLOAT16.from_float(f), want, np.uint16)


def test_bfloat16_from_float_single_rounding():
    """A float64 -> bfloat16 cast through float32 rounds twice (ml_dtypes before 0.7). For
    x = 1 + 2**-8 + 2**-40 (just above the bfloat16 tie 1 + 2**-8 between 1 and 1 + 2**-7),
    float32 rounds x to the tie exactly, and the tie then goes to even (1.0). Rounding once
    gives 1 + 2**-7 since x is above the tie."""
    x = 1 + 2.0**-8 + 2.0**-40
    assert float(np.float32(x)) == 1 + 2.0**-8  # the intermediate lands on the tie
    assert float(np.float32(x).astype(BF16)) == 1.0  # via float32: double rounding
    got = BFLOAT16.from_float(x)
    assert BFLOAT16.to_rational(got) == 1 + Fraction(1, 2**7)
    assert BFLOAT16.to_bits(got) == 0x3F81
    # mirror image below the tie: 1 + 2**-7 + 2**-8 - 2**-40 -> float32 rounds up onto the
    # tie between 1 + 2**-7 (odd) and 1 + 2**-6 (even); single rounding goes down.
    y = 1 + 2.0**-7 + 2.0**-8 - 2.0**-40
    assert float(np.float32(y).astype(BF16)) == 1 + 2.0**-6
    assert BFLOAT16.to_bits(BFLOAT16.from_float(y)) == 0x3F81
    # negative and subnormal versions of the same phenomenon (bfloat16 quantum 2**-133 there;
    # float32's is 2**-149, so a hair of 2**-163 vanishes in the float32 intermediate)
    assert BFLOAT16.to_bits(BFLOAT16.from_float(-x)) == 0xBF81
    s = 2.0**-133 * (2.5 + 2.0**-30)  # 2.5 quanta + a hair: single rounding -> 3 quanta
    assert np_bits(np.float32(s).astype(BF16), np.uint16) == 0x0002  # double rounding
    assert BFLOAT16.to_bits(BFLOAT16.from_float(s)) == 0x0003
    t = 2.0**-134 + 2.0**-170  # half a quantum + a hair: single rounding -> 1 quantum
    assert np_bits(np.float32(t).astype(BF16), np.uint16) == 0x0000
    assert BFLOAT16.to_bits(BFLOAT16.from_float(t)) == 0x0001


def test_from_float_nan_and_signed_zero():
    for D, _, _ in IEEE:
        assert D.is_nan(D.from_float(math.nan))
        assert D.to_bits(D.from_float(-0.0)) == 1 << (D.width - 1)
        assert D.to_bits(D.from_float(0.0)) == 0
        inf_bits = (2**D.ebits - 1) << D.mbits
        assert D.to_bits(D.from_float(math.inf)) == inf_bits
        assert D.to_bits(D.from_float(-math.inf)) == inf_bits | (1 << (D.width - 1))


# --------------------------------------------------------------------------- RATIONAL


@given(st.fractions(), st.fractions())
def test_rational_exact_arithmetic(a, b):
    R = RATIONAL
    assert R.add(a, b) == a + b
    assert R.sub(a, b) == a - b
    assert R.mul(a, b) == a * b
    assert R.neg(a) == -a
    assert R.abs(a) == abs(a)
    if b != 0:
        assert R.div(a, b) == a / b
        assert R.mul(R.div(a, b), b) == a
    else:
        with pytest.raises(DomainError):
            R.div(a, b)
    assert R.lt(a, b) == (a < b)
    assert R.eq(a, b) == (a == b)
    assert R.same(a, b) == (a == b)
    assert R.decode(R.encode(a)) == a
    sq = R.mul(a, a)
    assert R.sqrt(sq) == abs(a)


def test_rational_domain_errors_and_exact_cases():
    R = RATIONAL
    with pytest.raises(DomainError):
        R.div(Fraction(1), Fraction(0))
    with pytest.raises(DomainError):
        R.sqrt(Fraction(2))
    with pytest.raises(DomainError):
        R.sqrt(Fraction(9, 8))
    with pytest.raises(DomainError):
        R.sqrt(Fraction(-4))
    with pytest.raises(DomainError):
        R.exp(Fraction(1))
    with pytest.raises(DomainError):
        R.log(Fraction(2))
    for f in (R.tanh, R.sin, R.cos):
        with pytest.raises(DomainError):
            f(Fraction(1, 2))
    for f in (math.inf, -math.inf, math.nan):
        with pytest.raises(DomainError):
            R.from_float(f)
    assert R.sqrt(Fraction(9, 4)) == Fraction(3, 2)
    assert R.sqrt(Fraction(0)) == 0
    assert R.exp(Fraction(0)) == 1
    assert R.log(Fraction(1)) == 0
    assert R.tanh(Fraction(0)) == 0
    assert R.sin(Fraction(0)) == 0
    assert R.cos(Fraction(0)) == 1
    assert R.from_float(0.1) == Fraction(3602879701896397, 36028797018963968)
    assert R.from_rational(7) == Fraction(7)
    assert R.encode(Fraction(-3, 7)) == "-3/7"
    assert R.encode(Fraction(5)) == "5/1"
    assert R.decode("-3/7") == Fraction(-3, 7)
    assert R.decode(R.encode(Fraction(10**40 + 1, 3**50))) == Fraction(10**40 + 1, 3**50)
    assert not R.is_nan(Fraction(0))
    assert R.default_epsilon() == Fraction(1, 2**52)


# --------------------------------------------------------------------------- SYMBOLIC


def test_symbolic_arithmetic_builds_expressions():
    S = SYMBOLIC
    x, y = sympy.symbols("x y")
    assert S.add(x, x) == 2 * x
    assert S.mul(x, y) == x * y
    assert S.sub(x, x) == 0
    assert S.div(x, y) == x / y
    assert S.neg(x) == -x
    assert S.sqrt(S.from_rational(Fraction(9, 4))) == sympy.Rational(3, 2)
    assert S.sqrt(S.from_rational(2)) == sympy.sqrt(2)
    assert S.exp(S.zero()) == 1
    assert S.log(x) == sympy.log(x)
    assert S.tanh(x) == sympy.tanh(x)
    assert S.abs(x) == sympy.Abs(x)
    assert S.from_float(0.5) == sympy.Rational(1, 2)
    assert S.from_rational(Fraction(-3, 7)) == sympy.Rational(-3, 7)
    with pytest.raises(DomainError):
        S.div(x, S.zero())
    assert S.same(S.add(S.sin(x) ** 2, S.cos(x) ** 2), S.one())
    assert S.eq(S.mul(x + 1, x - 1), x**2 - 1)
    assert not S.same(x, y)
    e = S.add(S.mul(x, S.exp(y)), S.from_rational(Fraction(1, 3)))
    assert S.same(S.decode(S.encode(e)), e)
    assert S.decode(S.encode(e)) == e
    assert S.is_nan(sympy.nan)
    assert not S.is_nan(x)


def test_symbolic_comparisons():
    S = SYMBOLIC
    x = sympy.Symbol("x")
    p = sympy.Symbol("p", positive=True)
    with pytest.raises(DomainError):
        S.lt(x, S.zero())
    with pytest.raises(DomainError):
        S.eq(x, S.zero())
    assert S.gt(p, S.zero()) is True
    assert S.lt(p, S.zero()) is False
    assert S.ge(p, S.zero()) is True
    assert S.eq(p, p) is True
    assert S.eq(p + 1, S.zero()) is False
    assert S.lt(S.from_rational(1), S.from_rational(2)) is True
    assert S.lt(sympy.sqrt(2), sympy.Rational(3, 2)) is True
