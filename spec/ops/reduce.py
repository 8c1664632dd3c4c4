"""The reduce family: sum reduce_sum mean reduce_mean reduce_max logsumexp var std cumsum.

Invariants:
- sum and reduce_sum are left folds in row-major index order starting from the first
  element; an empty fold is the domain's zero. mean and reduce_mean are composites:
  div(fold, const N) with N >= 1 cast once.
- reduce_max is the fold m = maximum(m, v) along an axis: NaN propagates (the first NaN
  wins), ties keep the earlier element, and the whole cotangent (and tangent) goes to that
  one element.
- logsumexp, var and std are composites (attribute `dim` as in torch, non-negative; the
  axis must be non-empty). logsumexp is add(log(reduce_sum(exp(sub(x, m)))), m) with
  m = detach(reduce_max(x)) kept as a size-1 axis: the shift carries no derivative, so the
  derivative is exp(x − m)/Σ (the softmax) and no tie rule of the max enters it; a lane
  whose max is ±inf gives NaN (PyTorch masks those maxima and gives ±inf). var is
  div(reduce_sum(mul(d, d)), n − correction) with d = sub(x, reduce_mean(x)) (two-pass;
  n − correction must be >= 1, where PyTorch gives inf or NaN); std is sqrt(var), whose
  derivative is 0 where var is 0 (sqrt's convention; PyTorch gives NaN there).
- cumsum is a primitive: per lane of its dim, the sequential left fold y_k = y_{k-1} + x_k
  (first term as is; exclusive starts from the domain's zero; reverse runs from the end);
  its VJP is the same fold of the cotangent with reverse flipped.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..domains import Domain
from ..shape import Shape, ravel_index, size, unravel_index
from ..tensor import Tensor, fold_add
from .builders import composite, scalar_const, second_arg, second_point, shape_error
from .table import Attrs, AttrSpec, Env, arg, register, sample

__all__ = ["FAMILY"]

FAMILY = "reduce"


# --------------------------------------------------------------------------- reductions


def _sum_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    return Tensor((), (fold_add(D, xs[0].data),))


register(
    name="sum",
    family=FAMILY,
    arity=1,
    attrs=(),
    shape=lambda shapes, a: (),
    forward=_sum_forward,
    jvp=lambda D, xs, dxs, a, env: _sum_forward(D, dxs, a, env),
    vjp=lambda D, xs, g, a, env: [Tensor.full(xs[0].shape, g.data[0])],
    saves="input shape",
    doc="sum of all elements (left fold in row-major order)",
    tags=frozenset({"reduction"}),
    samples=(
        sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(second_arg()),
    ),
)


def _axis_rule(op: str, shapes: list[Shape], a: Attrs) -> int:
    axis = a["axis"]
    if not 0 <= axis < len(shapes[0]):
        raise shape_error(op, "axis out of range", 0, f"0 <= axis < {len(shapes[0])}", axis)
    return axis


def _reduce_sum_shape(shapes: list[Shape], a: Attrs) -> Shape:
    axis = _axis_rule("reduce_sum", shapes, a)
    return shapes[0][:axis] + shapes[0][axis + 1 :]


def _reduce_sum_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, axis = xs[0], a["axis"]
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    data = []
    for flat in range(size(out_shape)):
        o = unravel_index(flat, out_shape)
        data.append(
            fold_add(
                D,
                (
                    x.data[ravel_index((*o[:axis], k, *o[axis:]), x.shape)]
                    for k in range(x.shape[axis])
                ),
            )
        )
    return Tensor(out_shape, tuple(data))


def _reduce_sum_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x, axis = xs[0], a["axis"]
    data = []
    for flat in range(size(x.shape)):
        i = unravel_index(flat, x.shape)
        data.append(g.data[ravel_index(i[:axis] + i[axis + 1 :], g.shape)])
    return [Tensor(x.shape, tuple(data))]


register(
    name="reduce_sum",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("axis", "nat"),),
    shape=_reduce_sum_shape,
    forward=_reduce_sum_forward,
    jvp=lambda D, xs, dxs, a, env: _reduce_sum_forward(D, dxs, a, env),
    vjp=_reduce_sum_vjp,
    saves="input shape",
    doc="sum over one axis (removed), left fold in index order",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"axis": 1}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"axis": 1},
        ),
    ),
)


def _mean_body(b: Any, x: list[int], a: Attrs) -> int:
    n = size(b.shape_of(x[0]))
    if n == 0:
        raise shape_error("mean", "mean of an empty tensor is undefined", 0, "size >= 1", 0)
    return b.node("div", b.node("sum", x[0]), scalar_const(b, n))


composite(
    name="mean",
    family=FAMILY,
    arity=1,
    body=_mean_body,
    doc="div(sum(x), const N), N = size(x) >= 1 cast once",
    tags=frozenset({"reduction"}),
    samples=(
        sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(second_arg()),
    ),
)


def _reduce_mean_body(b: Any, x: list[int], a: Attrs) -> int:
    s = b.shape_of(x[0])
    n = s[_axis_rule("reduce_mean", [s], a)]
    if n == 0:
        raise shape_error("reduce_mean", "mean over an empty axis is undefined", 0, "dim >= 1", 0)
    return b.node("div", b.node("reduce_sum", x[0], axis=a["axis"]), scalar_const(b, n))


composite(
    name="reduce_mean",
    family=FAMILY,
    arity=1,
    body=_reduce_mean_body,
    attrs=(AttrSpec("axis", "nat"),),
    doc="div(reduce_sum(x, axis), const n) with n the axis length >= 1",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"axis": 0}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"axis": 0},
        ),
    ),
)


# --------------------------------------------------------------------------- reduce_max


def _reduce_max_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, axis = shapes[0], _axis_rule("reduce_max", shapes, a)
    if s[axis] < 1:
        raise shape_error(
            "reduce_max", "max over an empty axis is undefined", 0, "dim >= 1", s[axis]
        )
    return s[:axis] + s[axis + 1 :]


def _argmax_lanes(D: Domain, x: Tensor, axis: int) -> tuple[Shape, list[list[int]], list[int]]:
    """Per output position: the flat input positions along the axis, and the chosen one:
    the first NaN if any, else the first element attaining the maximum (the fold
    m = maximum(m, v) keeps m on ties, and a NaN once reached)."""
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    lanes, pick = [], []
    for flat in range(size(out_shape)):
        o = unravel_index(flat, out_shape)
        lane = [ravel_index((*o[:axis], k, *o[axis:]), x.shape) for k in range(x.shape[axis])]
        j, m = 0, x.data[lane[0]]
        for k in range(1, len(lane)):
            v = x.data[lane[k]]
            if not D.is_nan(m) and (D.is_nan(v) or D.lt(m, v)):
                j, m = k, v
        lanes.append(lane)
        pick.append(j)
    return out_shape, lanes, pick


def _reduce_max_fwd(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x = xs[0]
    out, lanes, pick = _argmax_lanes(D, x, a["axis"])
    return Tensor(out, tuple(x.data[lane[j]] for lane, j in zip(lanes, pick, strict=True)))


def _reduce_max_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    out, lanes, pick = _argmax_lanes(D, xs[0], a["axis"])
    return Tensor(out, tuple(dxs[0].data[lane[j]] for lane, j in zip(lanes, pick, strict=True)))


def _reduce_max_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    _, lanes, pick = _argmax_lanes(D, x, a["axis"])
    data = [D.zero()] * size(x.shape)
    for o, (lane, j) in enumerate(zip(lanes, pick, strict=True)):
        data[lane[j]] = g.data[o]
    return [Tensor(x.shape, tuple(data))]


register(
    name="reduce_max",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("axis", "nat"),),
    shape=_reduce_max_shape,
    forward=_reduce_max_fwd,
    jvp=_reduce_max_jvp,
    vjp=_reduce_max_vjp,
    saves="x (the arg-max positions)",
    doc="max over one axis (removed), the fold m = maximum(m, v) in index order: NaN "
    "propagates (the first NaN wins), ties keep the earlier element; tie rule for the "
    "derivative: the whole cotangent (and the tangent) goes to that one element "
    "(the first maximal one), the others get 0",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"axis": 1}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"axis": 1},
        ),
        sample(
            arg((2, 3), 1, 3, 3, -1, -1, 2),
            attrs={"axis": 1},
            kind="tie",
            note="equal maxima: the first gets the cotangent",
        ),
    ),
)


def _dim_and_keep(op: str, b: Any, x: int, a: Attrs) -> tuple[int, int, Shape]:
    s = b.shape_of(x)
    d = a["dim"]
    if not 0 <= d < len(s):
        raise shape_error(op, "dim out of range", 0, f"0 <= dim < {len(s)}", d)
    if s[d] < 1:
        raise shape_error(op, "reduction over an empty dim is undefined", 0, "dim >= 1", s[d])
    return d, s[d], (*s[:d], 1, *s[d + 1 :])


def _logsumexp_body(b: Any, x: list[int], a: Attrs) -> int:
    d, _, keep = _dim_and_keep("logsumexp", b, x[0], a)
    m = b.node("detach", b.node("reduce_max", x[0], axis=d))
    e = b.node("exp", b.node("sub", x[0], b.node("reshape", m, shape=keep)))
    return b.node("add", b.node("log", b.node("reduce_sum", e, axis=d)), m)


def _var_body(op: str) -> Any:
    def body(b: Any, x: list[int], a: Attrs) -> int:
        d, n, keep = _dim_and_keep(op, b, x[0], a)
        corr = a.get("correction", 1)
        if n - corr < 1:
            raise shape_error(op, "n - correction must be >= 1", 0, f"correction < {n}", corr)
        mu = b.node("reshape", b.node("reduce_mean", x[0], axis=d), shape=keep)
        dev = b.node("sub", x[0], mu)
        ss = b.node("reduce_sum", b.node("mul", dev, dev), axis=d)
        v = b.node("div", ss, scalar_const(b, n - corr))
        return b.node("sqrt", v) if op == "std" else v

    return body


_DIM = AttrSpec("dim", "nat")
_CORRECTION = AttrSpec("correction", "nat", required=False, default=1)

composite(
    name="logsumexp",
    family=FAMILY,
    arity=1,
    attrs=(_DIM,),
    body=_logsumexp_body,
    doc="add(log(reduce_sum(exp(sub(x, reshape(m))), dim)), m) with "
    "m = detach(reduce_max(x, dim)): derivative exp(x - m)/sum, no tie rule",
    algebraic=False,
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"dim": 1}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"dim": 0},
        ),
        sample(
            arg((2, 2), 1, 1, -2, 3),
            attrs={"dim": 1},
            kind="tie",
            note="equal maxima in a row: the detached shift carries no derivative",
        ),
    ),
)
_VAR_SAMPLES = (
    sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"dim": 1}, note="generic point"),
    second_point(
        second_arg(),
        attrs={"dim": 0, "correction": 0},
        note="population form",
    ),
    sample(
        arg((2, 2), 2, 2, -1, 3),
        attrs={"dim": 1},
        kind="boundary",
        note="a constant row: variance 0 (std's derivative is taken as 0 there)",
    ),
)
composite(
    name="var",
    family=FAMILY,
    arity=1,
    attrs=(_DIM, _CORRECTION),
    body=_var_body("var"),
    doc="div(reduce_sum(mul(d, d), dim), n - correction), d = sub(x, reduce_mean(x, dim)) "
    "(n - correction >= 1; correction defaults to 1)",
    algebraic=True,
    tags=frozenset({"reduction"}),
    samples=_VAR_SAMPLES,
)
composite(
    name="std",
    family=FAMILY,
    arity=1,
    attrs=(_DIM, _CORRECTION),
    body=_var_body("std"),
    doc="sqrt(var(x, dim, correction)): derivative 0 where the variance is 0 "
    "(n - correction >= 1; correction defaults to 1)",
    algebraic=False,
    tags=frozenset({"reduction"}),
    samples=_VAR_SAMPLES,
)


# --------------------------------------------------------------------------- cumulative sum


def _cumsum_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, d = shapes[0], a["dim"]
    if not 0 <= d < len(s):
        raise shape_error("cumsum", "dim out of range", 0, f"0 <= dim < {len(s)}", d)
    return s


def _cumsum(D: Domain, t: Tensor, d: int, exclusive: bool, reverse: bool) -> Tensor:
    """Per lane of axis d, in lane order (from the end when `reverse`): y_k is the left fold
    of x_0..x_k (inclusive: y_0 = x_0 as is) or of x_0..x_{k-1} (exclusive: y_0 = the
    domain's zero, y_1 = x_0 as is), each step one rounded add y_k = y_{k-1} + x_k."""
    s = t.shape
    n = s[d]
    if size(s) == 0:
        return t
    lanes = np.moveaxis(np.arange(size(s), dtype=np.int64).reshape(s), d, -1).reshape(-1, n)
    if reverse:
        lanes = lanes[:, ::-1]
    out: list[Any] = [None] * size(s)
    for lane in lanes.tolist():
        acc: Any = None
        for pos in lane:
            v = t.data[pos]
            if exclusive:
                out[pos] = D.zero() if acc is None else acc
            acc = v if acc is None else D.add(acc, v)
            if not exclusive:
                out[pos] = acc
    return Tensor(s, tuple(out))


def _cumsum_attrs(a: Attrs) -> tuple[int, bool, bool]:
    return a["dim"], bool(a.get("exclusive")), bool(a.get("reverse"))


register(
    name="cumsum",
    family=FAMILY,
    arity=1,
    attrs=(
        AttrSpec("dim", "nat"),
        AttrSpec("exclusive", "bool", False),
        AttrSpec("reverse", "bool", False),
    ),
    shape=_cumsum_shape,
    forward=lambda D, xs, a, env: _cumsum(D, xs[0], *_cumsum_attrs(a)),
    jvp=lambda D, xs, dxs, a, env: _cumsum(D, dxs[0], *_cumsum_attrs(a)),
    vjp=lambda D, xs, g, a, env: [
        _cumsum(D, g, a["dim"], bool(a.get("exclusive")), not a.get("reverse"))
    ],
    saves="nothing",
    doc="torch.cumsum(x, dim) with ONNX CumSum's exclusive and reverse: along dim, y_k = "
    "left fold of x_0..x_k in lane order (exclusive: of x_0..x_{k-1}, y_0 = +0; reverse: "
    "lanes run from the end), the first term as is, one rounded add per step (so the last "
    "element of an inclusive cumsum is reduce_sum's fold). JVP: cumsum of the tangent; VJP: "
    "cumsum of the cotangent with reverse flipped (the reverse cumulative sum), same "
    "exclusive",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"dim": 1}, note="generic point"
        ),
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"dim": 0, "exclusive": True, "reverse": True},
            kind="boundary",
            note="exclusive and reverse: the last row is +0, the first the sum of the rest",
        ),
        sample(
            arg((3,), -0.0, -0.0, 1),
            attrs={"dim": 0},
            kind="signed_zero",
            note="-0 first: the first term is taken as is (y_0 = -0, y_1 = -0 + -0 = -0)",
        ),
        sample(arg((1, 0)), attrs={"dim": 1}, kind="boundary", note="an empty lane"),
    ),
)
