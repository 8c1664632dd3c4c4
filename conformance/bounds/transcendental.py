"""Fast-profile bounds of the transcendental family.

Invariants:
- exp, log, tanh, sin, cos: K·ulp(y), K the function's ulp budget for the dtype
  (`ULP_BUDGET`; 0.5 under the ordered kernels); 0 where y is ±inf or NaN.
- sigmoid = 1/(1 + exp(−x)): (2K + 2.01)·u·|y| + η, K the budget of exp.
- erf, log1p, expm1: K·ulp(y) as the functions above (K from `ULP_BUDGET`).
- elu = α̂·expm1(x) for x <= 0 (α̂ = α rounded, then the product rounded):
  (2K + 2.01)·u·|y| + (K·|α| + 1)·η, K the budget of expm1; exact (0) for x > 0.
- celu = α̂·expm1(x/α̂): the quotient's rounding and α̂'s each move expm1's value by at most
  u relative (z·e^z/(1 − e^z) <= 1 for z <= 0), so (2K + 4.01)·u·|y| + (K·|α| + 3)·η.
- safe_log, softplus, gelu, silu, selu, mish are composites: no bound of their own; their
  primitives are checked after inlining.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from spec.tensor import Tensor

from .core import TRANSCENDENTAL, Fmt, exact_q, magnitude, register, ulp

__all__: list[str] = []


def _sigmoid(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    # 1/(1 + e), e = exp(-x) with K ulp (<= 2K·u relative); e/(1+e) <= 1 damps it; the add and
    # the division round once each.
    a = (2 * Fraction(K) + Fraction(201, 100)) * f.u
    return [(a * magnitude(v) + f.eta, magnitude(v)) for v in y.data]


def _transcendental(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for v in y.data:
        q = exact_q(v)
        u = ulp(f, q) if q is not None else Fraction(0)
        out.append((Fraction(K) * u, magnitude(v)))
    return out


def _alpha_expm1(extra: int) -> Any:
    def fn(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
        a = (2 * Fraction(K) + extra + Fraction(1, 100)) * f.u
        al = abs(Fraction(attrs["alpha"]))
        out = []
        for v, x in zip(y.data, xs[0].data, strict=True):
            q = exact_q(x)
            if q is not None and q > 0:
                out.append((Fraction(0), magnitude(v)))
            else:
                out.append(
                    (a * magnitude(v) + (Fraction(K) * al + extra - 1) * f.eta, magnitude(v))
                )
        return out

    return fn


for _name in (*TRANSCENDENTAL, "erf", "log1p", "expm1"):
    register(name=_name, bound=_transcendental)
register(name="elu", bound=_alpha_expm1(2))
register(name="celu", bound=_alpha_expm1(4))
register(name="sigmoid", bound=_sigmoid)
