"""Per-op laws of the conv family: conv{1,2,3}d, conv_transpose{1,2,3}d.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- All are bilinear and checked on free symbols against explicit loops over taps
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


# --------------------------------------------------------------------------- 1-D and 3-D


def _ints(a: Mapping[str, Any], key: str, nd: int, default: int) -> tuple[int, ...]:
    v = a.get(key)
    if v is None:
        return (default,) * nd
    return tuple(int(t) for t in v) * (nd if len(v) == 1 else 1)


def _pads(a: Mapping[str, Any], nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    v = tuple(int(t) for t in a.get("padding") or (0,))
    v = v * nd if len(v) == 1 else v
    return (v, v) if len(v) == nd else (v[:nd], v[nd:])


def _batched_nd(v: Arr, nd: int) -> tuple[Arr, bool]:
    return (v[None], True) if v.ndim == nd + 1 else (v, False)


def _conv_nd_def(nd: int) -> Any:
    def definition(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
        x, single = _batched_nd(v[0], nd)
        w = v[1]
        s, d = _ints(a, "stride", nd, 1), _ints(a, "dilation", nd, 1)
        lo, hi = _pads(a, nd)
        groups = a.get("groups") or 1
        dims, ks = x.shape[2:], w.shape[2:]
        cout, cg = w.shape[:2]
        outs = [
            (n + p + q - dd * (k - 1) - 1) // ss + 1
            for n, p, q, dd, k, ss in zip(dims, lo, hi, d, ks, s, strict=True)
        ]
        y = np.full((x.shape[0], cout, *outs), sympy.Integer(0), dtype=object)
        for b, o, *r in np.ndindex(x.shape[0], cout, *outs):
            g = o // (cout // groups)
            acc = sympy.Integer(0)
            for c, *t in np.ndindex(cg, *ks):
                pos = [
                    ri * si - pi + ti * di
                    for ri, si, pi, ti, di in zip(r, s, lo, t, d, strict=True)
                ]
                if all(0 <= p_ < n for p_, n in zip(pos, dims, strict=True)):
                    acc += w[(o, c, *t)] * x[(b, g * cg + c, *pos)]
            y[(b, o, *r)] = acc + (v[2][o] if len(v) == 3 else 0)
        return arr(y[0] if single else y)

    return definition


def _conv_t_nd_def(nd: int) -> Any:
    def definition(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
        x, single = _batched_nd(v[0], nd)
        w = v[1]
        s, d = _ints(a, "stride", nd, 1), _ints(a, "dilation", nd, 1)
        op_ = _ints(a, "output_padding", nd, 0)
        lo, hi = _pads(a, nd)
        groups = a.get("groups") or 1
        cin, dims = x.shape[1], x.shape[2:]
        cog, ks = w.shape[1], w.shape[2:]
        cig = cin // groups
        outs = [
            (n - 1) * ss - p - q + dd * (k - 1) + oo + 1
            for n, ss, p, q, dd, k, oo in zip(dims, s, lo, hi, d, ks, op_, strict=True)
        ]
        y = np.full((x.shape[0], cog * groups, *outs), sympy.Integer(0), dtype=object)
        for b, c, *u in np.ndindex(x.shape[0], cin, *dims):  # scatter form
            g = c // cig
            for o, *t in np.ndindex(cog, *ks):
                r = [
                    ui * si - pi + ti * di
                    for ui, si, pi, ti, di in zip(u, s, lo, t, d, strict=True)
                ]
                if all(0 <= ri < m for ri, m in zip(r, outs, strict=True)):
                    y[(b, g * cog + o, *r)] += x[(b, c, *u)] * w[(c, o, *t)]
        if len(v) == 3:
            y = y + v[2].reshape((-1,) + (1,) * nd)
        return arr(y[0] if single else y)

    return definition


law(
    op="conv1d",
    cases=[
        Case(((1, 3), (1, 1, 2), (1,)), free()),
        Case(((2, 4), (2, 1, 2)), free(), {"groups": 2, "padding": (1,), "stride": (2,)}),
        Case(((1, 5), (1, 1, 2)), free(), {"dilation": (2,), "padding": (2, 0)}),
    ],
    definition_text="y[n,o,r] = Σ_{c,t} w[o,c,t]·x[n, g·C_in/G + c, r·s - p_begin + t·d] + b[o] "
    "over in-bounds taps (zero padding)",
    derivative_text="jvp = conv1d(dx, w) + conv1d(x, dw) + db (bilinear)",
    definition=_conv_nd_def(1),
)

law(
    op="conv3d",
    cases=[
        Case(((1, 2, 2, 2), (1, 1, 1, 2, 2), (1,)), free()),
        Case(((2, 1, 2, 3), (2, 1, 1, 1, 2)), free(), {"groups": 2, "stride": (1, 1, 2)}),
        Case(((1, 1, 2, 3), (1, 1, 1, 2, 2)), free(), {"padding": (0, 1, 0, 0, 0, 1)}),
    ],
    definition_text="y[n,o,r] = Σ_{c,t} w[o,c,t]·x[n, g·C_in/G + c, r·s - p_begin + t·d] + b[o] "
    "over in-bounds taps (r, t, s, d, p triples; zero padding)",
    derivative_text="jvp = conv3d(dx, w) + conv3d(x, dw) + db (bilinear)",
    definition=_conv_nd_def(3),
)

law(
    op="conv_transpose1d",
    cases=[
        Case(((1, 2), (1, 1, 2), (1,)), free()),
        Case(((2, 2), (2, 1, 2)), free(), {"groups": 2, "stride": (2,), "output_padding": (1,)}),
        Case(((1, 3), (1, 1, 3)), free(), {"padding": (1,), "dilation": (2,)}),
    ],
    definition_text="scatter form: y[n, g·C_out/G + o, u·s - p_begin + t·d] += x[n,c,u]·w[c,o,t] "
    "over in-range outputs, then + b",
    derivative_text="jvp = conv_transpose1d(dx, w) + conv_transpose1d(x, dw) + db (bilinear)",
    definition=_conv_t_nd_def(1),
)

law(
    op="conv_transpose3d",
    cases=[
        Case(((1, 1, 1, 2), (1, 1, 1, 1, 2), (1,)), free()),
        Case(((2, 1, 1, 2), (2, 1, 1, 2, 1)), free(), {"groups": 2, "stride": (1, 2, 1)}),
        Case(
            ((1, 1, 2, 1), (1, 1, 2, 1, 1)),
            free(),
            {"stride": (2, 1, 1), "output_padding": (1, 0, 0)},
        ),
    ],
    definition_text="scatter form: y[n, g·C_out/G + o, u·s - p_begin + t·d] += x[n,c,u]·w[c,o,t] "
    "over in-range outputs (per axis), then + b",
    derivative_text="jvp = conv_transpose3d(dx, w) + conv_transpose3d(x, dw) + db (bilinear)",
    definition=_conv_t_nd_def(3),
)
