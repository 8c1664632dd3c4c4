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


# --------------------------------------------------------------------------- N-d, ceil mode


def _ints(a: Mapping[str, Any], key: str, nd: int, default: tuple[int, ...]) -> tuple[int, ...]:
    v = a.get(key)
    if not v:
        return default
    return tuple(int(t) for t in v) * (nd if len(v) == 1 else 1)


def _nd_windows(v: Arr, a: Mapping[str, Any], nd: int) -> tuple[Arr, list[Any], list[Any]]:
    """(x as (B, *dims), outputs, per output its in-bounds taps and its PyTorch divisor)."""
    dims = v.shape[-nd:]
    ks = _ints(a, "kernel_size", nd, (1,) * nd)
    s = _ints(a, "stride", nd, ks)
    d = _ints(a, "dilation", nd, (1,) * nd)
    p = _ints(a, "padding", nd, (0,) * nd)
    lo, hi = (p, p) if len(p) == nd else (p[:nd], p[nd:])
    outs = []
    for n, k, ss, pl, ph, dd in zip(dims, ks, s, lo, hi, d, strict=True):
        span = n + pl + ph - dd * (k - 1) - 1
        o = (span + (ss - 1 if a.get("ceil_mode") else 0)) // ss + 1
        if a.get("ceil_mode") and (o - 1) * ss >= n + pl:
            o -= 1
        outs.append(o)
    wins = []
    for r in np.ndindex(*outs):
        starts = [ri * si - pi for ri, si, pi in zip(r, s, lo, strict=True)]
        taps = []
        for t in np.ndindex(*ks):
            pos = tuple(st + ti * di for st, ti, di in zip(starts, t, d, strict=True))
            if all(0 <= q < n for q, n in zip(pos, dims, strict=True)):
                taps.append(pos)
        if a.get("divisor_override"):
            div = int(a["divisor_override"])
        elif a.get("count_include_pad") is False:
            div = len(taps)
        else:
            div = 1
            for st, k, n, ph in zip(starts, ks, dims, hi, strict=True):
                div *= min(st + k, n + ph) - st
        wins.append((taps, div))
    return v.reshape(-1, *dims), outs, wins


def _nd_avg(nd: int) -> Any:
    def definition(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
        x, outs, wins = _nd_windows(v[0], a, nd)
        out = np.empty((x.shape[0], len(wins)), dtype=object)
        for b in range(x.shape[0]):
            for k, (taps, div) in enumerate(wins):
                out[b, k] = sympy.Add(*[x[(b, *t)] for t in taps]) / div
        return arr(out.reshape((*v[0].shape[:-nd], *outs)))

    return definition


def _nd_max(nd: int, tangent: bool) -> Any:
    def definition(v: list[Arr], *rest: Any) -> Arr:
        a = rest[-2]
        x, outs, wins = _nd_windows(v[0], a, nd)
        dx = rest[0][0].reshape(x.shape) if tangent else None
        out = np.empty((x.shape[0], len(wins)), dtype=object)
        for b in range(x.shape[0]):
            for k, (taps, _) in enumerate(wins):
                vals = [x[(b, *t)] for t in taps]
                if tangent:
                    out[b, k] = dx[(b, *taps[first_max(vals)])]
                else:
                    m = vals[0]
                    for w in vals[1:]:
                        m = vmax(m, w)[()]
                    out[b, k] = m
        return arr(out.reshape((*v[0].shape[:-nd], *outs)))

    return definition


_AVG_TEXT = (
    "Σ of the in-bounds window elements / divisor: divisor_override, else the window clipped "
    "to the end padding (count_include_pad) or the in-bounds count; ceil mode per PyTorch"
)
_MAX_TEXT = "the maximum of the in-bounds window elements (-oo padding); ceil mode per PyTorch"
_MAX_DERIV = (
    "jvp = dx at the window's arg-max (strict maxima); at ties the first maximal in-bounds "
    "element in row-major window order gets the whole tangent"
)

law(
    op="avg_pool1d",
    cases=[
        Case(((1, 5),), free(), {"kernel_size": (2,), "ceil_mode": True}),
        Case(
            ((2, 5),),
            free(),
            {
                "kernel_size": (3,),
                "stride": (2,),
                "padding": (1,),
                "ceil_mode": True,
                "count_include_pad": False,
            },
        ),
        Case(((1, 4),), free(), {"kernel_size": (3,), "ceil_mode": True, "divisor_override": 2}),
    ],
    definition_text=_AVG_TEXT,
    derivative_text="jvp = avg_pool1d(dx) (linear)",
    definition=_nd_avg(1),
)

law(
    op="avg_pool3d",
    cases=[
        Case(((1, 2, 2, 2),), free(), {"kernel_size": (2, 2, 2)}),
        Case(
            ((1, 1, 3, 3),),
            free(),
            {"kernel_size": (1, 2, 2), "ceil_mode": True, "padding": (0, 1, 0)},
        ),
    ],
    definition_text=_AVG_TEXT,
    derivative_text="jvp = avg_pool3d(dx) (linear)",
    definition=_nd_avg(3),
)

law(
    op="max_pool1d",
    cases=[
        Case(((1, 5),), chain(3, 0, 4, 1, 2), {"kernel_size": (2,), "ceil_mode": True}),
        Case(
            ((1, 5),),
            chain(3, 0, 4, 1, 2),
            {"kernel_size": (3,), "stride": (2,), "padding": (1,), "ceil_mode": True},
        ),
        Case(((1, 4),), pattern(("at", 1), ("at", 1)), {"kernel_size": (2,), "stride": (1,)}),
    ],
    definition_text=_MAX_TEXT,
    derivative_text=_MAX_DERIV,
    definition=_nd_max(1, False),
    conv_jvp=_nd_max(1, True),
)

law(
    op="max_pool3d",
    cases=[
        Case(
            ((1, 1, 2, 3),), chain(4, 1, 5, 2, 0, 3), {"kernel_size": (1, 2, 2), "ceil_mode": True}
        ),
        Case(((1, 1, 2, 2),), pattern(("at", 1)), {"kernel_size": (1, 2, 2)}),
    ],
    definition_text=_MAX_TEXT,
    derivative_text=_MAX_DERIV,
    definition=_nd_max(3, False),
    conv_jvp=_nd_max(3, True),
)


# --------------------------------------------------------------------------- adaptive


def _adaptive_windows(v: Arr, a: Mapping[str, Any], nd: int) -> tuple[Arr, list[Any], list[Any]]:
    dims = v.shape[-nd:]
    outs = [int(t) for t in a["output_size"]]
    bounds = [
        [((o * n) // m, -((-(o + 1) * n) // m)) for o in range(m)]
        for n, m in zip(dims, outs, strict=True)
    ]
    wins = []
    for r in np.ndindex(*outs):
        ranges = [range(*bounds[ax][ri]) for ax, ri in enumerate(r)]
        wins.append([tuple(int(t) for t in p) for p in np.ndindex(*[len(g) for g in ranges])])
        wins[-1] = [tuple(ranges[ax][t[ax]] for ax in range(nd)) for t in wins[-1]]
    return v.reshape(-1, *dims), outs, wins


def _adaptive_def(nd: int, kind: str, tangent: bool = False) -> Any:
    def definition(v: list[Arr], *rest: Any) -> Arr:
        a = rest[-2]
        x, outs, wins = _adaptive_windows(v[0], a, nd)
        dx = rest[0][0].reshape(x.shape) if tangent else None
        out = np.empty((x.shape[0], len(wins)), dtype=object)
        for b in range(x.shape[0]):
            for k, taps in enumerate(wins):
                vals = [x[(b, *t)] for t in taps]
                if kind == "avg":
                    out[b, k] = sympy.Add(*vals) / len(vals)
                elif tangent:
                    out[b, k] = dx[(b, *taps[first_max(vals)])]
                else:
                    m = vals[0]
                    for w in vals[1:]:
                        m = vmax(m, w)[()]
                    out[b, k] = m
        return arr(out.reshape((*v[0].shape[:-nd], *outs)))

    return definition


_ADAPTIVE_CASES: dict[int, tuple[Any, ...]] = {
    1: ((1, 5), (3,), (3, 0, 4, 1, 2)),
    2: ((1, 2, 3), (2, 2), (3, 0, 4, 1, 5, 2)),
    3: ((1, 1, 2, 3), (1, 2, 2), (5, 0, 4, 1, 3, 2)),
}

for _nd, (_shape, _outs, _ranks) in _ADAPTIVE_CASES.items():
    law(
        op=f"adaptive_avg_pool{_nd}d",
        cases=[Case((_shape,), free(), {"output_size": _outs})],
        definition_text="window o on each axis covers [floor(o·n/out), ceil((o+1)·n/out)); "
        "the mean of its elements",
        derivative_text=f"jvp = adaptive_avg_pool{_nd}d(dx) (linear)",
        definition=_adaptive_def(_nd, "avg"),
    )
    law(
        op=f"adaptive_max_pool{_nd}d",
        cases=[
            Case((_shape,), chain(*_ranks), {"output_size": _outs}),
            Case((_shape,), pattern(("at", 1)), {"output_size": _outs}),
        ],
        definition_text="window o on each axis covers [floor(o·n/out), ceil((o+1)·n/out)); "
        "the maximum of its elements",
        derivative_text=_MAX_DERIV,
        definition=_adaptive_def(_nd, "max"),
        conv_jvp=_adaptive_def(_nd, "max", True),
    )
