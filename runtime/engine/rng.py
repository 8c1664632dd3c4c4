"""Vectorised SplitMix64 samples on any backend, equal bit for bit to `spec.rng`.

Invariants:
- Integer arithmetic is unsigned 64-bit with wrap-around (NumPy, CuPy and array-API
  uint64 arrays wrap), so `sample_nat(b, key, n)[i] == spec.rng.sample_nat(key, i)`.
- `keep_mask` compares integers only: u = nat / 2**32 >= p  <=>  nat >= ceil(p * 2**32),
  so the mask is exact on every backend and dtype.
- `uniform01` is u rounded once into the dtype: u = nat * 2**-32 is exact in binary64;
  its cast to binary32 is one rounding on every backend; float16 and bfloat16 are rounded
  on the host by `runtime.backends.round_f64` (CuPy's double -> half conversion goes
  through binary32, a second rounding).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np

from spec.rng_arrays import splitmix64_array

from ..backends.base import Backend, round_f64

__all__ = ["keep_mask", "sample_nat", "uniform01"]


def sample_nat(backend: Backend, key: int, n: int, start: int = 0) -> Any:
    """[spec.rng.sample_nat(key, start + i) for i < n] as a uint64 backend array."""
    xp = backend.xp
    with np.errstate(over="ignore"):
        idx = xp.arange(n, dtype=xp.uint64) + xp.asarray(
            (key + start) & ((1 << 64) - 1), dtype=xp.uint64
        )
        return splitmix64_array(xp, idx) & xp.asarray(0xFFFFFFFF, dtype=xp.uint64)


def keep_mask(backend: Backend, key: int, n: int, p: Fraction) -> Any:
    """[spec.rng.mask(key, i, p) for i < n] as a bool backend array (p in [0, 1])."""
    xp = backend.xp
    threshold = math.ceil(Fraction(p) * (1 << 32))
    if threshold > 0xFFFFFFFF:
        return xp.zeros(n, dtype=xp.bool)
    return sample_nat(backend, key, n) >= xp.asarray(threshold, dtype=xp.uint64)


def uniform01(backend: Backend, key: int, n: int, dtype: str) -> Any:
    """[spec.rng.uniform(D, key, i) for i < n] as a backend array of `dtype`."""
    xp = backend.xp
    u = xp.astype(sample_nat(backend, key, n), xp.float64) * xp.asarray(2.0**-32, dtype=xp.float64)
    if dtype in ("float64", "float32"):
        return u if dtype == "float64" else xp.astype(u, backend.dtype("float32"))
    return backend.from_host(round_f64(backend.to_host(u), dtype))
