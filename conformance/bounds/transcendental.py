"""Fast-profile bounds of the transcendental family.

Invariants:
- exp, log, tanh, sin, cos: K·ulp(y), K the function's ulp budget for the dtype
  (`ULP_BUDGET`; 0.5 under the ordered kernels); 0 where y is ±inf or NaN.
- sigmoid = 1/(1 + exp(−x)): (2K + 2.01)·u·|y| + η, K the budget of exp.
- safe_log, softplus, gelu, silu are composites: no bound of their own; their primitives
  are checked after inlining.
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


for _name in TRANSCENDENTAL:
    register(name=_name, bound=_transcendental)
register(name="sigmoid", bound=_sigmoid)
