"""ATen rule with no dependency on other rules: advanced indexing with static indices.

Invariant: indices are checked against the axis sizes (out of range refused, negative
ones counted from the end, as torch does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .core import Emitter, Unsupported

__all__ = ["index"]


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
