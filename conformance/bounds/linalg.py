"""Fast-profile bounds of the linalg family.

Invariants:
- matmul (k terms per output): γ_{k+1}·Σ|a_p·b_p| + (k+1)·η, the products exact (in `HP`),
  over the operands as the spec broadcasts them (`spec.ops.matmul_operands`).
- linear (k terms + bias): γ_{k+1}·(Σ|w_p·x_p| + |bias|) + (k+1)·η.
"""

from __future__ import annotations

from typing import Any

import numpy

from spec.ops import matmul_operands
from spec.shape import ravel_index, size, unravel_index
from spec.tensor import Tensor

from .core import HP, Fmt, register, sum_like

__all__: list[str] = []


def _products(a: Tensor, b: Tensor) -> list[list[Any]]:
    """Per output element of batched a @ b, the exact products a[i,p]*b[p,j] (as HP)."""
    A, B = matmul_operands(
        [a, b],
        (
            *numpy.broadcast_shapes(a.shape[:-2], b.shape[:-2]),
            a.shape[-2],
            b.shape[-1],
        ),
    )
    k = A.shape[-1]
    out_shape = (*A.shape[:-2], A.shape[-2], B.shape[-1])
    terms = []
    for flat in range(size(out_shape)):
        idx = unravel_index(flat, out_shape)
        bt, i, j = idx[:-2], idx[-2], idx[-1]
        terms.append(
            [
                HP.mul(
                    A.data[ravel_index((*bt, i, p), A.shape)],
                    B.data[ravel_index((*bt, p, j), B.shape)],
                )
                for p in range(k)
            ]
        )
    return terms


def _matmul(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    terms = _products(xs[0], xs[1])
    k = xs[0].shape[-1]
    return sum_like(f, terms, extra_eta=k + 1, gamma_n=k + 1)


def _linear(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    x, w, b = xs
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    terms = []
    for r in range(rows):
        for i in range(out_dim):
            ts = [HP.mul(w.data[i * n + j], x.data[r * n + j]) for j in range(n)]
            terms.append([*ts, b.data[i]])
    return sum_like(f, terms, extra_eta=n + 1, gamma_n=n + 1)


register(name="matmul", bound=_matmul)
register(name="linear", bound=_linear)
