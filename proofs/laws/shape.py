"""Per-op laws of the shape family: reshape, swap_adjacent, transpose, broadcast_to, concat,
slice.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- All are linear and checked on free symbols against the NumPy operation of the same
  meaning (row-major reshape, swapaxes, broadcast_to, concatenate on axis 0, slicing).
"""

from __future__ import annotations

import numpy as np

from .core import Case, arr, free, law

__all__: list[str] = []

law(
    op="reshape",
    cases=[
        Case(((2, 3),), free(), {"shape": (3, 2)}),
        Case(((6,),), free(), {"shape": (2, 1, 3)}),
        Case(((),), free(), {"shape": (1, 1)}),
        Case(((2, 2),), free(), {"shape": (4,)}),
    ],
    definition_text="NumPy reshape (row-major)",
    derivative_text="jvp = reshape(dx) (linear)",
    definition=lambda v, a, e: arr(v[0].reshape(a["shape"])),
)

law(
    op="swap_adjacent",
    cases=[
        Case(((2, 3),), free(), {"axis": 0}),
        Case(((2, 3, 2),), free(), {"axis": 1}),
        Case(((2, 3, 2),), free(), {"axis": 0}),
    ],
    definition_text="NumPy swapaxes(axis, axis + 1)",
    derivative_text="jvp = swap(dx) (linear)",
    definition=lambda v, a, e: arr(np.swapaxes(v[0], a["axis"], a["axis"] + 1)),
)

law(
    op="broadcast_to",
    cases=[
        Case(((),), free(), {"shape": (2, 3)}),
        Case(((3,),), free(), {"shape": (2, 3)}),
        Case(((2, 1),), free(), {"shape": (2, 3)}),
        Case(((2, 3),), free(), {"shape": (2, 3)}),
        Case(((1, 3),), free(), {"shape": (2, 2, 3)}),
    ],
    definition_text="NumPy broadcast_to",
    derivative_text="jvp = broadcast_to(dx) (linear)",
    definition=lambda v, a, e: arr(np.broadcast_to(v[0], a["shape"]).copy()),
)

law(
    op="concat",
    cases=[
        Case(((2,),), free()),
        Case(((2,), (3,)), free()),
        Case(((1, 2), (2, 2), (1, 2)), free()),
        Case(((0, 2), (2, 2)), free()),
    ],
    definition_text="NumPy concatenate on axis 0",
    derivative_text="jvp = concat(dx_i) (linear)",
    definition=lambda v, a, e: arr(np.concatenate(v, axis=0)),
)

law(
    op="slice",
    cases=[
        Case(((4,),), free(), {"start": 1, "stop": 3}),
        Case(((3, 2),), free(), {"start": 0, "stop": 3}),
        Case(((3, 2),), free(), {"start": 2, "stop": 2}),
        Case(((4, 2),), free(), {"start": 3, "stop": 4}),
    ],
    definition_text="x[start:stop] on the leading axis",
    derivative_text="jvp = dx[start:stop] (linear)",
    definition=lambda v, a, e: arr(v[0][a["start"] : a["stop"]]),
)

law(
    op="transpose",
    cases=[Case((s,), free()) for s in ((2, 3), (2, 2, 3), (1, 3))],
    definition_text="NumPy swapaxes(-1, -2)",
    derivative_text="jvp = transpose(dx) (linear)",
    definition=lambda v, a, e: arr(np.swapaxes(v[0], -1, -2)),
)
