"""Per-op laws of the linalg family: matmul, linear.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- Both are checked on free symbols against NumPy matmul (batch prefixes broadcast; an
  empty contraction gives zeros).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy

from .core import Arr, Case, arr, free, law

__all__: list[str] = []


def _np_matmul(v: list[Arr], a: Any, e: Any) -> Arr:
    A, B = v
    if A.shape[-1] == 0:
        shape = (*np.broadcast_shapes(A.shape[:-2], B.shape[:-2]), A.shape[-2], B.shape[-1])
        return arr(np.full(shape, sympy.Integer(0), dtype=object))
    return arr(np.matmul(A, B))


law(
    op="matmul",
    cases=[
        Case(((2, 3), (3, 2)), free()),
        Case(((3, 3), (3, 1)), free()),
        Case(((1, 1), (1, 1)), free()),
        Case(((2, 2, 3), (2, 3, 2)), free()),
        Case(((1, 2, 2), (3, 2, 2)), free()),
        Case(((2, 2, 3), (3, 2)), free()),
        Case(((2, 0), (0, 2)), free()),
    ],
    definition_text="NumPy matmul (batch prefixes broadcast)",
    derivative_text="jvp = dA@B + A@dB",
    definition=_np_matmul,
)


def _linear_def(v: list[Arr], a: Any, e: Any) -> Arr:
    x, w, b = v
    return arr(np.matmul(x, w.T) + b)


law(
    op="linear",
    cases=[
        Case(((3,), (2, 3), (2,)), free()),
        Case(((4, 3), (2, 3), (2,)), free()),
        Case(((1,), (1, 1), (1,)), free()),
        Case(((2, 2), (3, 2), (3,)), free()),
    ],
    definition_text="x @ wᵀ + b (NumPy)",
    derivative_text="jvp = dx@wᵀ + x@dwᵀ + db",
    definition=_linear_def,
)
