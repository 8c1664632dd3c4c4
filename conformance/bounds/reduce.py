"""Fast-profile bounds of the reduce family.

Invariants:
- sum, reduce_sum over n terms: γ_n·Σ|x_i| (any summation order).
- reduce_max: 0 (the result is one of the inputs).
- cumsum: each output is a sum of its lane's prefix of k terms: γ_k·Σ|x_i| over that prefix.
- mean, reduce_mean, logsumexp, var, std are composites: no bound of their own; their
  primitives are checked after inlining.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spec.shape import ravel_index, unravel_index
from spec.tensor import Tensor

from .core import EXACT, Fmt, register, sum_like

__all__: list[str] = []


def _sum(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    return sum_like(f, [list(xs[0].data)])


def _reduce_sum(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    x, axis = xs[0], attrs["axis"]
    terms = []
    for flat in range(len(y.data)):
        o = unravel_index(flat, y.shape)
        terms.append(
            [x.data[ravel_index((*o[:axis], k, *o[axis:]), x.shape)] for k in range(x.shape[axis])]
        )
    return sum_like(f, terms)


register(name="sum", bound=_sum)
register(name="reduce_sum", bound=_reduce_sum)
register(name="reduce_max", bound=EXACT)


def _cumsum(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    """Output k of a lane is a sum of its prefix (k+1 terms, k when exclusive)."""
    x, d = xs[0], attrs["dim"]
    n = x.shape[d]
    if not x.data:
        return []
    lanes = np.moveaxis(np.arange(len(x.data)).reshape(x.shape), d, -1).reshape(-1, n)
    if attrs.get("reverse"):
        lanes = lanes[:, ::-1]
    terms: list[list[Any]] = [[] for _ in x.data]
    for lane in lanes.tolist():
        for k, pos in enumerate(lane):
            stop = k if attrs.get("exclusive") else k + 1
            terms[pos] = [x.data[p] for p in lane[:stop]]
    return sum_like(f, terms)


register(name="cumsum", bound=_cumsum)
