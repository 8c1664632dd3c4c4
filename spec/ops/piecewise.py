"""The piecewise family: prelu where — elementwise ops that choose, per element, between
two branches (prelu by the sign of x, where by a constant mask).

Invariants:
- prelu(x, weight) is a primitive (PyTorch's _prelu_kernel): x if x > 0 else w·x, w the
  weight of x's channel (axis 1; weight (C,) with C = x.shape[1], or one element shared,
  x of rank >= 1). Cotangents: to x, g if x > 0 else w·g (the weight at x = 0, PyTorch's
  tie); to weight, per channel the left fold in row-major order of (x > 0 ? +0 : x·g).
  JVP: dx if x > 0 else w·dx + dw·x. A composite through where would need the mask as
  data, and maximum/minimum would split the tie at 0.
- where(a, b; mask, mask_shape): the mask is an attribute (0/1 entries, non-differentiable
  data, as gather's indices and mask_neg_inf's mask); mask, a and b broadcast together
  (ONNX Where, torch.where). The result picks a where the mask is 1, else b (the other
  side's NaN never leaks); the cotangent goes to the picked side (+0 to the other), each
  reduced to its operand's shape by `unbroadcast` (the central broadcasting).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import GraphError, op_error
from ..shape import Shape, broadcast_shapes, size
from ..tensor import Tensor
from .builders import shape_error
from .table import Attrs, AttrSpec, Env, arg, expand, register, sample, unbroadcast

__all__ = ["FAMILY"]

FAMILY = "piecewise"


# --------------------------------------------------------------------------- prelu


def _prelu_wshape(shapes: list[Shape]) -> Shape:
    """The weight's shape aligned to x for broadcasting: (C, 1, ..., 1) along axis 1."""
    sx, sw = shapes
    if len(sx) < 1:
        raise shape_error("prelu", "input must have rank >= 1", 0, "rank >= 1", sx)
    n = size(sw)
    if len(sw) > 1:
        raise shape_error("prelu", "weight must be (C,) or one element", 1, "rank <= 1", sw)
    if n == 1:
        return ()
    channels = sx[1] if len(sx) > 1 else 1
    if n != channels:
        raise shape_error(
            "prelu", "weight count must be 1 or the channel count x.shape[1]", 1, channels, n
        )
    return (n, *([1] * (len(sx) - 2)))


def _prelu_w(xs: list[Tensor]) -> Tensor:
    w = xs[1]
    ws = _prelu_wshape([xs[0].shape, w.shape])
    return expand(Tensor(ws, w.data), xs[0].shape)


def _prelu_fwd(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, w = xs[0], _prelu_w(xs)
    return Tensor(
        x.shape,
        tuple(
            v if D.lt(D.zero(), v) else D.mul(wv, v) for v, wv in zip(x.data, w.data, strict=True)
        ),
    )


def _prelu_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, w, dw = xs[0], _prelu_w(xs), _prelu_w([xs[0], dxs[1]])
    return Tensor(
        x.shape,
        tuple(
            dv if D.lt(D.zero(), v) else D.add(D.mul(wv, dv), D.mul(dwv, v))
            for v, wv, dv, dwv in zip(x.data, w.data, dxs[0].data, dw.data, strict=True)
        ),
    )


def _prelu_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x, w = xs[0], _prelu_w(xs)
    pos = [D.lt(D.zero(), v) for v in x.data]
    gx = tuple(gv if p else D.mul(wv, gv) for p, wv, gv in zip(pos, w.data, g.data, strict=True))
    gw_full = Tensor(
        x.shape,
        tuple(
            D.zero() if p else D.mul(v, gv) for p, v, gv in zip(pos, x.data, g.data, strict=True)
        ),
    )
    gw = unbroadcast(D, gw_full, _prelu_wshape([x.shape, xs[1].shape]))
    return [Tensor(x.shape, gx), Tensor(xs[1].shape, gw.data)]


def _prelu_shape(shapes: list[Shape], a: Attrs) -> Shape:
    _prelu_wshape(shapes)
    return shapes[0]


register(
    name="prelu",
    family=FAMILY,
    arity=2,
    attrs=(),
    shape=_prelu_shape,
    forward=_prelu_fwd,
    jvp=_prelu_jvp,
    vjp=_prelu_vjp,
    saves="x, weight",
    doc="x if x > 0 else w*x, w = weight[channel] (channel axis 1; weight (C,) or one "
    "element); cotangents g if x > 0 else w*g (the weight at x = 0) and, per channel, the "
    "left fold of (x > 0 ? 0 : x*g); JVP dx if x > 0 else w*dx + dw*x",
    tags=frozenset({"elementwise"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), Fraction(-3, 2), 3, Fraction(-1, 4)),
            arg((3,), Fraction(1, 4), Fraction(-1, 2), 2),
            note="generic point: one weight per channel (axis 1)",
        ),
        sample(
            arg((2, 2, 2), 1, -2, Fraction(1, 2), -3, Fraction(-1, 4), 2, -1, Fraction(3, 2)),
            arg((1,), Fraction(1, 4)),
            note="one shared weight, rank 3",
        ),
        sample(
            arg((1, 2, 2), 0, -1, 0, 2),
            arg((2,), Fraction(1, 4), -3),
            kind="kink",
            note="x = 0 takes the weight branch: derivative w, weight cotangent 0*g",
        ),
        sample(
            arg((3,), -0.0, 0, 1),
            arg((1,), Fraction(1, 4)),
            kind="signed_zero",
            note="prelu(-0) = w*(-0) = -0",
        ),
    ),
)


# --------------------------------------------------------------------------- where


def _where_shape(shapes: list[Shape], a: Attrs) -> Shape:
    ms = tuple(a["mask_shape"])
    if len(a["mask"]) != size(ms):
        raise shape_error("where", "mask does not fill mask_shape", None, size(ms), len(a["mask"]))
    if any(v not in (0, 1) for v in a["mask"]):
        raise op_error(
            GraphError,
            "where",
            "mask entries must be 0 or 1",
            expected="0 or 1",
            got=sorted(set(a["mask"])),
        )
    ab = broadcast_shapes(shapes[0], shapes[1])
    if ab is None:
        raise shape_error(
            "where", "operands do not broadcast", 1, f"broadcastable with {shapes[0]}", shapes[1]
        )
    out = broadcast_shapes(ms, ab)
    if out is None:
        raise shape_error("where", "mask_shape does not broadcast with the operands", None, ab, ms)
    return out


def _where_mask(a: Attrs, shape: Shape) -> tuple[Any, ...]:
    return expand(Tensor(tuple(a["mask_shape"]), tuple(a["mask"])), shape).data


def _where_fwd(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    out = _where_shape([xs[0].shape, xs[1].shape], a)
    A, B = expand(xs[0], out), expand(xs[1], out)
    m = _where_mask(a, out)
    return Tensor(out, tuple(p if k else q for k, p, q in zip(m, A.data, B.data, strict=True)))


def _where_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    m, z = _where_mask(a, g.shape), D.zero()
    ga = Tensor(g.shape, tuple(v if k else z for k, v in zip(m, g.data, strict=True)))
    gb = Tensor(g.shape, tuple(z if k else v for k, v in zip(m, g.data, strict=True)))
    return [unbroadcast(D, ga, xs[0].shape), unbroadcast(D, gb, xs[1].shape)]


register(
    name="where",
    family=FAMILY,
    arity=2,
    attrs=(AttrSpec("mask", "ints"), AttrSpec("mask_shape", "shape")),
    shape=_where_shape,
    forward=_where_fwd,
    jvp=lambda D, xs, dxs, a, env: _where_fwd(D, dxs, a, env),
    vjp=_where_vjp,
    saves="nothing (the mask is an attribute)",
    doc="a where mask = 1 else b (mask, a and b broadcast together; the mask is a constant "
    "0/1 attribute, not differentiable); cotangent g to the picked side, +0 to the other, "
    "unbroadcast to each operand",
    tags=frozenset({"elementwise", "broadcast"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            arg((3,), Fraction(1, 3), -1, 2),
            attrs={"mask": (1, 0, 1, 0, 0, 1), "mask_shape": (2, 3)},
            note="generic point: b broadcast along rows",
        ),
        sample(
            arg((3,), 1, -2, 3),
            arg((), Fraction(1, 2)),
            attrs={"mask": (1, 0), "mask_shape": (2, 1)},
            note="the mask widens the result to (2, 3)",
        ),
        sample(
            arg((3,), float("nan"), 1, float("inf")),
            arg((3,), 2, float("nan"), -0.0),
            attrs={"mask": (0, 1, 0), "mask_shape": (3,)},
            kind="special",
            note="the unpicked side's NaN and inf never leak",
        ),
    ),
)
