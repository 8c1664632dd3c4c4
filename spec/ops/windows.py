"""Sliding-window index tables of the conv and pool families (no op is registered here).

Invariants:
- Every table is built with vectorised NumPy (broadcast index arithmetic), never a Python
  loop over output positions, taps or padding: its cost is one pass over the table.
- Geometry is per spatial axis: an input of length n, kernel k, stride s, dilation d and
  padding (lo, hi) gives window starts o*s - lo for o < out; tap t of window o reads input
  position o*s - lo + t*d, which is "in bounds" when 0 <= position < n.
- Flat positions are row-major over the spatial dims; tables are returned as NumPy int64
  arrays (the callers turn them into the tuples of `gather`'s `indices` attribute).
- Attribute checks raise `GraphError`/`ShapeError` naming the op, the attribute and
  expected vs got.
- The conv and pool families' shape rules are closed form: they run the bodies' own
  validation on a `ShapeView` and compute the output dims per axis, never a table (so
  validating a graph never builds an im2col index list).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import GraphError, op_error
from ..shape import Shape
from .builders import shape_error
from .table import Attrs

__all__ = [
    "ShapeView",
    "adaptive_table",
    "channel_dims",
    "flat_gather",
    "int_tuple",
    "outer_flat",
    "padding_pairs",
    "pool_out_dim",
    "row_major_strides",
    "tap_table",
    "transposed_tap_table",
    "window_out_dim",
]


class ShapeView:
    """Argument shapes in place of a `GraphBuilder` for the closed-form shape rules (which
    read `shape_of` only): the same validation code runs without building a body."""

    def __init__(self, shapes: Sequence[Shape]) -> None:
        self.shapes = list(shapes)

    def shape_of(self, i: int) -> Shape:
        return self.shapes[i]


def channel_dims(op: str, b: Any, x: int, nd: int, index: int = 0) -> tuple[Shape, int, Shape]:
    """(batch prefix, C, spatial dims) of an input (C, *spatial) or (N, C, *spatial) with nd
    spatial dims."""
    s = b.shape_of(x)
    if len(s) not in (nd + 1, nd + 2):
        raise shape_error(
            op,
            f"input must be (C, {nd} spatial dims) or (N, C, {nd} spatial dims)",
            index,
            f"rank {nd + 1} or {nd + 2}",
            s,
        )
    return s[: len(s) - nd - 1], s[-nd - 1], s[-nd:]


def int_tuple(op: str, a: Attrs, key: str, nd: int, default: int, minimum: int) -> tuple[int, ...]:
    """Attribute `key` as nd ints >= minimum (a single int is repeated, as PyTorch does)."""
    v = a.get(key)
    if v is None:
        return (default,) * nd
    vs = tuple(v)
    if len(vs) == 1 and nd > 1:
        vs = vs * nd
    if len(vs) != nd or min(vs) < minimum:
        raise op_error(
            GraphError,
            op,
            f"attribute {key!r} must be {nd} ints >= {minimum}",
            expected=f"{nd} ints >= {minimum}",
            got=v,
        )
    return tuple(int(x) for x in vs)


def padding_pairs(op: str, a: Attrs, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(begin pads, end pads) from `padding`: nd ints (symmetric, PyTorch) or 2*nd ints
    (ONNX order: every axis's begin, then every axis's end)."""
    v = a.get("padding")
    if v is None:
        return (0,) * nd, (0,) * nd
    vs = tuple(int(x) for x in v)
    if len(vs) == 1 and nd > 1:
        vs = vs * nd
    if len(vs) == nd:
        return vs, vs
    if len(vs) == 2 * nd:
        return vs[:nd], vs[nd:]
    raise op_error(
        GraphError,
        op,
        "attribute 'padding' must be nd ints (symmetric) or 2*nd ints (begins, then ends)",
        expected=f"{nd} or {2 * nd} ints",
        got=v,
    )


def window_out_dim(op: str, n: int, k: int, s: int, lo: int, hi: int, d: int) -> int:
    """floor((n + lo + hi - (d*(k-1)+1)) / s) + 1, required >= 1."""
    eff = d * (k - 1) + 1
    span = n + lo + hi - eff
    if span < 0:
        raise shape_error(
            op, "output would be empty", 0, f"padded input >= dilation*(kernel-1)+1 = {eff}", n
        )
    return span // s + 1


def pool_out_dim(op: str, n: int, k: int, s: int, lo: int, hi: int, d: int, ceil: bool) -> int:
    """PyTorch's pooling output length: floor (or ceil) of (n + lo + hi - eff)/s, + 1; with
    ceil_mode a last window that would start in the end padding is dropped."""
    eff = d * (k - 1) + 1
    span = n + lo + hi - eff
    if span < 0:
        raise shape_error(
            op, "output would be empty", 0, f"padded input >= dilation*(kernel-1)+1 = {eff}", n
        )
    out = (span + (s - 1 if ceil else 0)) // s + 1
    if ceil and (out - 1) * s >= n + lo:
        out -= 1
    return out


def row_major_strides(dims: Sequence[int]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(dims):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def outer_flat(srcs: Sequence[Any], dims: Shape) -> Any:
    """The row-major flat source positions of an output whose axis a reads input positions
    srcs[a] (int64 vectors) of an input of shape `dims`: their outer sum, shape
    (len(srcs[0]), ..., len(srcs[-1]))."""
    mult = row_major_strides(dims)
    flat: Any = np.zeros((), dtype=np.int64)
    for a, src in enumerate(srcs):
        flat = np.add.outer(flat, np.asarray(src, dtype=np.int64) * mult[a])
    return flat


def flat_gather(b: Any, x: int, flat: Any, ok: Any = None) -> int:
    """One `gather` over reshape(x, (N,)): output element p reads x's flat position
    flat[p] (the output's shape is flat's), or +0 (gather's pad index N) where ok[p] is
    False. Emits a reshape and a gather node on the builder b."""
    dims = b.shape_of(x)
    n = 1
    for d in dims:
        n *= d
    idx = np.asarray(flat, dtype=np.int64)
    if ok is not None:
        idx = np.where(ok, idx, n)
    flat_x = b.node("reshape", x, shape=(n,))
    return b.node("gather", flat_x, indices=idx.reshape(-1).tolist(), shape=tuple(idx.shape))


def _combine(per_axis: list[tuple[Any, Any]], dims: Shape) -> tuple[Any, Any]:
    """Per axis a, (pos_a, ok_a) of shape (k_a, o_a) -> (flat, ok) of shape (k..., o...),
    flat the row-major position and ok the in-bounds mask (flat is 0 where not ok)."""
    nd = len(dims)
    mult = row_major_strides(dims)
    flat: Any = np.zeros((1,) * (2 * nd), dtype=np.int64)
    ok: Any = np.ones((1,) * (2 * nd), dtype=bool)
    for a, (pos, good) in enumerate(per_axis):
        shape = [1] * (2 * nd)
        shape[a], shape[nd + a] = pos.shape
        flat = flat + np.where(good, pos, 0).reshape(shape) * mult[a]
        ok = ok & good.reshape(shape)
    return np.where(ok, flat, 0), ok


def tap_table(
    dims: Shape,
    kernel: Sequence[int],
    stride: Sequence[int],
    lo: Sequence[int],
    dil: Sequence[int],
    outs: Sequence[int],
) -> tuple[Any, Any]:
    """(flat, ok), each of shape (k_1..k_nd, o_1..o_nd): tap t of window o reads flat
    position flat[t, o] when ok[t, o] (zero padding elsewhere)."""
    per_axis = []
    for n, k, s, p, d, o in zip(dims, kernel, stride, lo, dil, outs, strict=True):
        pos = np.arange(o, dtype=np.int64)[None, :] * s - p + np.arange(k)[:, None] * d
        per_axis.append((pos, (pos >= 0) & (pos < n)))
    return _combine(per_axis, dims)


def transposed_tap_table(
    dims: Shape,
    kernel: Sequence[int],
    stride: Sequence[int],
    lo: Sequence[int],
    dil: Sequence[int],
    outs: Sequence[int],
) -> tuple[Any, Any]:
    """(flat, ok) of a transposed convolution: output o receives tap t from input u where
    u*s - lo + t*d = o, i.e. u = (o + lo - t*d)/s when that is an integer in [0, n)."""
    per_axis = []
    for n, k, s, p, d, o in zip(dims, kernel, stride, lo, dil, outs, strict=True):
        num = np.arange(o, dtype=np.int64)[None, :] + p - np.arange(k)[:, None] * d
        u = np.floor_divide(num, s)
        per_axis.append((u, (num % s == 0) & (u >= 0) & (u < n)))
    return _combine(per_axis, dims)


def adaptive_table(dims: Shape, outs: Sequence[int]) -> tuple[Any, Any, Any]:
    """PyTorch's adaptive windows: on each axis, window o covers [floor(o*n/out),
    ceil((o+1)*n/out)). Returns (flat, ok, count) with flat and ok of shape (o..., K) (K
    the largest window's tap count, taps in row-major order inside the window, the unused
    slots at the end with ok False) and count (o...) the window sizes."""
    nd = len(dims)
    per_axis = []
    for n, o in zip(dims, outs, strict=True):
        r = np.arange(o, dtype=np.int64)
        start = (r * n) // o
        end = -((-(r + 1) * n) // o)
        kmax = int((end - start).max())
        pos = start[:, None] + np.arange(kmax)[None, :]  # (o, kmax)
        per_axis.append((pos, pos < end[:, None], end - start, kmax))
    mult = row_major_strides(dims)
    shape_o = tuple(o for o in outs)
    kmaxes = tuple(p[3] for p in per_axis)
    flat: Any = np.zeros((1,) * (2 * nd), dtype=np.int64)
    ok: Any = np.ones((1,) * (2 * nd), dtype=bool)
    count: Any = np.ones((1,) * nd, dtype=np.int64)
    for a, (pos, good, cnt, km) in enumerate(per_axis):
        shape = [1] * (2 * nd)
        shape[a], shape[nd + a] = shape_o[a], km
        flat = flat + np.where(good, pos, 0).reshape(shape) * mult[a]
        ok = ok & good.reshape(shape)
        cshape = [1] * nd
        cshape[a] = shape_o[a]
        count = count * cnt.reshape(cshape)
    flat = np.broadcast_to(flat, (*shape_o, *kmaxes))
    ok = np.broadcast_to(ok, (*shape_o, *kmaxes))
    size_o = int(np.prod(shape_o, dtype=np.int64))
    size_k = int(np.prod(kmaxes, dtype=np.int64))
    flat, ok = flat.reshape(size_o, size_k), ok.reshape(size_o, size_k)
    # Valid taps first in each window (stable: row-major order kept), unused slots last.
    order = np.argsort(~ok, axis=1, kind="stable")
    flat = np.take_along_axis(flat, order, axis=1)
    ok = np.take_along_axis(ok, order, axis=1)
    return flat, ok, np.broadcast_to(count, shape_o).reshape(-1)
