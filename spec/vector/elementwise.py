"""Array rules of the elementwise primitives (the spec's `spec.ops.elementwise`).

Invariants:
- Binary ops broadcast as `builders.elementwise2`: operands and tangents are expanded to the
  output shape; the cotangent of a broadcast operand is reduced by `unbroadcast`.
- Unary ops follow `builders.unary`: the JVP recomputes y = f(x) and pushes each tangent
  through the same per-element sequence of operations as the spec's `push`; the VJP is the
  JVP applied to the cotangent.
- Every branch of a spec rule (a comparison with a NaN is false; ties, ±0 and NaN as the
  spec's `max_pick`/`max_split`/`max_tangent`) is one `np.where` over the whole array, with
  the zero of a rule being +0.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from .formats import Format
from .table import rule, unbroadcast

__all__: list[str] = []

Arr = np.ndarray
Attrs = dict[str, Any]


def _out(xs: list[Arr]) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(xs[0].shape, xs[1].shape))


def _binary(
    name: str,
    f: Callable[[Format, Arr, Arr], Arr],
    jvp_s: Callable[[Format, Arr, Arr, Arr, Arr], Arr],
    vjp_s: Callable[[Format, Arr, Arr, Arr], tuple[Arr, Arr]],
) -> None:
    def forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
        out = _out(xs)
        return F.cast(np.broadcast_to(f(F, xs[0], xs[1]), out))

    def jvp(F: Format, xs: list[Arr], dxs: list[Arr], a: Attrs, env: Any) -> Arr:
        out = _out(xs)
        A, B = np.broadcast_to(xs[0], out), np.broadcast_to(xs[1], out)
        dA, dB = np.broadcast_to(dxs[0], out), np.broadcast_to(dxs[1], out)
        return F.cast(np.broadcast_to(jvp_s(F, A, B, dA, dB), out))

    def vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
        A, B = np.broadcast_to(xs[0], g.shape), np.broadcast_to(xs[1], g.shape)
        ga, gb = vjp_s(F, A, B, g)
        ga, gb = F.cast(np.broadcast_to(ga, g.shape)), F.cast(np.broadcast_to(gb, g.shape))
        return [unbroadcast(F, ga, xs[0].shape), unbroadcast(F, gb, xs[1].shape)]

    rule(name, forward, jvp, vjp)


def _quot(F: Format, a: Arr, b: Arr) -> Arr:
    return F.div(F.div(a, b), b)


_binary(
    "add",
    lambda F, a, b: F.add(a, b),
    lambda F, a, b, da, db: F.add(da, db),
    lambda F, a, b, g: (g, g),
)
_binary(
    "sub",
    lambda F, a, b: F.sub(a, b),
    lambda F, a, b, da, db: F.sub(da, db),
    lambda F, a, b, g: (g, F.sub(0.0, g)),
)
_binary(
    "mul",
    lambda F, a, b: F.mul(a, b),
    lambda F, a, b, da, db: F.add(F.mul(da, b), F.mul(a, db)),
    lambda F, a, b, g: (F.mul(g, b), F.mul(a, g)),
)
_binary(
    "div",
    lambda F, a, b: F.div(a, b),
    lambda F, a, b, da, db: F.sub(F.div(da, b), F.mul(db, _quot(F, a, b))),
    lambda F, a, b, g: (F.div(g, b), F.neg(F.mul(g, _quot(F, a, b)))),
)


def _pick(larger: bool) -> Callable[[Format, Arr, Arr], Arr]:
    def f(F: Format, a: Arr, b: Arr) -> Arr:
        b_wins = (a < b) if larger else (b < a)
        return np.where(np.isnan(a), a, np.where(np.isnan(b), b, np.where(b_wins, b, a)))

    return f


def _wins(a: Arr, b: Arr, larger: bool) -> tuple[Arr, Arr]:
    return ((b < a), (a < b)) if larger else ((a < b), (b < a))


def _tangent(larger: bool) -> Callable[[Format, Arr, Arr, Arr, Arr], Arr]:
    def jvp_s(F: Format, a: Arr, b: Arr, da: Arr, db: Arr) -> Arr:
        a_wins, b_wins = _wins(a, b, larger)
        tie = F.mul(F.add(da, db), F.const(Fraction(1, 2)))
        return np.where(a_wins, da, np.where(b_wins, db, np.where(a == b, tie, 0.0)))

    return jvp_s


def _split(larger: bool) -> Callable[[Format, Arr, Arr, Arr], tuple[Arr, Arr]]:
    def vjp_s(F: Format, a: Arr, b: Arr, g: Arr) -> tuple[Arr, Arr]:
        a_wins, b_wins = _wins(a, b, larger)
        h = F.mul(g, F.const(Fraction(1, 2)))
        tie = a == b
        ga = np.where(a_wins, g, np.where(b_wins, 0.0, np.where(tie, h, 0.0)))
        gb = np.where(a_wins, 0.0, np.where(b_wins, g, np.where(tie, h, 0.0)))
        return ga, gb

    return vjp_s


for _name, _larger in (("maximum", True), ("minimum", False)):
    _binary(_name, _pick(_larger), _tangent(_larger), _split(_larger))


# --------------------------------------------------------------------------- unary


def _unary(
    name: str,
    f: Callable[[Format, Arr, Attrs], Arr],
    push: Callable[[Format, Arr, Arr, Arr, Attrs], Arr],
) -> None:
    def forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
        return F.cast(f(F, xs[0], a))

    def jvp(F: Format, xs: list[Arr], dxs: list[Arr], a: Attrs, env: Any) -> Arr:
        y = forward(F, xs, a, env)
        return F.cast(np.broadcast_to(push(F, xs[0], y, dxs[0], a), xs[0].shape))

    def vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
        return [jvp(F, xs, [g], a, env)]

    rule(name, forward, jvp, vjp)


def _const(F: Format, a: Attrs, key: str) -> float:
    return F.const(Fraction(a[key]))


def _slope(F: Format, a: Attrs) -> float:
    return F.const(Fraction(a.get("negative_slope", Fraction(1, 100))))


def _clamp(F: Format, x: Arr, a: Attrs) -> Arr:
    lo, hi = _const(F, a, "lo"), _const(F, a, "hi")
    return np.where(np.isnan(x), x, np.where(x < lo, lo, np.where(hi < x, hi, x)))


def _clamp_push(F: Format, x: Arr, y: Arr, t: Arr, a: Attrs) -> Arr:
    lo, hi = _const(F, a, "lo"), _const(F, a, "hi")
    return np.where((lo < x) & (x < hi), t, 0.0)


def _abs_push(F: Format, x: Arr, y: Arr, t: Arr, a: Attrs) -> Arr:
    return np.where(0.0 < x, t, np.where(x < 0.0, F.neg(t), 0.0))


def _sqrt_push(F: Format, x: Arr, y: Arr, t: Arr, a: Attrs) -> Arr:
    return np.where(0.0 < x, F.div(t, F.mul(2.0, y)), 0.0)


_unary("neg", lambda F, x, a: F.neg(x), lambda F, x, y, t, a: F.neg(t))
_unary(
    "scale",
    lambda F, x, a: F.mul(_const(F, a, "c"), x),
    lambda F, x, y, t, a: F.mul(_const(F, a, "c"), t),
)
_unary(
    "relu",
    lambda F, x, a: np.where(np.isnan(x), x, np.where(0.0 < x, x, 0.0)),
    lambda F, x, y, t, a: np.where(0.0 < x, t, 0.0),
)
_unary("abs", lambda F, x, a: np.abs(x), _abs_push)
_unary("clamp", _clamp, _clamp_push)
_unary("sqrt", lambda F, x, a: F.sqrt(x), _sqrt_push)
_unary(
    "leaky_relu",
    lambda F, x, a: np.where(0.0 < x, x, F.mul(_slope(F, a), x)),
    lambda F, x, y, t, a: np.where(0.0 < x, t, F.mul(_slope(F, a), t)),
)


def _zeros_like(F: Format, xs: list[Arr], *rest: Any) -> Arr:
    return F.zeros(xs[0].shape)


def _sign(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
    x = xs[0]
    return F.cast(np.where(0.0 < x, 1.0, np.where(x < 0.0, -1.0, np.where(np.isnan(x), x, 0.0))))


rule("sign", _sign, _zeros_like, lambda F, xs, g, a, env: [F.zeros(xs[0].shape)])
rule(
    "detach",
    lambda F, xs, a, env: xs[0],
    _zeros_like,
    lambda F, xs, g, a, env: [F.zeros(xs[0].shape)],
)


def _const_forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
    vals = [F.const(Fraction(q)) for q in a["values"]]
    return F.cast(np.array(vals, dtype=np.float64).reshape(tuple(a["shape"])))


rule(
    "const",
    _const_forward,
    lambda F, xs, dxs, a, env: F.zeros(tuple(a["shape"])),
    lambda F, xs, g, a, env: [],
)
