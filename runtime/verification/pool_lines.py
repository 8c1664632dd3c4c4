"""MaxPool2d's optimisable upper lines: for one output, max over its window W of inputs
x_i in [l_i, u_i] is at most sum_i lam_i x_i + c(lam) for every lam in [0, 1]^W, with

    c(lam) = max over j in W of ( (1 - lam_j) u_j - sum_{i in W, i != j} lam_i l_i ).

Derivation. h(x) = sum_i lam_i x_i + c is above max(x) on the box iff
c >= max over the box of (max_j x_j - sum_i lam_i x_i) = max over j of max over the box of
(x_j - sum_i lam_i x_i) (a maximum of maxima). For a fixed j the function is linear in x
with coefficient 1 - lam_j >= 0 on x_j and -lam_i <= 0 on x_i (i != j), so its maximum is
at x_j = u_j and x_i = l_i: (1 - lam_j) u_j - sum_{i != j} lam_i l_i. Hence c(lam) is the
least sound intercept for the slopes lam (no vertex enumeration). lam = 0 gives CROWN's
constant line max <= max_j u_j; lam = e_k gives max <= x_k + max(0, max_{j != k} u_j - l_k);
lam = s e_k with s = (u_k - u*) / (u_k - l_k) (u* = max_{j != k} u_j < u_k) is the chord
u* + s (x_k - l_k) of max(x_k, u*). max is exact in every format, so the same line holds
at both levels (with the level's intervals).

Invariants:
- `intercept` is exact (rationals in, rational out); the float helpers (`float_lines`)
  are the optimiser's image of it and are not trusted: CROWN recomputes the intercept
  exactly from the binary64 slopes the optimiser returns (each in [0, 1], exact dyadic
  rationals), and the certificate checker recomputes it on its own validated intervals.
- `Windows` holds, per output, the window's input indices padded to the widest window
  (`idx`, with `mask` False on padding), so rows of slopes are (outputs, widest window)
  arrays; `gather` / `scatter` move rows between a stage's outputs x window and its
  inputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["Windows", "float_lines", "intercept"]


def intercept(lam: Sequence[Any], lo: Sequence[Any], hi: Sequence[Any]) -> Any:
    """c(lam) of one window (see the module docstring), exact: lam, lo, hi per window input."""
    total = sum((a * b for a, b in zip(lam, lo, strict=True)), lo[0] * 0)
    return max((1 - a) * u - (total - a * lw) for a, lw, u in zip(lam, lo, hi, strict=True))


class Windows:
    """A max pooling's windows as padded index arrays over its inputs."""

    def __init__(self, windows: Sequence[Sequence[int]], n_in: int) -> None:
        width = max(len(w) for w in windows)
        self.idx = np.zeros((len(windows), width), dtype=np.int64)
        self.mask = np.zeros((len(windows), width), dtype=bool)
        for o, w in enumerate(windows):
            self.idx[o, : len(w)] = w
            self.mask[o, : len(w)] = True
        self.n_in = n_in

    def gather(self, v: np.ndarray) -> np.ndarray:
        """(..., n_in) -> (..., outputs, width): each window's values (0 on padding)."""
        return np.where(self.mask, v[..., self.idx], 0.0)

    def scatter(self, a: np.ndarray) -> np.ndarray:
        """(rows, outputs, width) -> (rows, n_in): the sum of each input's entries."""
        out = np.zeros((a.shape[0], self.n_in))
        for r in range(a.shape[0]):
            np.add.at(out[r], self.idx[self.mask], a[r][self.mask])
        return out


def float_lines(win: Windows, lam: np.ndarray, lo: np.ndarray, hi: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Float c(lam) per row and output, and its gradient with respect to lam
    (-u_j* at the maximising j*, -l_i elsewhere; 0 on padding)."""
    L, U = win.gather(lo), win.gather(hi)
    total = (lam * L).sum(axis=-1, keepdims=True)
    vals = np.where(win.mask, (1 - lam) * U - (total - lam * L), -np.inf)
    star = np.argmax(vals, axis=-1)
    c = np.take_along_axis(vals, star[..., None], axis=-1)[..., 0]
    grad = np.broadcast_to(np.where(win.mask, -L, 0.0), vals.shape).copy()
    ustar = np.take_along_axis(np.broadcast_to(U, vals.shape), star[..., None], axis=-1)
    np.put_along_axis(grad, star[..., None], -ustar, axis=-1)
    return c, grad
