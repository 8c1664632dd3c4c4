"""numba loop of the rigorous engine's ReLU back-substitution step (imported by
`runtime.verification.rigorous` only when numba is installed; the NumPy path there computes
the same values).

Invariants:
- Compiled with `fastmath=False` (no reassociation, no fused multiply-add contraction) and
  `cache=True` (`runtime.engine.compiled_kernels.JIT_OPTIONS`).
- Per element the coefficient is one rounded product fl(g * slope) (the upper slope for
  g < 0, else the lower one), as the NumPy path; the two row sums are plain float sums in
  index order, bounded by the caller with the dot-product error bound (valid for any
  order).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

from runtime.engine.compiled_kernels import JIT_OPTIONS

__all__ = ["relax_rows"]


@njit(**JIT_OPTIONS)
def relax_rows(
    G: Any, slope_lo: Any, slope_up: Any, icpt: Any, zu: Any
) -> Any:  # pragma: no cover - compiled
    """H = fl(G x slope) (B, r, n), |H|, P[b, i] = sum_j min(G, 0) icpt and Q[b, i] =
    sum_j |H| zu (computed sums). slope_lo is (B, 1, n) or (B, r, n); slope_up (B, 1, n);
    icpt, zu (B, n)."""
    B, r, n = G.shape
    per_row = slope_lo.shape[1] > 1
    H = np.empty((B, r, n))
    aH = np.empty((B, r, n))
    P = np.empty((B, r))
    Q = np.empty((B, r))
    for b in range(B):
        for i in range(r):
            si = i if per_row else 0
            p = 0.0
            q = 0.0
            for j in range(n):
                g = G[b, i, j]
                if g < 0:
                    h = g * slope_up[b, 0, j]
                    p += g * icpt[b, j]
                else:
                    h = g * slope_lo[b, si, j]
                a = abs(h)
                H[b, i, j] = h
                aH[b, i, j] = a
                q += a * zu[b, j]
            P[b, i] = p
            Q[b, i] = q
    return H, aH, P, Q
