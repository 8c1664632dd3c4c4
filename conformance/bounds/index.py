"""Fast-profile bounds of the index family.

Invariants:
- select, index_select, gather: 0 (they pick elements, never compute).
- scatter_add: γ_n·Σ|x_i| per output element, over the n input rows scattered onto it.
"""

from __future__ import annotations

from typing import Any

from spec.shape import size
from spec.tensor import Tensor

from .core import EXACT, Fmt, register, sum_like

__all__: list[str] = []


def _scatter_add(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    x = xs[0]
    inner = size(x.shape[1:])
    terms: list[list[Any]] = [[] for _ in range(len(y.data))]
    for k, j in enumerate(attrs["indices"]):
        for e in range(inner):
            terms[j * inner + e].append(x.data[k * inner + e])
    return sum_like(f, terms)


for _name in ("select", "index_select", "gather"):
    register(name=_name, bound=EXACT)
register(name="scatter_add", bound=_scatter_add)
