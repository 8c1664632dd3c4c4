"""Per-op laws of the index family: select, index_select, scatter_add, gather.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- All are linear and checked on free symbols: NumPy indexing (repeats and empty index
  lists included), scatter-add by explicit loop, gather through one zero padding column.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from .core import Arr, Case, arr, free, law, zeros

__all__: list[str] = []


def _select_def(v: list[Arr], a: Mapping[str, Any], e: tuple[int, ...]) -> Arr:
    i = a["index"] if a.get("index") is not None else e[a["env_slot"]]
    return arr(v[0][i])


law(
    op="select",
    cases=[
        Case(((3,),), free(), {"index": 1}),
        Case(((3, 2),), free(), {"index": 2}),
        Case(((2, 2, 2),), free(), {"index": 0}),
        Case(((3, 2),), free(), {"env_slot": 0}, env=(1,)),
    ],
    definition_text="x[i] on the leading axis, i = index or env[env_slot]",
    derivative_text="jvp = dx[i] (linear)",
    definition=_select_def,
)

law(
    op="index_select",
    cases=[
        Case(((3,),), free(), {"indices": (2, 0, 2)}),
        Case(((3, 2),), free(), {"indices": (1,)}),
        Case(((3, 2),), free(), {"indices": (0, 0, 1, 2)}),
        Case(((2, 2),), free(), {"indices": ()}),
    ],
    definition_text="NumPy x[indices] (rows, repeats allowed)",
    derivative_text="jvp = dx[indices] (linear)",
    definition=lambda v, a, e: (
        arr(v[0][list(a["indices"])])
        if a["indices"]
        else arr(np.zeros((0, *v[0].shape[1:]), dtype=object))
    ),
)


def _scatter_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = v[0]
    out = np.full((a["size"], *x.shape[1:]), sympy.Integer(0), dtype=object)
    for k, j in enumerate(a["indices"]):
        out[j] = out[j] + x[k]
    return arr(out)


law(
    op="scatter_add",
    cases=[
        Case(((3,),), free(), {"indices": (1, 0, 1), "size": 2}),
        Case(((2, 2),), free(), {"indices": (0, 0), "size": 3}),
        Case(((0,),), free(), {"indices": (), "size": 2}),
    ],
    definition_text="out[j] = Σ_{k: indices[k] = j} x[k], zero rows elsewhere",
    derivative_text="jvp = scatter_add(dx) (linear)",
    definition=_scatter_def,
)


def _gather_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = v[0]
    padded = np.concatenate([x, zeros((*x.shape[:-1], 1))], axis=-1)
    idx = list(a["indices"])
    out = padded[..., idx] if idx else zeros((*x.shape[:-1], 0))
    return arr(out.reshape((*x.shape[:-1], *a["shape"])))


law(
    op="gather",
    cases=[
        Case(((3,),), free(), {"indices": (2, 0, 3, 2), "shape": (2, 2)}),
        Case(((2, 3),), free(), {"indices": (1, 1, 0), "shape": (1, 3)}),
        Case(((2, 2),), free(), {"indices": (), "shape": (0,)}),
    ],
    definition_text="x padded with one zero column, then NumPy x[..., indices] reshaped to shape",
    derivative_text="jvp = gather(dx) (linear); the VJP scatter-adds (its adjoint)",
    definition=_gather_def,
)
