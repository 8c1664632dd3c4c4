"""Kernels of the index family: select index_select scatter_add gather.

Invariants:
- select reads its index from the attributes or from an env slot; an index out of range is
  a ShapeError, an env slot out of range a GraphError (as in spec).
- index_select and scatter_add are each other's VJP: `builders.take` and `builders.scatter`
  (a left fold per target row in index order, the first contribution stored as is).
- gather is vectorised over output elements; its VJP is the spec's left fold per target in
  increasing output position: rank 0 (the first occurrence) is stored as is, rank r is
  added to the running value, which is the same sequence of roundings as `fold_add`;
  padding positions are dropped. Python loops run only over occurrence ranks (at most the
  largest number of times one index repeats, e.g. kh*kw for a stride-1 convolution).
- Written against `ctx.xp`; NumPy is used only to precompute index structures on the host
  (they are converted with `builders.device_array`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spec.errors import GraphError, ShapeError

from ..engine.context import KernelContext
from .builders import device_array, pad_rows, scatter, take
from .table import Attrs, Env, register

__all__: list[str] = []


def _sel_index(a: Attrs, env: Env, dim: int) -> int:
    if a.get("env_slot") is not None:
        slot = a["env_slot"]
        if not 0 <= slot < len(env):
            raise GraphError(f"select: env slot out of range (expected < {len(env)}, got {slot})")
        i = env[slot]
    else:
        i = a["index"]
    if not 0 <= i < dim:
        raise ShapeError(
            f"select: input 0: index out of range (expected 0 <= index < {dim}, got {i})"
        )
    return i


def _select_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x = xs[0]
    i = _sel_index(a, e, x.shape[0])
    return c.arr(x[i, ...]), (tuple(x.shape), i)


def _select_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    shape, i = s
    return [pad_rows(c, c.xp.reshape(g, (1, *shape[1:])), shape, i)]


register(
    family=__name__,
    name="select",
    forward=_select_fwd,
    vjp=_select_vjp,
    jvp=lambda c, s, dxs, a, e: c.arr(dxs[0][s[1], ...]),
    saves="input shape, index",
)
register(
    family=__name__,
    name="index_select",
    forward=lambda c, xs, a, e: (take(c, xs[0], a["indices"]), xs[0].shape[0]),
    vjp=lambda c, s, g, a, e: [scatter(c, g, a["indices"], s)],
    jvp=lambda c, s, dxs, a, e: take(c, dxs[0], a["indices"]),
    saves="leading dim",
)
register(
    family=__name__,
    name="scatter_add",
    forward=lambda c, xs, a, e: (scatter(c, xs[0], a["indices"], a["size"]), None),
    vjp=lambda c, s, g, a, e: [take(c, g, a["indices"])],
    jvp=lambda c, s, dxs, a, e: scatter(c, dxs[0], a["indices"], a["size"]),
    saves="nothing",
)


# --------------------------------------------------------------------------- gather

# index tuples (attribute values) -> host structures; keyed by identity, keeping the tuple
# alive in the entry, so a composite body's cached attributes are converted only once.
_PLANS: dict[int, tuple[Any, Any]] = {}


def _plan(indices: Sequence[int], m: int) -> dict[str, Any]:
    key = id(indices)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is indices and hit[1]["m"] == m:
        return hit[1]
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    pos = np.flatnonzero(idx < m)
    tgt = idx[pos]
    order = np.argsort(tgt, kind="stable")  # by target, then by position
    st, sp = tgt[order], pos[order]
    first = np.ones(len(st), dtype=bool)
    first[1:] = st[1:] != st[:-1]
    start = np.maximum.accumulate(np.where(first, np.arange(len(st)), 0)) if len(st) else st
    rank = np.arange(len(st)) - start
    ranks = []
    for r in range(int(rank.max()) + 1 if len(st) else 0):
        p_r, t_r = sp[rank == r], st[rank == r]  # targets t_r are distinct within a rank
        src = np.full(m, len(p_r), dtype=np.int64)  # len(p_r): the zero pad slot
        src[t_r] = np.arange(len(p_r))
        lands = np.zeros(m, dtype=bool)
        lands[t_r] = True
        ranks.append((p_r, src, lands))
    plan = {"m": m, "idx": idx, "pad": bool(len(pos) < len(idx)), "ranks": ranks}
    if len(_PLANS) >= 512:
        _PLANS.clear()
    _PLANS[key] = (indices, plan)
    return plan


def _gather(ctx: KernelContext, x: Any, a: Attrs) -> Any:
    xp = ctx.xp
    lead, m = tuple(x.shape[:-1]), x.shape[-1]
    plan = _plan(a["indices"], m)
    src = x
    if plan["pad"]:
        src = xp.concat([x, ctx.zeros((*lead, 1))], axis=-1)  # index m reads +0
    y = xp.take(src, device_array(ctx, plan["idx"]), axis=len(lead))
    return ctx.arr(xp.reshape(y, (*lead, *a["shape"])))


def _scatter_last(ctx: KernelContext, g: Any, a: Attrs, shape: tuple[int, ...]) -> Any:
    xp = ctx.xp
    lead, m = shape[:-1], shape[-1]
    plan = _plan(a["indices"], m)
    gf = xp.reshape(g, (*lead, len(plan["idx"])))
    out = ctx.zeros(shape)
    zero = ctx.zeros((*lead, 1))
    # Rank r holds the r-th contribution of each target (targets distinct within a rank):
    # moved into place with take (a zero pad where a target has none) and selected with
    # where, so no in-place scatter is needed (array-API namespaces need not have one).
    for r, (pos, src, hit) in enumerate(plan["ranks"]):
        vals = xp.take(gf, device_array(ctx, pos), axis=len(lead))
        placed = xp.take(xp.concat([vals, zero], axis=-1), device_array(ctx, src), axis=len(lead))
        out = xp.where(device_array(ctx, hit), placed if r == 0 else out + placed, out)
    return out


register(
    family=__name__,
    name="gather",
    forward=lambda c, xs, a, e: (_gather(c, xs[0], a), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [_scatter_last(c, g, a, s)],
    jvp=lambda c, s, dxs, a, e: _gather(c, dxs[0], a),
    saves="input shape",
)
