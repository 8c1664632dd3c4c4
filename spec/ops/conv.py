"""The conv family: conv2d conv_transpose2d (composites).

Invariants:
- Each body is gather (im2col, zero padding) + matmul, so each output is the matmul k-loop
  fold over (c_in, kh, kw) in row-major order (padding taps included as w·0), then + bias.
- Window geometry follows `builders.conv_out_dim`; stride, padding, dilation and groups
  are attributes. Errors name the op, the input index and expected vs got.
- Shape rules are closed form (`windows.ShapeView`): the bodies' validation, in the same
  order, then the output dims; the body (and its index list) is built only to evaluate.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import GraphError, op_error
from ..shape import Shape, size
from .builders import composite, second_arg, second_point, shape_error
from .table import OPS, Attrs, AttrSpec, arg, sample
from .windows import (
    ShapeView,
    channel_dims,
    int_tuple,
    padding_pairs,
    tap_table,
    transposed_tap_table,
    window_out_dim,
)

__all__ = ["FAMILY"]

FAMILY = "conv"


_ND_DOC = (
    "; padding is nd ints (symmetric, PyTorch) or 2*nd ints (every axis's begin, then every "
    "axis's end: ONNX's `pads`); a single int in stride, padding, dilation is repeated"
)


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


def _bias(op: str, b: Any, y: int, args: list[int], cout: int, nd: int) -> int:
    if len(args) == 2:
        return y
    if b.shape_of(args[2]) != (cout,):
        raise shape_error(op, "bias must be (C_out,)", 2, (cout,), b.shape_of(args[2]))
    return b.node("add", y, b.node("reshape", args[2], shape=(cout,) + (1,) * nd))


def _arity23(op: str, args: list[int]) -> None:
    if len(args) not in (2, 3):
        raise op_error(
            GraphError, op, "takes (x, w) or (x, w, b)", expected="2 or 3 arguments", got=len(args)
        )


# --------------------------------------------------------------------------- conv{1,2,3}d


def _kernel_dims(op: str, ws: Shape, nd: int, what: str) -> tuple[int, int, Shape]:
    if len(ws) != nd + 2:
        raise shape_error(op, f"weight must be {what}", 1, f"rank {nd + 2}", ws)
    ks = tuple(ws[2:])
    if min(ks) < 1:
        raise shape_error(op, "kernel must be at least 1 in every dim", 1, ">= 1", ks)
    return ws[0], ws[1], ks


def _pads(op: str, a: Attrs, nd: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lo, hi = padding_pairs(op, a, nd)
    if min((*lo, *hi), default=0) < 0:
        raise op_error(GraphError, op, "padding must be >= 0", expected=">= 0", got=(lo, hi))
    return lo, hi


def _conv_geometry(op: str, b: Any, args: list[int], a: Attrs, nd: int) -> tuple[Any, ...]:
    """(batch, cin, dims, groups, cout, cg, ks, stride, dil, lo, outs), validated."""
    _arity23(op, args)
    batch, cin, dims = channel_dims(op, b, args[0], nd)
    groups = a.get("groups") or 1
    cout, cg, ks = _kernel_dims(op, b.shape_of(args[1]), nd, "(C_out, C_in/groups, *kernel)")
    if cin % groups or cout % groups:
        raise shape_error(
            op, "groups must divide C_in and C_out", 1, f"divisible by {groups}", (cin, cout)
        )
    if cg != cin // groups:
        raise shape_error(
            op, "weight's input channels differ from C_in/groups", 1, cin // groups, cg
        )
    stride = int_tuple(op, a, "stride", nd, 1, 1)
    dil = int_tuple(op, a, "dilation", nd, 1, 1)
    lo, hi = _pads(op, a, nd)
    outs = tuple(window_out_dim(op, *g) for g in zip(dims, ks, stride, lo, hi, dil, strict=True))
    return batch, cin, dims, groups, cout, cg, ks, stride, dil, lo, outs


def _conv_body(nd: int) -> Any:
    op = f"conv{nd}d"

    def body(b: Any, args: list[int], a: Attrs) -> int:
        batch, cin, dims, groups, cout, cg, ks, stride, dil, lo, outs = _conv_geometry(
            op, b, args, a, nd
        )
        table = tap_table(dims, ks, stride, lo, dil, outs)

        def weight() -> int:
            return b.node("reshape", args[1], shape=(groups, cout // groups, cg * size(ks)))

        return _matmul_cols(op, b, args, batch, (cin, *dims), ks, outs, groups, cout, table, weight)

    return body


def _bias_shape(op: str, shapes: list[Shape], cout: int) -> None:
    if len(shapes) == 3 and shapes[2] != (cout,):
        raise shape_error(op, "bias must be (C_out,)", 2, (cout,), shapes[2])


def _conv_shape(nd: int) -> Any:
    op = f"conv{nd}d"

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        g = _conv_geometry(op, ShapeView(shapes), list(range(len(shapes))), a, nd)
        _bias_shape(op, shapes, g[4])
        return (*g[0], g[4], *g[10])

    return shape


def _matmul_cols(
    op: str,
    b: Any,
    args: list[int],
    batch: Shape,
    cdims: Shape,
    ks: Shape,
    outs: Shape,
    groups: int,
    cout: int,
    table: tuple[Any, Any],
    weight: Callable[[], int],
) -> int:
    """im2col gather (rows (c_in, taps) row-major, columns the outputs row-major, index
    C_in*prod(dims) the zero padding), then matmul with the (G, C_out/G, K) weight that
    `weight()` emits (after the gather, the node order of the 2-D bodies)."""
    flat, ok = table
    cin, dims = cdims[0], cdims[1:]
    sp = size(dims)
    chans = np.arange(cin, dtype=np.int64).reshape((cin,) + (1,) * flat.ndim) * sp
    idx = np.where(ok[None], chans + flat[None], cin * sp).reshape(-1).tolist()
    k = cin // groups * size(ks)
    cols = _im2col(b, args[0], batch, cdims, idx, (groups, k, size(outs)))
    y = b.node("matmul", weight(), cols)
    y = b.node("reshape", y, shape=(*batch, cout, *outs))
    return _bias(op, b, y, args, cout, len(dims))


_conv2d_body = _conv_body(2)


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
    "w*0), then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 3, 3), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2), 1),
            arg((2, 1, 2, 2), 1, 0, -1, 2, Fraction(1, 2), 1, -2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"padding": (1, 0), "stride": (1, 2)},
            note="generic point",
        ),
        second_point(
            second_arg((1, 2, 3)),
            arg((1, 1, 1, 2), 1, -1),
            arg((1,), Fraction(1, 2)),
            attrs={"padding": (1, 0)},
        ),
    ),
)


# --------------------------------------------------------------------------- conv_transpose2d


def _conv_t_geometry(op: str, b: Any, args: list[int], a: Attrs, nd: int) -> tuple[Any, ...]:
    """(batch, cin, dims, groups, cog, ks, stride, dil, lo, outs), validated."""
    _arity23(op, args)
    batch, cin, dims = channel_dims(op, b, args[0], nd)
    groups = a.get("groups") or 1
    wcin, cog, ks = _kernel_dims(op, b.shape_of(args[1]), nd, "(C_in, C_out/groups, *kernel)")
    if wcin != cin:
        raise shape_error(op, "weight's leading dim differs from C_in", 1, cin, wcin)
    if cin % groups:
        raise shape_error(op, "groups must divide C_in", 1, f"divisible by {groups}", cin)
    stride = int_tuple(op, a, "stride", nd, 1, 1)
    dil = int_tuple(op, a, "dilation", nd, 1, 1)
    opad = int_tuple(op, a, "output_padding", nd, 0, 0)
    lo, hi = _pads(op, a, nd)
    if any(p >= max(s, d) for p, s, d in zip(opad, stride, dil, strict=True)):
        raise op_error(
            GraphError,
            op,
            "output_padding must be < max(stride, dilation)",
            expected=f"< {tuple(max(s, d) for s, d in zip(stride, dil, strict=True))}",
            got=opad,
        )
    outs = tuple(
        (n - 1) * s - p - q + d * (k - 1) + e + 1
        for n, s, p, q, d, k, e in zip(dims, stride, lo, hi, dil, ks, opad, strict=True)
    )
    if min(outs) < 1:
        raise shape_error(op, "output would be empty", 0, "padding small enough", outs)
    return batch, cin, dims, groups, cog, ks, stride, dil, lo, outs


def _conv_t_body(nd: int) -> Any:
    op = f"conv_transpose{nd}d"

    def body(b: Any, args: list[int], a: Attrs) -> int:
        batch, cin, dims, groups, cog, ks, stride, dil, lo, outs = _conv_t_geometry(
            op, b, args, a, nd
        )
        cig = cin // groups

        def weight() -> int:
            w = b.node("reshape", args[1], shape=(groups, cig, cog, size(ks)))
            k = cig * size(ks)
            return b.node("reshape", b.node("swap_adjacent", w, axis=1), shape=(groups, cog, k))

        table = transposed_tap_table(dims, ks, stride, lo, dil, outs)
        cout = cog * groups
        return _matmul_cols(op, b, args, batch, (cin, *dims), ks, outs, groups, cout, table, weight)

    return body


def _conv_t_shape(nd: int) -> Any:
    op = f"conv_transpose{nd}d"

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        g = _conv_t_geometry(op, ShapeView(shapes), list(range(len(shapes))), a, nd)
        cout = g[4] * g[3]
        _bias_shape(op, shapes, cout)
        return (*g[0], cout, *g[9])

    return shape


_conv_t2d_body = _conv_t_body(2)


composite(
    name="conv_transpose2d",
    family=FAMILY,
    arity=None,
    body=_conv_t2d_body,
    attrs=(*_CONV_ATTRS, AttrSpec("output_padding", "ints", False)),
    doc="transposed 2-D convolution (the adjoint of conv2d in x): x (C_in, H, W) or (N, C_in, "
    "H, W), w (C_in, C_out/groups, kh, kw), optional b (C_out,); OH = (H-1)*stride - "
    "pad_begin - pad_end + dilation*(kh-1) + output_padding + 1. Body: gather of the input taps "
    "feeding each output (zero where none) to (G, C_in/G*kh*kw, OH*OW), matmul with w "
    "rearranged to (G, C_out/G, C_in/G*kh*kw), reshape, add b; sum order per output: left "
    "fold over (c_in, kh, kw) row-major (taps without an input contribute w*0), then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 2), 1, -2, 3, Fraction(1, 2)),
            arg((1, 2, 2, 2), 1, 0, -1, 2, Fraction(1, 2), 1, -2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"stride": (2, 1)},
            note="generic point",
        ),
        second_point(
            second_arg((1, 2, 3)),
            arg((1, 1, 1, 2), 1, -1),
            arg((1,), Fraction(1, 2)),
            attrs={"stride": (1, 2)},
        ),
    ),
)


# --------------------------------------------------------------------------- 1-D and 3-D

_CONV_T_ATTRS = (
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
    AttrSpec("output_padding", "ints", False),
    AttrSpec("groups", "nat", False),
    AttrSpec("dilation", "ints", False),
)


composite(
    name="conv1d",
    family=FAMILY,
    arity=None,
    body=_conv_body(1),
    attrs=_CONV_ATTRS,
    doc="1-D cross-correlation, channel first: x (C_in, L) or (N, C_in, L), w (C_out, "
    "C_in/groups, k), optional b (C_out,); stride, padding, dilation, groups as conv2d. "
    "Body: gather (im2col, zero padding) to (G, C_in/G*k, OL), matmul with w as (G, "
    "C_out/G, C_in/G*k), reshape, add b. Sum order per output: matmul's left fold over "
    "(c_in, k) row-major (padding taps included as w*0), then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 4), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            arg((2, 1, 2), 1, Fraction(-1, 2), 2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"padding": (1,), "stride": (2,), "groups": 2},
            note="generic point",
        ),
        sample(
            arg((1, 1, 5), 1, -2, Fraction(1, 2), 3, Fraction(1, 4)),
            arg((1, 1, 2), 1, -1),
            attrs={"padding": (2, 0), "dilation": (2,)},
            note="asymmetric padding (2 before, 0 after) and dilation",
        ),
    ),
)

composite(
    name="conv3d",
    family=FAMILY,
    arity=None,
    body=_conv_body(3),
    attrs=_CONV_ATTRS,
    doc="3-D cross-correlation, channel first: x (C_in, D, H, W) or (N, C_in, D, H, W), w "
    "(C_out, C_in/groups, kd, kh, kw), optional b (C_out,); stride, padding, dilation, "
    "groups as conv2d. Body: gather (im2col, zero padding) to (G, C_in/G*kd*kh*kw, "
    "OD*OH*OW), matmul, reshape, add b. Sum order per output: matmul's left fold over "
    "(c_in, kd, kh, kw) row-major (padding taps included as w*0), then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 2, 2), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            arg((2, 1, 1, 2, 2), 1, 0, -1, 2, Fraction(1, 2), 1, -2, 3),
            arg((2,), Fraction(1, 4), -3),
            attrs={"padding": (1, 0, 0)},
            note="generic point",
        ),
        sample(
            arg((1, 1, 2, 2, 2), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), 2, -1, 3),
            arg((1, 1, 2, 1, 2), 1, -1, 2, Fraction(1, 2)),
            attrs={"stride": (1, 2, 1), "padding": (0, 1, 0, 1, 0, 0)},
            note="asymmetric padding and a stride that skips the last row",
        ),
    ),
)

composite(
    name="conv_transpose1d",
    family=FAMILY,
    arity=None,
    body=_conv_t_body(1),
    attrs=_CONV_T_ATTRS,
    doc="transposed 1-D convolution: x (C_in, L) or (N, C_in, L), w (C_in, C_out/groups, k), "
    "optional b (C_out,); OL = (L-1)*stride - pad_begin - pad_end + dilation*(k-1) + "
    "output_padding + 1. Body as conv_transpose2d: gather of the input taps feeding each "
    "output (zero where none), matmul with w rearranged to (G, C_out/G, C_in/G*k); sum order "
    "per output: left fold over (c_in, k) row-major, then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 2), 1, -2, 3, Fraction(1, 2)),
            arg((2, 1, 3), 1, 0, -1, 2, Fraction(1, 2), 1),
            arg((2,), Fraction(1, 4), -3),
            attrs={"stride": (2,), "padding": (1,), "output_padding": (1,), "groups": 2},
            note="generic point",
        ),
        second_point(
            arg((1, 1, 3), 1, -2, Fraction(1, 2)),
            arg((1, 2, 2), 1, -1, 2, 3),
            attrs={"dilation": (2,)},
            note="dilation",
        ),
    ),
)

composite(
    name="conv_transpose3d",
    family=FAMILY,
    arity=None,
    body=_conv_t_body(3),
    attrs=_CONV_T_ATTRS,
    doc="transposed 3-D convolution: x (C_in, D, H, W) or (N, C_in, D, H, W), w (C_in, "
    "C_out/groups, kd, kh, kw), optional b (C_out,); output dims as conv_transpose1d per "
    "axis. Body as conv_transpose2d; sum order per output: left fold over (c_in, kd, kh, "
    "kw) row-major, then + b" + _ND_DOC,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 1, 2, 2), 1, -2, 3, Fraction(1, 2)),
            arg((1, 2, 1, 2, 1), 1, 0, -1, 2),
            arg((2,), Fraction(1, 4), -3),
            attrs={"stride": (1, 2, 1)},
            note="generic point",
        ),
        second_point(
            arg((2, 1, 1, 2), 1, -2, Fraction(1, 2), 3),
            arg((2, 1, 1, 1, 2), 1, -1, 2, Fraction(1, 2)),
            attrs={"groups": 2, "padding": (0, 0, 1), "output_padding": (0, 0, 1), "stride": (2,)},
            note="groups, output padding",
        ),
    ),
)


for _nd in (1, 2, 3):  # closed-form shape rules in place of building the bodies
    OPS[f"conv{_nd}d"].shape = _conv_shape(_nd)
    OPS[f"conv_transpose{_nd}d"].shape = _conv_t_shape(_nd)
