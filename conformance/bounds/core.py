"""The table of fast-profile per-node error bounds and the arithmetic they share.

Invariants:
- `BOUNDS` maps an op name to its `BoundFn`; every entry is added once, by a family module
  calling `register(name=..., bound=...)` (a second registration of a name raises). No
  placeholder is ever stored. `conformance.bounds` imports every family module, so the table
  is complete once that package is imported.
- A `BoundFn(f, xs, y, attrs, K)` returns, per element of `y` (the exact result in `HP` on
  the runtime's own inputs `xs`), a pair (bound on |ŷ − y|, magnitude); the magnitude scales
  the 2**-200 slack for `HP`'s own rounding and decides the overflow allowance.
- The helpers below are exact: rationals (`Fraction`), never floats. `exact_q` maps inf/NaN
  to None and `magnitude` maps them to 10**400 (a bound that absorbs any finite error).
- An op with a math-function record (`OpDef.math`) and no bound of its own gets
  `math_bound` (K·ulp(y)) from `derive_math_bounds`; K is `ulp_budget(dtype, fn)`, read from
  the record (a missing budget raises, never a silent 0).
- `node_bound(op)` raises `TorchLeanError` for an op without a stated bound (composite ops
  are inlined into primitives before checking, so only primitives need one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2

from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.mathfns import BUDGET_DTYPES, MATH_FNS
from spec.ops import OPS, OpDef
from spec.tensor import Tensor

__all__ = [
    "BOUNDS",
    "EXACT",
    "HP",
    "LIBM_OF",
    "POW_ULPS",
    "TRANSCENDENTAL",
    "ULP_BUDGET",
    "BoundFn",
    "Fmt",
    "derive_math_bounds",
    "elementwise",
    "exact_q",
    "fmt",
    "gamma",
    "libm_of",
    "magnitude",
    "math_bound",
    "node_bound",
    "register",
    "sum_like",
    "ulp",
    "ulp_budget",
]

HP = IEEEDomain("hp256", 256, 24)

POW_ULPS = {"float64": 4.0, "float32": 4.0, "bfloat16": 1.0, "float16": 1.0}
"""The fast profile's budget of pow (NumPy's power: glibc pow/powf, documented within 1 ulp;
SIMD builds within 4 ulp; bfloat16/float16 computed in float32 and rounded once)."""

LIBM_OF = {
    "sigmoid": "exp",
    "softmax": "exp",
    "log_softmax": "exp",
    "elu": "expm1",
    "celu": "expm1",
    "pow": "pow",
    "pow_tensor": "pow",
}
"""The libm function behind an op that is not itself a math function (log_softmax also
calls log: same budget per dtype); an op with a `math` record uses its record's."""


def libm_of(op: OpDef) -> str | None:
    """The libm function whose budget an op's bound reads (None: the bound reads none)."""
    return op.math.name if op.math is not None else LIBM_OF.get(op.name)


def ulp_budget(dtype: str, fn: str) -> float:
    """The fast profile's ULP budget of libm function `fn` in `dtype`: its record's
    (`spec.mathfns.MathFn.ulps`), or `POW_ULPS`; a missing one raises, naming where to add
    it (never a silent 0)."""
    if fn == "pow":
        return POW_ULPS[dtype]
    rec = MATH_FNS.get(fn)
    if rec is None:
        raise TorchLeanError(f"no math-function record for {fn!r}: no ULP budget to read")
    if dtype not in rec.ulps:
        raise TorchLeanError(
            f"math function {fn!r} states no fast-profile ULP budget for {dtype}: add "
            f"ulps={{..., {dtype!r}: K}} to its MathFn record"
        )
    return rec.ulps[dtype]


def _budgets() -> dict[str, dict[str, float]]:
    return {
        dt: {
            **{n: f.ulps[dt] for n, f in MATH_FNS.items() if dt in f.ulps},
            "pow": POW_ULPS[dt],
        }
        for dt in BUDGET_DTYPES
    }


ULP_BUDGET: dict[str, dict[str, float]] = _budgets()
"""dtype -> libm function -> fast-profile ULP budget, derived from the math-function records
(as they stood when this module was imported) and `POW_ULPS`; `ulp_budget` reads them live."""
TRANSCENDENTAL = ("exp", "log", "tanh", "sin", "cos")


@dataclass
class Fmt:
    u: Fraction
    eta: Fraction
    threshold: Fraction
    D: IEEEDomain


def fmt(D: IEEEDomain) -> Fmt:
    u = Fraction(1, 2**D.precision)
    eta = Fraction(1, 2 ** (1 - D.emin))
    max_finite = Fraction(2) ** D.emax - Fraction(2) ** (D.emax - D.precision)
    return Fmt(u, eta, max_finite + Fraction(2) ** (D.emax - D.precision - 1), D)


def exact_q(v: Any) -> Fraction | None:
    """Exact rational of an MPFR value, or None for inf/NaN."""
    if not gmpy2.is_finite(v):
        return None
    n, d = v.as_integer_ratio()
    return Fraction(int(n), int(d))


def magnitude(v: Any) -> Fraction:
    q = exact_q(v)
    return abs(q) if q is not None else Fraction(10) ** 400


def ulp(f: Fmt, y: Fraction) -> Fraction:
    D = f.D
    a = abs(y)
    if a == 0:
        return f.eta
    e = a.numerator.bit_length() - a.denominator.bit_length() + 1
    while Fraction(2) ** (e - 1) > a:
        e -= 1
    while Fraction(2) ** e <= a:
        e += 1
    return Fraction(2) ** (max(e, D.emin + D.precision - 1) - D.precision)


def gamma(n: int, u: Fraction) -> Fraction:
    return n * u / (1 - n * u) if n * u < 1 else Fraction(10) ** 400


BoundFn = Callable[
    [Fmt, list[Tensor], Tensor, dict[str, Any], float], list[tuple[Fraction, Fraction]]
]


def elementwise(a: float, b: float) -> BoundFn:
    def fn(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
        return [
            (Fraction(a) * f.u * magnitude(v) + Fraction(b) * f.eta, magnitude(v)) for v in y.data
        ]

    return fn


EXACT: BoundFn = elementwise(0, 0)
"""The bound of an op whose result is one of its inputs' elements (or ±0, −∞): 0."""


def sum_like(
    f: Fmt, terms: list[list[Any]], extra_eta: int = 0, gamma_n: int | None = None
) -> list[tuple[Fraction, Fraction]]:
    out = []
    for ts in terms:
        m = sum((magnitude(t) for t in ts), Fraction(0))
        n = gamma_n if gamma_n is not None else len(ts)
        out.append((gamma(n, f.u) * m + extra_eta * f.eta, m))
    return out


BOUNDS: dict[str, BoundFn] = {}
"""Op name -> its fast-profile bound (filled by the family modules through `register`)."""


def register(*, name: str, bound: BoundFn) -> None:
    """State the fast-profile bound of one primitive op (once per op)."""
    if name in BOUNDS:
        raise TorchLeanError(f"fast-profile bound for op {name!r} registered twice")
    BOUNDS[name] = bound


def math_bound(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    """K·ulp(y) per element (0 where y is ±inf or NaN): one libm call within K ulp."""
    out = []
    for v in y.data:
        q = exact_q(v)
        u = ulp(f, q) if q is not None else Fraction(0)
        out.append((Fraction(K) * u, magnitude(v)))
    return out


def derive_math_bounds() -> None:
    """Register `math_bound` for every op of the table that is a math function (`math`
    record) and has no bound of its own (run once the family modules are loaded)."""
    for name, op in OPS.items():
        if op.math is not None and op.kind == "primitive" and name not in BOUNDS:
            register(name=name, bound=math_bound)


def node_bound(op: str) -> BoundFn:
    try:
        return BOUNDS[op]
    except KeyError:
        raise TorchLeanError(f"no fast-profile error bound stated for op {op!r}") from None
