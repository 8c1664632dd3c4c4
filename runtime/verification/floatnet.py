"""The network's binary64 image for search only: a forward pass with its gradient (the
adversarial search) and CROWN bounds in plain float64 (choosing input splits).

Invariants:
- Nothing here is trusted. The image is built from the exact stages (`network.stages`)
  rounded to binary64 and evaluated in numpy's own order; a point it finds is re-checked
  with the runtime (`predict`, ordered kernels) and exact Fractions before anyone reports
  it, and a bound it computes only decides which boxes to hand to the exact verifier.
- `FloatNet.build` returns None for a network with a stage it does not model (anything but
  chains of the affine stages, batch_norm (affine per element) and relu / leaky_relu).
- `grad` is the exact gradient of the image where it is differentiable, or, with `leak`,
  a surrogate direction (an inactive ReLU passes a fraction of the gradient back).
- `crown(lo, hi, C)` is CROWN with the adaptive lower slope (1 when u >= -l, else 0):
  per row of C, a lower bound of C . y over the box [lo, hi] and the linear coefficients on
  the input that give it (the split heuristic reads them).
- On a ReLU chain (`chain`: affine maps with plain ReLUs between), `split_bounds` is the
  sound engine's algorithm
  (`rigorous`: IBP intersected with CROWN, ReLU split signs clamping the pre-activation
  intervals) in plain float64, batched over domains, and `alpha_crown` the final rows'
  bound for given pre-activation intervals and lower slopes with its exact gradient in the
  slopes (reverse mode through the back-substitution, the sign pattern of the
  coefficients held fixed): ReLU branch and bound optimises slopes and picks splits with
  them, and only the rigorous engine's bound closes a branch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .network import AFFINE, attr, stages

__all__ = ["FloatNet", "ascend_slopes", "relax"]


def relax(l: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """ReLU relaxation on [l, u] (elementwise): (live, unstable, upper slope, upper
    intercept); a dead neuron has slope 0, a live one slope 1, an unstable one the chord."""
    live, unst = l >= 0, (l < 0) & (u > 0)
    den = np.where(unst, u - l, 1.0)
    up = np.where(live, 1.0, np.where(unst, u / den, 0.0))
    return live, unst, up, np.where(unst, -up * l, 0.0)


def _rows_matmul(lam: np.ndarray, W: np.ndarray) -> np.ndarray:
    """(B, m, n) @ (n, k) through one 2-D product."""
    B, m, n = lam.shape
    return (lam.reshape(B * m, n) @ W).reshape(B, m, W.shape[1])


def _affine(st: Any) -> tuple[np.ndarray, np.ndarray]:
    """(W, b) in binary64 of an affine or batch_norm stage."""
    if st.op in AFFINE:
        W = (st.windowed.float_dense() if st.windowed is not None
             else np.array(st.weight, dtype=np.float64))  # fmt: skip
        return W, np.array(st.bias, dtype=np.float64)
    g, b, m, v = (np.array(x, dtype=np.float64) for x in (st.weight[0], st.bias, st.mean, st.var))
    s = g / np.sqrt(v + float(st.eps))
    return np.diag(s), b - m * s


@dataclass
class FloatNet:
    """Alternating affine maps and activations: `layers[i]` is ("affine", W, b) or
    ("relu", slope) (slope: the negative side's, 0 for ReLU)."""

    layers: list[tuple[Any, ...]]

    @staticmethod
    def build(result: Any, in_shape: tuple[int, ...]) -> FloatNet | None:
        out: list[tuple[Any, ...]] = []
        for st in stages(result, in_shape):
            if st.inputs:
                return None
            if st.op in AFFINE or st.op == "batch_norm":
                W, b = _affine(st)
                if out and out[-1][0] == "affine":  # merge consecutive affine maps
                    W0, b0 = out.pop()[1:]
                    W, b = W @ W0, W @ b0 + b
                out.append(("affine", W, b))
            elif st.op in ("relu", "leaky_relu"):
                s = 0.0 if st.op == "relu" else float(attr(st, "negative_slope"))
                out.append(("relu", s))
            else:
                return None
        return FloatNet(out)

    @staticmethod
    def chain(Ws: list[np.ndarray], bs: list[np.ndarray]) -> FloatNet:
        """The ReLU chain of the affine maps (W, b) (binary64 values), ReLU between."""
        out: list[tuple[Any, ...]] = []
        for W, b in zip(Ws, bs, strict=True):
            out += [("affine", np.asarray(W, np.float64), np.asarray(b, np.float64)), ("relu", 0.0)]
        return FloatNet(out[:-1])

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Outputs for a batch of flat inputs (rows)."""
        for layer in self.layers:
            if layer[0] == "affine":
                x = x @ layer[1].T + layer[2]
            else:
                x = np.where(x > 0, x, layer[1] * x)
        return x

    def grad(
        self, x: np.ndarray, C: np.ndarray, leak: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per batch row b: (C[b] . y(x_b), its gradient in x_b); C is (batch, m). With
        `leak` > 0 an inactive ReLU passes that fraction of the gradient back (a search
        direction where the true gradient is 0; the value is unchanged)."""
        acts = []
        for layer in self.layers:
            acts.append(x)
            if layer[0] == "affine":
                x = x @ layer[1].T + layer[2]
            else:
                x = np.where(x > 0, x, layer[1] * x)
        val = (x * C).sum(axis=1)
        g = C
        for layer, a in zip(reversed(self.layers), reversed(acts), strict=True):
            slope = max(layer[1], leak) if layer[0] == "relu" else 0.0
            g = g @ layer[1] if layer[0] == "affine" else np.where(a > 0, g, slope * g)
        return val, g

    def crown(self, lo: np.ndarray, hi: np.ndarray, C: np.ndarray) -> tuple[np.ndarray, Any]:
        """Lower bounds of C . y on the box and the input coefficients of each row."""
        bounds: list[tuple[np.ndarray, np.ndarray] | None] = []
        for i, layer in enumerate(self.layers):
            if layer[0] == "relu":
                W = np.eye(self.layers[i - 1][1].shape[0])
                lb, _ = self._back(lo, hi, W, i, bounds)
                ub, _ = self._back(lo, hi, -W, i, bounds)
                bounds.append((lb, -ub))
            else:
                bounds.append(None)
        return self._back(lo, hi, C, len(self.layers), bounds)

    def _back(self, lo: np.ndarray, hi: np.ndarray, C: np.ndarray, upto: int, bounds: list) -> Any:
        """Lower bounds of C . (value after layer upto - 1) by back-substitution."""
        A, const = C, np.zeros(C.shape[0])
        for i in range(upto - 1, -1, -1):
            layer = self.layers[i]
            if layer[0] == "affine":
                const = const + A @ layer[2]
                A = A @ layer[1]
                continue
            lb, ub = bounds[i]
            s = layer[1]
            dead, live = ub <= 0, lb >= 0
            unst = ~dead & ~live
            den = np.where(unst, ub - lb, 1.0)
            up_slope = np.where(live, 1.0, np.where(dead, s, (ub - s * lb) / den))
            up_icpt = np.where(unst, ub - up_slope * ub, 0.0)
            lo_slope = np.where(live, 1.0, np.where(dead, s, np.where(ub >= -lb, 1.0, s)))
            pos, neg = np.maximum(A, 0), np.minimum(A, 0)
            const = const + neg @ up_icpt
            A = pos * lo_slope + neg * up_slope
        val = const + np.maximum(A, 0) @ lo + np.minimum(A, 0) @ hi
        return val, A

    def backsub(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        lam: np.ndarray,
        upto: int,
        pre: list[tuple[np.ndarray, np.ndarray]],
        alpha: list[np.ndarray] | None = None,
    ) -> tuple[np.ndarray, list[Any]]:
        """Lower bounds (B, m) of lam[b] . (value after layer upto - 1) over the box
        lo[b], hi[b] (B, n_in) by back-substitution on a ReLU chain, with pre[k] the
        intervals of the k-th ReLU's input and lower slopes alpha[k] (B, m, n) (None: the
        adaptive rule); and the tape `alpha_crown` differentiates."""
        B, m = lam.shape[:2]
        const = np.zeros((B, m))
        tape: list[Any] = []
        for i in range(upto - 1, -1, -1):
            layer = self.layers[i]
            if layer[0] == "affine":
                const = const + lam @ layer[2]
                tape.append(("affine", layer[1], layer[2]))
                lam = _rows_matmul(lam, layer[1])
                continue
            k = i // 2
            l, u = pre[k]
            live, unst, up, icpt = (v[:, None, :] for v in relax(l, u))
            a = (u >= -l).astype(np.float64)[:, None, :] if alpha is None else alpha[k]
            pos = lam >= 0
            S = np.where(pos, np.where(live, 1.0, np.where(unst, a, 0.0)), up)
            const = const + (np.minimum(lam, 0) * icpt).sum(axis=2)
            tape.append(("relu", k, lam, pos & unst, S, icpt))
            lam = lam * S
        x = np.where(lam > 0, lo[:, None, :], hi[:, None, :])
        tape.append(("input", x))
        return const + (lam * x).sum(axis=2), tape

    def alpha_crown(
        self,
        lo: np.ndarray,
        hi: np.ndarray,
        A: np.ndarray,
        pre: list[tuple[np.ndarray, np.ndarray]],
        alpha: list[np.ndarray],
    ) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray], np.ndarray]:
        """The bound (B, m) of the rows A (m, n_out), its gradient in each alpha[k]
        (B, m, n_k), per ReLU the rows' coefficients on its output (B, m, n_k), and per
        row the box vertex (B, m, n_in) where the bound's linear form is smallest."""
        B = lo.shape[0]
        lam0 = np.broadcast_to(A, (B, *A.shape)).copy()
        bound, tape = self.backsub(lo, hi, lam0, len(self.layers), pre, alpha)
        g = tape[-1][1]
        grads: list[Any] = [None] * len(pre)
        coef: list[Any] = [None] * len(pre)
        for op in reversed(tape[:-1]):
            if op[0] == "affine":
                g = _rows_matmul(g, op[1].T) + op[2]
            else:
                _, k, lam, mask, S, icpt = op
                grads[k] = np.where(mask, g * lam, 0.0)
                coef[k] = lam
                g = g * S + np.where(lam < 0, icpt, 0.0)
        return bound, grads, coef, tape[-1][1]

    def split_bounds(
        self, lo: np.ndarray, hi: np.ndarray, splits: list[np.ndarray]
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per ReLU, the (l, u) (B, n) of its input over the boxes (B, n_in): IBP
        intersected with CROWN (adaptive slopes), then clamped by the split signs."""
        pre: list[tuple[np.ndarray, np.ndarray]] = []
        xl, xu = lo, hi
        for i in range(0, len(self.layers) - 1, 2):
            W, b = self.layers[i][1], self.layers[i][2]
            Wp, Wn = np.maximum(W, 0), np.minimum(W, 0)
            zl, zu = xl @ Wp.T + xu @ Wn.T + b, xu @ Wp.T + xl @ Wn.T + b
            if pre:
                n = W.shape[0]
                eye = np.broadcast_to(np.vstack([np.eye(n), -np.eye(n)]), (lo.shape[0], 2 * n, n))
                cb, _ = self.backsub(lo, hi, eye.copy(), i + 1, pre)
                zl, zu = np.maximum(zl, cb[:, :n]), np.minimum(zu, -cb[:, n:])
            s = splits[len(pre)]
            zl, zu = np.where(s > 0, np.maximum(zl, 0), zl), np.where(s < 0, np.minimum(zu, 0), zu)
            pre.append((zl, zu))
            xl, xu = np.maximum(zl, 0), np.maximum(zu, 0)
        return pre


def ascend_slopes(
    fn: FloatNet,
    lo: np.ndarray,
    hi: np.ndarray,
    A: np.ndarray,
    pre: Any,
    alpha: list[np.ndarray],
    steps: int,
    lr: float,
    decay: float,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Lower slopes in [0, 1] (per relu stage (B, m, n)) raising the untrusted float
    alpha-CROWN bound of each row: projected Adam from `alpha` with step lr * decay**t, the
    best seen per (box or domain, row), with that bound (B, m)."""
    a = [x.copy() for x in alpha]
    best_a = [x.copy() for x in alpha]
    best = np.full(alpha[0].shape[:2], -np.inf)
    m1 = [np.zeros_like(x) for x in a]
    m2 = [np.zeros_like(x) for x in a]
    for t in range(1, steps + 2):
        bound, grads, _, _ = fn.alpha_crown(lo, hi, A, pre, a)
        better = bound > best
        best = np.where(better, bound, best)
        for k in range(len(a)):
            best_a[k][better] = a[k][better]
        if t > steps:
            break
        for k, g in enumerate(grads):
            m1[k] = 0.9 * m1[k] + 0.1 * g
            m2[k] = 0.999 * m2[k] + 0.001 * g * g
            step = (m1[k] / (1 - 0.9**t)) / (np.sqrt(m2[k] / (1 - 0.999**t)) + 1e-12)
            a[k] = np.clip(a[k] + lr * decay**t * step, 0.0, 1.0)
    return best_a, best
