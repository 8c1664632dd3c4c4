"""The error of one element and the scale it is measured in (the judge's arithmetic).

Invariants:
- `lift` puts a dtype value into `HP` (256-bit MPFR) exactly (keeps -0, inf, NaN).
- `elem_error`: |got - exact| / ulp(max(|exact|, S)) in ulps of the engine's dtype; NaN vs
  NaN and equal infinities are 0; a finite/NaN or finite/inf disagreement is infinite,
  except that an engine's ±inf is correct where the exact value rounds to that infinity.
- `scale_for` gives S per op, direction and budget scale (`budgets`): "rel" 0; "cotangent"
  max|g| (not for the forward); "abs" (and "ball", whose ball is checked beside it) the
  magnitude of the same computation with absolute values (the op on |inputs|, and |g|
  propagated through the op's inlined primitive body with absolute contributions,
  `abs_scale`); "norm" the "abs" scale widened by max|g| * G * max|x|, G the op's
  |.|-propagated gain with gamma = 1. Everything here is exact rational arithmetic on HP
  values; nothing reads an engine.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import gmpy2

from spec.errors import TorchLeanError
from spec.graph import Graph, Node
from spec.inline import inline
from spec.ops import get_op
from spec.tensor import Tensor, TensorPack

from ..bounds.core import HP, exact_q, fmt, ulp
from .base import ieee_domain
from .propagate import abs_backprop

__all__ = ["abs_scale", "elem_error", "lift", "magnitude", "safe_float", "scale_for", "tiny"]


def lift(t: Tensor) -> Tensor:
    """A tensor of an IEEE domain lifted exactly into HP (keeps -0, inf, NaN)."""
    return t.map(lambda v: gmpy2.mpfr(v, HP.precision))


def tiny(dtype: str) -> Fraction:
    """The dtype's smallest normal magnitude, 2**(1 - bias)."""
    return Fraction(2) ** (1 - ieee_domain(dtype).bias)


def magnitude(t: Tensor) -> Fraction:
    """The largest |finite element| of t (0 for none)."""
    m = Fraction(0)
    for v in t.data:
        q = exact_q(v)
        if q is not None:
            m = max(m, abs(q))
    return m


def safe_float(q: Fraction) -> float:
    """A rational as a float, +inf when it is beyond binary64's range."""
    try:
        return float(q)
    except OverflowError:
        return float("inf")


def elem_error(dtype: str, got: Any, want: Any, scale: Fraction) -> float:
    """The error of one element in ulps of `dtype` (see the module docstring)."""
    f = fmt(ieee_domain(dtype))
    if gmpy2.is_nan(got) or gmpy2.is_nan(want):
        return 0.0 if gmpy2.is_nan(got) and gmpy2.is_nan(want) else float("inf")
    gq, wq = exact_q(got), exact_q(want)
    if wq is None:
        return 0.0 if got == want else float("inf")
    if gq is None:
        return 0.0 if abs(wq) >= f.threshold and (wq > 0) == (got > 0) else float("inf")
    err = abs(gq - wq)
    if err == 0:
        return 0.0
    return safe_float(err / ulp(f, max(abs(wq), scale)))


def abs_scale(op: str, xs: list[Tensor], g: Tensor, attrs: dict[str, Any]) -> list[Tensor]:
    """Per argument, |g| propagated back through the op's inlined primitive body with every
    node's contributions made absolute before they are summed (the magnitude of the terms
    the engine's backward sums; see `whole`)."""
    one = Graph([x.shape for x in xs], [Node(op, tuple(range(len(xs))), attrs)])
    gi, vmap = inline(one)
    seed = [Tensor.zeros(HP, s) for s in gi.shapes]
    seed[vmap[-1]] = g.map(abs)
    return abs_backprop(gi, xs, TensorPack(gi.shapes, tuple(seed)))


def _ones(shape: tuple[int, ...], n: int) -> Tensor:
    return Tensor(shape, (gmpy2.mpfr(1),) * n)


def _norm_scale(op: str, xs: list[Tensor], g: Tensor, attrs: dict[str, Any], k: int) -> Fraction:
    # the gain of the normalised value x_hat = (x - mean)/sqrt(var + eps): the op's
    # |.|-propagated gain with gamma = 1 (x_hat's error reaches gamma's cotangent too)
    unit = [xs[0], *(_ones(x.shape, len(x.data)) for x in xs[1:])]
    y = get_op(op).forward(HP, unit, attrs, ())
    gain = max(magnitude(t) for t in abs_scale(op, unit, _ones(y.shape, len(y.data)), attrs))
    extra = magnitude(g) * gain * max([magnitude(x) for x in xs] + [Fraction(1)])
    return max(extra, scale_for(op, "abs", "vjp", xs, g, attrs, k))


def scale_for(
    op: str,
    mode: str,
    direction: str,
    xs: list[Tensor],
    g: Tensor | None,
    attrs: dict[str, Any],
    k: int,
) -> Fraction:
    """The scale S of result k of `op` in `direction` under budget scale `mode` (see the
    module docstring); g is the cotangent (tangent for "jvp"), None for the forward."""
    if mode == "rel":
        return Fraction(0)
    if mode == "ball":  # the abs scale; the ball is checked beside it (`local`)
        mode = "abs"
    gm = magnitude(g) if g is not None else Fraction(0)
    if mode == "cotangent":
        return gm if direction != "forward" else Fraction(0)
    d = get_op(op)
    if mode == "norm" and direction == "vjp":
        assert g is not None
        return _norm_scale(op, xs, g, attrs, k)
    axs = [x.map(abs) for x in xs]
    try:
        if direction == "forward":
            return magnitude(d.forward(HP, axs, attrs, ()))
        if direction == "vjp":
            assert g is not None
            return max(
                gm,
                magnitude(d.vjp(HP, axs, g.map(abs), attrs, ())[k]),
                magnitude(abs_scale(op, xs, g, attrs)[k]),
            )
        y = d.forward(HP, xs, attrs, ())
        m = abs_scale(op, xs, _ones(y.shape, len(y.data)), attrs)
        return max(gm, gm * max([magnitude(t) for t in m] + [Fraction(0)]))
    except TorchLeanError:
        return gm
