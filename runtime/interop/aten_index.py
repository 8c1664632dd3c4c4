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

from .core import Emitter, InvalidModelError, Static, Unsupported, axis_of

__all__ = ["copy", "index", "select_scatter", "slice_scatter"]


def index(E: Emitter, x: Any, indices: Sequence[Any]) -> Any:
    """x[i0, i1, ...] with index tensors known at import time (`None` for a full axis:
    slices between index tensors; boolean masks; negative ids from the end), by NumPy's
    advanced-indexing rules, which are torch's: the positions of the axes up to the last
    index tensor are indexed at import time, the trailing axes kept whole, and the flat
    positions gathered with `index_select` and reshaped."""
    s = tuple(E.shape(x))
    k = max((j + 1 for j, i in enumerate(indices) if i is not None), default=0)
    if k == 0:
        return x
    if len(indices) > len(s):
        raise InvalidModelError(f"index: {len(indices)} indices for a rank-{len(s)} value")
    key = [slice(None) if i is None else _index_array(E, i) for i in indices[:k]]
    try:
        picked = np.arange(int(np.prod(s[:k]))).reshape(s[:k])[tuple(key)]
    except IndexError as e:
        raise Unsupported(f"index out of range: {e}") from None
    if picked.size == 0:
        raise Unsupported("indexing that selects nothing (an empty result)")
    rows = E.reshape(x, (int(np.prod(s[:k])), *s[k:]))
    flat = tuple(int(i) for i in picked.reshape(-1))
    return E.reshape(E.node("index_select", rows, indices=flat), (*picked.shape, *s[k:]))


def _index_array(E: Emitter, i: Any) -> np.ndarray:
    """An index tensor known at import time: booleans kept (a mask), integers as int64."""
    if isinstance(i, Static) and np.asarray(i.value).dtype == np.bool_:
        return np.asarray(i.value)
    return E.static_ints(i, "an index")


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
