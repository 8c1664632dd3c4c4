"""Per-op laws of the embed family: embedding, one_hot.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- embedding is linear (free symbols, NumPy row indexing); one_hot has no arguments and is
  the identity rows eye(num_classes)[indices].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sympy

from .core import Arr, Case, arr, free, law, zeros

__all__: list[str] = []


def _emb_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    t, idx = v[0], list(a["indices"])
    shape = a.get("shape") or (len(idx),)
    return arr(t[idx].reshape((*shape, t.shape[1])))


law(
    op="embedding",
    cases=[
        Case(((3, 2),), free(), {"indices": (2, 0, 2)}),
        Case(((2, 1),), free(), {"indices": (1, 1, 0, 1), "shape": (2, 2)}),
    ],
    definition_text="table[indices] (NumPy rows) reshaped to shape + (D,)",
    derivative_text="jvp = embedding(dtable) (linear); the VJP scatter-adds rows",
    definition=_emb_def,
)


def _one_hot_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    out = zeros((len(a["indices"]), a["num_classes"]))
    for k, i in enumerate(a["indices"]):
        out[k, i] = sympy.Integer(1)
    return out


law(
    op="one_hot",
    cases=[
        Case((), free(), {"indices": (2, 0, 1), "num_classes": 3}),
        Case((), free(), {"indices": (), "num_classes": 2}),
    ],
    definition_text="the identity rows eye(num_classes)[indices]",
    derivative_text="no arguments: jvp = 0 and the VJP is the empty list",
    definition=_one_hot_def,
)
