"""Per-op laws of the norm family: layer_norm, batch_norm, instance_norm, group_norm,
batch_norm_eval, local_response_norm.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- The four statistics norms use the biased variance and eps = 1/100000 (unless given);
  batch_norm_eval takes given running statistics; local_response_norm is PyTorch's channel
  window. All are checked on free symbols and at fixed rational points, with the numeric
  fallback allowed for every obligation.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from .core import ALL_OBLIGATIONS, Arr, Case, arr, fixed, free, law

__all__: list[str] = []

_EPS = sympy.Rational(1, 100000)


def _ln_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, gamma, beta = v
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        mu = sympy.Add(*row) / len(row)
        var = sympy.Add(*[(r - mu) ** 2 for r in row]) / len(row)
        out[idx] = [
            (r - mu) / sympy.sqrt(var + _EPS) * g + bb
            for r, g, bb in zip(row, gamma, beta, strict=True)
        ]
    return arr(out)


law(
    op="layer_norm",
    cases=[
        Case(((2,), (2,), (2,)), free()),
        Case(((2, 2), (2,), (2,)), fixed({0: (1, -2, Fraction(1, 2), 3)})),
    ],
    definition_text="(x - mean)/sqrt(var + 1/100000)·γ + β over the last axis (biased variance)",
    derivative_text="jvp = the derivative of that expression (smooth: var + ε > 0)",
    definition=_ln_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)


def _bn_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, gamma, beta = v
    out = np.empty(x.shape, dtype=object)
    for c in range(x.shape[1]):
        vals = list(x[:, c].reshape(-1))
        mu = sympy.Add(*vals) / len(vals)
        var = sympy.Add(*[(t - mu) ** 2 for t in vals]) / len(vals)
        out[:, c] = (x[:, c] - mu) * (1 / sympy.sqrt(var + _EPS)) * gamma[c] + beta[c]
    return arr(out)


law(
    op="batch_norm",
    cases=[
        Case(((2, 1), (1,), (1,)), free()),
        Case(((2, 2, 1), (2,), (2,)), fixed({0: (1, -2, Fraction(1, 2), 3)})),
    ],
    definition_text=(
        "per channel c: (x - mean_c)/sqrt(var_c + 1/100000)·γ_c + β_c, statistics over the batch "
        "and spatial axes (biased variance)"
    ),
    derivative_text="jvp = the derivative of that expression (smooth: var + ε > 0)",
    definition=_bn_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)


def _gn_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    """Per sample n and group of C/G consecutive channels: mean and biased variance over
    the group's channels and spatial positions, then the per-channel affine."""
    x, gamma, beta = v
    c = x.shape[1]
    groups = c if a.get("num_groups") is None else int(a["num_groups"])
    eps = _EPS if a.get("eps") is None else sympy.Rational(a["eps"])
    out = np.empty(x.shape, dtype=object)
    per = c // groups
    for n in range(x.shape[0]):
        for g in range(groups):
            block = x[n, g * per : (g + 1) * per]
            vals = list(block.reshape(-1))
            mu = sympy.Add(*vals) / len(vals)
            var = sympy.Add(*[(t - mu) ** 2 for t in vals]) / len(vals)
            out[n, g * per : (g + 1) * per] = (block - mu) * (1 / sympy.sqrt(var + eps))
    shape = (c, *([1] * (x.ndim - 2)))
    return arr(out * gamma.reshape(shape) + beta.reshape(shape))


law(
    op="instance_norm",
    cases=[
        Case(((1, 1, 2), (1,), (1,)), free()),
        Case(
            ((2, 1, 2), (1,), (1,)),
            fixed({0: (1, 3, Fraction(1, 2), -2)}),
            {"eps": Fraction(1, 10)},
        ),
    ],
    definition_text=(
        "per sample n and channel c: (x - mean_nc)/sqrt(var_nc + eps)·γ_c + β_c, statistics "
        "over the spatial axes (biased variance; eps = 1/100000 unless given)"
    ),
    derivative_text="jvp = the derivative of that expression (smooth: var + eps > 0)",
    definition=_gn_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)

law(
    op="group_norm",
    cases=[
        Case(((1, 2), (2,), (2,)), free(), {"num_groups": 1}),
        Case(
            ((1, 4, 1), (4,), (4,)),
            fixed({0: (1, -2, Fraction(1, 2), 3)}),
            {"num_groups": 2},
        ),
    ],
    definition_text=(
        "per sample n and group of C/G consecutive channels: (x - mean)/sqrt(var + eps)·γ_c + "
        "β_c, statistics over the group's channels and spatial positions (biased variance)"
    ),
    derivative_text="jvp = the derivative of that expression (smooth: var + eps > 0)",
    definition=_gn_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)


def _bn_eval_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, mean, var, gamma, beta = v
    eps = _EPS if a.get("eps") is None else sympy.Rational(a["eps"])
    shape = (x.shape[1], *([1] * (x.ndim - 2)))
    den = arr(np.vectorize(lambda t: sympy.sqrt(t + eps), otypes=[object])(var))
    return arr(
        (x - mean.reshape(shape)) / den.reshape(shape) * gamma.reshape(shape) + beta.reshape(shape)
    )


law(
    op="batch_norm_eval",
    cases=[
        Case(((2, 1), (1,), (1,), (1,), (1,)), free({}, {}, {"positive": True})),
        Case(
            ((1, 2, 1, 1, 2), (2,), (2,), (2,), (2,)),
            fixed({2: (Fraction(1, 2), 3)}),
            {"eps": Fraction(1, 10)},
        ),
    ],
    definition_text="per channel c: (x - mean_c)/sqrt(var_c + eps)·γ_c + β_c with the given "
    "running statistics (any rank >= 2; eps = 1/100000 unless given)",
    derivative_text="jvp = the derivative of that expression (smooth: var + eps > 0)",
    definition=_bn_eval_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)


def _lrn_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    """PyTorch's window: channels c - size//2 .. c + (size-1)//2 within 0..C-1."""
    x = v[0]
    n, c = int(a["size"]), x.shape[1]
    alpha, beta = sympy.Rational(a.get("alpha", Fraction(1, 10000))), sympy.Rational(a["beta"])
    k = sympy.Rational(a.get("k", 1))
    out = np.empty(x.shape, dtype=object)
    for ch in range(c):
        lo, hi = max(ch - n // 2, 0), min(ch + (n - 1) // 2, c - 1)
        sq = sum((x[:, j] ** 2 for j in range(lo, hi + 1)), np.zeros_like(x[:, ch]))
        base = arr(k + alpha * sq / n)
        out[:, ch] = x[:, ch] / np.vectorize(lambda t: t**beta, otypes=[object])(base)
    return arr(out)


law(
    op="local_response_norm",
    cases=[
        Case(((1, 2, 1),), free(), {"size": 3, "alpha": 1, "beta": Fraction(3, 4), "k": 2}),
        Case(
            ((1, 3, 1),),
            fixed({0: (1, -2, Fraction(1, 2))}),
            {"size": 2, "alpha": Fraction(1, 2), "beta": 1, "k": 1},
        ),
    ],
    definition_text="x_c / (k + alpha/size·Σ x_j²)^beta over channels j from c - size//2 to "
    "c + (size-1)//2 within the channel axis (PyTorch's window)",
    derivative_text="jvp = the derivative of that expression (smooth: the base is >= k > 0)",
    definition=_lrn_def,
    conv_jvp="definition",
    numeric=ALL_OBLIGATIONS,
)
