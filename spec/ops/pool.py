"""The pool family: avg_pool2d max_pool2d (composites).

Invariants:
- Bodies gather windows to (..., OH*OW, kh*kw), then reduce_sum / div by const kh*kw (avg,
  zero padding counted) or reduce_max (max; a padded tap reads the window's first in-bounds
  element). Window indices are attributes, never tensor arguments.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..errors import GraphError, op_error
from ..shape import Shape
from .builders import composite, conv_out_dim, image_dims, int_pair, scalar_const, shape_error
from .table import Attrs, AttrSpec, arg, sample

__all__ = ["FAMILY"]

FAMILY = "pool"


# --------------------------------------------------------------------------- pooling


def _pool_geometry(op: str, b: Any, x: int, a: Attrs) -> tuple[Shape, Shape, list[Any]]:
    lead, (c, h, w) = image_dims(op, b, x)
    kh, kw = int_pair(op, a, "kernel_size", (0, 0), 1)
    sh, sw = int_pair(op, a, "stride", (kh, kw), 1)
    ph, pw = int_pair(op, a, "padding", (0, 0), 0)
    dh, dw = int_pair(op, a, "dilation", (1, 1), 1)
    if 2 * ph > kh or 2 * pw > kw:
        raise op_error(
            GraphError,
            op,
            "padding must be at most half the kernel",
            expected=f"<= {(kh // 2, kw // 2)}",
            got=(ph, pw),
        )
    oh = conv_out_dim(op, h, kh, sh, ph, dh)
    ow = conv_out_dim(op, w, kw, sw, pw, dw)
    wins: list[list[int | None]] = []
    for r in range(oh):
        for q in range(ow):
            win: list[int | None] = []
            for i in range(kh):
                ih = r * sh - ph + i * dh
                for j in range(kw):
                    iw = q * sw - pw + j * dw
                    win.append(ih * w + iw if 0 <= ih < h and 0 <= iw < w else None)
            wins.append(win)
    return (*lead, c), (h, w, oh, ow, kh * kw), wins


def _avg_pool_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "avg_pool2d"
    if a.get("dilation") not in (None, (1, 1)):
        raise op_error(
            GraphError, op, "dilation is not supported", expected=(1, 1), got=a.get("dilation")
        )
    lead, (h, w, oh, ow, k), wins = _pool_geometry(op, b, args[0], a)
    idx = [h * w if v is None else v for win in wins for v in win]
    flat = b.node("reshape", args[0], shape=(*lead, h * w))
    cols = b.node("gather", flat, indices=idx, shape=(oh * ow, k))
    s = b.node("reduce_sum", cols, axis=len(lead) + 1)
    y = b.node("div", s, scalar_const(b, k))
    return b.node("reshape", y, shape=(*lead, oh, ow))


_POOL_ATTRS = (
    AttrSpec("kernel_size", "ints"),
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
)

composite(
    name="avg_pool2d",
    family=FAMILY,
    arity=1,
    body=_avg_pool_body,
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False)),
    doc="average pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = "
    "kernel), padding <= kernel/2 (zero padding, counted: PyTorch's count_include_pad); "
    "dilation must be (1, 1). Body: gather windows to (..., OH*OW, kh*kw), reduce_sum over "
    "the window (left fold in row-major (kh, kw) order), div by const kh*kw, reshape",
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 1),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
            note="generic point",
        ),
        sample(
            arg((1, 2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            attrs={"kernel_size": (1, 2), "stride": (1, 1)},
            note="a second generic point",
        ),
    ),
)


def _max_pool_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "max_pool2d"
    lead, (h, w, oh, ow, k), wins = _pool_geometry(op, b, args[0], a)
    idx: list[int] = []
    for n, win in enumerate(wins):
        inside = [v for v in win if v is not None]
        if not inside:
            raise shape_error(op, "a window lies entirely in the padding", 0, "an in-bounds tap", n)
        idx.extend(inside[0] if v is None else v for v in win)
    flat = b.node("reshape", args[0], shape=(*lead, h * w))
    cols = b.node("gather", flat, indices=idx, shape=(oh * ow, k))
    y = b.node("reduce_max", cols, axis=len(lead) + 1)
    return b.node("reshape", y, shape=(*lead, oh, ow))


composite(
    name="max_pool2d",
    family=FAMILY,
    arity=1,
    body=_max_pool_body,
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False)),
    doc="max pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = kernel), "
    "padding <= kernel/2, dilation (default 1). Body: gather windows to (..., OH*OW, "
    "kh*kw), reduce_max over the window, reshape. A padded tap reads the window's first "
    "in-bounds element (the same max as -inf padding). Ties: the first maximal element "
    "in window row-major (kh, kw) order gets the whole cotangent (PyTorch's CPU rule); "
    "NaN propagates (the first NaN wins)",
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), Fraction(3, 4)),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
            note="generic point",
        ),
        sample(
            arg((1, 2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            attrs={"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
            note="a second generic point",
        ),
        sample(
            arg((1, 2, 2), 1, 2, 2, 1),
            attrs={"kernel_size": (2, 2)},
            kind="tie",
            note="two equal maxima in one window: the first wins",
        ),
    ),
)
