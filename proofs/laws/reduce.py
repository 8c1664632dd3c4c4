"""Per-op laws of the reduce family: sum, reduce_sum, mean, reduce_mean, reduce_max,
logsumexp, var, std, cumsum (linear, free symbols: np.cumsum).

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- sum, reduce_sum, mean and reduce_mean are linear and checked on free symbols, empty
  tensors included for sum and reduce_sum.
- reduce_max uses row orders and strict chains (smooth) plus ties (convention: the first
  maximal element gets the whole tangent and cotangent).
- var is a polynomial (free symbols); std and logsumexp use row orders (std's variance is
  then positive; logsumexp's max decided) and a constant lane (std: sqrt's 0) and a tie
  (logsumexp: the detached shift keeps the true derivative) as conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from .core import Arr, Case, arr, chain, first_max, fixed, free, law, rows, ufunc, unary_free, vmax

__all__: list[str] = []

law(
    op="sum",
    cases=unary_free(((), (3,), (2, 3), (2, 2, 2), (0,))),
    definition_text="Σ of all elements (0 for an empty tensor)",
    derivative_text="jvp = Σ dx (linear)",
    definition=lambda v, a, e: arr(sympy.Add(*v[0].reshape(-1))),
)

law(
    op="reduce_sum",
    cases=[
        Case(((2, 3),), free(), {"axis": 0}),
        Case(((2, 3),), free(), {"axis": 1}),
        Case(((2, 3, 2),), free(), {"axis": 1}),
        Case(((3,),), free(), {"axis": 0}),
        Case(((2, 0),), free(), {"axis": 1}),
    ],
    definition_text="NumPy sum over the axis",
    derivative_text="jvp = reduce_sum(dx) (linear)",
    definition=lambda v, a, e: (
        arr(v[0].sum(axis=a["axis"]))
        if v[0].size
        else arr(np.zeros(v[0].shape[: a["axis"]] + v[0].shape[a["axis"] + 1 :], dtype=object) * 0)
    ),
)

law(
    op="mean",
    cases=unary_free(((), (3,), (2, 3), (2, 1, 2))),
    definition_text="Σ x / size(x)",
    derivative_text="jvp = mean(dx) (linear)",
    definition=lambda v, a, e: arr(sympy.Add(*v[0].reshape(-1)) / v[0].size),
)

law(
    op="reduce_mean",
    cases=[
        Case(((2, 3),), free(), {"axis": 0}),
        Case(((2, 3),), free(), {"axis": 1}),
        Case(((2, 2, 2),), free(), {"axis": 2}),
        Case(((3,),), free(), {"axis": 0}),
    ],
    definition_text="NumPy sum over the axis divided by the axis length",
    derivative_text="jvp = reduce_mean(dx) (linear)",
    definition=lambda v, a, e: arr(v[0].sum(axis=a["axis"]) / v[0].shape[a["axis"]]),
)


def _rmax_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = np.moveaxis(v[0], a["axis"], -1)
    out = np.empty(x.shape[:-1], dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        m = x[idx][0]
        for w in x[idx][1:]:
            m = vmax(m, w)[()]
        out[idx] = m
    return arr(out)


def _rmax_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, dx = np.moveaxis(v[0], a["axis"], -1), np.moveaxis(d[0], a["axis"], -1)
    out = np.empty(x.shape[:-1], dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx] = dx[idx][first_max(list(x[idx]))]
    return arr(out)


def _rmax_conv_vjp(v: list[Arr], g: Arr, a: Mapping[str, Any], e: Any) -> list[Arr]:
    x = np.moveaxis(v[0], a["axis"], -1)
    out = np.full(x.shape, sympy.Integer(0), dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx][first_max(list(x[idx]))] = g[idx]
    return [arr(np.moveaxis(out, -1, a["axis"]))]


law(
    op="reduce_max",
    cases=[
        Case(((3,),), rows("inc"), {"axis": 0}),
        Case(((3,),), rows("mid"), {"axis": 0}),
        Case(((3,),), rows("tie"), {"axis": 0}),
        Case(((2, 3),), rows("dec", "tie"), {"axis": 1}),
        Case(((2, 2),), chain(1, 2, 3, 0), {"axis": 0}),
    ],
    definition_text="the maximum along the axis, max written as (a + b + |a - b|)/2",
    derivative_text=(
        "jvp = dx at the arg-max (smooth where the maximum is strict); at ties the whole tangent "
        "(and cotangent) goes to the first maximal element"
    ),
    definition=_rmax_def,
    conv_jvp=_rmax_conv,
    conv_vjp=_rmax_conv_vjp,
)


def _var_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = v[0]
    d = a["dim"]
    n = x.shape[d]
    mu = x.sum(axis=d, keepdims=True) / n
    return arr(((x - mu) ** 2).sum(axis=d) / (n - a["correction"]))


def _lse_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = np.moveaxis(v[0], a["dim"], -1)
    out = np.empty(x.shape[:-1], dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx] = sympy.log(sympy.Add(*[sympy.exp(w) for w in x[idx]]))
    return arr(out)


law(
    op="var",
    cases=[
        Case(((2, 3),), free(), {"dim": 1, "correction": 1}),
        Case(((2, 3),), free(), {"dim": 0, "correction": 0}),
        Case(((3,),), free(), {"dim": 0, "correction": 2}),
    ],
    definition_text="Σ (x − mean)² along dim, divided by n − correction",
    derivative_text="jvp = 2·Σ (x − mean)·dx / (n − correction) (the mean's term sums to 0)",
    definition=_var_def,
)

law(
    op="std",
    cases=[
        Case(((3,),), rows("inc"), {"dim": 0, "correction": 1}),
        Case(((2, 3),), rows("dec", "mid"), {"dim": 1, "correction": 0}),
        Case(((3,),), fixed({0: (2, 2, 2)}), {"dim": 0, "correction": 1}, kind="convention"),
    ],
    definition_text="sqrt(var(x, dim, correction))",
    derivative_text=(
        "jvp = Σ (x − mean)·dx / ((n − correction)·std) where the variance is positive; on a "
        "constant lane (variance 0) sqrt's convention gives 0"
    ),
    definition=lambda v, a, e: ufunc(sympy.sqrt, 1)(_var_def(v, a, e)),
    conv_jvp=lambda v, d, a, e: arr(
        np.zeros(v[0].shape[: a["dim"]] + v[0].shape[a["dim"] + 1 :], dtype=object) * 0
    ),
)

law(
    op="logsumexp",
    cases=[
        Case(((3,),), rows("inc"), {"dim": 0}),
        Case(((3,),), rows("mid"), {"dim": 0}),
        Case(((2, 3),), rows("dec", "mid"), {"dim": 1}),
        Case(((3,),), rows("tie"), {"dim": 0}),
    ],
    definition_text="log Σ exp(x) along dim",
    derivative_text=(
        "jvp = Σ softmax(x)·dx along dim; the max shift is detached, so at a tie of the "
        "maximum the derivative is still the true one (compared with the definition's)"
    ),
    definition=_lse_def,
    conv_jvp="definition",
)


def _cumsum_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    """np.cumsum along dim of x (reversed first and after when reverse); exclusive shifts
    the sums by one, 0 first."""
    d = a["dim"]
    x = np.flip(v[0], d) if a.get("reverse") else v[0]
    y = np.cumsum(x, axis=d) if x.shape[d] else x
    if a.get("exclusive") and x.shape[d]:
        head = np.zeros_like(np.take(y, [0], axis=d))
        head[...] = sympy.Integer(0)
        y = np.concatenate([head, np.take(y, range(x.shape[d] - 1), axis=d)], axis=d)
    return arr(np.flip(y, d) if a.get("reverse") else y)


law(
    op="cumsum",
    cases=[
        Case(((2, 3),), free(), {"dim": 1}),
        Case(((3, 2),), free(), {"dim": 0, "exclusive": True}),
        Case(((2, 3),), free(), {"dim": 1, "reverse": True}),
        Case(((2, 3),), free(), {"dim": 1, "exclusive": True, "reverse": True}),
        Case(((1, 0),), free(), {"dim": 1}),
    ],
    definition_text="np.cumsum along dim (reverse: of the reversed lane, reversed back; "
    "exclusive: shifted by one with 0 first); inclusive, the last element is the lane's sum",
    derivative_text="jvp = cumsum(dx) (linear); the VJP is the reverse cumulative sum",
    definition=_cumsum_def,
)
