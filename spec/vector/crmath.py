"""Correctly rounded exp log tanh sin cos erf log1p expm1 on arrays: a fast binary64
approximation with an error bound, and MPFR (the spec domain's own function) for the
elements the bound cannot decide.

Invariants:
- For a target format of precision p <= 24 (binary32, bfloat16, float16): y is the binary64
  value of the platform function (NumPy's ufunc, or `math.erf`), assumed within
  |y| * 2**-40 of the exact value (2**13 ulps of binary64: every documented error of these
  functions in glibc and NumPy is under 4 ulps, so this is an assumption with a wide
  margin, not a proof). Rounding is monotone, so when y − e and y + e (e = |y| * 2**-40,
  widened by the rounding of those two sums) round to the same number of the format, the
  exact value rounds to it too: that number is the correctly rounded result. Every other
  element (the interval holds a rounding boundary, or x or y is non-finite, or |y| is
  below 2**-1000 or above 2**1000, or sin/cos of |x| > 2**20) is computed by MPFR.
- binary64 (p = 53): a binary64 approximation cannot decide a binary64 rounding, so every
  element is computed by MPFR.
- `MPFR_ELEMENTS` counts, process-wide, the elements computed by MPFR (a caller reads it
  before and after an evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .formats import Format

__all__ = ["APPROX", "MPFR_ELEMENTS", "correctly_rounded"]

Arr = np.ndarray

_erf = np.frompyfunc(math.erf, 1, 1)


def _erf64(x: Arr) -> Arr:
    return np.asarray(_erf(x), dtype=np.float64)


APPROX: dict[str, Callable[[Arr], Arr]] = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "sin": np.sin,
    "cos": np.cos,
    "erf": _erf64,
    "log1p": np.log1p,
    "expm1": np.expm1,
}
"""The binary64 approximations, by the name of the spec domain's function."""

REL = 2.0**-40
_TRIG = ("sin", "cos")


class _Count:
    n = 0


MPFR_ELEMENTS = _Count()


def _undecided(F: Format, name: str, x: Arr, y: Arr) -> Arr:
    """The elements whose rounding the approximation y does not decide."""
    if F.domain.precision > 24:
        return np.ones(x.shape, dtype=bool)
    e = np.abs(y) * (REL * (1 + 2.0**-50))
    lo, hi = F.rnd(y - e), F.rnd(y + e)
    bad = (lo != hi) | ~np.isfinite(y) | ~np.isfinite(x)
    bad |= (np.abs(y) < 2.0**-1000) | (np.abs(y) > 2.0**1000)
    if name in _TRIG:
        bad |= np.abs(x) > 2.0**20
    return bad


def correctly_rounded(F: Format, name: str, x: Arr) -> Arr:
    """f(x) rounded once to nearest-even in F, elementwise (f the domain function `name`)."""
    x64 = np.asarray(x, dtype=np.float64)
    y = APPROX[name](x64)
    bad = _undecided(F, name, x64, y)
    out = np.asarray(F.rnd(y), dtype=np.float64).copy()
    idx = np.nonzero(bad.reshape(-1))[0]
    if len(idx):
        D = F.domain
        fn = getattr(D, name)
        flat_x, flat_out = x64.reshape(-1), out.reshape(-1)
        for i in idx:
            flat_out[i] = float(fn(D.from_float(float(flat_x[i]))))
        MPFR_ELEMENTS.n += len(idx)
    return F.cast(out)
