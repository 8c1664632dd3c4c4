"""alpha-CROWN's slope optimiser: per objective row, the lower-line slopes of unstable ReLU
neurons, chosen by projected gradient ascent on CROWN's own lower bound (in binary64).

Invariants:
- Nothing here is trusted. A ReLU neuron whose interval [lo, hi] straddles 0 (lo < 0 < hi)
  is "free": every line y = a x with 0 <= a <= 1 lies below ReLU on the whole real line,
  so any slope the optimiser returns in [0, 1] gives a valid relaxation. The returned slopes
  are binary64 values clipped to [0, 1] (so exact dyadic rationals in [0, 1]); the caller
  recomputes the bound with them in exact arithmetic (`crown.Crown.backward`), and the
  certificate checker validates each slope as a relaxation on its neuron's interval.
- The objective is the float64 image of the exact backward pass: the same stages, the
  same relaxations (aL, cL, aU, cU) except the free slopes, the same level-2 error terms,
  the same concretisation (over the box, or over a LayerNorm's output interval where the
  pass stops). Its gradient is written out by hand (reverse mode over the recorded rows).
- Optimisation: Adam (LR, ITERS, step decay DECAY) from CROWN's own slopes, keeping per row
  the best slopes seen (by the float bound), so the result is never worse than CROWN's
  start in the float objective; the exact recomputation decides what is certified.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gmpy2 import mpq

from .network import AFFINE

__all__ = ["DECAY", "ITERS", "LR", "Chain", "optimise"]

ITERS = 50
LR = 0.3
DECAY = 0.93


class Chain:
    """The float64 image of one CROWN object's backward pass (built once per Crown)."""

    def __init__(self, cr: Any) -> None:
        self.cr = cr
        self.W: dict[int, np.ndarray] = {}
        self.b: dict[int, np.ndarray] = {}
        self.e: dict[int, np.ndarray] = {}
        self.rl: dict[int, np.ndarray] = {}
        self.free: dict[int, np.ndarray] = {}
        self._box: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))

    def sync(self, t: int) -> None:
        """Float copies of the stages below t (relaxations appear as the forward pass runs)."""
        cr = self.cr
        for s in range(1, t + 1):
            st = cr.stages[s - 1]
            if st.op in AFFINE and s not in self.W and s in cr.err:
                self.W[s] = np.array([[float(w) for w in r] for r in cr.W[s]], dtype=np.float64)
                self.b[s] = np.array([float(v) for v in st.bias], dtype=np.float64)
                self.e[s] = np.array([float(v) for v in cr.err[s]], dtype=np.float64)
            elif s in cr.relax and s not in self.rl:
                self.rl[s] = np.array([[float(v) for v in r] for r in cr.relax[s]])
                if st.op == "relu":
                    lo = np.array([float(x[0]) for x in cr.ivs[s - 1]])
                    hi = np.array([float(x[1]) for x in cr.ivs[s - 1]])
                    self.free[s] = (lo < 0) & (hi > 0)

    def trace(
        self, C: np.ndarray, t: int, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, list[tuple[int, np.ndarray]], np.ndarray, bool]:
        """The float pass: the lower bounds of C @ z_t, the rows entering every stage crossed
        (stage, rows), the rows at the bottom, and whether the bottom is the input box (not
        a LayerNorm where the pass stops)."""
        cr = self.cr
        lam, c = C, np.zeros(C.shape[0])
        seen: list[tuple[int, np.ndarray]] = []
        box, at_input = cr.ivs[0], True
        for s in range(t, 0, -1):
            op = cr.stages[s - 1].op
            if op == "layer_norm":
                box, at_input = cr.ivs[s], False
                break
            seen.append((s, lam))
            if op in AFFINE:
                c = c + lam @ self.b[s] - np.abs(lam) @ self.e[s]
                lam = lam @ self.W[s]
            else:
                aL, cL, aU, cU = self._lines(s, alpha)
                pos = lam >= 0
                c = c + np.where(pos, lam * cL, lam * cU).sum(axis=1)
                lam = np.where(pos, lam * aL, lam * aU)
        lo = np.array([float(x[0]) for x in box])
        hi = np.array([float(x[1]) for x in box])
        bound = c + np.where(lam >= 0, lam * lo, lam * hi).sum(axis=1)
        self._box = (lo, hi)
        return bound, seen, lam, at_input

    def run(
        self, C: np.ndarray, t: int, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """The float lower bounds of C @ z_t and their gradients with respect to alpha."""
        bound, seen, lam, _ = self.trace(C, t, alpha)
        lo, hi = self._box
        G = np.where(lam >= 0, lo, hi)
        grads: dict[int, np.ndarray] = {}
        for s, lam_s in reversed(seen):
            if self.cr.stages[s - 1].op in AFFINE:
                G = self.b[s] - np.sign(lam_s) * self.e[s] + G @ self.W[s].T
            else:
                aL, cL, aU, cU = self._lines(s, alpha)
                pos = lam_s >= 0
                if s in alpha:
                    grads[s] = np.where(pos & self.free[s], lam_s * G, 0.0)
                G = np.where(pos, aL * G + cL, aU * G + cU)
        return bound, grads

    def _lines(self, s: int, alpha: dict[int, np.ndarray]) -> tuple[Any, Any, Any, Any]:
        r = self.rl[s]
        aL = alpha[s] if s in alpha else r[:, 0]
        return aL, r[:, 1], r[:, 2], r[:, 3]


def optimise(cr: Any, C: list[list[Any]], t: int) -> dict[int, list[list[Any]]] | None:
    """Per row of C: slopes (exact, in [0, 1]) for every ReLU stage below t with a free
    neuron, chosen to raise the row's lower bound of C @ z_t; None when no neuron is free."""
    ch: Chain = cr.chain
    ch.sync(t)
    k = len(C)
    starts = {
        s: np.repeat(ch.rl[s][None, :, 0], k, axis=0) for s in ch.free if s < t and ch.free[s].any()
    }
    if not starts:
        return None
    Cf = np.array([[float(v) for v in r] for r in C], dtype=np.float64)
    alpha = {s: a.copy() for s, a in starts.items()}
    best_b, _ = ch.run(Cf, t, alpha)
    best = {s: a.copy() for s, a in alpha.items()}
    m1 = {s: np.zeros_like(a) for s, a in alpha.items()}
    m2 = {s: np.zeros_like(a) for s, a in alpha.items()}
    lr = LR
    for it in range(1, ITERS + 1):
        _, g = ch.run(Cf, t, alpha)
        for s in alpha:
            m1[s] = 0.9 * m1[s] + 0.1 * g[s]
            m2[s] = 0.999 * m2[s] + 0.001 * g[s] * g[s]
            step = (m1[s] / (1 - 0.9**it)) / (np.sqrt(m2[s] / (1 - 0.999**it)) + 1e-12)
            upd = np.clip(alpha[s] + lr * step, 0.0, 1.0)
            alpha[s] = np.where(ch.free[s][None, :], upd, starts[s])
        lr *= DECAY
        b, _ = ch.run(Cf, t, alpha)
        better = np.isfinite(b) & (b > best_b)
        if better.any():
            best_b = np.where(better, b, best_b)
            for s in alpha:
                best[s][better] = alpha[s][better]
    return {s: [[mpq(float(v)) for v in row] for row in a] for s, a in best.items()}
