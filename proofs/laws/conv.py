"""Per-op laws of the conv family: conv2d, conv_transpose2d.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- Both are bilinear and checked on free symbols against explicit loops over taps
  (gather form for conv2d, scatter form for conv_transpose2d), zero padding, stride,
  dilation, groups and output padding included.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import sympy

from .core import Arr, Case, arr, free, law, pair

__all__: list[str] = []


def _batched(v: Arr) -> tuple[Arr, bool]:
    return (v[None], True) if v.ndim == 3 else (v, False)


def _conv_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, single = _batched(v[0])
    w = v[1]
    sh, sw = pair(a, "stride", (1, 1))
    ph, pw = pair(a, "padding", (0, 0))
    dh, dw = pair(a, "dilation", (1, 1))
    groups = a.get("groups") or 1
    n, _, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.full((n, cout, oh, ow), sympy.Integer(0), dtype=object)
    for b, o, r, q in np.ndindex(n, cout, oh, ow):
        g = o // (cout // groups)
        acc = sympy.Integer(0)
        for c, i, j in np.ndindex(cg, kh, kw):
            ih, iw = r * sh - ph + i * dh, q * sw - pw + j * dw
            if 0 <= ih < h and 0 <= iw < wd:
                acc += w[o, c, i, j] * x[b, g * cg + c, ih, iw]
        y[b, o, r, q] = acc + (v[2][o] if len(v) == 3 else 0)
    return arr(y[0] if single else y)


law(
    op="conv2d",
    cases=[
        Case(((1, 3, 3), (1, 1, 2, 2), (1,)), free()),
        Case(((2, 2, 3), (2, 1, 2, 2)), free(), {"padding": (1, 0), "groups": 2}),
        Case(((1, 1, 3, 3), (1, 1, 2, 2)), free(), {"stride": (2, 1), "padding": (1, 1)}),
        Case(((1, 3, 3), (1, 1, 2, 2)), free(), {"dilation": (2, 1)}),
    ],
    definition_text=(
        "y[n,o,r,q] = Σ_{c,i,j} w[o,c,i,j]·x[n, g·C_in/G + c, r·s - p + i·d, q·s - p + j·d] + b[o] "
        "over in-bounds taps (zero padding), g the group of o"
    ),
    derivative_text="jvp = conv2d(dx, w) + conv2d(x, dw) + db (bilinear)",
    definition=_conv_def,
)


def _conv_t_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, single = _batched(v[0])
    w = v[1]
    sh, sw = pair(a, "stride", (1, 1))
    ph, pw = pair(a, "padding", (0, 0))
    dh, dw = pair(a, "dilation", (1, 1))
    oph, opw = pair(a, "output_padding", (0, 0))
    groups = a.get("groups") or 1
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    y = np.full((n, cog * groups, oh, ow), sympy.Integer(0), dtype=object)
    for b, c, ih, iw in np.ndindex(n, cin, h, wd):  # scatter form: each input feeds taps
        g = c // cig
        for o, i, j in np.ndindex(cog, kh, kw):
            r, q = ih * sh - ph + i * dh, iw * sw - pw + j * dw
            if 0 <= r < oh and 0 <= q < ow:
                y[b, g * cog + o, r, q] += x[b, c, ih, iw] * w[c, o, i, j]
    if len(v) == 3:
        y = y + v[2].reshape(-1, 1, 1)
    return arr(y[0] if single else y)


law(
    op="conv_transpose2d",
    cases=[
        Case(((1, 2, 2), (1, 1, 2, 2), (1,)), free()),
        Case(((2, 1, 2), (2, 1, 1, 2)), free(), {"groups": 2, "stride": (2, 1)}),
        Case(
            ((1, 1, 2, 1), (1, 1, 2, 1)),
            free(),
            {"stride": (2, 2), "padding": (1, 0), "output_padding": (1, 1)},
        ),
    ],
    definition_text=(
        "scatter form: y[n, g·C_out/G + o, ih·s - p + i·d, iw·s - p + j·d] += "
        "x[n,c,ih,iw]·w[c,o,i,j] over in-range outputs, then + b"
    ),
    derivative_text="jvp = conv_transpose2d(dx, w) + conv_transpose2d(x, dw) + db (bilinear)",
    definition=_conv_t_def,
)
