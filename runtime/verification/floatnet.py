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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .network import AFFINE, attr, stages

__all__ = ["FloatNet"]


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
