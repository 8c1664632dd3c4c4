"""Per-op laws of the attention family: scaled_dot_product_attention, multi_head_attention,
mask_neg_inf.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- Attention fixes the inputs that feed the softmax comparisons at rational points and
  compares the JVP with the derivative of the independent (unshifted) definition in every
  direction, softmax being smooth; the numeric fallback is allowed for every obligation.
- mask_neg_inf is characterised: x where the mask keeps, -oo elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy

from spec.tensor import Tensor

from .core import ALL_OBLIGATIONS, Arr, Case, arr, fixed, free, law, rat

__all__: list[str] = []


def _mask_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Mapping[str, Any]) -> list[Any]:
    keep = np.broadcast_to(np.asarray(a["mask"]).reshape(a["mask_shape"]), v[0].shape)
    res: list[Any] = []
    for k, (x, y) in enumerate(zip(v[0].data, out.data, strict=True)):
        if keep.reshape(-1)[k]:
            res.append(sympy.sympify(y) - x)
        else:
            res.append(bool(y == -sympy.oo))
    return res


law(
    op="mask_neg_inf",
    cases=[
        Case(((3,),), free(), {"mask": (1, 0, 1), "mask_shape": (3,)}),
        Case(((2, 2),), free(), {"mask": (0, 1), "mask_shape": (2,)}),
        Case(((2,),), free(), {"mask": (1, 1), "mask_shape": (2,)}),
    ],
    definition_text="x where the (broadcast) mask is 1, -oo where it is 0",
    derivative_text=(
        "jvp = dx where mask = 1, 0 where mask = 0 (the masked value is the constant -oo)"
    ),
    characterize=_mask_char,
)


def _scale_for(d: int, a: Mapping[str, Any]) -> Any:
    if a.get("scale") is not None:
        return rat(a["scale"])
    with mpmath.workdps(60):
        return rat(Fraction(float(1 / mpmath.sqrt(d))))  # binary64 nearest 1/sqrt(d)


def _attend(q: Arr, k: Arr, v: Arr, a: Mapping[str, Any]) -> Arr:
    lq, lk = q.shape[-2], k.shape[-2]
    keep = np.ones((lq, lk), dtype=bool)
    if a.get("mask") is not None:
        keep &= np.asarray(a["mask"], dtype=bool).reshape(lq, lk)
    if a.get("causal"):
        keep &= np.tril(np.ones((lq, lk), dtype=bool))
    c = _scale_for(q.shape[-1], a)
    out = np.empty(
        (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), lq, v.shape[-1]), dtype=object
    )
    qb = np.broadcast_to(q, (*out.shape[:-2], *q.shape[-2:]))
    kb = np.broadcast_to(k, (*out.shape[:-2], *k.shape[-2:]))
    vb = np.broadcast_to(v, (*out.shape[:-2], *v.shape[-2:]))
    for idx in np.ndindex(*out.shape[:-2]):
        for i in range(lq):
            ws = [
                sympy.exp(c * sympy.Add(*(qb[idx][i] * kb[idx][j]))) if keep[i, j] else 0
                for j in range(lk)
            ]
            s = sympy.Add(*ws)
            for t in range(v.shape[-1]):
                out[idx][i, t] = sympy.Add(*[ws[j] * vb[idx][j, t] for j in range(lk)]) / s
    return arr(out)


law(
    op="scaled_dot_product_attention",
    cases=[
        Case(((1, 1), (2, 1), (2, 1)), fixed({0: (1,), 1: (2, -1)})),
        Case(((2, 1), (2, 1), (2, 1)), fixed({0: (1, Fraction(1, 2)), 1: (-1, 2)}), {"causal": 1}),
        Case(
            ((1, 2), (2, 2), (2, 1)),
            fixed({0: (1, 2), 1: (0, 1, 1, -1)}),
            {"mask": (0, 1), "scale": Fraction(1, 2)},
        ),
    ],
    definition_text=(
        "Σ_j w_j·v_j / Σ_j w_j with w_j = exp(c·⟨q_i, k_j⟩) over kept keys (mask, causal j <= i), "
        "c = scale or the binary64 nearest 1/sqrt(d) (no max-shift)"
    ),
    derivative_text=(
        "jvp = the derivative of that expression in q, k and v (softmax is smooth; masked keys "
        "contribute nothing)"
    ),
    definition=lambda v, a, e: _attend(v[0], v[1], v[2], a),
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)


def _mha_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    q_in, k_in, v_in, wq, wk, wv, wo = v
    heads, emb = a["heads"], q_in.shape[-1]
    dh = emb // heads

    def split(t: Arr) -> Arr:
        return np.swapaxes(t.reshape((*t.shape[:-1], heads, dh)), -2, -3)

    q, k, vv = split(q_in @ wq.T), split(k_in @ wk.T), split(v_in @ wv.T)
    o = _attend(q, k, vv, {"mask": a.get("mask"), "causal": a.get("causal")})
    o = np.swapaxes(o, -2, -3).reshape(q_in.shape)
    return arr(o @ wo.T)


law(
    op="multi_head_attention",
    cases=[
        Case(
            ((1, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2)),
            fixed({0: (1, -1), 1: (1, 0, 0, 2), 3: (1, 0, 0, 1), 4: (1, 1, 0, 1)}),
            {"heads": 2},
        ),
    ],
    definition_text=(
        "heads split on the last axis of x·wqᵀ, x·wkᵀ, x·wvᵀ; per head the attention above; heads "
        "merged and multiplied by woᵀ"
    ),
    derivative_text="jvp = the derivative of that expression in every input (smooth)",
    definition=_mha_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)
