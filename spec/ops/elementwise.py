"""The elementwise family: add sub neg mul scale div inv maximum minimum abs relu clamp sqrt
detach const leaky_relu sign hardtanh relu6 hardsigmoid hardswish softsign add_n maximum_n
minimum_n mean_n.

Invariants:
- Binary ops broadcast through `builders.elementwise2`; unary ops are `builders.elementwise1`, one
  domain call per element, and their JVP and VJP push through the same diagonal derivative.
- Conventions: relu'(0) = 0; maximum/minimum ties give each side ḡ·(1/2) (NaN propagates,
  ties, +0 vs −0 included, return a); sqrt' = 0 for x <= 0; clamp' = 0 at the bounds;
  div's denominator cotangent is −(ḡ·((a/b)/b)); sub's second cotangent is 0 − ḡ.
- detach and const are not differentiable (zero JVP and VJP); const casts each exact
  rational into the domain with one rounding.
- `inv` is torch.reciprocal / ONNX Reciprocal (1/x rounded once): no separate reciprocal op.
- leaky_relu: x if x > 0 else slope·x (slope rounded once); its derivative is the slope at
  x = 0 (PyTorch's choice). sign: ±1, +0 at ±0, NaN at NaN; its derivative is 0.
- hardtanh and relu6 are clamp (derivative 0 at the bounds, as PyTorch's); hardsigmoid is
  clamp(x + 3, 0, 6)/6 and hardswish (x·clamp(x + 3, 0, 6))/6 (PyTorch's order; their
  derivatives at ±3 follow clamp's: hardswish' is 0 at −3 and 1 at 3, as PyTorch's);
  softsign is x/(1 + |x|).
- add_n, maximum_n, minimum_n and mean_n (ONNX's variadic Sum, Max, Min, Mean; two or more
  arguments, one is the identity for an importer) are left folds of add, maximum, minimum
  over their arguments (broadcasting as the binary ops), and
  mean_n divides the sum by the argument count once. A tie among n arguments of
  maximum_n/minimum_n splits the cotangent as the nested binary ties do (1/2, 1/4, ...).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import GraphError, op_error
from ..shape import Shape, size
from ..tensor import Tensor
from .builders import (
    composite,
    elementwise1,
    elementwise2,
    max_pick,
    max_split,
    max_tangent,
    same_shape,
    scalar_const,
    second_arg,
    second_point,
    shape_error,
    zeros_like,
)
from .table import Attrs, AttrSpec, Env, Sample, arg, register, sample

__all__ = ["FAMILY"]

FAMILY = "elementwise"


elementwise2(
    name="add",
    family=FAMILY,
    f=lambda D, a, b: D.add(a, b),
    jvp_s=lambda D, a, b, da, db: D.add(da, db),
    vjp_s=lambda D, a, b, g: (g, g),
    saves="nothing",
    doc="a + b (broadcasting)",
    samples=(
        sample(
            arg((2, 3), 1, -2, Fraction(3, 2), Fraction(1, 2), Fraction(5, 4), -3),
            arg((3,), Fraction(1, 2), -1, 2),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((3,), Fraction(1, 2), -2, 2),
        ),
        sample(
            arg((3,), 0, -0.0, -0.0),
            arg((3,), -0.0, 0, -0.0),
            kind="signed_zero",
            note="+0 + -0 = +0, -0 + -0 = -0",
        ),
    ),
)
elementwise2(
    name="sub",
    family=FAMILY,
    f=lambda D, a, b: D.sub(a, b),
    jvp_s=lambda D, a, b, da, db: D.sub(da, db),
    vjp_s=lambda D, a, b, g: (g, D.sub(D.zero(), g)),
    saves="nothing",
    doc="a - b (broadcasting); second cotangent is 0 - g",
    samples=(
        sample(arg((2, 1), 1, -2), arg((1, 3), Fraction(1, 2), -1, 3), note="generic point"),
        second_point(
            second_arg(),
            arg((3,), Fraction(1, 2), -2, 2),
        ),
        sample(
            arg((3,), 0, -0.0, -0.0),
            arg((3,), 0, 0, -0.0),
            kind="signed_zero",
            note="+0 - +0, -0 - +0 = -0, -0 - -0",
        ),
    ),
)
elementwise2(
    name="mul",
    family=FAMILY,
    f=lambda D, a, b: D.mul(a, b),
    jvp_s=lambda D, a, b, da, db: D.add(D.mul(da, b), D.mul(a, db)),
    vjp_s=lambda D, a, b, g: (D.mul(g, b), D.mul(a, g)),
    saves="a, b",
    doc="a * b (broadcasting)",
    samples=(
        sample(arg((3,), 1, -2, Fraction(3, 4)), arg((), Fraction(-3, 2)), note="generic point"),
        second_point(
            second_arg(),
            arg((3,), Fraction(1, 2), -2, 2),
        ),
        sample(
            arg((3,), 0, -0.0, 2),
            arg((3,), -3, 1, -0.0),
            kind="signed_zero",
            note="zero products carry the sign of the operands",
        ),
    ),
)
elementwise2(
    name="div",
    family=FAMILY,
    f=lambda D, a, b: D.div(a, b),
    jvp_s=lambda D, a, b, da, db: D.sub(D.div(da, b), D.mul(db, D.div(D.div(a, b), b))),
    vjp_s=lambda D, a, b, g: (D.div(g, b), D.neg(D.mul(g, D.div(D.div(a, b), b)))),
    saves="a, b",
    doc="a / b (broadcasting); denominator cotangent is -(g*((a/b)/b))",
    samples=(
        sample(
            arg((2, 2), 1, -2, 3, Fraction(1, 2)),
            arg((2,), 2, Fraction(-1, 2)),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((3,), Fraction(1, 2), -2, 2),
        ),
        sample(
            arg((2,), 0, -0.0),
            arg((2,), 2, -3),
            kind="signed_zero",
            note="±0 numerators over both signs",
        ),
    ),
)


def _max_family(*, name: str, larger: bool, samples: tuple[Sample, ...]) -> None:
    def f(D: Domain, a: Any, b: Any) -> Any:
        return max_pick(D, a, b, larger)

    def jvp_s(D: Domain, a: Any, b: Any, da: Any, db: Any) -> Any:
        return max_tangent(D, a, b, da, db, larger)

    def vjp_s(D: Domain, a: Any, b: Any, g: Any) -> tuple[Any, Any]:
        return max_split(D, a, b, g, larger)

    elementwise2(
        name=name,
        family=FAMILY,
        f=f,
        jvp_s=jvp_s,
        vjp_s=vjp_s,
        saves="a, b",
        doc=f"elementwise {name} (broadcasting); NaN propagates, ties return a and split "
        "the cotangent as g*(1/2) to each side",
        samples=samples,
    )


_max_family(
    name="maximum",
    larger=True,
    samples=(
        sample(arg((3,), 1, -2, 3), arg((3,), 2, -3, Fraction(1, 2)), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            arg((3,), Fraction(1, 2), -2, 2),
            kind="tie",
            note="b's -2 ties with a[0][1] (broadcast row)",
        ),
        sample(
            arg((2,), 0, -0.0),
            arg((2,), -0.0, 0),
            kind="signed_zero",
            note="+0 vs -0 compare equal: a tie, a returned",
        ),
    ),
)
_max_family(
    name="minimum",
    larger=False,
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(-1, 2), Fraction(1, 4), -1),
            arg((), Fraction(1, 3)),
            note="generic point",
        ),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            arg((3,), Fraction(1, 2), -2, 2),
            kind="tie",
            note="b's -2 ties with a[0][1] (broadcast row)",
        ),
        sample(
            arg((2,), 0, -0.0),
            arg((2,), -0.0, 0),
            kind="signed_zero",
            note="+0 vs -0 compare equal: a tie, a returned",
        ),
    ),
)


elementwise1(
    name="neg",
    family=FAMILY,
    f=lambda D, x, a: D.neg(x),
    push=lambda D, x, y, t, a: D.neg(t),
    reads="",
    doc="-x",
    samples=(
        sample(arg((3,), 1, -2, Fraction(1, 2)), note="generic point"),
        second_point(second_arg()),
        sample(arg((3,), 0, -0.0, 1), kind="signed_zero", note="neg(+0) = -0, neg(-0) = +0"),
    ),
)


def _scale_c(D: Domain, a: Attrs) -> Any:
    return D.from_rational(a["c"])


elementwise1(
    name="scale",
    family=FAMILY,
    f=lambda D, x, a: D.mul(_scale_c(D, a), x),
    push=lambda D, x, y, t, a: D.mul(_scale_c(D, a), t),
    reads="",
    attrs=(AttrSpec("c", "rational"),),
    doc="c * x, c an exact rational cast into the domain",
    samples=(
        sample(arg((3,), 1, -2, Fraction(1, 2)), attrs={"c": Fraction(1, 3)}, note="generic point"),
        second_point(
            second_arg(),
            attrs={"c": Fraction(3, 2)},
        ),
        sample(
            arg((3,), 0, -0.0, 1),
            attrs={"c": Fraction(-1, 3)},
            kind="signed_zero",
            note="a negative c flips the sign of a zero",
        ),
    ),
)


def _relu(D: Domain, x: Any, a: Attrs) -> Any:
    if D.is_nan(x):
        return x
    return x if D.lt(D.zero(), x) else D.zero()


elementwise1(
    name="relu",
    family=FAMILY,
    f=_relu,
    push=lambda D, x, y, t, a: t if D.lt(D.zero(), x) else D.zero(),
    reads="x",
    doc="x if x > 0 else +0 (NaN propagates); relu'(0) = 0",
    samples=(
        sample(arg((4,), -1, 2, Fraction(-1, 2), 3), note="generic point"),
        second_point(second_arg()),
        sample(arg((3,), 0, -1, 2), kind="kink", note="x = 0: relu'(0) = 0"),
        sample(arg((2,), -0.0, 1), kind="signed_zero", note="relu(-0) = +0"),
    ),
)


def _abs_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return t
    if D.lt(x, D.zero()):
        return D.neg(t)
    return D.zero()


elementwise1(
    name="abs",
    family=FAMILY,
    f=lambda D, x, a: D.abs(x),
    push=_abs_push,
    reads="x",
    doc="|x|; the derivative is sign(x) with 0 at x = 0",
    samples=(
        sample(arg((3,), -1, 2, Fraction(-1, 2)), note="generic point"),
        second_point(second_arg()),
        sample(arg((3,), 0, -1, 2), kind="kink", note="x = 0: abs'(0) = 0"),
        sample(arg((2,), -0.0, 1), kind="signed_zero", note="abs(-0) = +0"),
    ),
)


def _clamp(D: Domain, x: Any, a: Attrs) -> Any:
    if D.is_nan(x):
        return x
    lo, hi = D.from_rational(a["lo"]), D.from_rational(a["hi"])
    if D.lt(x, lo):
        return lo
    if D.lt(hi, x):
        return hi
    return x


def _clamp_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    lo, hi = D.from_rational(a["lo"]), D.from_rational(a["hi"])
    return t if D.lt(lo, x) and D.lt(x, hi) else D.zero()


def _clamp_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if a["lo"] > a["hi"]:
        raise op_error(
            GraphError,
            "clamp",
            "bounds out of order",
            expected="lo <= hi",
            got=(str(a["lo"]), str(a["hi"])),
        )
    return shapes[0]


elementwise1(
    name="clamp",
    family=FAMILY,
    f=_clamp,
    push=_clamp_push,
    reads="x",
    shape=_clamp_shape,
    attrs=(AttrSpec("lo", "rational"), AttrSpec("hi", "rational")),
    doc="min(max(x, lo), hi) with rational bounds lo <= hi; clamp' = 0 at the bounds",
    samples=(
        sample(
            arg((4,), -2, Fraction(-1, 2), Fraction(1, 2), 3),
            attrs={"lo": -1, "hi": 1},
            note="generic point",
        ),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            attrs={"lo": Fraction(-1), "hi": Fraction(1)},
            kind="boundary",
            note="x = 1 sits on hi and x = 1/2 inside",
        ),
        sample(
            arg((3,), -1, 1, Fraction(1, 2)),
            attrs={"lo": -1, "hi": 1},
            kind="boundary",
            note="x on lo and on hi: clamp' = 0 there",
        ),
    ),
)


def _sqrt_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    # sqrt'(x) = 1/(2*sqrt x) for x > 0; defined as 0 for x <= 0 (and NaN), where the
    # derivative is infinite or undefined.
    if D.lt(D.zero(), x):
        return D.div(t, D.mul(D.from_rational(2), y))
    return D.zero()


elementwise1(
    name="sqrt",
    family=FAMILY,
    f=lambda D, x, a: D.sqrt(x),
    push=_sqrt_push,
    reads="xy",
    doc="sqrt(x); cotangent g/(2*y) for x > 0, else 0",
    algebraic=False,
    samples=(
        sample(arg((3,), Fraction(1, 4), 4, 2), note="generic point"),
        second_point(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
        ),
        sample(
            arg((3,), 0, Fraction(1, 4), 4), kind="boundary", note="x = +0: sqrt' is taken as 0"
        ),
        sample(arg((2,), -0.0, 1), kind="signed_zero", note="sqrt(-0) = -0"),
    ),
)


def _identity_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return t


def _detach_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    return xs[0]


register(
    name="detach",
    family=FAMILY,
    arity=1,
    attrs=(),
    shape=same_shape("detach"),
    forward=_detach_forward,
    jvp=lambda D, xs, dxs, a, env: zeros_like(D, xs[0]),
    vjp=lambda D, xs, g, a, env: [zeros_like(D, xs[0])],
    saves="nothing",
    doc="identity forward; zero JVP and VJP",
    differentiable=False,
    samples=(
        sample(arg((2,), 1, -2), note="generic point"),
        second_point(second_arg()),
    ),
)


# --------------------------------------------------------------------------- const


def _const_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if len(a["values"]) != size(a["shape"]):
        raise shape_error(
            "const", "value count does not fill the shape", None, size(a["shape"]), len(a["values"])
        )
    return a["shape"]


register(
    name="const",
    family=FAMILY,
    arity=0,
    attrs=(AttrSpec("shape", "shape"), AttrSpec("values", "rationals")),
    shape=_const_shape,
    forward=lambda D, xs, a, env: Tensor(
        a["shape"], tuple(D.from_rational(q) for q in a["values"])
    ),
    jvp=lambda D, xs, dxs, a, env: Tensor.zeros(D, a["shape"]),
    vjp=lambda D, xs, g, a, env: [],
    saves="nothing",
    doc="exact rational values cast into the domain (one rounding each)",
    differentiable=False,
    samples=(
        sample(attrs={"shape": (2,), "values": (Fraction(1, 3), -2)}, note="generic point"),
        second_point(
            attrs={"shape": (2,), "values": (Fraction(1), Fraction(1, 2))},
        ),
    ),
)


composite(
    name="inv",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node("div", scalar_const(b, 1), x[0]),
    doc="1 / x, as div(const 1, x): torch.reciprocal, ONNX Reciprocal",
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), 2, Fraction(-1, 2), 4), note="generic point"),
        second_point(second_arg()),
    ),
)


LEAKY_SLOPE = Fraction(1, 100)  # leaky_relu's default negative_slope (PyTorch's)


def _slope(D: Domain, a: Attrs) -> Any:
    return D.from_rational(a.get("negative_slope", LEAKY_SLOPE))


def _leaky(D: Domain, x: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return x
    return D.mul(_slope(D, a), x)


def _leaky_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return t
    return D.mul(_slope(D, a), t)


elementwise1(
    name="leaky_relu",
    family=FAMILY,
    f=_leaky,
    push=_leaky_push,
    reads="x",
    attrs=(AttrSpec("negative_slope", "rational", required=False, default=LEAKY_SLOPE),),
    doc="x if x > 0 else negative_slope * x (NaN propagates); derivative t for x > 0, else "
    "negative_slope * t: the slope at x = 0",
    samples=(
        sample(
            arg((4,), -1, 2, Fraction(-1, 2), 3),
            attrs={"negative_slope": Fraction(1, 10)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            note="slope 1/100",
        ),
        sample(arg((3,), 0, -1, 2), kind="kink", note="x = 0: the derivative is the slope"),
        sample(arg((2,), -0.0, 1), kind="signed_zero", note="leaky_relu(-0) = -0"),
    ),
)


def _sign(D: Domain, x: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return D.one()
    if D.lt(x, D.zero()):
        return D.neg(D.one())
    return x if D.is_nan(x) else D.zero()


register(
    name="sign",
    family=FAMILY,
    arity=1,
    attrs=(),
    shape=same_shape("sign"),
    forward=lambda D, xs, a, env: xs[0].map(lambda v: _sign(D, v, a)),
    jvp=lambda D, xs, dxs, a, env: zeros_like(D, xs[0]),
    vjp=lambda D, xs, g, a, env: [zeros_like(D, xs[0])],
    saves="nothing",
    doc="1 if x > 0, -1 if x < 0, +0 at ±0, NaN at NaN; zero JVP and VJP (piecewise "
    "constant; at 0 the derivative is taken as 0)",
    differentiable=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
        sample(arg((3,), 0, -0.0, 1), kind="signed_zero", note="sign(±0) = +0"),
        sample(arg((2,), float("nan"), float("-inf")), kind="special", note="NaN and -inf"),
    ),
)


def _clamp_body(lo: Fraction, hi: Fraction) -> Any:
    return lambda b, x, a: b.node("clamp", x[0], lo=lo, hi=hi)


def _hardtanh_body(b: Any, x: list[int], a: Attrs) -> int:
    return b.node("clamp", x[0], lo=a.get("min_val", -1), hi=a.get("max_val", 1))


_CLAMP_SAMPLES = (
    sample(arg((4,), -2, Fraction(-1, 2), Fraction(1, 2), 3), note="generic point"),
    sample(
        arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
        kind="boundary",
        note="x = 1 on a bound",
    ),
)

composite(
    name="hardtanh",
    family=FAMILY,
    arity=1,
    attrs=(
        AttrSpec("min_val", "rational", required=False, default=Fraction(-1)),
        AttrSpec("max_val", "rational", required=False, default=Fraction(1)),
    ),
    body=_hardtanh_body,
    doc="clamp(x, lo=min_val, hi=max_val) (defaults -1, 1): derivative 0 at the bounds",
    tags=frozenset({"elementwise"}),
    samples=(
        *_CLAMP_SAMPLES,
        sample(
            arg((3,), Fraction(-1, 2), Fraction(4, 5), 0),
            attrs={"min_val": Fraction(-1, 2), "max_val": Fraction(4, 5)},
            kind="boundary",
            note="x on min_val and on max_val",
        ),
    ),
)
composite(
    name="relu6",
    family=FAMILY,
    arity=1,
    body=_clamp_body(Fraction(0), Fraction(6)),
    doc="clamp(x, lo=0, hi=6): derivative 0 at 0 and 6; relu6(-0) = -0",
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((4,), -2, Fraction(1, 2), 3, 7), note="generic point"),
        sample(arg((3,), 0, 6, -0.0), kind="boundary", note="x on 0 and on 6, and -0"),
    ),
)


def _hardsigmoid_body(b: Any, x: list[int], a: Attrs) -> int:
    c = b.node("clamp", b.node("add", x[0], scalar_const(b, 3)), lo=Fraction(0), hi=Fraction(6))
    return b.node("div", c, scalar_const(b, 6))


def _hardswish_body(b: Any, x: list[int], a: Attrs) -> int:
    c = b.node("clamp", b.node("add", x[0], scalar_const(b, 3)), lo=Fraction(0), hi=Fraction(6))
    return b.node("div", b.node("mul", x[0], c), scalar_const(b, 6))


_HARD_SAMPLES = (
    sample(arg((4,), -4, Fraction(-1, 2), 1, 4), note="generic point"),
    second_point(
        arg((2, 3), 1, -2, Fraction(1, 2), 5, Fraction(1, 4), Fraction(-7, 2)),
    ),
    sample(arg((3,), -3, 3, 0), kind="boundary", note="x = -3 and x = 3: clamp's bounds"),
    sample(arg((2,), -0.0, 1), kind="signed_zero", note="x = -0"),
)

composite(
    name="hardsigmoid",
    family=FAMILY,
    arity=1,
    body=_hardsigmoid_body,
    doc="div(clamp(add(x, 3), 0, 6), 6): derivative 1/6 inside, 0 at and beyond ±3",
    tags=frozenset({"elementwise"}),
    samples=_HARD_SAMPLES,
)
composite(
    name="hardswish",
    family=FAMILY,
    arity=1,
    body=_hardswish_body,
    doc="div(mul(x, clamp(add(x, 3), 0, 6)), 6): derivative 0 at x = -3 and 1 at x = 3",
    tags=frozenset({"elementwise"}),
    samples=_HARD_SAMPLES,
)
composite(
    name="softsign",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node(
        "div", x[0], b.node("add", scalar_const(b, 1), b.node("abs", x[0]))
    ),
    doc="div(x, add(1, abs(x))): derivative 1 at 0 (abs'(0) = 0 is multiplied by x = 0)",
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(arg((3,), 0, -0.0, 1), kind="kink", note="x = ±0: |x| has its kink"),
    ),
)


def _fold_body(op: str, name: str) -> Any:
    def body(b: Any, x: list[int], a: Attrs) -> int:
        if len(x) < 2:
            raise shape_error(name, "needs at least two arguments", None, ">= 2", len(x))
        acc = x[0]
        for v in x[1:]:
            acc = b.node(op, acc, v)
        return acc

    return body


def _mean_n_body(b: Any, x: list[int], a: Attrs) -> int:
    return b.node("div", _fold_body("add", "mean_n")(b, x, a), scalar_const(b, len(x)))


_N_SAMPLES = (
    sample(
        arg((3,), 1, -2, Fraction(3, 2)),
        arg((3,), Fraction(1, 2), -1, 2),
        arg((1,), Fraction(-3, 4)),
        note="generic point: three arguments, one broadcast",
    ),
    sample(arg((2,), 1, -2), arg((2, 1), Fraction(1, 2), 3), note="two arguments, broadcast"),
)
_N_TIES = (
    sample(
        arg((3,), 1, -2, 2),
        arg((3,), 1, 3, 2),
        arg((3,), 1, -2, 0),
        kind="tie",
        note="a three-way tie (1), and pairwise ties (-2, 2)",
    ),
)

composite(
    name="add_n",
    family=FAMILY,
    arity=None,
    body=_fold_body("add", "add_n"),
    doc="ONNX Sum: add(add(x0, x1), x2)... (a left fold, broadcasting)",
    tags=frozenset({"elementwise", "broadcast"}),
    samples=_N_SAMPLES,
)
composite(
    name="maximum_n",
    family=FAMILY,
    arity=None,
    body=_fold_body("maximum", "maximum_n"),
    doc="ONNX Max: maximum(maximum(x0, x1), x2)... (a left fold, broadcasting; ties split "
    "the cotangent as the nested binary ties do)",
    tags=frozenset({"elementwise", "broadcast"}),
    samples=_N_SAMPLES + _N_TIES,
)
composite(
    name="minimum_n",
    family=FAMILY,
    arity=None,
    body=_fold_body("minimum", "minimum_n"),
    doc="ONNX Min: minimum(minimum(x0, x1), x2)... (a left fold, broadcasting; ties split "
    "the cotangent as the nested binary ties do)",
    tags=frozenset({"elementwise", "broadcast"}),
    samples=_N_SAMPLES + _N_TIES,
)
composite(
    name="mean_n",
    family=FAMILY,
    arity=None,
    body=_mean_n_body,
    doc="ONNX Mean: div(add_n's left fold, n), n the argument count",
    tags=frozenset({"elementwise", "broadcast"}),
    samples=_N_SAMPLES,
)
