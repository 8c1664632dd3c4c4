"""Array rules of the transcendental primitives: exp log tanh sin cos sigmoid erf log1p expm1
elu celu (the spec's `spec.ops.transcendental`; pow, pow_tensor fall back to the spec rule).

Invariants:
- Each function value is correctly rounded (`crmath.correctly_rounded`), each arithmetic
  step one rounded `Format` operation, in the spec rule's order.
- exp, log, tanh, sin, cos and sigmoid are the spec's `unary` ops (the push reads x and
  y = f(x)); erf, log1p, expm1, elu and celu its `_pointwise` ops (the push reads x only).
  Branches are `np.where` over the whole array (a comparison with NaN is false).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ..ops.transcendental import ERF_C
from .crmath import correctly_rounded
from .formats import Format
from .table import rule

__all__: list[str] = []

Arr = np.ndarray
Attrs = dict[str, Any]


def _fn(name: str) -> Callable[[Format, Arr], Arr]:
    return lambda F, x: correctly_rounded(F, name, x)


exp, log, tanh, sin, cos = (_fn(n) for n in ("exp", "log", "tanh", "sin", "cos"))
erf, log1p, expm1 = (_fn(n) for n in ("erf", "log1p", "expm1"))


def _unary(
    name: str,
    f: Callable[[Format, Arr, Attrs], Arr],
    push: Callable[[Format, Arr, Arr, Arr, Attrs], Arr],
    reads_y: bool = True,
) -> None:
    def forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
        return F.cast(f(F, xs[0], a))

    def jvp(F: Format, xs: list[Arr], dxs: list[Arr], a: Attrs, env: Any) -> Arr:
        y = forward(F, xs, a, env) if reads_y else xs[0]
        return F.cast(np.broadcast_to(push(F, xs[0], y, dxs[0], a), xs[0].shape))

    rule(name, forward, jvp, lambda F, xs, g, a, env: [jvp(F, xs, [g], a, env)])


def _sigmoid(F: Format, x: Arr, a: Attrs) -> Arr:
    return F.div(1.0, F.add(1.0, exp(F, F.neg(x))))


_unary("exp", lambda F, x, a: exp(F, x), lambda F, x, y, t, a: F.mul(t, y))
_unary("log", lambda F, x, a: log(F, x), lambda F, x, y, t, a: F.div(t, x))
_unary(
    "tanh",
    lambda F, x, a: tanh(F, x),
    lambda F, x, y, t, a: F.mul(t, F.sub(1.0, F.mul(y, y))),
)
_unary("sin", lambda F, x, a: sin(F, x), lambda F, x, y, t, a: F.mul(t, cos(F, x)))
_unary("cos", lambda F, x, a: cos(F, x), lambda F, x, y, t, a: F.neg(F.mul(t, sin(F, x))))
_unary(
    "sigmoid",
    _sigmoid,
    lambda F, x, y, t, a: F.mul(t, F.mul(y, F.sub(1.0, y))),
)


def _erf_push(F: Format, x: Arr, _: Arr, t: Arr, a: Attrs) -> Arr:
    return F.mul(t, F.mul(F.const(ERF_C), exp(F, F.neg(F.mul(x, x)))))


def _alpha(F: Format, a: Attrs) -> float:
    return F.const(Fraction(a.get("alpha", 1)))


def _elu(F: Format, x: Arr, a: Attrs) -> Arr:
    return np.where(0.0 < x, x, F.mul(_alpha(F, a), expm1(F, x)))


def _elu_push(F: Format, x: Arr, _: Arr, t: Arr, a: Attrs) -> Arr:
    return np.where(0.0 < x, t, F.mul(t, F.mul(_alpha(F, a), exp(F, x))))


def _celu(F: Format, x: Arr, a: Attrs) -> Arr:
    al = _alpha(F, a)
    return np.where(0.0 < x, x, F.mul(al, expm1(F, F.div(x, al))))


def _celu_push(F: Format, x: Arr, _: Arr, t: Arr, a: Attrs) -> Arr:
    return np.where(0.0 < x, t, F.mul(t, exp(F, F.div(x, _alpha(F, a)))))


_unary("erf", lambda F, x, a: erf(F, x), _erf_push, reads_y=False)
_unary(
    "log1p",
    lambda F, x, a: log1p(F, x),
    lambda F, x, y, t, a: F.div(t, F.add(1.0, x)),
    reads_y=False,
)
_unary(
    "expm1",
    lambda F, x, a: expm1(F, x),
    lambda F, x, y, t, a: F.mul(t, exp(F, x)),
    reads_y=False,
)
_unary("elu", _elu, _elu_push, reads_y=False)
_unary("celu", _celu, _celu_push, reads_y=False)
