"""Kernels of the reduce family: sum reduce_sum mean reduce_mean reduce_max logsumexp var std
cumsum.

Invariants:
- sum and reduce_sum are the context's folds (`ctx.sum_all`, `ctx.sum_axis`: left folds in
  index order under `ordered`); their VJPs broadcast the cotangent back.
- reduce_max picks the same element as spec (the first NaN, else the first maximal one)
  and routes the whole cotangent or tangent to it; its Python loop runs only over the
  reduction lanes (vectorised over the other axes).
- mean, reduce_mean, logsumexp, var and std are composite: their kernels run the spec
  bodies (`table.composite_kernel`, derived from the op table).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.context import KernelContext
from .table import Attrs, Env, register

__all__: list[str] = []

register(
    family=__name__,
    name="sum",
    forward=lambda c, xs, a, e: (c.sum_all(xs[0]), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.xp.broadcast_to(g, s)],
    jvp=lambda c, s, dxs, a, e: c.sum_all(dxs[0]),
    saves="input shape",
)
register(
    family=__name__,
    name="reduce_sum",
    forward=lambda c, xs, a, e: (c.sum_axis(xs[0], a["axis"]), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.xp.broadcast_to(c.xp.expand_dims(g, axis=a["axis"]), s)],
    jvp=lambda c, s, dxs, a, e: c.sum_axis(dxs[0], a["axis"]),
    saves="input shape",
)


def _lanes(ctx: KernelContext, x: Any, axis: int) -> Any:
    return ctx.xp.moveaxis(x, axis, -1) if axis != x.ndim - 1 else x


def _argmax(ctx: KernelContext, x: Any) -> tuple[Any, Any]:
    """(max, index) along the last axis: the fold m = maximum(m, v) of spec, one step per
    lane element (vectorised over the lanes)."""
    xp = ctx.xp
    m = x[..., 0]
    j = xp.zeros(tuple(m.shape), dtype=xp.int64)
    for k in range(1, x.shape[-1]):
        v = x[..., k]
        take = ~ctx.isnan(m) & (ctx.isnan(v) | (m < v))
        m = xp.where(take, v, m)
        j = xp.where(take, k, j)
    return ctx.arr(m), j


def _rmax_fwd(ctx: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x = _lanes(ctx, xs[0], a["axis"])
    m, j = _argmax(ctx, x)
    return m, (tuple(xs[0].shape), j)


def _rmax_vjp(ctx: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    shape, j = s
    xp = ctx.xp
    n = shape[a["axis"]]
    ks = xp.reshape(xp.arange(n, dtype=xp.int64), (*([1] * len(j.shape)), n))
    hit = xp.expand_dims(j, axis=-1) == ks
    gb = xp.broadcast_to(xp.expand_dims(g, axis=-1), tuple(hit.shape))
    out = xp.where(hit, gb, ctx.zeros(tuple(hit.shape)))
    if a["axis"] != len(shape) - 1:
        out = xp.moveaxis(out, -1, a["axis"])
    return [ctx.arr(out)]


def _rmax_jvp(ctx: KernelContext, s: Any, dxs: list[Any], a: Attrs, e: Env) -> Any:
    _, j = s
    d = _lanes(ctx, dxs[0], a["axis"])
    out = d[..., 0]
    for k in range(1, d.shape[-1]):
        out = ctx.xp.where(j == k, d[..., k], out)
    return ctx.arr(out)


register(
    family=__name__,
    name="reduce_max",
    forward=_rmax_fwd,
    vjp=_rmax_vjp,
    jvp=_rmax_jvp,
    saves="input shape, arg-max positions",
)


def _cumsum(ctx: KernelContext, x: Any, dim: int, exclusive: bool, reverse: bool) -> Any:
    """spec's cumsum: per lane of `dim` the left fold y_k = y_{k-1} + x_k, first term as is.
    `ordered` on a non-NumPy backend runs the fold one step per lane position (vectorised
    over the lanes); NumPy's add.accumulate is that same sequential fold by definition, and
    `fast` elsewhere uses the backend's cumsum (any association, within the bound)."""
    xp = ctx.xp
    if reverse:
        x = xp.flip(x, axis=dim)
    n = x.shape[dim]
    if n == 0:
        y = x
    elif ctx.backend.is_numpy:
        y = np.add.accumulate(x, axis=dim, dtype=x.dtype)
    elif not ctx.ordered:
        # the array API's name (2023.12) where the namespace has it, CuPy's otherwise
        cumsum = getattr(xp, "cumulative_sum", None) or xp.cumsum
        y = cumsum(x, axis=dim, dtype=ctx.dt)
    else:
        lanes = xp.moveaxis(x, dim, 0)
        acc = lanes[0, ...]
        steps = [acc]
        for k in range(1, n):
            acc = acc + lanes[k, ...]
            steps.append(acc)
        y = xp.moveaxis(xp.stack(steps, axis=0), 0, dim)
    if exclusive and n:
        head = ctx.zeros((*x.shape[:dim], 1, *x.shape[dim + 1 :]))
        y = xp.concat([head, xp.take(y, xp.arange(n - 1), axis=dim)], axis=dim)
    if reverse:
        y = xp.flip(y, axis=dim)
    return ctx.arr(y)


def _cs(a: Attrs, flip: bool = False) -> tuple[int, bool, bool]:
    return a["dim"], bool(a.get("exclusive")), bool(a.get("reverse")) != flip


register(
    family=__name__,
    name="cumsum",
    forward=lambda c, xs, a, e: (_cumsum(c, xs[0], *_cs(a)), None),
    vjp=lambda c, s, g, a, e: [_cumsum(c, g, *_cs(a, flip=True))],
    jvp=lambda c, s, dxs, a, e: _cumsum(c, dxs[0], *_cs(a)),
    saves="nothing",
)
