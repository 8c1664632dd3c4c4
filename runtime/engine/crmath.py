"""Correctly rounded transcendental functions for the `ordered` kernel profile.

Method (Ziv-style, vectorised): evaluate the function in a wider format W (float64 for
binary32/bfloat16/float16 targets; x87 long double, 64-bit significand, for binary64),
round that to the target to get a candidate c, and accept c only when the interval
[y_W - E, y_W + E] lies strictly between the two rounding boundaries (midpoints) around c.
E = ERR_ULPS * spacing_W(y_W) is the assumed error bound of the wide evaluation. Rejected
elements (probability about ERR_ULPS * 2**-(p_W - p_target) each) are recomputed with
MPFR through the spec domain, which is correctly rounded by construction. A candidate that
double-rounded (bfloat16 through float32) lies outside its own boundary interval and is
rejected too. Where long double is not wider than binary64, binary64 falls back to MPFR
for every element (slow, still correct).

The functions are the records of `spec.mathfns.MATH_FNS` (nothing is listed here): the wide
evaluation of a function is the NumPy ufunc its record names (`numpy_name`), or, where
NumPy has none, the C library's binary64 function its record names (`python`, one call
per element), so in binary64 (no wider evaluation available) it is MPFR for every element.
A name without a record raises `TorchLeanError` saying where to add one.

Assumption (stated, and checked by the opt-in sweep `python -m conformance.sweep`): NumPy's
float64 and long-double functions (exp, log, tanh, sin, cos, log1p, expm1) and the C
library's binary64 erf err by at most ERR_ULPS units in the last place of their own
format. glibc documents <= 4 ulp for these functions (erf <= 2).
`cr_pow` is the same method for the binary pow (C99 pow, NumPy's `power`: glibc's pow and
powl are documented within 1 ulp), on broadcast operands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from spec.domains import Domain, IEEEDomain
from spec.errors import TorchLeanError
from spec.mathfns import MATH_FNS, MathFn, numpy_name

from ..backends.base import DTYPE_DOMAIN, from_spec, np_dtype, round_f64, to_spec

__all__ = [
    "ERR_ULPS",
    "FUNCTIONS",
    "cr_apply",
    "cr_pow",
    "functions",
    "host64",
    "libm_ufunc",
    "record",
    "unsafe_mask",
    "wide",
]

ERR_ULPS = 16
_LONG_OK = np.finfo(np.longdouble).nmant >= 63


def record(fn: str) -> MathFn:
    """The math-function record of `fn`, or `TorchLeanError` saying where to add one."""
    try:
        return MATH_FNS[fn]
    except KeyError:
        raise TorchLeanError(
            f"runtime.engine.crmath: no math-function record for {fn!r}; add a MathFn for it "
            "(spec.domains.add_math_function, or the math= of its op's register(...))"
        ) from None


def functions() -> tuple[str, ...]:
    """Every function with a record, in the order the records were added."""
    return tuple(MATH_FNS)


FUNCTIONS = functions()
"""The functions with a record when this module was imported (the sweep's default)."""


_UFUNCS: dict[str, Callable[[Any], Any] | None] = {}


def libm_ufunc(fn: str) -> Callable[[Any], Any] | None:
    """NumPy's function for fn (its record's first present spelling), or None."""
    try:
        return _UFUNCS[fn]
    except KeyError:
        name = numpy_name(record(fn))
        f = _UFUNCS[fn] = None if name is None else getattr(np, name)
        return f


def host64(fn: str, x: Any) -> Any:
    """The C library's binary64 fn (the record's `python` name) of every element of x (x
    converted to float64 first), as a float64 array of x's shape."""
    f = np.frompyfunc(getattr(math, str(record(fn).python)), 1, 1)
    a = np.asarray(x, dtype=np.float64)
    return np.asarray(f(a), dtype=np.float64).reshape(a.shape)


def wide(fn: str) -> Callable[[Any], Any]:
    """The wide evaluation of fn: NumPy's ufunc (float64 and long double), or where NumPy
    has none the binary64 `host64` (a long-double argument is evaluated in binary64)."""
    f = libm_ufunc(fn)
    return f if f is not None else (lambda x: host64(fn, x))


def _quantum(e: Any, D: IEEEDomain, W: Any) -> Any:
    """Spacing of target values with MPFR exponent e (|v| in [2**(e-1), 2**e))."""
    return np.ldexp(W(1), np.maximum(e, D.emin + D.precision - 1) - D.precision)


def unsafe_mask(y: Any, c: Any, D: IEEEDomain) -> Any:
    """True where the candidate c (target dtype) may not be the correct rounding of the
    true value known only to lie within y +- ERR_ULPS*spacing(y) (y in the wide dtype W)."""
    W = y.dtype.type
    ay = np.abs(y)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.spacing(ay) * W(ERR_ULPS)
        ac = np.abs(c.astype(W))
        mant, e = np.frexp(ac)
        up = _quantum(e, D, W)
        down = np.where(
            (mant == 0.5) & (e - 1 >= D.emin + D.precision - 1), _quantum(e - 1, D, W), up
        )
        max_finite = np.ldexp(W(1), D.emax) - np.ldexp(W(1), D.emax - D.precision)
        threshold = max_finite + np.ldexp(W(1), D.emax - D.precision - 1)
        lo = ac - down / 2
        hi = ac + up / 2
        finite_ok = (lo < ay - err) & (ay + err < hi)
        # c == 0 is safe when the value is below half the smallest subnormal, 2**(emin-1)/2
        zero_ok = ay + err < np.ldexp(W(1), D.emin - 2)
        inf_ok = ay - err > threshold
    safe = np.where(np.isinf(ac), inf_ok | np.isinf(ay), np.where(ac == 0, zero_ok, finite_ok))
    safe |= np.isnan(y) & np.isnan(c.astype(W))
    return ~safe


def cr_apply(fn: str, x: Any, dtype: str) -> Any:
    """fn(x) correctly rounded in `dtype` (one of float64/float32/bfloat16/float16)."""
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    if dtype == "float64" and (not _LONG_OK or libm_ufunc(fn) is None):
        return _mpfr_all(fn, x, dtype, D)
    ufunc = wide(fn)
    W = np.longdouble if dtype == "float64" else np.float64
    with np.errstate(all="ignore"):
        y = np.asarray(ufunc(np.asarray(x).astype(W)))
        c = (
            y.astype(np.float64).astype(np_dtype(dtype))
            if dtype == "float64"
            else (round_f64(y, dtype))
        )
    bad = unsafe_mask(y, c, D)
    if bad.any():
        c = np.array(c, copy=True)
        # boolean-mask indexing (not np.nonzero): also works for 0-d inputs
        c[bad] = _mpfr_all(fn, np.asarray(x)[bad], dtype, D)
    return c


def _mpfr_all(fn: str, x: Any, dtype: str, D: Domain) -> Any:
    t = to_spec(np.asarray(x), dtype)
    f = getattr(D, fn)
    return from_spec(t.map(f), dtype)


def cr_pow(a: Any, b: Any, dtype: str) -> Any:
    """pow(a, b) (C99 special values) correctly rounded in `dtype` (float64/float32/bfloat16/
    float16), a and b broadcast against each other."""
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    a, b = np.broadcast_arrays(np.asarray(a), np.asarray(b))
    if dtype == "float64" and not _LONG_OK:
        return _mpfr_pow(a, b, dtype, D)
    W = np.longdouble if dtype == "float64" else np.float64
    with np.errstate(all="ignore"):
        y = np.asarray(np.power(a.astype(W), b.astype(W)))
        c = (
            y.astype(np.float64).astype(np_dtype(dtype))
            if dtype == "float64"
            else round_f64(y, dtype)
        )
    # Zeros, infinities and NaNs (operands or results) go to MPFR: the signs of zeros and
    # C99's special cases are not the wide evaluation's to decide (NumPy's scalar path,
    # for one, takes sqrt for y = 0.5 and returns pow(-0, 0.5) = -0).
    with np.errstate(invalid="ignore"):
        special = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)) | (a == 0) | (c == 0)
    bad = unsafe_mask(y, c, D) | special
    if bad.any():
        c = np.array(c, copy=True)
        c[bad] = _mpfr_pow(a[bad], b[bad], dtype, D)
    return c


def _mpfr_pow(a: Any, b: Any, dtype: str, D: Domain) -> Any:
    ta, tb = to_spec(np.ascontiguousarray(a), dtype), to_spec(np.ascontiguousarray(b), dtype)
    t = type(ta)(ta.shape, tuple(D.pow(p, q) for p, q in zip(ta.data, tb.data, strict=True)))
    return from_spec(t, dtype)
