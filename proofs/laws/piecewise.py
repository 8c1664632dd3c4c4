"""Per-op laws of the piecewise family: prelu, where.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- prelu is max(x, 0) + w·min(x, 0) with w broadcast along axis 1 (NumPy reshape to
  (C, 1, ..., 1)); at x = 0 the weight branch: jvp = w·dx + dw·x (= w·dx there). where is
  NumPy's `where` over the broadcast mask, a and b (linear in a and b; the mask is data).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..decide import lt
from .core import Arr, Case, arr, free, law, pattern, vmax, vmin

__all__: list[str] = []


def _prelu_w(x: Arr, w: Arr) -> Arr:
    """The weight reshaped against x: one element shared, or (C, 1, ..., 1) along axis 1."""
    if w.size == 1:
        return arr(w.reshape(()))
    return arr(w.reshape((w.size,) + (1,) * (x.ndim - 2)))


def _prelu_def(v: list[Arr], a: Any, e: Any) -> Arr:
    x = v[0]
    return arr(vmax(x, 0) + _prelu_w(x, v[1]) * vmin(x, 0))


def _prelu_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    x, w, dx, dw = v[0], _prelu_w(v[0], v[1]), d[0], _prelu_w(v[0], d[1])
    W, DW = np.broadcast_to(w, x.shape), np.broadcast_to(dw, x.shape)
    out = np.empty(x.shape, dtype=object)
    for i in np.ndindex(x.shape):
        out[i] = dx[i] if lt(0, x[i]) else W[i] * dx[i] + DW[i] * x[i]
    return arr(out)


_PRELU_SHAPES = (((2,), (1,)), ((2, 3), (3,)), ((1, 2, 2), (2,)), ((2, 2), (1,)))

law(
    op="prelu",
    cases=[Case(s, pattern(p)) for p in ("pos", "neg") for s in _PRELU_SHAPES]
    + [
        Case(((3,), (1,)), pattern(("at", 0))),
        Case(((1, 3), (3,)), pattern("pos", "neg", ("at", 0))),
    ],
    definition_text="max(x, 0) + w·min(x, 0), w = weight broadcast along axis 1 (or shared)",
    derivative_text=(
        "jvp = dx for x > 0, w·dx + dw·x for x < 0; at x = 0 the weight branch: w·dx + dw·0"
    ),
    definition=_prelu_def,
    conv_jvp=_prelu_conv,
)


def _where_def(v: list[Arr], a: Any, e: Any) -> Arr:
    m = np.array([bool(k) for k in a["mask"]], dtype=bool).reshape(a["mask_shape"])
    return arr(np.where(m, v[0], v[1]))


_WHERE_CASES = [
    ((3,), (3,), (1, 0, 1), (3,)),
    ((2, 3), (3,), (1, 0, 0, 1, 1, 0), (2, 3)),
    ((3,), (), (1, 0), (2, 1)),
    ((2, 1), (1, 3), (0,), ()),
    ((2, 2), (2, 2), (1,), (1,)),
]

law(
    op="where",
    cases=[Case((sa, sb), free(), {"mask": m, "mask_shape": ms}) for sa, sb, m, ms in _WHERE_CASES],
    definition_text="NumPy's where(mask, a, b) over the broadcast of mask, a and b",
    derivative_text="jvp = where(mask, da, db) (linear in a and b; the mask is constant data)",
    definition=_where_def,
)
