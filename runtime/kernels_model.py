"""Runtime kernels of the model-scale primitives: gather, reduce_max, mask_neg_inf.

Registered into `runtime.kernels.KERNELS` when `runtime.kernels` is imported (it imports
this module last). The model-scale composites (conv2d, pooling, norms, attention,
embedding, one_hot) need no kernels of their own: `runtime.kernels` runs their spec bodies
through the primitive kernels, so their ordered results are the spec's bit for bit.

Invariants:
- Each kernel performs its spec rule's operation sequence and is vectorised over output
  elements; Python loops run only over reduction steps (the lanes of `reduce_max`) or
  occurrence ranks of a scatter (at most the largest number of times one index repeats,
  e.g. kh*kw for a stride-1 convolution).
- gather's VJP is the spec's left fold per target in increasing output position: rank 0
  (the first occurrence) is stored as is, rank r is added to the running value, which is
  the same sequence of roundings as `fold_add`; padding positions are dropped.
- reduce_max picks the same element as spec (the first NaN, else the first maximal one)
  and routes the whole cotangent or tangent to it.
- Written against `ctx.xp`; NumPy is used only to precompute index structures on the host
  (they are converted with `ctx.xp.asarray`) and where `ctx._np` guards it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from spec.ops_model import neg_inf
from spec.tensor import Tensor

from .backend import from_spec
from .context import KernelContext
from .kernels import _k

__all__: list[str] = []

Attrs = dict[str, Any]
Env = Sequence[int]

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


def _dev(ctx: KernelContext, a: Any) -> Any:
    return a if ctx.backend.is_numpy else ctx.xp.asarray(a)


def _gather(ctx: KernelContext, x: Any, a: Attrs) -> Any:
    xp = ctx.xp
    lead, m = tuple(x.shape[:-1]), x.shape[-1]
    plan = _plan(a["indices"], m)
    src = x
    if plan["pad"]:
        src = xp.concat([x, ctx.zeros((*lead, 1))], axis=-1)  # index m reads +0
    y = xp.take(src, _dev(ctx, plan["idx"]), axis=len(lead))
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
        vals = xp.take(gf, _dev(ctx, pos), axis=len(lead))
        placed = xp.take(xp.concat([vals, zero], axis=-1), _dev(ctx, src), axis=len(lead))
        out = xp.where(_dev(ctx, hit), placed if r == 0 else out + placed, out)
    return out


_k(
    "gather",
    lambda c, xs, a, e: (_gather(c, xs[0], a), tuple(xs[0].shape)),
    lambda c, s, g, a, e: [_scatter_last(c, g, a, s)],
    lambda c, s, dxs, a, e: _gather(c, dxs[0], a),
    "input shape",
)


# --------------------------------------------------------------------------- reduce_max


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


_k("reduce_max", _rmax_fwd, _rmax_vjp, _rmax_jvp, "input shape, arg-max positions")


# --------------------------------------------------------------------------- mask_neg_inf


def _keep(ctx: KernelContext, a: Attrs) -> Any:
    m = np.asarray(a["mask"], dtype=bool).reshape(a["mask_shape"])
    return _dev(ctx, m)


def _mask_fwd(ctx: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x = xs[0]
    if all(a["mask"]):
        return x, None
    ninf = from_spec(Tensor((), (neg_inf(ctx.domain),)), ctx.dtype)
    if not ctx.backend.is_numpy:
        ninf = ctx.backend.from_host(ninf)
    return ctx.arr(ctx.xp.where(_keep(ctx, a), x, ninf)), None


def _mask_lin(ctx: KernelContext, t: Any, a: Attrs) -> Any:
    keep = ctx.xp.broadcast_to(_keep(ctx, a), tuple(t.shape))
    return ctx.arr(ctx.xp.where(keep, t, ctx.zeros(tuple(t.shape))))


_k(
    "mask_neg_inf",
    _mask_fwd,
    lambda c, s, g, a, e: [_mask_lin(c, g, a)],
    lambda c, s, dxs, a, e: _mask_lin(c, dxs[0], a),
    "nothing",
)
