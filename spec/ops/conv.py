"""The conv family: conv2d conv_transpose2d (composites).

Invariants:
- Each body is gather (im2col, zero padding) + matmul, so each output is the matmul k-loop
  fold over (c_in, kh, kw) in row-major order (padding taps included as w·0), then + bias.
- Window geometry follows `builders.conv_out_dim`; stride, padding, dilation and groups
  are attributes. Errors name the op, the input index and expected vs got.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..errors import GraphError, op_error
from ..shape import Shape, size
from .builders import composite, conv_out_dim, image_dims, int_pair, shape_error
from .table import Attrs, AttrSpec, arg, sample

__all__ = ["FAMILY"]

FAMILY = "conv"


_CONV_ATTRS = (
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
    AttrSpec("dilation", "ints", False),
    AttrSpec("groups", "nat", False),
)


def _im2col(b: Any, x: int, batch: Shape, chw: Shape, idx: list[int], shape: Shape) -> int:
    """gather(reshape(x, batch + (C*H*W,)), idx) with index C*H*W as the zero padding."""
    flat = b.node("reshape", x, shape=(*batch, size(chw)))
    return b.node("gather", flat, indices=idx, shape=shape)


def _bias(op: str, b: Any, y: int, args: list[int], cout: int) -> int:
    if len(args) == 2:
        return y
    if b.shape_of(args[2]) != (cout,):
        raise shape_error(op, "bias must be (C_out,)", 2, (cout,), b.shape_of(args[2]))
    return b.node("add", y, b.node("reshape", args[2], shape=(cout, 1, 1)))


def _arity23(op: str, args: list[int]) -> None:
    if len(args) not in (2, 3):
        raise op_error(
            GraphError, op, "takes (x, w) or (x, w, b)", expected="2 or 3 arguments", got=len(args)
        )


# --------------------------------------------------------------------------- conv2d


def _conv2d_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "conv2d"
    _arity23(op, args)
    batch, (cin, h, w) = image_dims(op, b, args[0])
    ws = b.shape_of(args[1])
    if len(ws) != 4:
        raise shape_error(op, "weight must be (C_out, C_in/groups, kh, kw)", 1, "rank 4", ws)
    groups = a.get("groups") or 1
    cout, cg, kh, kw = ws
    if cin % groups or cout % groups:
        raise shape_error(
            op, "groups must divide C_in and C_out", 1, f"divisible by {groups}", (cin, cout)
        )
    if cg != cin // groups:
        raise shape_error(
            op, "weight's input channels differ from C_in/groups", 1, cin // groups, cg
        )
    if kh < 1 or kw < 1:
        raise shape_error(op, "kernel must be at least 1x1", 1, ">= (1, 1)", (kh, kw))
    sh, sw = int_pair(op, a, "stride", (1, 1), 1)
    ph, pw = int_pair(op, a, "padding", (0, 0), 0)
    dh, dw = int_pair(op, a, "dilation", (1, 1), 1)
    oh = conv_out_dim(op, h, kh, sh, ph, dh)
    ow = conv_out_dim(op, w, kw, sw, pw, dw)
    pad = cin * h * w
    idx: list[int] = []
    for g in range(groups):
        for c in range(g * cg, (g + 1) * cg):
            for i in range(kh):
                for j in range(kw):
                    for r in range(oh):
                        ih = r * sh - ph + i * dh
                        row_ok = 0 <= ih < h
                        for q in range(ow):
                            iw = q * sw - pw + j * dw
                            idx.append(c * h * w + ih * w + iw if row_ok and 0 <= iw < w else pad)
    k = cg * kh * kw
    cols = _im2col(b, args[0], batch, (cin, h, w), idx, (groups, k, oh * ow))
    wm = b.node("reshape", args[1], shape=(groups, cout // groups, k))
    y = b.node("matmul", wm, cols)
    y = b.node("reshape", y, shape=(*batch, cout, oh, ow))
    return _bias(op, b, y, args, cout)


composite(
    name="conv2d",
    family=FAMILY,
    arity=None,
    body=_conv2d_body,
    attrs=_CONV_ATTRS,
    doc="2-D cross-correlation, channel first: x (C_in, H, W) or (N, C_in, H, W), w (C_out, "
    "C_in/groups, kh, kw), optional b (C_out,); stride, padding, dilation (pairs, defaults "
    "1, 0, 1), groups (default 1); output dims by the sliding-window rule with kernel "
    "dilation*(k-1)+1. Body: gather (im2col, zero padding) to (G, C_in/G*kh*kw, OH*OW), "
    "matmul with w as (G, C_out/G, C_in/G*kh*kw), reshape, add b. Sum order per output: "
    "matmul's left fold over (c_in, kh, kw) in row-major order (padding taps included as "
    "w*0), then + b",
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 1),
            arg((2, 1, 2, 2), 1, 0, -1, 2, Fraction(1, 2), 1, -2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"padding": (1, 0), "stride": (1, 2)},
            note="generic point",
        ),
        sample(
            arg((1, 2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            arg((1, 1, 1, 2), 1, -1),
            arg((1,), Fraction(1, 2)),
            attrs={"padding": (1, 0)},
            note="a second generic point",
        ),
    ),
)


# --------------------------------------------------------------------------- conv_transpose2d


def _conv_t_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "conv_transpose2d"
    _arity23(op, args)
    batch, (cin, h, w) = image_dims(op, b, args[0])
    ws = b.shape_of(args[1])
    if len(ws) != 4:
        raise shape_error(op, "weight must be (C_in, C_out/groups, kh, kw)", 1, "rank 4", ws)
    groups = a.get("groups") or 1
    wcin, cog, kh, kw = ws
    if wcin != cin:
        raise shape_error(op, "weight's leading dim differs from C_in", 1, cin, wcin)
    if cin % groups:
        raise shape_error(op, "groups must divide C_in", 1, f"divisible by {groups}", cin)
    if kh < 1 or kw < 1:
        raise shape_error(op, "kernel must be at least 1x1", 1, ">= (1, 1)", (kh, kw))
    sh, sw = int_pair(op, a, "stride", (1, 1), 1)
    ph, pw = int_pair(op, a, "padding", (0, 0), 0)
    dh, dw = int_pair(op, a, "dilation", (1, 1), 1)
    oph, opw = int_pair(op, a, "output_padding", (0, 0), 0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise op_error(
            GraphError,
            op,
            "output_padding must be < max(stride, dilation)",
            expected=f"< {(max(sh, dh), max(sw, dw))}",
            got=(oph, opw),
        )
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if oh < 1 or ow < 1:
        raise shape_error(op, "output would be empty", 0, "padding small enough", (oh, ow))
    cig, cout = cin // groups, cog * groups
    pad = cin * h * w

    def src(o: int, t: int, s: int, p: int, d: int, n: int) -> int | None:
        u = o + p - t * d
        if u % s or not 0 <= u // s < n:
            return None
        return u // s

    idx: list[int] = []
    for g in range(groups):
        for c in range(g * cig, (g + 1) * cig):
            for i in range(kh):
                for j in range(kw):
                    for r in range(oh):
                        ih = src(r, i, sh, ph, dh, h)
                        for q in range(ow):
                            iw = src(q, j, sw, pw, dw, w)
                            ok = ih is not None and iw is not None
                            idx.append(c * h * w + ih * w + iw if ok else pad)  # type: ignore[operator]
    k = cig * kh * kw
    cols = _im2col(b, args[0], batch, (cin, h, w), idx, (groups, k, oh * ow))
    w4 = b.node("reshape", args[1], shape=(groups, cig, cog, kh * kw))
    wm = b.node("reshape", b.node("swap_adjacent", w4, axis=1), shape=(groups, cog, k))
    y = b.node("matmul", wm, cols)
    y = b.node("reshape", y, shape=(*batch, cout, oh, ow))
    return _bias(op, b, y, args, cout)


composite(
    name="conv_transpose2d",
    family=FAMILY,
    arity=None,
    body=_conv_t_body,
    attrs=(*_CONV_ATTRS, AttrSpec("output_padding", "ints", False)),
    doc="transposed 2-D convolution (the adjoint of conv2d in x): x (C_in, H, W) or (N, C_in, "
    "H, W), w (C_in, C_out/groups, kh, kw), optional b (C_out,); OH = (H-1)*stride - "
    "2*padding + dilation*(kh-1) + output_padding + 1. Body: gather of the input taps "
    "feeding each output (zero where none) to (G, C_in/G*kh*kw, OH*OW), matmul with w "
    "rearranged to (G, C_out/G, C_in/G*kh*kw), reshape, add b; sum order per output: left "
    "fold over (c_in, kh, kw) row-major (taps without an input contribute w*0), then + b",
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 2), 1, -2, 3, Fraction(1, 2)),
            arg((1, 2, 2, 2), 1, 0, -1, 2, Fraction(1, 2), 1, -2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"stride": (2, 1)},
            note="generic point",
        ),
        sample(
            arg((1, 2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            arg((1, 1, 1, 2), 1, -1),
            arg((1,), Fraction(1, 2)),
            attrs={"stride": (1, 2)},
            note="a second generic point",
        ),
    ),
)
