"""Kernels of the piecewise family: prelu where.

Invariants:
- Each kernel performs its spec rule's operation sequence (same operations, same operand
  order) and saves only what its derivative reads.
- prelu reshapes its weight to (C, 1, ..., 1) (or a scalar) against x and picks per
  element; the weight's cotangent is `ctx.unbroadcast` of (x > 0 ? +0 : x·g), the spec's
  row-major fold. where's mask is a host 0/1 array of the attribute (moved to the
  backend), broadcast with a and b; its cotangents are `ctx.unbroadcast` of the picks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.context import KernelContext
from .builders import device_array
from .table import Attrs, Env, register

__all__: list[str] = []


# --------------------------------------------------------------------------- prelu


def _prelu_w(c: KernelContext, x: Any, w: Any) -> Any:
    n = int(np.prod(w.shape)) if len(w.shape) else 1
    if n == 1:
        return c.xp.reshape(w, ())
    return c.xp.reshape(w, (n, *([1] * (x.ndim - 2))))


def _prelu_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x, w = xs
    wb = _prelu_w(c, x, w)
    return c.arr(c.xp.where(c.const(0) < x, x, wb * x)), (x, w)


def _prelu_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    x, w = s
    wb = _prelu_w(c, x, w)
    pos = c.const(0) < x
    gx = c.arr(c.xp.where(pos, g, wb * g))
    gw = c.unbroadcast(c.xp.where(pos, c.zeros(tuple(x.shape)), x * g), tuple(wb.shape))
    return [gx, c.xp.reshape(gw, tuple(w.shape))]


def _prelu_jvp(c: KernelContext, s: Any, dxs: list[Any], a: Attrs, e: Env) -> Any:
    x, w = s
    wb, dwb = _prelu_w(c, x, w), _prelu_w(c, x, dxs[1])
    return c.arr(c.xp.where(c.const(0) < x, dxs[0], wb * dxs[0] + dwb * x))


register(
    family=__name__,
    name="prelu",
    forward=_prelu_fwd,
    vjp=_prelu_vjp,
    jvp=_prelu_jvp,
    saves="x, weight",
)


# --------------------------------------------------------------------------- where


def _mask(c: KernelContext, a: Attrs) -> Any:
    m = np.asarray([bool(v) for v in a["mask"]], dtype=bool).reshape(tuple(a["mask_shape"]))
    return device_array(c, m)


def _where_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    m = _mask(c, a)
    out = tuple(np.broadcast_shapes(tuple(m.shape), tuple(xs[0].shape), tuple(xs[1].shape)))
    y = c.xp.broadcast_to(c.arr(c.xp.where(m, xs[0], xs[1])), out)
    return y, (tuple(xs[0].shape), tuple(xs[1].shape), out)


def _where_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    sa, sb, out = s
    m = c.xp.broadcast_to(_mask(c, a), out)
    z = c.zeros(out)
    return [
        c.unbroadcast(c.arr(c.xp.where(m, g, z)), sa),
        c.unbroadcast(c.arr(c.xp.where(m, z, g)), sb),
    ]


def _where_jvp(c: KernelContext, s: Any, dxs: list[Any], a: Attrs, e: Env) -> Any:
    out = s[2]
    return c.xp.broadcast_to(c.arr(c.xp.where(_mask(c, a), dxs[0], dxs[1])), out)


register(
    family=__name__,
    name="where",
    forward=_where_fwd,
    vjp=_where_vjp,
    jvp=_where_jvp,
    saves="shapes of a, b and the result",
)
