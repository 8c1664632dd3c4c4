"""ATen rules with no dependency on other rules: advanced indexing with static indices,
and the functional forms of writes into a view (`slice_scatter`, `select_scatter`, `copy`)
that torch's functionalization produces for `y[:, :2] *= 2`, `y[0] = v`, `y.copy_(v)`.

Invariants: indices are checked against the axis sizes (out of range refused, negative
ones counted from the end, as torch does). A scatter is one `concat` of the input and the
source along the axis and one `index_select` picking, per position, the input's row or the
source's: gradients reach the source at the written rows and the input elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .core import Emitter, InvalidModelError, Unsupported, axis_of

__all__ = ["copy", "index", "select_scatter", "slice_scatter"]


def index(E: Emitter, x: Any, indices: Sequence[Any]) -> Any:
    """x[i0, i1, ...] with integer index tensors known at import time (advanced indexing
    on leading axes): the flat positions gathered with `index_select` and reshaped."""
    if any(i is None for i in indices):
        raise Unsupported("indexing with None (slices between index tensors)")
    idx = [E.static_ints(i, "an index") for i in indices]
    s = E.shape(x)
    k = len(idx)
    for j, a in enumerate(idx):
        if a.size and (a.min() < -s[j] or a.max() >= s[j]):
            raise Unsupported(f"index {int(a.max())} out of range for axis {j} of size {s[j]}")
    b = np.broadcast_arrays(*idx)
    pos = np.ravel_multi_index(tuple(np.mod(a, s[j]) for j, a in enumerate(b)), s[:k])
    rows = E.reshape(x, (int(np.prod(s[:k])), *s[k:]))
    flat = tuple(int(i) for i in pos.reshape(-1))
    picked = E.node("index_select", rows, indices=flat)
    return E.reshape(picked, (*b[0].shape, *s[k:]))


def _scatter_rows(E: Emitter, x: Any, src: Any, dim: int, rows: Sequence[int]) -> Any:
    """x with the rows `rows` of axis `dim` replaced by src's rows along `dim`, in order."""
    s = E.shape(x)
    d = axis_of(dim, len(s), "scatter dim")
    want = (*s[:d], len(rows), *s[d + 1 :])
    if tuple(E.shape(src)) != want:
        raise InvalidModelError(
            f"scatter source of shape {list(E.shape(src))}, expected {list(want)}"
        )
    if not rows:
        return x
    pick = list(range(s[d]))
    for k, r in enumerate(rows):
        pick[r] = s[d] + k
    both = E.node("concat", E.move_axis(x, d, 0), E.move_axis(src, d, 0))
    return E.move_axis(E.node("index_select", both, indices=tuple(pick)), 0, d)


def slice_scatter(
    E: Emitter, x: Any, src: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Any:
    """`aten.slice_scatter`: x with x[dim][start:end:step] replaced by src."""
    s = E.shape(x)
    d = axis_of(dim, len(s), "slice_scatter dim")
    if int(step) < 1:
        raise InvalidModelError(f"slice_scatter step {step} (must be >= 1)")
    return _scatter_rows(E, x, src, d, list(range(s[d]))[slice(start, end, int(step))])


def select_scatter(E: Emitter, x: Any, src: Any, dim: int, index: int) -> Any:
    """`aten.select_scatter`: x with x.select(dim, index) replaced by src."""
    s = E.shape(x)
    d = axis_of(dim, len(s), "select_scatter dim")
    if not -s[d] <= int(index) < s[d]:
        raise InvalidModelError(f"select_scatter index {index} for an axis of size {s[d]}")
    row = E.reshape(src, (*s[:d], 1, *s[d + 1 :]))
    return _scatter_rows(E, x, row, d, [int(index) % s[d]])


def copy(E: Emitter, x: Any, src: Any, *_: Any, **__: Any) -> Any:
    """`aten.copy` (functional `copy_`): src broadcast to x's shape (x's values unused; the
    graph runs in one float dtype, so a dtype change is an identity)."""
    s, t = tuple(E.shape(x)), tuple(E.shape(src))
    if t == s:
        return src
    try:
        np.broadcast_shapes(t, s)
    except ValueError as e:
        raise InvalidModelError(f"copy of shape {list(t)} into {list(s)}") from e
    if np.broadcast_shapes(t, s) != s:
        raise InvalidModelError(f"copy of shape {list(t)} into {list(s)}")
    return E.node("broadcast_to", src, shape=s)
