"""Kernels of the shape family: reshape swap_adjacent transpose broadcast_to concat slice.

Invariants:
- These kernels move values and never round: forward, VJP and JVP are views, copies,
  concatenations or zero paddings (`builders.pad_rows`); broadcast_to's VJP is the
  context's `unbroadcast` fold.
- concat and slice work on the leading axis, as in spec.
- transpose and pad are composite: their kernels run the spec bodies
  (`table.composite_kernel`, derived from the op table).
"""

from __future__ import annotations

from typing import Any

from ..engine.context import KernelContext
from .builders import pad_rows
from .table import Attrs, Env, register

__all__: list[str] = []

register(
    family=__name__,
    name="reshape",
    forward=lambda c, xs, a, e: (c.xp.reshape(xs[0], a["shape"]), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.xp.reshape(g, s)],
    jvp=lambda c, s, dxs, a, e: c.xp.reshape(dxs[0], a["shape"]),
    saves="input shape",
)


def _swap(c: KernelContext, x: Any, k: int) -> Any:
    perm = list(range(x.ndim))
    perm[k], perm[k + 1] = perm[k + 1], perm[k]
    return c.xp.permute_dims(x, tuple(perm))


register(
    family=__name__,
    name="swap_adjacent",
    forward=lambda c, xs, a, e: (_swap(c, xs[0], a["axis"]), None),
    vjp=lambda c, s, g, a, e: [_swap(c, g, a["axis"])],
    jvp=lambda c, s, dxs, a, e: _swap(c, dxs[0], a["axis"]),
    saves="nothing",
)
register(
    family=__name__,
    name="broadcast_to",
    forward=lambda c, xs, a, e: (c.xp.broadcast_to(xs[0], a["shape"]), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.unbroadcast(g, s)],
    jvp=lambda c, s, dxs, a, e: c.xp.broadcast_to(dxs[0], a["shape"]),
    saves="input shape",
)


def _concat_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    out, start = [], 0
    for shape in s:
        out.append(g[start : start + shape[0], ...])
        start += shape[0]
    return out


register(
    family=__name__,
    name="concat",
    forward=lambda c, xs, a, e: (
        c.xp.concat(list(xs), axis=0),
        tuple(tuple(x.shape) for x in xs),
    ),
    vjp=_concat_vjp,
    jvp=lambda c, s, dxs, a, e: c.xp.concat(list(dxs), axis=0),
    saves="input shapes",
)
register(
    family=__name__,
    name="slice",
    forward=lambda c, xs, a, e: (xs[0][a["start"] : a["stop"], ...], tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [pad_rows(c, g, s, a["start"])],
    jvp=lambda c, s, dxs, a, e: dxs[0][a["start"] : a["stop"], ...],
    saves="input shape",
)
