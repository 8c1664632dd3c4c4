"""Math functions as data: one `MathFn` record per elementwise function of one argument.

Invariants:
- A record holds everything about the function that is not a rule of some op: its
  spellings (MPFR through gmpy2, sympy, mpmath, NumPy, the array API, each judged engine),
  its derivative (a sympy expression, checked against sympy's derivative of the sympy
  spelling by a test), its real domain, its hard points (drawn as consts by a derived
  graph builder), its fast-profile ULP budget per IEEE dtype and its exact rational
  points. Every *registration* a function needs is derived
  from it: the `Domain` methods (`spec.domains.add_math_function`), the correctly rounded
  evaluation (`runtime.engine.crmath`), the fast-profile budget and bound
  (`conformance.bounds.core`), the graph builder (`conformance.graphs.core`), the law
  (`proofs.laws.derived`) and the engine adapters (`conformance.engines.common`).
- `numpy` lists candidate NumPy names, the first present wins (`arctan` works on
  NumPy 1.26 and 2.x, `atan` on 2.x only); where NumPy has none, `python` names the
  `math` function evaluated element by element in binary64.
- `ulps` has one entry for every dtype of `BUDGET_DTYPES`; a record lacking one is
  incomplete (`proofs.completeness` names it), never a silent 0.
- `MATH_FNS` is filled by `spec.domains.add_math_function` only (the built-in records are
  added when `spec.domains` is imported); a name added twice raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import sympy

__all__ = [
    "BUDGET_DTYPES",
    "BUILTIN",
    "MATH_FNS",
    "MathFn",
    "numpy_name",
    "record_gaps",
]

BUDGET_DTYPES = ("float64", "float32", "bfloat16", "float16")
"""The IEEE dtypes every record states a fast-profile ULP budget for."""

ENGINE_NAMES = ("torch", "jax", "tinygrad", "autograd")


@dataclass(frozen=True)
class MathFn:
    """One math function f of one real argument.

    `sympy(x)` and `derivative(x)` map a sympy expression to f(x) and f'(x); `domain` is the
    open interval (lo, hi) where f is real and smooth (None: unbounded); `hard` the points
    where evaluations are hardest (overflow edges, poles); `exact` the rational points
    where f is rational (what an exact domain may answer); `engines` the dotted name each judged
    engine spells f with, from the engine's root (torch.<s>, jax.<s>, tinygrad's
    Tensor.<s>(), autograd.numpy.<s>); an engine missing there does not cover the op."""

    name: str
    mpfr: str
    sympy: Callable[[Any], Any]
    derivative: Callable[[Any], Any]
    mpmath: str
    numpy: tuple[str, ...]
    array_api: str
    ulps: Mapping[str, float]
    domain: tuple[Fraction | None, Fraction | None] = (None, None)
    hard: tuple[float, ...] = ()
    exact: Mapping[Fraction, Fraction] = field(default_factory=dict)
    engines: Mapping[str, str] = field(default_factory=dict)
    python: str | None = None


MATH_FNS: dict[str, MathFn] = {}
"""Name -> record (filled through `spec.domains.add_math_function`)."""


def numpy_name(fn: MathFn) -> str | None:
    """The first of `fn.numpy` that the installed NumPy has, or None."""
    import numpy as np

    return next((n for n in fn.numpy if hasattr(np, n)), None)


def record_gaps(fn: MathFn) -> list[str]:
    """What the record lacks, one phrase per gap (empty when complete)."""
    gaps = [f"a ULP budget for {dt}" for dt in BUDGET_DTYPES if dt not in fn.ulps]
    if numpy_name(fn) is None and fn.python is None:
        gaps.append(f"a wide evaluation (numpy={fn.numpy} names no NumPy function; set python=)")
    return gaps


def _same(name: str, *without: str) -> dict[str, str]:
    """The spelling `name` in every engine but `without` (jax's under jax.numpy)."""
    out = {e: name for e in ENGINE_NAMES if e not in without}
    if "jax" in out:
        out["jax"] = f"numpy.{name}"
    return out


_LIBM = dict(zip(BUDGET_DTYPES, (4.0, 4.0, 1.0, 1.0), strict=True))
# NumPy's SIMD float32 routines and libm/SVML float64 are within 4 ulp; bfloat16/float16
# are computed in float32 and rounded once (< 1 ulp). erf is the C library's binary64 erf
# (glibc: <= 2 ulp), rounded once into the narrower dtypes (< 1 ulp there).
_ERF_ULPS = dict(zip(BUDGET_DTYPES, (4.0, 1.0, 1.0, 1.0), strict=True))

BUILTIN = (
    MathFn(
        name="exp",
        mpfr="exp",
        sympy=sympy.exp,
        derivative=sympy.exp,
        mpmath="exp",
        numpy=("exp",),
        array_api="exp",
        ulps=_LIBM,
        hard=(-745.0, -103.0, 88.7, 709.78),
        exact={Fraction(0): Fraction(1)},
        engines=_same("exp"),
    ),
    MathFn(
        name="log",
        mpfr="log",
        sympy=sympy.log,
        derivative=lambda x: 1 / x,
        mpmath="log",
        numpy=("log",),
        array_api="log",
        ulps=_LIBM,
        domain=(Fraction(0), None),
        hard=(5e-324, 1.0, 1.7976931348623157e308),
        exact={Fraction(1): Fraction(0)},
        engines=_same("log"),
    ),
    MathFn(
        name="tanh",
        mpfr="tanh",
        sympy=sympy.tanh,
        derivative=lambda x: 1 - sympy.tanh(x) ** 2,
        mpmath="tanh",
        numpy=("tanh",),
        array_api="tanh",
        ulps=_LIBM,
        hard=(-20.0, 1e-8, 20.0),
        exact={Fraction(0): Fraction(0)},
        engines=_same("tanh"),
    ),
    MathFn(
        name="sin",
        mpfr="sin",
        sympy=sympy.sin,
        derivative=sympy.cos,
        mpmath="sin",
        numpy=("sin",),
        array_api="sin",
        ulps=_LIBM,
        hard=(3.141592653589793, 1e22),
        exact={Fraction(0): Fraction(0)},
        engines=_same("sin"),
    ),
    MathFn(
        name="cos",
        mpfr="cos",
        sympy=sympy.cos,
        derivative=lambda x: -sympy.sin(x),
        mpmath="cos",
        numpy=("cos",),
        array_api="cos",
        ulps=_LIBM,
        hard=(1.5707963267948966, 1e22),
        exact={Fraction(0): Fraction(1)},
        engines=_same("cos"),
    ),
    MathFn(
        name="erf",
        mpfr="erf",
        sympy=sympy.erf,
        derivative=lambda x: 2 / sympy.sqrt(sympy.pi) * sympy.exp(-(x**2)),
        mpmath="erf",
        numpy=(),
        array_api="erf",
        ulps=_ERF_ULPS,
        hard=(-6.0, 1e-300, 6.0),
        exact={Fraction(0): Fraction(0)},
        engines={**_same("erf", "autograd"), "jax": "lax.erf"},
        python="erf",
    ),
    MathFn(
        name="log1p",
        mpfr="log1p",
        sympy=lambda x: sympy.log(1 + x),
        derivative=lambda x: 1 / (1 + x),
        mpmath="log1p",
        numpy=("log1p",),
        array_api="log1p",
        ulps=_LIBM,
        domain=(Fraction(-1), None),
        hard=(-1.0, -0.5, 1e-30),
        exact={Fraction(0): Fraction(0)},
        engines=_same("log1p", "tinygrad"),
    ),
    MathFn(
        name="expm1",
        mpfr="expm1",
        sympy=lambda x: sympy.exp(x) - 1,
        derivative=sympy.exp,
        mpmath="expm1",
        numpy=("expm1",),
        array_api="expm1",
        ulps=_LIBM,
        hard=(-40.0, 1e-30, 709.78),
        exact={Fraction(0): Fraction(0)},
        engines=_same("expm1", "tinygrad"),
    ),
)
"""The built-in records (added to `MATH_FNS` when `spec.domains` is imported)."""
