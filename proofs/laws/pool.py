"""Per-op laws of the pool family: avg_pool2d, max_pool2d.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- avg_pool2d is linear (free symbols; zero padding counted in the divisor).
- max_pool2d uses strict chains (smooth) plus ties (convention: the first maximal in-bounds
  element in row-major window order gets the whole tangent); padding is -oo.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from .core import Arr, Case, arr, chain, first_max, free, law, pair, pattern, vmax

__all__: list[str] = []


def _windows(x: Arr, a: Mapping[str, Any]) -> tuple[Arr, list[list[list[tuple[Any, ...]]]]]:
    """(x as (B, H, W), per output (r, q) the in-bounds (b-free) positions (ih, iw))."""
    kh, kw = pair(a, "kernel_size", (1, 1))
    sh, sw = pair(a, "stride", (kh, kw))
    ph, pw = pair(a, "padding", (0, 0))
    dh, dw = pair(a, "dilation", (1, 1))
    h, w = x.shape[-2:]
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    wins = [
        [
            [
                (r * sh - ph + i * dh, q * sw - pw + j * dw)
                for i in range(kh)
                for j in range(kw)
                if 0 <= r * sh - ph + i * dh < h and 0 <= q * sw - pw + j * dw < w
            ]
            for q in range(ow)
        ]
        for r in range(oh)
    ]
    return x.reshape(-1, h, w), wins


def _avg_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    kh, kw = pair(a, "kernel_size", (1, 1))
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        out[b, r, q] = sympy.Add(*[x[b, i, j] for i, j in wins[r][q]]) / (kh * kw)
    return arr(out.reshape((*v[0].shape[:-2], oh, ow)))


law(
    op="avg_pool2d",
    cases=[
        Case(((1, 2, 2),), free(), {"kernel_size": (2, 2)}),
        Case(((1, 3, 3),), free(), {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)}),
        Case(((2, 1, 2, 3),), free(), {"kernel_size": (1, 2)}),
    ],
    definition_text="Σ of the in-bounds window elements / (kh·kw) (zero padding counted)",
    derivative_text="jvp = avg_pool2d(dx) (linear)",
    definition=_avg_def,
)


def _max_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        vals = [x[b, i, j] for i, j in wins[r][q]]
        m = vals[0]
        for w in vals[1:]:
            m = vmax(m, w)[()]
        out[b, r, q] = m
    return arr(out.reshape((*v[0].shape[:-2], oh, ow)))


def _max_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    dx = d[0].reshape(x.shape)
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        taps = wins[r][q]
        i, j = taps[first_max([x[b, i, j] for i, j in taps])]
        out[b, r, q] = dx[b, i, j]
    return arr(out.reshape((*v[0].shape[:-2], oh, ow)))


_ORDER9 = (4, 1, 7, 2, 6, 3, 0, 8, 5)

law(
    op="max_pool2d",
    cases=[
        Case(((1, 3, 3),), chain(*_ORDER9), {"kernel_size": (2, 2), "stride": (1, 1)}),
        Case(((1, 3, 3),), chain(*_ORDER9), {"kernel_size": (2, 2), "padding": (1, 1)}),
        Case(((1, 2, 2),), pattern(("at", 1)), {"kernel_size": (2, 2)}),
        Case(
            ((1, 2, 3),),
            pattern(("at", 0), ("at", 2), ("at", 2)),
            {"kernel_size": (1, 3), "padding": (0, 1), "stride": (1, 1)},
        ),
    ],
    definition_text=(
        "the maximum of the in-bounds window elements (-oo padding), max as (a + b + |a - b|)/2"
    ),
    derivative_text=(
        "jvp = dx at the window's arg-max (strict maxima); at ties the first maximal in-bounds "
        "element in row-major window order gets the whole tangent"
    ),
    definition=_max_def,
    conv_jvp=_max_conv,
)
