"""Array rules of the folding and structural primitives: matmul linear sum reduce_sum
reduce_max gather reshape swap_adjacent broadcast_to concat slice.

Invariants:
- Every sum is the spec's left fold: matmul/linear over the contraction index in
  increasing order (first product as is), sum over row-major order, reduce_sum along its
  axis, gather's VJP per target in increasing source position; each is one loop over the
  folded index, vectorised over every independent axis.
- reduce_max picks, per lane, the first NaN or else the first maximal element (the fold
  m = maximum(m, v)); the tangent and the cotangent go to that element only (others +0).
- Structural rules move values without arithmetic; their VJPs are the spec's adjoint moves
  (zeros are +0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .formats import Format
from .table import fold, rule, unbroadcast

__all__ = ["matmul_fold"]

Arr = np.ndarray
Attrs = dict[str, Any]


# --------------------------------------------------------------------------- matmul, linear


def matmul_fold(F: Format, A: Arr, B: Arr) -> Arr:
    """op(A) @ op(B) over equal (or broadcasting) batch prefixes, each entry the left fold
    over the contraction index p of mul(A[.., i, p], B[.., p, j])."""
    k = A.shape[-1]
    out = (*np.broadcast_shapes(A.shape[:-2], B.shape[:-2]), A.shape[-2], B.shape[-1])
    if k == 0:
        return F.zeros(out)
    acc = F.mul(A[..., :, 0:1], B[..., 0:1, :])
    for p in range(1, k):
        acc = F.add(acc, F.mul(A[..., :, p : p + 1], B[..., p : p + 1, :]))
    return F.cast(np.broadcast_to(acc, out))


def _t(x: Arr) -> Arr:
    return np.swapaxes(x, -1, -2)


def _operands(xs: list[Arr]) -> tuple[Arr, Arr, tuple[int, ...]]:
    A, B = xs
    batch = tuple(np.broadcast_shapes(A.shape[:-2], B.shape[:-2]))
    A = np.broadcast_to(A, (*batch, *A.shape[-2:]))
    B = np.broadcast_to(B, (*batch, *B.shape[-2:]))
    return A, B, (*batch, A.shape[-2], B.shape[-1])


def _matmul_forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
    A, B, _ = _operands(xs)
    return matmul_fold(F, A, B)


def _matmul_jvp(F: Format, xs: list[Arr], dxs: list[Arr], a: Attrs, env: Any) -> Arr:
    A, B, out = _operands(xs)
    dA, dB, _ = _operands(dxs)
    dA = np.broadcast_to(dA, (*out[:-2], *dA.shape[-2:]))
    dB = np.broadcast_to(dB, (*out[:-2], *dB.shape[-2:]))
    return F.add(matmul_fold(F, dA, B), matmul_fold(F, A, dB))


def _matmul_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    A, B, _ = _operands(xs)
    gA = matmul_fold(F, g, _t(B))  # gA[i,p] = fold_j g[i,j]*B[p,j]
    gB = matmul_fold(F, _t(A), g)  # gB[p,j] = fold_i A[i,p]*g[i,j]
    return [unbroadcast(F, gA, xs[0].shape), unbroadcast(F, gB, xs[1].shape)]


rule("matmul", _matmul_forward, _matmul_jvp, _matmul_vjp)


def _rows(x: Arr) -> Arr:
    return x.reshape(1, -1) if x.ndim == 1 else x


def _linear_core(F: Format, x: Arr, w: Arr) -> Arr:
    """y[r,i] = fold_j mul(w[i,j], x[r,j]) as a (rows, out) array."""
    return matmul_fold(F, _rows(x), w.T)


def _linear_forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
    x, w, b = xs
    y = F.add(_linear_core(F, x, w), b[None, :])
    return y.reshape((*x.shape[:-1], w.shape[0]))


def _linear_jvp(F: Format, xs: list[Arr], dxs: list[Arr], a: Attrs, env: Any) -> Arr:
    x, w, _ = xs
    dx, dw, db = dxs
    p, q = _linear_core(F, dx, w), _linear_core(F, x, dw)
    return F.add(F.add(p, q), db[None, :]).reshape((*x.shape[:-1], w.shape[0]))


def _linear_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    x, w, _ = xs
    g2, x2 = _rows(g), _rows(x)
    gx = matmul_fold(F, g2, w).reshape(x.shape)  # fold_i g[r,i]*w[i,j]
    gw = matmul_fold(F, g2.T, x2)  # fold_r g[r,i]*x[r,j]
    gb = fold(F, g2, 0)
    return [gx, gw, gb]


rule("linear", _linear_forward, _linear_jvp, _linear_vjp)


# --------------------------------------------------------------------------- reductions


def _sum_forward(F: Format, xs: list[Arr], a: Attrs, env: Any) -> Arr:
    return fold(F, xs[0].reshape(-1), 0).reshape(())


rule(
    "sum",
    _sum_forward,
    lambda F, xs, dxs, a, env: _sum_forward(F, dxs, a, env),
    lambda F, xs, g, a, env: [F.cast(np.broadcast_to(g, xs[0].shape)).copy()],
)


def _reduce_sum_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    x = xs[0]
    return [F.cast(np.broadcast_to(np.expand_dims(g, a["axis"]), x.shape)).copy()]


rule(
    "reduce_sum",
    lambda F, xs, a, env: fold(F, xs[0], a["axis"]),
    lambda F, xs, dxs, a, env: fold(F, dxs[0], a["axis"]),
    _reduce_sum_vjp,
)


def _argmax(x: Arr, axis: int) -> Arr:
    """Per lane: the first NaN, else the first maximal element (index along `axis`)."""
    xs = np.moveaxis(x, axis, 0)
    j = np.zeros(xs.shape[1:], dtype=np.int64)
    m = xs[0].copy()
    for k in range(1, xs.shape[0]):
        v = xs[k]
        take = ~np.isnan(m) & (np.isnan(v) | (m < v))
        j = np.where(take, k, j)
        m = np.where(take, v, m)
    return j


def _take(x: Arr, j: Arr, axis: int) -> Arr:
    return np.take_along_axis(x, np.expand_dims(j, axis), axis).squeeze(axis)


def _reduce_max_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    x, axis = xs[0], a["axis"]
    out = F.zeros(x.shape)
    j = np.expand_dims(_argmax(x, axis), axis)
    np.put_along_axis(out, j, np.expand_dims(g, axis), axis)
    return [out]


rule(
    "reduce_max",
    lambda F, xs, a, env: _take(xs[0], _argmax(xs[0], a["axis"]), a["axis"]),
    lambda F, xs, dxs, a, env: _take(dxs[0], _argmax(xs[0], a["axis"]), a["axis"]),
    _reduce_max_vjp,
)


# --------------------------------------------------------------------------- gather


class _GatherPlan:
    """gather's index array and its scatter schedule, per index list (cached by identity
    of the attribute value, which a graph node keeps for its lifetime)."""

    def __init__(self, indices: Any, m: int) -> None:
        idx = np.asarray(indices, dtype=np.int64)
        self.idx = idx
        real = np.nonzero(idx < m)[0]
        order = real[np.argsort(idx[real], kind="stable")]
        tgt = idx[order]
        start = np.searchsorted(tgt, tgt, side="left")
        rank = np.arange(len(order)) - start
        # steps[r] = (sources p with rank r in their bucket, their targets), p ascending per
        # target across steps
        self.steps = [
            (order[rank == r], tgt[rank == r]) for r in range(int(rank.max(initial=-1)) + 1)
        ]


_PLANS: dict[tuple[int, int], tuple[Any, _GatherPlan]] = {}


def _plan(indices: Any, m: int) -> _GatherPlan:
    key = (id(indices), m)
    hit = _PLANS.get(key)
    if hit is not None and hit[0] is indices:
        return hit[1]
    if len(_PLANS) > 256:
        _PLANS.clear()
    p = _GatherPlan(indices, m)
    _PLANS[key] = (indices, p)
    return p


def _gather_fwd(F: Format, x: Arr, a: Attrs) -> Arr:
    m = x.shape[-1]
    padded = np.concatenate([x, F.zeros((*x.shape[:-1], 1))], axis=-1)
    out = np.take(padded, _plan(a["indices"], m).idx, axis=-1)
    return F.cast(out.reshape((*x.shape[:-1], *a["shape"])))


def _gather_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    x = xs[0]
    m = x.shape[-1]
    plan = _plan(a["indices"], m)
    g2 = g.reshape((*x.shape[:-1], len(plan.idx)))
    out = F.zeros(x.shape)
    for r, (src, tgt) in enumerate(plan.steps):
        col = g2[..., src]
        out[..., tgt] = col if r == 0 else F.add(out[..., tgt], col)
    return [out]


rule(
    "gather",
    lambda F, xs, a, env: _gather_fwd(F, xs[0], a),
    lambda F, xs, dxs, a, env: _gather_fwd(F, dxs[0], a),
    _gather_vjp,
)


# --------------------------------------------------------------------------- structure


def _shape(a: Attrs) -> tuple[int, ...]:
    return tuple(a["shape"])


rule(
    "reshape",
    lambda F, xs, a, env: xs[0].reshape(_shape(a)),
    lambda F, xs, dxs, a, env: dxs[0].reshape(_shape(a)),
    lambda F, xs, g, a, env: [g.reshape(xs[0].shape)],
)


def _swap(x: Arr, k: int) -> Arr:
    return np.ascontiguousarray(np.swapaxes(x, k, k + 1))


rule(
    "swap_adjacent",
    lambda F, xs, a, env: _swap(xs[0], a["axis"]),
    lambda F, xs, dxs, a, env: _swap(dxs[0], a["axis"]),
    lambda F, xs, g, a, env: [_swap(g, a["axis"])],
)
rule(
    "broadcast_to",
    lambda F, xs, a, env: np.broadcast_to(xs[0], _shape(a)).copy(),
    lambda F, xs, dxs, a, env: np.broadcast_to(dxs[0], _shape(a)).copy(),
    lambda F, xs, g, a, env: [unbroadcast(F, g, xs[0].shape)],
)


def _concat_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    out, start = [], 0
    for x in xs:
        out.append(g[start : start + x.shape[0]])
        start += x.shape[0]
    return out


rule(
    "concat",
    lambda F, xs, a, env: np.concatenate(xs, axis=0),
    lambda F, xs, dxs, a, env: np.concatenate(dxs, axis=0),
    _concat_vjp,
)


def _slice_vjp(F: Format, xs: list[Arr], g: Arr, a: Attrs, env: Any) -> list[Arr]:
    out = F.zeros(xs[0].shape)
    out[a["start"] : a["stop"]] = g
    return [out]


rule(
    "slice",
    lambda F, xs, a, env: xs[0][a["start"] : a["stop"]],
    lambda F, xs, dxs, a, env: dxs[0][a["start"] : a["stop"]],
    _slice_vjp,
)
