"""Scalar IEEE domains, continued from tests/test_domains.py (same oracles, same helpers):
correctly rounded transcendentals against mpmath at 300 bits, special values, the equality
policy (NaN as one class, signed zeros, bitwise `same`) and the bit encoding.
"""

from __future__ import annotations

import math
import struct
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from spec.domains import (
    BFLOAT16,
    BINARY32,
    FLOAT16,
    FLOAT64,
    IEEEDomain,
    round_rational_to_format,
)
from spec.errors import DomainError
from tests.test_domains import (
    BF16,
    CANONICAL_NAN,
    IEEE,
    IEEE_IDS,
    ONE_BITS,
    bits_strategy,
    finite_bits_strategy,
    is_negative_zero,
    np_bits,
    np_from_bits,
    np_isnan,
    oracle,
    value_of,
)

# --------------------------------------------------------------------------- transcendentals

MP_PREC = 300
MP_FUNCS = {
    "exp": mpmath.exp,
    "log": mpmath.log,
    "tanh": mpmath.tanh,
    "sin": mpmath.sin,
    "cos": mpmath.cos,
}


def mp_fraction(y) -> Fraction:
    p, q = mpmath.libmp.to_rational(y._mpf_)
    return Fraction(int(p), int(q))


def expected_transcendental(D: IEEEDomain, fname: str, x: Fraction, x_neg_zero: bool):
    """The correctly rounded value of fname(x) in D, or None when mpmath's 300-bit value is
    within 2**-150 (relative) of a rounding boundary (does not happen in practice).
    Returns (value, negative_zero_expected)."""
    if fname == "exp" and abs(x) > 2000:  # far beyond every format's range
        return (math.inf, False) if x > 0 else (Fraction(0), False)
    with mpmath.workprec(MP_PREC):
        y = MP_FUNCS[fname](mpmath.mpf(float(x)))  # every input is exact in binary64
        assert mpmath.isfinite(y)
        r = mp_fraction(y)
        eps = Fraction(1, 2**150)
        cands = {oracle(D, r * (1 - eps)), oracle(D, r), oracle(D, r * (1 + eps))}
    if len(cands) != 1:
        return None
    (want,) = cands
    if r != 0:
        neg_zero = r < 0
    else:  # exact zero: sin(+-0) = +-0, tanh(+-0) = +-0, log(1) = +0
        neg_zero = fname in ("sin", "tanh") and x_neg_zero
    return want, neg_zero


def check_transcendental(D: IEEEDomain, fname: str, bits: int) -> None:
    xd = D.from_bits(bits)
    x = D.to_rational(xd)
    if fname == "log" and x <= 0:
        return
    exp = expected_transcendental(D, fname, x, is_negative_zero(xd))
    assume(exp is not None)
    want, neg_zero = exp
    got = getattr(D, fname)(xd)
    assert value_of(D, got) == want, (D.name, fname, float(x), got, want)
    if want == 0:
        assert is_negative_zero(got) == neg_zero


@pytest.mark.parametrize("fname", list(MP_FUNCS))
@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_transcendental_correctly_rounded(D, dt, ut, fname, data):
    bits = data.draw(finite_bits_strategy(D, dt, ut), label="bits")
    if fname == "log":  # only positive arguments are interesting here
        bits &= ~(1 << (D.width - 1))
    check_transcendental(D, fname, bits)


@pytest.mark.parametrize("fname", list(MP_FUNCS))
@pytest.mark.parametrize(("D", "dt", "ut"), [IEEE[2], IEEE[3]], ids=["float16", "bfloat16"])
def test_transcendental_16bit_sweep(D, dt, ut, fname):
    """A deterministic sweep over every 29th 16-bit pattern (both signs, all exponents)."""
    exp_mask = (2**D.ebits - 1) << D.mbits
    for bits in range(0, 1 << 16, 29):
        if (bits & exp_mask) == exp_mask:
            continue
        xd = D.from_bits(bits)
        x = D.to_rational(xd)
        if fname == "log" and x <= 0:
            continue
        exp = expected_transcendental(D, fname, x, is_negative_zero(xd))
        if exp is None:
            continue
        want, neg_zero = exp
        got = getattr(D, fname)(xd)
        assert value_of(D, got) == want, (D.name, fname, hex(bits), got, want)
        if want == 0:
            assert is_negative_zero(got) == neg_zero


# Binary32 inputs where rounding the exact value to binary64 first and then to binary32 gives
# a different (wrong) result than rounding once: the exact value lies within about 2**-29
# binary32 ulps of a binary32 rounding boundary. Found by scanning every positive finite
# binary32 input with NumPy's float64 functions and confirming the survivors with mpmath
# (the test re-confirms each one). They catch an implementation that goes through a
# binary64 libm (or any 53-bit intermediate) and rounds again.
BINARY32_DOUBLE_ROUNDING_TRAPS = [
    ("log", 0x3C413D3A),
    ("log", 0x41178FEB),
    ("log", 0x4C5D65A5),
    ("log", 0x65D890D3),
    ("log", 0x6F31A8EC),
    ("sin", 0x46199998),
    ("cos", 0x5F18B878),
    ("cos", 0x6115CB11),
]


@pytest.mark.parametrize(
    ("fname", "bits"),
    BINARY32_DOUBLE_ROUNDING_TRAPS,
    ids=[f"{f}-{b:08x}" for f, b in BINARY32_DOUBLE_ROUNDING_TRAPS],
)
def test_transcendental_binary32_double_rounding_traps(fname, bits):
    D = BINARY32
    x = D.to_rational(D.from_bits(bits))
    with mpmath.workprec(400):
        r = mp_fraction(MP_FUNCS[fname](mpmath.mpf(float(x))))
    eps = Fraction(1, 2**200)
    single = {oracle(D, r * (1 - eps)), oracle(D, r * (1 + eps))}
    assert len(single) == 1
    (want,) = single
    via_binary64 = oracle(D, round_rational_to_format(r, 53, -1073, 1024))
    assert via_binary64 != want  # it really is a trap
    got = getattr(D, fname)(D.from_bits(bits))
    assert D.to_rational(got) == want
    if fname != "log":  # sin is odd, cos is even
        mirrored = getattr(D, fname)(D.from_bits(bits | 0x80000000))
        assert D.to_rational(mirrored) == (-want if fname == "sin" else want)


def test_transcendental_hand_worked():
    # exp(1) in binary32: e = 2.71828182845904523536... ; 24-bit significand 0x2DF854
    assert BINARY32.to_bits(BINARY32.exp(BINARY32.one())) == 0x402DF854
    # float64 exp(1) is the correctly rounded e = 0x4005BF0A8B145769 (math.e)
    assert (
        FLOAT64.to_bits(FLOAT64.exp(FLOAT64.one()))
        == struct.unpack("<Q", struct.pack("<d", math.e))[0]
    )
    # log(2) in float16: 0.693147... -> 0x398C (= 0.69336)
    assert FLOAT16.to_bits(FLOAT16.log(FLOAT16.from_rational(2))) == 0x398C
    # exact results
    for D, _, _ in IEEE:
        assert D.to_bits(D.exp(D.zero())) == ONE_BITS[D.name]
        assert D.to_bits(D.log(D.one())) == 0
        assert D.to_bits(D.cos(D.zero())) == ONE_BITS[D.name]
        assert D.to_bits(D.sin(D.from_float(-0.0))) == 1 << (D.width - 1)
        assert D.to_bits(D.tanh(D.from_float(-0.0))) == 1 << (D.width - 1)


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_special_values(D, dt, ut):
    inf = D.from_float(math.inf)
    ninf = D.from_float(-math.inf)
    pz, nz = D.from_float(0.0), D.from_float(-0.0)
    nan = D.from_float(math.nan)
    minus_one = D.from_rational(-1)
    sign = 1 << (D.width - 1)
    inf_bits = (2**D.ebits - 1) << D.mbits

    assert D.to_bits(D.exp(ninf)) == 0
    assert D.to_bits(D.exp(inf)) == inf_bits
    assert D.to_bits(D.log(pz)) == sign | inf_bits
    assert D.to_bits(D.log(nz)) == sign | inf_bits
    assert D.to_bits(D.log(inf)) == inf_bits
    assert D.is_nan(D.log(minus_one))
    assert D.is_nan(D.log(ninf))
    assert D.to_bits(D.sqrt(nz)) == sign
    assert D.to_bits(D.sqrt(pz)) == 0
    assert D.to_bits(D.sqrt(inf)) == inf_bits
    assert D.is_nan(D.sqrt(minus_one))
    assert D.is_nan(D.sqrt(ninf))
    assert D.to_bits(D.tanh(inf)) == ONE_BITS[D.name]
    assert D.to_bits(D.tanh(ninf)) == sign | ONE_BITS[D.name]
    for f in (D.sin, D.cos):
        assert D.is_nan(f(inf))
        assert D.is_nan(f(ninf))
    for f in (D.exp, D.log, D.tanh, D.sin, D.cos, D.sqrt, D.neg, D.abs):
        assert D.is_nan(f(nan))
    # invalid operations
    assert D.is_nan(D.sub(inf, inf))
    assert D.is_nan(D.add(inf, ninf))
    assert D.is_nan(D.mul(pz, inf))
    assert D.is_nan(D.div(pz, nz))
    assert D.is_nan(D.div(inf, ninf))
    assert D.to_bits(D.div(D.one(), nz)) == sign | inf_bits
    for r in (D.sub(inf, inf), D.log(minus_one), D.sqrt(minus_one), D.sin(inf)):
        assert D.to_bits(r) == CANONICAL_NAN[D.name]


# --------------------------------------------------------------------------- equality policy


def nan_patterns(D: IEEEDomain) -> list[int]:
    exp_all = (2**D.ebits - 1) << D.mbits
    sign = 1 << (D.width - 1)
    quiet = 1 << (D.mbits - 1)
    return [
        exp_all | quiet,
        exp_all | 1,  # signalling, minimal payload
        exp_all | quiet | 5,
        sign | exp_all | quiet,
        sign | exp_all | 1,
        (1 << D.width) - 1,  # all ones
    ]


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_nan_is_one_class(D, dt, ut):
    assert D.canonical_nan_bits == CANONICAL_NAN[D.name]
    assert np_bits(np.array(np.nan, dtype=dt), ut) == CANONICAL_NAN[D.name]
    nans = [D.from_bits(b) for b in nan_patterns(D)]
    for b in nan_patterns(D):
        assert np_isnan(np_from_bits(b, dt, ut))  # the patterns really are NaNs
    for a in nans:
        assert D.is_nan(a)
        assert D.to_bits(a) == CANONICAL_NAN[D.name]
        assert D.encode(a) == f"0x{CANONICAL_NAN[D.name]:0{D.width // 4}x}"
        assert not D.eq(a, a)
        assert not D.lt(a, D.one())
        assert not D.lt(D.one(), a)
        assert not D.le(a, a)
        for b in nans:
            assert D.same(a, b)
        assert not D.same(a, D.from_float(math.inf))
        assert not D.same(a, D.zero())


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_signed_zero_policy(D, dt, ut):
    pz, nz = D.from_bits(0), D.from_bits(1 << (D.width - 1))
    assert not D.same(pz, nz)
    assert D.same(pz, D.zero())
    assert D.same(nz, D.from_float(-0.0))
    assert D.eq(pz, nz)
    assert not D.lt(nz, pz)
    assert not D.lt(pz, nz)
    assert D.le(nz, pz)
    assert D.is_zero(nz)


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_same_is_bitwise(D, dt, ut, data):
    strat = bits_strategy(D, dt, ut)
    a, b = data.draw(strat, label="a"), data.draw(strat, label="b")
    xa, xb = D.from_bits(a), D.from_bits(b)
    na, nb = np_isnan(np_from_bits(a, dt, ut)), np_isnan(np_from_bits(b, dt, ut))
    assert D.same(xa, xb) == ((na and nb) or (not na and not nb and a == b))
    assert D.same(xa, xa)


def ieee_kinds(D: IEEEDomain) -> dict[str, int]:
    sign = 1 << (D.width - 1)
    exp_all = (2**D.ebits - 1) << D.mbits
    return {
        "+0": 0,
        "-0": sign,
        "min subnormal": 1,
        "max subnormal": (1 << D.mbits) - 1,
        "-min subnormal": sign | 1,
        "min normal": 1 << D.mbits,
        "one": ONE_BITS[D.name],
        "-one": sign | ONE_BITS[D.name],
        "max finite": exp_all - 1,
        "-max finite": sign | (exp_all - 1),
        "+inf": exp_all,
        "-inf": sign | exp_all,
    }


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
def test_encode_decode_every_kind(D, dt, ut):
    ndig = D.width // 4
    for kind, bits in ieee_kinds(D).items():
        v = D.from_bits(bits)
        s = D.encode(v)
        assert s == f"0x{bits:0{ndig}x}", kind
        back = D.decode(s)
        assert D.same(back, v), kind
        assert D.to_bits(back) == bits, kind
        # decoded values agree with NumPy's reading of the same bits
        npv = float(np.asarray(np_from_bits(bits, dt, ut)).astype(np.float64))
        assert float(back) == npv, kind
        assert math.copysign(1.0, float(back)) == math.copysign(1.0, npv), kind
    nan = D.decode(f"0x{CANONICAL_NAN[D.name]:0{ndig}x}")
    assert D.is_nan(nan)
    assert D.same(D.decode(D.encode(nan)), nan)
    assert D.encode(D.one()) == f"0x{ONE_BITS[D.name]:0{ndig}x}"


@pytest.mark.parametrize(("D", "dt", "ut"), IEEE, ids=IEEE_IDS)
@given(data=st.data())
def test_encode_decode_roundtrip_property(D, dt, ut, data):
    bits = data.draw(bits_strategy(D, dt, ut), label="bits")
    v = D.from_bits(bits)
    s = D.encode(v)
    assert len(s) == 2 + D.width // 4
    assert D.same(D.decode(s), v)
    if not np_isnan(np_from_bits(bits, dt, ut)):
        assert s == f"0x{bits:0{D.width // 4}x}"
        want = float(np.asarray(np_from_bits(bits, dt, ut)).astype(np.float64))
        assert float(v) == want
        assert math.copysign(1.0, float(v)) == math.copysign(1.0, want)


def test_from_bits_out_of_range():
    for D, _, _ in IEEE:
        with pytest.raises(DomainError):
            D.from_bits(1 << D.width)
        with pytest.raises(DomainError):
            D.from_bits(-1)


@pytest.mark.parametrize(("D", "dt"), [(FLOAT16, np.float16), (BFLOAT16, BF16)])
def test_bit_roundtrip_exhaustive_16bit(D, dt):
    with np.errstate(all="ignore"):
        values = np.arange(1 << 16, dtype=np.uint16).view(dt).astype(np.float64).tolist()
    exp_mask = (2**D.ebits - 1) << D.mbits
    bad = []
    for b in range(1 << 16):
        v = D.from_bits(b)
        want = values[b]
        if (b & exp_mask) == exp_mask and (b & ((1 << D.mbits) - 1)):
            if not (D.is_nan(v) and math.isnan(want)):
                bad.append(b)
            continue
        if D.to_bits(v) != b or float(v) != want:
            bad.append(b)
    assert not bad, [hex(b) for b in bad[:10]]


def test_to_rational_rejects_non_finite():
    for D, _, _ in IEEE:
        for f in (math.inf, -math.inf, math.nan):
            with pytest.raises(DomainError):
                D.to_rational(D.from_float(f))
