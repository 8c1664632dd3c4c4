"""Kernels of the softmax family: softmax log_softmax.

Invariants:
- Both follow spec's sequence along the last axis: m = fold of maximum (NaN propagates,
  ties keep the earlier; `builders.pick`), z = x - m, e = exp(z), s = fold e; softmax is
  e / s, log_softmax z - log(s).
- softmax saves y, log_softmax the probabilities e / s; their VJP and JVP read only that.
"""

from __future__ import annotations

from typing import Any

from ..engine.context import KernelContext
from .builders import pick
from .table import Attrs, Env, register

__all__: list[str] = []


def _row_max(c: KernelContext, x: Any) -> Any:
    """fold of maximum (NaN propagates, ties keep the earlier) along the last axis."""
    m = x[..., 0]
    for j in range(1, x.shape[-1]):
        m = pick(c, m, x[..., j], True)
    return c.xp.expand_dims(c.arr(m), axis=-1)


def _softmax_parts(c: KernelContext, x: Any) -> tuple[Any, Any, Any]:
    """z = x - m, e = exp(z), s = fold e (last axis, kept)."""
    z = x - _row_max(c, x)
    e = c.unary("exp", z)
    s = c.xp.expand_dims(c.sum_axis(e, -1), axis=-1)
    return z, e, s


def _softmax_fwd(c: KernelContext, xs: list[Any], a: Attrs, env: Env) -> tuple[Any, Any]:
    _, e, s = _softmax_parts(c, xs[0])
    y = c.div(e, s)
    return y, y


def _lastsum(c: KernelContext, x: Any) -> Any:
    return c.xp.expand_dims(c.sum_axis(x, -1), axis=-1)


register(
    family=__name__,
    name="softmax",
    forward=_softmax_fwd,
    vjp=lambda c, y, g, a, e: [y * (g - _lastsum(c, g * y))],
    jvp=lambda c, y, dxs, a, e: y * (dxs[0] - _lastsum(c, y * dxs[0])),
    saves="y",
)


def _log_softmax_fwd(c: KernelContext, xs: list[Any], a: Attrs, env: Env) -> tuple[Any, Any]:
    z, e, s = _softmax_parts(c, xs[0])
    y = z - c.unary("log", s)
    return c.arr(y), c.div(e, s)


register(
    family=__name__,
    name="log_softmax",
    forward=_log_softmax_fwd,
    vjp=lambda c, p, g, a, e: [g - p * _lastsum(c, g)],
    jvp=lambda c, p, dxs, a, e: dxs[0] - _lastsum(c, p * dxs[0]),
    saves="softmax p",
)
