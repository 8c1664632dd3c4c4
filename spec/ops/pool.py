"""The pool family: avg_pool2d max_pool2d (composites).

Invariants:
- Shape rules are closed form (`windows.ShapeView`): the bodies' validation, then the
  output dims; max pools find a window lying entirely in the padding per axis. The body
  (and its index list) is built only to evaluate.
- Bodies gather windows to (..., OH*OW, kh*kw), then reduce_sum / div by const kh*kw (avg,
  zero padding counted) or reduce_max (max; a padded tap reads the window's first in-bounds
  element). Window indices are attributes, never tensor arguments.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import GraphError, op_error
from ..shape import Shape, size
from .builders import composite, scalar_const, second_arg, second_point, shape_error
from .table import OPS, Attrs, AttrSpec, arg, sample
from .windows import (
    ShapeView,
    adaptive_table,
    channel_dims,
    int_tuple,
    padding_pairs,
    pool_out_dim,
    tap_table,
)

__all__ = ["FAMILY"]

FAMILY = "pool"


# --------------------------------------------------------------------------- pooling


def _pool_dims(op: str, b: Any, x: int, a: Attrs, nd: int) -> tuple[Any, ...]:
    """(batch, c, dims, ks, stride, dil, lo, hi, outs) of a pool, validated."""
    batch, c, dims = channel_dims(op, b, x, nd)
    ks = int_tuple(op, a, "kernel_size", nd, 0, 1)
    stride = int_tuple(op, a, "stride", nd, 1, 1) if a.get("stride") else ks
    dil = int_tuple(op, a, "dilation", nd, 1, 1)
    lo, hi = padding_pairs(op, a, nd)
    if any(p < 0 or 2 * p > k for p, k in zip((*lo, *hi), (*ks, *ks), strict=True)):
        raise op_error(
            GraphError,
            op,
            "padding must be at most half the kernel",
            expected=f"<= {tuple(k // 2 for k in ks)}",
            got=(lo, hi) if lo != hi else lo,
        )
    ceil = bool(a.get("ceil_mode"))
    outs = tuple(
        pool_out_dim(op, n, k, s, p, q, d, ceil)
        for n, k, s, p, q, d in zip(dims, ks, stride, lo, hi, dil, strict=True)
    )
    return batch, c, dims, ks, stride, dil, lo, hi, outs


def _pool_geometry(op: str, b: Any, x: int, a: Attrs, nd: int) -> tuple[Shape, Shape, Any]:
    """(lead = batch + (C,), spatial dims, geometry) of a pool; geometry holds the window
    table (flat, ok) of shape (O, K) (outputs row-major, taps row-major), the outputs and
    per axis (starts, kernel, n, pad_end) for the divisor."""
    batch, c, dims, ks, stride, dil, lo, hi, outs = _pool_dims(op, b, x, a, nd)
    flat, ok = tap_table(dims, ks, stride, lo, dil, outs)
    k, o = size(ks), size(outs)
    flat, ok = flat.reshape(k, o).T, ok.reshape(k, o).T
    axes = [
        (np.arange(n_o, dtype=np.int64) * s - p, kk, n, q)
        for n_o, s, p, kk, n, q in zip(outs, stride, lo, ks, dims, hi, strict=True)
    ]
    return (*batch, c), dims, (flat, ok, outs, axes)


def _first_padding_window(
    dims: Shape, ks: Shape, stride: Shape, dil: Shape, lo: Shape, outs: Shape
) -> int | None:
    """The row-major index of the first window with no in-bounds tap (None if none), per
    axis in closed form: a window is empty when it is empty on some axis."""
    first = None
    step = 1
    for ax in range(len(dims) - 1, -1, -1):
        o = np.arange(outs[ax], dtype=np.int64)[:, None] * stride[ax] - lo[ax]
        pos = o + np.arange(ks[ax], dtype=np.int64)[None, :] * dil[ax]
        empty = np.flatnonzero(~((pos >= 0) & (pos < dims[ax])).any(axis=1))
        if empty.size:
            cand = int(empty[0]) * step
            first = cand if first is None else min(first, cand)
        step *= outs[ax]
    return first


def _pool_shape(nd: int, kind: str) -> Any:
    op = f"{kind}_pool{nd}d"

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        if kind == "avg":
            _no_dilation(op, a, nd)
        batch, c, dims, ks, stride, dil, lo, _, outs = _pool_dims(op, ShapeView(shapes), 0, a, nd)
        if kind == "max":
            empty = _first_padding_window(dims, ks, stride, dil, lo, outs)
            if empty is not None:
                raise shape_error(
                    op, "a window lies entirely in the padding", 0, "an in-bounds tap", empty
                )
        return (*batch, c, *outs)

    return shape


def _gathered(b: Any, x: int, lead: Shape, dims: Shape, idx: Any) -> int:
    """gather(reshape(x, lead + (prod(dims),)), idx) with idx (O, K)."""
    flat = b.node("reshape", x, shape=(*lead, size(dims)))
    return b.node("gather", flat, indices=idx.reshape(-1).tolist(), shape=idx.shape)


def _divide(b: Any, s: int, counts: Any) -> int:
    """s / counts: one scalar const when every window has the same divisor."""
    if counts.size and (counts == counts.flat[0]).all():
        return b.node("div", s, scalar_const(b, int(counts.flat[0])))
    vals = tuple(Fraction(int(v)) for v in counts.reshape(-1))
    return b.node("div", s, b.node("const", shape=(len(vals),), values=vals))


def _avg_divisors(a: Attrs, axes: list[Any]) -> Any:
    """PyTorch's divisor per window: divisor_override, else the window clipped to the end
    padding (count_include_pad, the default) or to the input, multiplied over axes."""
    if a.get("divisor_override"):
        return np.array([int(a["divisor_override"])])
    include = a.get("count_include_pad") is not False
    out: Any = np.ones((), dtype=np.int64)
    for start, k, n, hi in axes:
        if include:
            cnt = np.minimum(start + k, n + hi) - start
        else:
            cnt = np.minimum(start + k, n) - np.maximum(start, 0)
        out = np.multiply.outer(out, cnt)
    return out.reshape(-1)


def _no_dilation(op: str, a: Attrs, nd: int) -> None:
    if a.get("dilation") not in (None, (1,) * nd):
        raise op_error(
            GraphError, op, "dilation is not supported", expected=(1,) * nd, got=a.get("dilation")
        )


def _avg_pool_body(nd: int) -> Any:
    op = f"avg_pool{nd}d"

    def body(b: Any, args: list[int], a: Attrs) -> int:
        _no_dilation(op, a, nd)
        lead, dims, (flat, ok, outs, axes) = _pool_geometry(op, b, args[0], a, nd)
        cols = _gathered(b, args[0], lead, dims, np.where(ok, flat, size(dims)))
        s = b.node("reduce_sum", cols, axis=len(lead) + 1)
        y = _divide(b, s, _avg_divisors(a, axes))
        return b.node("reshape", y, shape=(*lead, *outs))

    return body


def _max_pool_body(nd: int) -> Any:
    op = f"max_pool{nd}d"

    def body(b: Any, args: list[int], a: Attrs) -> int:
        lead, dims, (flat, ok, outs, _) = _pool_geometry(op, b, args[0], a, nd)
        empty = np.flatnonzero(~ok.any(axis=1))
        if empty.size:
            raise shape_error(
                op, "a window lies entirely in the padding", 0, "an in-bounds tap", int(empty[0])
            )
        first = np.take_along_axis(flat, ok.argmax(axis=1)[:, None], axis=1)
        cols = _gathered(b, args[0], lead, dims, np.where(ok, flat, first))
        y = b.node("reduce_max", cols, axis=len(lead) + 1)
        return b.node("reshape", y, shape=(*lead, *outs))

    return body


_POOL_ATTRS = (
    AttrSpec("kernel_size", "ints"),
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
)

_CEIL = AttrSpec("ceil_mode", "bool", False)
_AVG_EXTRA = (
    _CEIL,
    AttrSpec("count_include_pad", "bool", False),
    AttrSpec("divisor_override", "nat", False),
)

_WIN_DOC = (
    "; ceil_mode (default False) rounds the output length up, dropping a last window that "
    "would start in the end padding (PyTorch's rule); padding is nd ints or 2*nd ints (every "
    "axis's begin, then every axis's end); a single int in kernel_size, stride, padding is "
    "repeated"
)
_AVG_DOC = (
    ". Body: gather windows to (..., O, K) (padded taps read the gather's zero), reduce_sum "
    "over the window (left fold in row-major tap order), div by the window's divisor (one "
    "scalar const when all are equal, else a const per window), reshape. Divisor as PyTorch: "
    "divisor_override if given, else with count_include_pad (default True) the window "
    "clipped to the end of the padding (ceil-mode windows overhanging it count less), else "
    "the in-bounds taps only" + _WIN_DOC
)
_MAX_DOC = (
    ". Body: gather windows to (..., O, K), reduce_max over the window, reshape. A padded "
    "tap reads the window's first in-bounds element (the same max as -inf padding). Ties: "
    "the first maximal element in row-major window order gets the whole cotangent "
    "(PyTorch's CPU rule); NaN propagates (the first NaN wins)" + _WIN_DOC
)

composite(
    name="avg_pool2d",
    family=FAMILY,
    arity=1,
    body=_avg_pool_body(2),
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False), *_AVG_EXTRA),
    doc="average pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = "
    "kernel), padding <= kernel/2 (zero padding); dilation must be (1, 1)" + _AVG_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 1),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
            note="generic point",
        ),
        second_point(
            second_arg((1, 2, 3)),
            attrs={"kernel_size": (1, 2), "stride": (1, 1)},
        ),
    ),
)


composite(
    name="max_pool2d",
    family=FAMILY,
    arity=1,
    body=_max_pool_body(2),
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False), _CEIL),
    doc="max pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = kernel), "
    "padding <= kernel/2, dilation (default 1)" + _MAX_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), Fraction(3, 4)),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
            note="generic point",
        ),
        second_point(
            second_arg((1, 2, 3)),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
        ),
        sample(
            arg((1, 2, 2), 1, 2, 2, 1),
            attrs={"kernel_size": (2, 2)},
            kind="tie",
            note="two equal maxima in one window: the first wins",
        ),
    ),
)


# --------------------------------------------------------------------------- 1-D and 3-D

_AVG_ND_ATTRS = (*_POOL_ATTRS, *_AVG_EXTRA)
_MAX_ND_ATTRS = (*_POOL_ATTRS, AttrSpec("dilation", "ints", False), _CEIL)

composite(
    name="avg_pool1d",
    family=FAMILY,
    arity=1,
    body=_avg_pool_body(1),
    attrs=_AVG_ND_ATTRS,
    doc="average pooling of x (C, L) or (N, C, L): kernel_size, stride (default = kernel), "
    "padding <= kernel/2" + _AVG_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 4), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            attrs={"kernel_size": (3,), "stride": (2,), "padding": (1,)},
            note="generic point",
        ),
        sample(
            arg((1, 5), 1, -2, Fraction(1, 2), 3, Fraction(1, 4)),
            attrs={"kernel_size": (2,), "ceil_mode": True, "count_include_pad": False},
            note="ceil mode: the last window holds one element and divides by 1",
        ),
    ),
)

composite(
    name="avg_pool3d",
    family=FAMILY,
    arity=1,
    body=_avg_pool_body(3),
    attrs=_AVG_ND_ATTRS,
    doc="average pooling of x (C, D, H, W) or (N, C, D, H, W): kernel_size, stride (default = "
    "kernel), padding <= kernel/2" + _AVG_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 2, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 1, 3, 2, 5),
            attrs={"kernel_size": (2, 2, 2), "stride": (1, 1, 1), "padding": (1, 0, 1)},
            note="generic point",
        ),
        sample(
            arg((1, 1, 3, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), 2, -1, 3, 1),
            attrs={"kernel_size": (1, 2, 2), "ceil_mode": True, "padding": (0, 1, 0)},
            note="ceil mode with padding: windows overhanging the end padding count less",
        ),
    ),
)

composite(
    name="max_pool1d",
    family=FAMILY,
    arity=1,
    body=_max_pool_body(1),
    attrs=_MAX_ND_ATTRS,
    doc="max pooling of x (C, L) or (N, C, L): kernel_size, stride (default = kernel), "
    "padding <= kernel/2, dilation (default 1)" + _MAX_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 4), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            attrs={"kernel_size": (3,), "stride": (2,), "padding": (1,)},
            note="generic point",
        ),
        sample(
            arg((1, 5), 1, 3, 3, Fraction(1, 4), 2),
            attrs={"kernel_size": (2,), "stride": (1,), "ceil_mode": True},
            kind="tie",
            note="two equal maxima in one window: the first wins",
        ),
    ),
)

composite(
    name="max_pool3d",
    family=FAMILY,
    arity=1,
    body=_max_pool_body(3),
    attrs=_MAX_ND_ATTRS,
    doc="max pooling of x (C, D, H, W) or (N, C, D, H, W): kernel_size, stride (default = "
    "kernel), padding <= kernel/2, dilation (default 1)" + _MAX_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 2, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 7, 3, 6, 5),
            attrs={"kernel_size": (2, 2, 2), "stride": (1, 1, 2), "padding": (1, 0, 1)},
            note="generic point",
        ),
        sample(
            arg((1, 1, 2, 3), 1, 2, 2, 2, Fraction(1, 2), 2),
            attrs={"kernel_size": (1, 2, 2), "ceil_mode": True},
            kind="tie",
            note="ties in a window and a ceil-mode window with one column",
        ),
    ),
)


# --------------------------------------------------------------------------- adaptive


def _adaptive_dims(op: str, b: Any, x: int, a: Attrs, nd: int) -> tuple[Any, ...]:
    batch, c, dims = channel_dims(op, b, x, nd)
    outs = int_tuple(op, a, "output_size", nd, 1, 1)
    if min(dims) < 1:
        raise shape_error(op, "spatial dims must be >= 1", 0, ">= 1", dims)
    return batch, c, dims, outs


def _adaptive_shape(nd: int, kind: str) -> Any:
    op = f"adaptive_{kind}_pool{nd}d"

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        batch, c, _, outs = _adaptive_dims(op, ShapeView(shapes), 0, a, nd)
        return (*batch, c, *outs)

    return shape


def _adaptive_body(nd: int, kind: str) -> Any:
    op = f"adaptive_{kind}_pool{nd}d"

    def body(b: Any, args: list[int], a: Attrs) -> int:
        batch, c, dims, outs = _adaptive_dims(op, b, args[0], a, nd)
        flat, ok, counts = adaptive_table(dims, outs)
        lead = (*batch, c)
        if kind == "avg":
            cols = _gathered(b, args[0], lead, dims, np.where(ok, flat, size(dims)))
            y = _divide(b, b.node("reduce_sum", cols, axis=len(lead) + 1), counts)
        else:
            cols = _gathered(b, args[0], lead, dims, np.where(ok, flat, flat[:, :1]))
            y = b.node("reduce_max", cols, axis=len(lead) + 1)
        return b.node("reshape", y, shape=(*lead, *outs))

    return body


_ADAPTIVE_DOC = (
    "; output_size nd ints >= 1 (a single int is repeated). Windows as PyTorch: on each axis "
    "window o covers [floor(o*n/out), ceil((o+1)*n/out)), so sizes need not divide the input "
    "and windows may overlap. Body: gather the windows to (..., O, K), K the largest "
    "window's tap count, taps in row-major order first, then "
)
_ADAPTIVE_AVG_DOC = (
    "the gather's zero in the unused slots; reduce_sum (left fold: the taps, then +0s), div "
    "by the window's tap count (one scalar const when all are equal), reshape. A window of "
    "-0s sums to +0 when it has unused slots"
)
_ADAPTIVE_MAX_DOC = (
    "the window's first tap repeated in the unused slots; reduce_max, reshape. Ties: the "
    "first maximal tap in row-major window order gets the whole cotangent; NaN propagates"
)
_ADAPTIVE_X = {1: (1, 5), 2: (1, 2, 3), 3: (1, 1, 2, 3)}


def _adaptive(*, name: str, nd: int, kind: str) -> None:
    """Register adaptive_{kind}_pool{nd}d (samples: unequal overlapping windows, then ties)."""
    x = _ADAPTIVE_X[nd]
    composite(
        name=name,
        family=FAMILY,
        arity=1,
        body=_adaptive_body(nd, kind),
        attrs=(AttrSpec("output_size", "ints"),),
        doc=f"adaptive {kind} pooling of x (C, {nd} spatial dims) or (N, C, ...)"
        + _ADAPTIVE_DOC
        + (_ADAPTIVE_AVG_DOC if kind == "avg" else _ADAPTIVE_MAX_DOC),
        tags=frozenset({"reduction", "model"}),
        samples=(
            sample(
                arg(x, *(1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2))[: size(x)]),
                attrs={"output_size": (3,) if nd == 1 else (1, 2, 2)[-nd:]},
                note="generic point: overlapping windows of unequal sizes",
            ),
            sample(
                arg(x, *(2, 1, 2, 2, 1, 2)[: size(x)]),
                attrs={"output_size": (2,) if nd == 1 else (1, 1, 2)[-nd:]},
                kind="tie" if kind == "max" else "ordinary",
                note="equal values inside windows (max: the first maximal tap wins)",
            ),
        ),
    )


_adaptive(name="adaptive_avg_pool1d", nd=1, kind="avg")
_adaptive(name="adaptive_max_pool1d", nd=1, kind="max")
_adaptive(name="adaptive_avg_pool2d", nd=2, kind="avg")
_adaptive(name="adaptive_max_pool2d", nd=2, kind="max")
_adaptive(name="adaptive_avg_pool3d", nd=3, kind="avg")
_adaptive(name="adaptive_max_pool3d", nd=3, kind="max")


for _nd in (1, 2, 3):  # closed-form shape rules in place of building the bodies
    for _kind in ("avg", "max"):
        OPS[f"{_kind}_pool{_nd}d"].shape = _pool_shape(_nd, _kind)
        OPS[f"adaptive_{_kind}_pool{_nd}d"].shape = _adaptive_shape(_nd, _kind)
