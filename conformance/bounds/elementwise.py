"""Fast-profile bounds of the elementwise family.

Invariants:
- neg, abs, relu, maximum, minimum, detach: 0 (the result is an input element or ±0).
- add, sub, mul, div, sqrt, clamp, const: u·|y| + η/2 (correctly rounded).
- scale: 2.01·u·|y| + (|x| + 1)·η (the constant c is rounded first); leaky_relu the same
  (slope·x for x <= 0; exact for x > 0, covered by the same bound).
- sign: 0 (±1, +0 or NaN).
- inv, hardtanh, relu6, hardsigmoid, hardswish, softsign, add_n, maximum_n, minimum_n and
  mean_n are composites: no bound of their own; their primitives are checked after
  inlining.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from spec.tensor import Tensor

from .core import EXACT, Fmt, elementwise, magnitude, register

__all__: list[str] = []


def _scale(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    return [
        (Fraction(201, 100) * f.u * magnitude(v) + (magnitude(x) + 1) * f.eta, magnitude(v))
        for v, x in zip(y.data, xs[0].data, strict=True)
    ]


for _name in ("neg", "abs", "relu", "maximum", "minimum", "detach", "sign"):
    register(name=_name, bound=EXACT)
_CORRECTLY_ROUNDED = elementwise(1, 0.5)
for _name in ("add", "sub", "mul", "div", "sqrt", "clamp", "const"):
    register(name=_name, bound=_CORRECTLY_ROUNDED)
register(name="scale", bound=_scale)
register(name="leaky_relu", bound=_scale)
