"""Fast-profile bounds of the reduce family.

Invariants:
- sum, reduce_sum over n terms: γ_n·Σ|x_i| (any summation order).
- reduce_max: 0 (the result is one of the inputs).
- mean, reduce_mean, logsumexp, var, std are composites: no bound of their own; their
  primitives are checked after inlining.
"""

from __future__ import annotations

from typing import Any

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
