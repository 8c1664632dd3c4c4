"""SplitMix64 random numbers keyed by (seed, counter); identical on every backend.

All integer arithmetic is mod 2**64. `splitmix64(x)` is one step of Vigna's SplitMix64:
z = x + γ, then the two xor-shift-multiply rounds and a final xor-shift, with
γ = 0x9E3779B97F4A7C15. Keys, streams and samples are pure functions of their arguments:
- key_of(seed, counter) = splitmix64(seed + counter·γ)
  (the counter-th output of a SplitMix64 stream started at `seed`);
- next_seed(seed, counter) = key_of(seed, counter + 1);
- sample_nat(key, i) = splitmix64(key + i) mod 2**32;
- sample_unit(key, i) = sample_nat(key, i) / 2**32, an exact rational in [0, 1);
- uniform(D, key, i, lo, hi) = lo + (hi − lo)·u computed exactly, rounded once into D
  (so a value may round to `hi`);
- mask(key, i, p) keeps element i iff sample_unit(key, i) >= p (exact comparison);
- normal(D, key, i): Box–Muller, cos branch, with u1 = sample_unit(key, 2i) clamped below
  by D.default_epsilon() and u2 = sample_unit(key, 2i + 1), each operation rounded in D:
  mul(sqrt(mul(-2, log(u1))), cos(mul(2π, u2))), 2π being the binary64 value 2·math.pi;
- split(key) = (key_of(key, 0), key_of(key, 1)).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from .domains import Domain
from .errors import DomainError

__all__ = [
    "GAMMA",
    "key_of",
    "mask",
    "next_seed",
    "normal",
    "sample_nat",
    "sample_unit",
    "split",
    "splitmix64",
    "uniform",
]

MASK64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def _u64(name: str, v: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise DomainError(f"rng: {name} must be an int, got {v!r}")
    return v & MASK64


def splitmix64(x: int) -> int:
    z = (_u64("x", x) + GAMMA) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def key_of(seed: int, counter: int) -> int:
    return splitmix64((_u64("seed", seed) + _u64("counter", counter) * GAMMA) & MASK64)


def next_seed(seed: int, counter: int) -> int:
    return key_of(seed, _u64("counter", counter) + 1)


def sample_nat(key: int, i: int) -> int:
    if isinstance(i, bool) or not isinstance(i, int) or i < 0:
        raise DomainError(f"rng: sample index must be a non-negative int, got {i!r}")
    return splitmix64((_u64("key", key) + i) & MASK64) & 0xFFFFFFFF


def sample_unit(key: int, i: int) -> Fraction:
    return Fraction(sample_nat(key, i), 1 << 32)


def uniform(D: Domain, key: int, i: int, lo: Fraction | int = 0, hi: Fraction | int = 1) -> Any:
    lo, hi = Fraction(lo), Fraction(hi)
    if lo > hi:
        raise DomainError(f"rng.uniform: lo {lo} > hi {hi}")
    return D.from_rational(lo + (hi - lo) * sample_unit(key, i))


def mask(key: int, i: int, p: Fraction | int | float) -> bool:
    p = Fraction(p)
    if not 0 <= p <= 1:
        raise DomainError(f"rng.mask: drop probability must be in [0, 1], got {p}")
    return sample_unit(key, i) >= p


TWO_PI = Fraction(2 * math.pi)


def normal(D: Domain, key: int, i: int) -> Any:
    u1 = D.from_rational(sample_unit(key, 2 * i))
    eps = D.default_epsilon()
    if D.lt(u1, eps):
        u1 = eps
    u2 = D.from_rational(sample_unit(key, 2 * i + 1))
    r = D.sqrt(D.mul(D.from_rational(-2), D.log(u1)))
    return D.mul(r, D.cos(D.mul(D.from_rational(TWO_PI), u2)))


def split(key: int) -> tuple[int, int]:
    return key_of(key, 0), key_of(key, 1)
