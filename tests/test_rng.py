"""spec.rng: SplitMix64 golden values, an independent reference stream, samples, masks, normals."""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec import rng
from spec.domains import BINARY32, FLOAT16, FLOAT64, RATIONAL
from spec.errors import DomainError

U64 = st.integers(0, 2**64 - 1)
M64 = 2**64


class VignaSplitMix64:
    """Transliteration of Vigna's reference splitmix64.c (`next()` advances the state by
    gamma, then mixes)."""

    def __init__(self, seed: int) -> None:
        self.x = seed % M64

    def next(self) -> int:
        self.x = (self.x + 0x9E3779B97F4A7C15) % M64
        z = self.x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) % M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) % M64
        return z ^ (z >> 31)


def vigna_nth(seed: int, n: int) -> int:
    """The n-th (0-based) output of the stream started at `seed`."""
    g = VignaSplitMix64(seed)
    out = 0
    for _ in range(n + 1):
        out = g.next()
    return out


# --------------------------------------------------------------------------- golden values


def test_golden_values():
    assert rng.key_of(0, 0) == 0xE220A8397B1DCDAF
    assert rng.next_seed(7, 0) == 309689372594955804
    k = rng.key_of(0, 0)
    assert [rng.sample_nat(k, i) for i in range(4)] == [
        1293516399,
        2939677055,
        1326138252,
        994118778,
    ]
    # the first outputs of Vigna's generator seeded with 0 (widely published)
    assert [rng.splitmix64(i * rng.GAMMA) for i in range(3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]


@given(U64, st.integers(0, 20))
def test_key_of_is_the_counter_th_output_of_the_stream(seed, counter):
    assert rng.key_of(seed, counter) == vigna_nth(seed, counter)
    assert rng.next_seed(seed, counter) == vigna_nth(seed, counter + 1)


@given(U64, st.integers(0, 2**32))
def test_sample_nat_reference(key, i):
    # sample_nat(key, i) = low 32 bits of the first output of the stream started at key + i
    assert rng.sample_nat(key, i) == vigna_nth(key + i, 0) & 0xFFFFFFFF


@given(st.integers(-(2**70), 2**70), st.integers(0, 2**70))
def test_arithmetic_is_mod_2_64(seed, counter):
    assert rng.key_of(seed, counter) == rng.key_of(seed % M64, counter % M64)
    assert rng.key_of(seed + M64, counter) == rng.key_of(seed, counter)
    assert 0 <= rng.key_of(seed, counter) < M64


def test_bad_arguments_raise():
    with pytest.raises(DomainError):
        rng.sample_nat(1, -1)
    with pytest.raises(DomainError):
        rng.sample_nat(1, True)
    with pytest.raises(DomainError):
        rng.key_of(1.5, 0)
    with pytest.raises(DomainError):
        rng.key_of(True, 0)
    with pytest.raises(DomainError):
        rng.uniform(RATIONAL, 1, 0, lo=2, hi=1)
    with pytest.raises(DomainError):
        rng.mask(1, 0, Fraction(-1, 10))
    with pytest.raises(DomainError):
        rng.mask(1, 0, Fraction(11, 10))


# --------------------------------------------------------------------------- samples


@given(U64, st.integers(0, 2**40))
def test_sample_unit_in_unit_interval(key, i):
    u = rng.sample_unit(key, i)
    assert isinstance(u, Fraction)
    assert 0 <= u < 1
    assert (u * 2**32).denominator == 1
    assert u == Fraction(vigna_nth(key + i, 0) & 0xFFFFFFFF, 2**32)


@given(
    U64,
    st.integers(0, 10**6),
    st.fractions(min_value=-100, max_value=100),
    st.fractions(min_value=0, max_value=100),
)
def test_uniform_rational_exact_and_in_range(key, i, lo, width):
    hi = lo + width
    u = Fraction(vigna_nth(key + i, 0) & 0xFFFFFFFF, 2**32)
    x = rng.uniform(RATIONAL, key, i, lo, hi)
    assert x == lo + (hi - lo) * u
    assert lo <= x <= hi
    if width > 0:
        assert x < hi


@given(U64, st.integers(0, 10**6), st.integers(-8, 8), st.integers(0, 8))
def test_uniform_ieee_in_closed_range(key, i, lo, width):
    hi = lo + width
    for D in (BINARY32, FLOAT16):
        x = rng.uniform(D, key, i, lo, hi)
        q = D.to_rational(x)
        assert lo <= q <= hi


def test_uniform_may_round_to_hi():
    # find an index whose sample is within half a float16 ulp of 1 (u >= 1 - 2**-12)
    key = rng.key_of(3, 1)
    i = next(i for i in range(200000) if rng.sample_nat(key, i) >= 2**32 - 2**20)
    assert FLOAT16.to_rational(rng.uniform(FLOAT16, key, i)) == 1
    assert rng.uniform(RATIONAL, key, i) < 1


@given(U64, st.integers(0, 10**6))
def test_mask_threshold(key, i):
    n = vigna_nth(key + i, 0) & 0xFFFFFFFF
    u = Fraction(n, 2**32)
    assert rng.mask(key, i, 0) is True
    assert rng.mask(key, i, 1) is False
    assert rng.mask(key, i, u) is True  # keep iff u >= p (boundary kept)
    assert rng.mask(key, i, u + Fraction(1, 2**40)) is False
    if n > 0:
        assert rng.mask(key, i, u - Fraction(1, 2**40)) is True


def test_mask_rates():
    key = rng.key_of(11, 0)
    kept = sum(rng.mask(key, i, Fraction(1, 4)) for i in range(4000))
    assert 2800 < kept < 3200  # ~3000 expected
    kept = sum(rng.mask(key, i, 0.5) for i in range(4000))
    assert 1800 < kept < 2200


# --------------------------------------------------------------------------- normal


def test_normal_rational_raises():
    for i in range(5):
        with pytest.raises(DomainError):
            rng.normal(RATIONAL, rng.key_of(0, 0), i)


def test_normal_binary32_finite_and_bounded():
    key = rng.key_of(5, 2)
    # u1 is clamped below by 2**-23, so |z| <= sqrt(-2 ln 2**-23) (+ rounding slack)
    bound = math.sqrt(2 * 23 * math.log(2)) * (1 + 1e-5)
    values = [rng.normal(BINARY32, key, i) for i in range(300)]
    for z in values:
        assert gmpy2.is_finite(z)
        assert abs(float(z)) <= bound
    mean = sum(float(z) for z in values) / len(values)
    var = sum(float(z) ** 2 for z in values) / len(values) - mean**2
    assert abs(mean) < 0.3
    assert 0.7 < var < 1.3


def test_normal_formula_float64():
    """Box-Muller cos branch with u1 = sample 2i and u2 = sample 2i+1, checked against math
    (which need not be correctly rounded: a loose tolerance)."""
    key = rng.key_of(9, 4)
    for i in range(50):
        u1 = max(rng.sample_nat(key, 2 * i) / 2**32, 2.0**-52)
        u2 = rng.sample_nat(key, 2 * i + 1) / 2**32
        want = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
        got = float(rng.normal(FLOAT64, key, i))
        assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12), (i, got, want)


def test_normal_clamps_u1_at_epsilon():
    """u1 below the domain's epsilon is replaced by it. float16's epsilon is 2**-10; pick an
    index whose u1 < 2**-13 (unclamped radius >= 4.24, clamped 3.72) and |cos| > 1/2."""
    key = rng.key_of(1, 1)

    def cos_of(i: int) -> float:
        return math.cos(2 * math.pi * rng.sample_nat(key, 2 * i + 1) / 2**32)

    i = next(
        i for i in range(200000) if rng.sample_nat(key, 2 * i) < 2**19 and abs(cos_of(i)) > 0.5
    )
    radius = float(rng.normal(FLOAT16, key, i)) / cos_of(i)
    assert abs(radius - math.sqrt(-2 * math.log(2.0**-10))) < 0.05


def test_determinism_and_split():
    k1, k2 = rng.split(12345)
    assert k1 != k2
    assert (k1, k2) == (vigna_nth(12345, 0), vigna_nth(12345, 1))
    assert rng.split(12345) == (k1, k2)
    a = [BINARY32.to_bits(rng.normal(BINARY32, k1, i)) for i in range(20)]
    b = [BINARY32.to_bits(rng.normal(BINARY32, k1, i)) for i in range(20)]
    assert a == b
    c = [BINARY32.to_bits(rng.normal(BINARY32, k2, i)) for i in range(20)]
    assert a != c
    assert [rng.sample_nat(k1, i) for i in range(10)] == [rng.sample_nat(k1, i) for i in range(10)]


@given(U64)
def test_split_keys_differ(key):
    a, b = rng.split(key)
    assert a != b
    assert (a, b) == (vigna_nth(key, 0), vigna_nth(key, 1))
