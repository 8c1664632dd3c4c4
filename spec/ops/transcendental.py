"""The transcendental family: exp log safe_log tanh sigmoid softplus gelu silu sin cos erf
log1p expm1 elu celu selu mish pow pow_tensor.

Invariants:
- exp, log, tanh, sin, cos, erf, log1p and expm1 are primitives rounded once per element
  (correctly rounded: MPFR); sigmoid is a primitive so its derivative y·(1 − y) stays
  finite where exp(−x) overflows; softplus, gelu, silu, safe_log, selu and mish are
  composites whose bodies are normative.
- elu and celu are primitives (a composite through maximum/minimum would take a tie's half
  derivative at 0): x for x > 0, else α·expm1(x) (elu) or α·expm1(x/α) (celu), α rounded
  once into the domain, each operation rounded once in that order. Derivative for x <= 0
  α·exp(x) (elu; α at x = 0, PyTorch's and JAX's choice) and exp(x/α) (celu). The
  derivative rules of erf, log1p, expm1, elu and celu read x only (never the forward).
- gelu's `approximate` is "none" (the default: the exact erf form, as `F.gelu(x)`, ONNX's
  Gelu and every name taken from PyTorch: PyTorch's defaults) or "tanh" (the tanh
  approximation, named explicitly).
- log refuses inputs <= 0 or NaN on graph nodes (a precondition); safe_log is total:
  log(maximum(x, SAFE_LOG_EPS)).
- pow(x, exponent) (torch.pow with a number, aten pow.Tensor_Scalar) and pow_tensor(a, b)
  (torch.pow of two tensors, ONNX Pow, broadcasting) are primitives: one correctly
  rounded MPFR pow per element (C99 special values: x**0 = 1 even for NaN or 0, 1**y = 1,
  a negative base to a non-integer is NaN, ±0 to a negative power ±inf). pow's exponent is
  an exact rational rounded once into the domain (as `scale`'s c); its derivative is
  t·(e·x**e1) with e1 = exponent − 1 (exact, then rounded once), and 0 for exponent 0
  (PyTorch's: no 0·inf at x = 0). pow_tensor's derivatives (PyTorch's rule): to a,
  g·(b·a**(b − 1)) with b − 1 rounded, 0 where b = 0; to b, g·(a**b·log a), 0 where a = ±0
  and b >= 0 (a < 0 gives NaN through log; a = ±0 with b < 0 gives ±inf·(−inf)).
- GELU_C and GELU_K are exact rationals cast once; the verifier and the certificate checker
  share them from here.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import DomainError, GraphError, op_error
from ..mathfns import MATH_FNS
from ..tensor import Tensor
from .builders import (
    composite,
    elementwise1,
    elementwise2,
    scalar_const,
    second_arg,
    second_point,
)
from .table import Attrs, AttrSpec, arg, sample

__all__ = [
    "ERF_C",
    "FAMILY",
    "GELU_C",
    "GELU_K",
    "GELU_SQRT1_2",
    "SAFE_LOG_EPS",
    "SELU_ALPHA",
    "SELU_SCALE",
]

FAMILY = "transcendental"


elementwise1(
    name="exp",
    math=MATH_FNS["exp"],
    family=FAMILY,
    f=lambda D, x, a: D.exp(x),
    push=lambda D, x, y, t, a: D.mul(t, y),
    reads="y",
    doc="exp(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)


def _log_pre(D: Domain, xs: list[Tensor], a: Attrs) -> None:
    for i, v in enumerate(xs[0].data):
        if D.is_nan(v) or not D.lt(D.zero(), v):
            raise DomainError(
                f"log: input 0 element {i} is {v}; log refuses inputs <= 0 or NaN (use safe_log)"
            )


elementwise1(
    name="log",
    math=MATH_FNS["log"],
    family=FAMILY,
    f=lambda D, x, a: D.log(x),
    push=lambda D, x, y, t, a: D.div(t, x),
    reads="x",
    doc="natural log; refuses to build on any input <= 0 or NaN",
    algebraic=False,
    precondition=_log_pre,
    samples=(
        sample(arg((3,), Fraction(1, 2), 2, 3), note="generic point"),
        second_point(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
        ),
    ),
)
elementwise1(
    name="tanh",
    math=MATH_FNS["tanh"],
    family=FAMILY,
    f=lambda D, x, a: D.tanh(x),
    push=lambda D, x, y, t, a: D.mul(t, D.sub(D.one(), D.mul(y, y))),
    reads="y",
    doc="tanh(x); derivative 1 - y*y",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)
elementwise1(
    name="sin",
    math=MATH_FNS["sin"],
    family=FAMILY,
    f=lambda D, x, a: D.sin(x),
    push=lambda D, x, y, t, a: D.mul(t, D.cos(x)),
    reads="x",
    doc="sin(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)
elementwise1(
    name="cos",
    math=MATH_FNS["cos"],
    family=FAMILY,
    f=lambda D, x, a: D.cos(x),
    push=lambda D, x, y, t, a: D.neg(D.mul(t, D.sin(x))),
    reads="x",
    doc="cos(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)


def _sigmoid(D: Domain, x: Any, a: Attrs) -> Any:
    return D.div(D.one(), D.add(D.one(), D.exp(D.neg(x))))


# A primitive rather than the composite div(1, add(1, exp(neg x))): composed, the
# derivative for x < about -88 (binary32) is (-0)*inf = NaN, because exp(-x) overflows.
# The explicit rule y*(1 - y) stays finite.
elementwise1(
    name="sigmoid",
    family=FAMILY,
    f=_sigmoid,
    push=lambda D, x, y, t, a: D.mul(t, D.mul(y, D.sub(D.one(), y))),
    reads="y",
    doc="div(1, add(1, exp(neg x))); derivative mul(y, sub(1, y))",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)


def _softplus_body(b: Any, x: list[int], a: Attrs) -> int:
    # max(x, 0) + log(1 + exp(-|x|)): no overflow; at x = 0 the tie rule of maximum gives
    # 1/2 and abs'(0) = 0, so the composed derivative is the true sigmoid(0) = 1/2.
    tail = b.node(
        "log", b.node("add", scalar_const(b, 1), b.node("exp", b.node("neg", b.node("abs", x[0]))))
    )
    return b.node("add", b.node("maximum", x[0], scalar_const(b, 0)), tail)


composite(
    name="softplus",
    family=FAMILY,
    arity=1,
    body=_softplus_body,
    doc="add(maximum(x, 0), log(add(1, exp(neg(abs x)))))",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)

GELU_C = Fraction(0.7978845608028654)  # the binary64 nearest sqrt(2/pi), as an exact rational
GELU_K = Fraction(44715, 10**6)
GELU_SQRT1_2 = Fraction(0.7071067811865476)  # the binary64 nearest 1/sqrt(2), exact rational
GELU_FORMS = ("tanh", "none")


def _gelu_body(b: Any, x: list[int], a: Attrs) -> int:
    form = a.get("approximate") or "none"
    if form not in GELU_FORMS:
        raise op_error(
            GraphError, "gelu", "attribute 'approximate' unknown", expected=GELU_FORMS, got=form
        )
    x0 = x[0]
    if form == "none":
        # PyTorch's order: (x * 1/2) * (1 + erf(x * c)), c the binary64 nearest 1/sqrt(2)
        e = b.node("erf", b.node("mul", x0, scalar_const(b, GELU_SQRT1_2)))
        return b.node(
            "mul",
            b.node("mul", x0, scalar_const(b, Fraction(1, 2))),
            b.node("add", scalar_const(b, 1), e),
        )
    x3 = b.node("mul", b.node("mul", x0, x0), x0)
    inner = b.node("add", x0, b.node("mul", scalar_const(b, GELU_K), x3))
    t = b.node("tanh", b.node("mul", scalar_const(b, GELU_C), inner))
    return b.node(
        "mul",
        b.node("mul", scalar_const(b, Fraction(1, 2)), x0),
        b.node("add", scalar_const(b, 1), t),
    )


composite(
    name="gelu",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("approximate", "str", required=False, default="none"),),
    body=_gelu_body,
    doc="approximate='none' (the default, exact, as F.gelu and ONNX Gelu): mul(mul(x, 1/2), "
    "add(1, erf(mul(x, s)))) with s = binary64 1/sqrt(2) = 0.7071067811865476; "
    "approximate='tanh' (named explicitly): mul(mul(1/2, x), add(1, tanh(mul(c, add(x, "
    "mul(k, mul(mul(x,x),x))))))) with c = binary64 sqrt(2/pi) = 0.7978845608028654 and "
    "k = 0.044715; the constants are exact rationals cast once",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
        sample(
            arg((3,), -1, Fraction(1, 2), 2),
            attrs={"approximate": "tanh"},
            note="the tanh form at a generic point",
        ),
        sample(
            arg((3,), 0, -0.0, -6),
            attrs={"approximate": "none"},
            kind="signed_zero",
            note="erf form at ±0 (gelu(-0) = -0) and far left (erf(-6/sqrt 2) rounds to -1)",
        ),
    ),
)
composite(
    name="silu",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node("mul", x[0], b.node("sigmoid", x[0])),
    doc="mul(x, sigmoid x)",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        second_point(second_arg()),
    ),
)

SAFE_LOG_EPS = Fraction(1, 2**24)  # exact in binary64/32, bfloat16 and float16


composite(
    name="safe_log",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node("log", b.node("maximum", x[0], scalar_const(b, SAFE_LOG_EPS))),
    doc="log(maximum(x, 2**-24)): total (accepts every input; NaN gives NaN)",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), Fraction(1, 2), 2, 3), note="generic point"),
        second_point(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
        ),
        sample(
            arg((3,), Fraction(1, 33554432), 0, 2),
            kind="boundary",
            note="x below eps = 2**-24 (and 0) reads log(eps)",
        ),
    ),
)


_GENERIC = (
    sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
    second_point(second_arg()),
)

ERF_C = Fraction("1.128379167095512573896158903121545171688101258657997713688171443421285")
"""2/sqrt(pi) to 70 significant digits, as an exact rational (cast once into a domain)."""


elementwise1(
    name="erf",
    math=MATH_FNS["erf"],
    family=FAMILY,
    reads="x",
    f=lambda D, x, a: D.erf(x),
    push=lambda D, x, y, t, a: D.mul(t, D.mul(D.from_rational(ERF_C), D.exp(D.neg(D.mul(x, x))))),
    doc="erf(x), correctly rounded; derivative mul(t, mul(c, exp(neg(mul(x, x))))) with "
    "c = 2/sqrt(pi) cast once",
    samples=(
        *_GENERIC,
        sample(arg((3,), 0, -0.0, 6), kind="signed_zero", note="erf(±0) = ±0; erf(6) rounds to 1"),
        sample(
            arg((3,), float("inf"), float("-inf"), float("nan")),
            kind="special",
            note="erf(±inf) = ±1, NaN propagates; derivative 0 at ±inf",
        ),
    ),
    algebraic=False,
)
elementwise1(
    name="log1p",
    math=MATH_FNS["log1p"],
    family=FAMILY,
    reads="x",
    f=lambda D, x, a: D.log1p(x),
    push=lambda D, x, y, t, a: D.div(t, D.add(D.one(), x)),
    doc="log(1 + x), correctly rounded (NaN for x < -1, -inf at -1); derivative div(t, add(1, x))",
    samples=(
        sample(arg((3,), Fraction(-1, 2), Fraction(1, 2), 2), note="generic point"),
        second_point(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 4)),
        ),
        sample(
            arg((3,), 0, -0.0, Fraction(1, 2**30)),
            kind="signed_zero",
            note="log1p(±0) = ±0; a tiny x gives x itself",
        ),
        sample(
            arg((3,), -1, -2, float("inf")),
            kind="special",
            note="log1p(-1) = -inf, log1p(x < -1) = NaN, log1p(inf) = inf",
        ),
    ),
    algebraic=False,
)
elementwise1(
    name="expm1",
    math=MATH_FNS["expm1"],
    family=FAMILY,
    reads="x",
    f=lambda D, x, a: D.expm1(x),
    push=lambda D, x, y, t, a: D.mul(t, D.exp(x)),
    doc="exp(x) - 1, correctly rounded; derivative mul(t, exp(x))",
    samples=(
        *_GENERIC,
        sample(
            arg((3,), 0, -0.0, Fraction(1, 2**30)),
            kind="signed_zero",
            note="expm1(±0) = ±0; a tiny x gives x itself",
        ),
        sample(
            arg((3,), float("-inf"), float("inf"), -200),
            kind="special",
            note="expm1(-inf) = -1, expm1(inf) = inf, expm1(-200) rounds to -1",
        ),
    ),
    algebraic=False,
)


def _elu(D: Domain, x: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return x
    return D.mul(D.from_rational(a.get("alpha", 1)), D.expm1(x))


def _elu_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return t
    return D.mul(t, D.mul(D.from_rational(a.get("alpha", 1)), D.exp(x)))


_KINK_SAMPLES = (
    sample(arg((3,), 0, -1, 2), kind="kink", note="x = 0 takes the x <= 0 branch"),
    sample(arg((2,), -0.0, 1), kind="signed_zero", note="x = -0 gives -0 (alpha > 0)"),
)

elementwise1(
    name="elu",
    family=FAMILY,
    reads="x",
    f=_elu,
    push=_elu_push,
    attrs=(AttrSpec("alpha", "rational", required=False, default=Fraction(1)),),
    doc="x if x > 0 else mul(alpha, expm1(x)) (NaN propagates); derivative t for x > 0, else "
    "mul(t, mul(alpha, exp(x))): alpha at x = 0",
    samples=(
        sample(
            arg((4,), -1, Fraction(1, 2), 2, Fraction(-3, 2)),
            attrs={"alpha": Fraction(3, 2)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            note="alpha = 1",
        ),
        *_KINK_SAMPLES,
    ),
    algebraic=False,
)


def _celu_shape(shapes: list[Any], a: Attrs) -> Any:
    if a.get("alpha", 1) == 0:
        raise op_error(GraphError, "celu", "alpha must not be 0", expected="alpha != 0", got=0)
    return shapes[0]


def _celu(D: Domain, x: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return x
    al = D.from_rational(a.get("alpha", 1))
    return D.mul(al, D.expm1(D.div(x, al)))


def _celu_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return t
    return D.mul(t, D.exp(D.div(x, D.from_rational(a.get("alpha", 1)))))


elementwise1(
    name="celu",
    family=FAMILY,
    reads="x",
    f=_celu,
    push=_celu_push,
    shape=_celu_shape,
    attrs=(AttrSpec("alpha", "rational", required=False, default=Fraction(1)),),
    doc="x if x > 0 else mul(alpha, expm1(div(x, alpha))) (alpha != 0); derivative t for "
    "x > 0, else mul(t, exp(div(x, alpha))): 1 at x = 0",
    samples=(
        sample(
            arg((4,), -1, Fraction(1, 2), 2, Fraction(-3, 2)),
            attrs={"alpha": Fraction(3, 2)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            note="alpha = 1",
        ),
        *_KINK_SAMPLES,
    ),
    algebraic=False,
)

SELU_ALPHA = Fraction(1.6732632423543772)  # PyTorch's binary64 constants, exact rationals
SELU_SCALE = Fraction(1.0507009873554805)

composite(
    name="selu",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node("scale", b.node("elu", x[0], alpha=SELU_ALPHA), c=SELU_SCALE),
    doc="scale(elu(x, alpha=1.6732632423543772), c=1.0507009873554805) (PyTorch's binary64 "
    "constants; elu rounds, then the product with the rounded scale rounds)",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(*_GENERIC, *_KINK_SAMPLES),
)
composite(
    name="mish",
    family=FAMILY,
    arity=1,
    body=lambda b, x, a: b.node("mul", x[0], b.node("tanh", b.node("softplus", x[0]))),
    doc="mul(x, tanh(softplus(x)))",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        *_GENERIC,
        sample(arg((2,), 0, -0.0), kind="signed_zero", note="mish(0): softplus's tie at 0"),
    ),
)


# --------------------------------------------------------------------------- pow


def _pow_e(D: Domain, a: Attrs, shift: int = 0) -> Any:
    return D.from_rational(Fraction(a["exponent"]) - shift)


def _pow_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if Fraction(a["exponent"]) == 0:
        return D.zero()
    return D.mul(t, D.mul(_pow_e(D, a), D.pow(x, _pow_e(D, a, 1))))


_NAN, _INF = float("nan"), float("inf")

elementwise1(
    name="pow",
    family=FAMILY,
    reads="x",
    f=lambda D, x, a: D.pow(x, _pow_e(D, a)),
    push=_pow_push,
    attrs=(AttrSpec("exponent", "rational"),),
    doc="pow(x, e), e = exponent rounded once, correctly rounded (C99 special values); "
    "derivative mul(t, mul(e, pow(x, e1))) with e1 = exponent - 1 rounded once; 0 for "
    "exponent 0",
    samples=(
        sample(
            arg((3,), Fraction(1, 2), 2, 3),
            attrs={"exponent": Fraction(3, 2)},
            note="generic point",
        ),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            attrs={"exponent": 3},
            note="an integer exponent: negative bases keep their sign",
        ),
        sample(
            arg((3,), -2, Fraction(1, 2), 3),
            attrs={"exponent": -2},
            note="a negative integer exponent",
        ),
        sample(
            arg((3,), 0, -0.0, 2),
            attrs={"exponent": 0},
            kind="boundary",
            note="x**0 = 1, 0**0 = 1; the derivative is 0 (PyTorch's)",
        ),
        sample(
            arg((3,), 0, -0.0, 1),
            attrs={"exponent": -1},
            kind="signed_zero",
            note="(+0)**-1 = inf, (-0)**-1 = -inf",
        ),
        sample(
            arg((3,), 0, -1, 4),
            attrs={"exponent": Fraction(1, 2)},
            kind="boundary",
            note="a fractional exponent: NaN below 0, an infinite derivative at 0",
        ),
        sample(
            arg((3,), _NAN, _INF, -_INF),
            attrs={"exponent": 3},
            kind="special",
            note="NaN propagates; (±inf)**3 = ±inf",
        ),
        sample(
            arg((2,), _NAN, _INF),
            attrs={"exponent": 0},
            kind="special",
            note="NaN**0 = inf**0 = 1",
        ),
    ),
    algebraic=False,
)


def _pow_da(D: Domain, a: Any, b: Any, t: Any) -> Any:
    if D.eq(b, D.zero()):
        return D.zero()
    return D.mul(t, D.mul(b, D.pow(a, D.sub(b, D.one()))))


def _pow_db(D: Domain, a: Any, b: Any, t: Any) -> Any:
    if D.eq(a, D.zero()) and D.ge(b, D.zero()):
        return D.zero()
    return D.mul(t, D.mul(D.pow(a, b), D.log(a)))


elementwise2(
    name="pow_tensor",
    family=FAMILY,
    f=lambda D, a, b: D.pow(a, b),
    jvp_s=lambda D, a, b, da, db: D.add(_pow_da(D, a, b, da), _pow_db(D, a, b, db)),
    vjp_s=lambda D, a, b, g: (_pow_da(D, a, b, g), _pow_db(D, a, b, g)),
    saves="a, b",
    doc="pow(a, b) (broadcasting), correctly rounded (C99 special values); cotangents "
    "mul(g, mul(b, pow(a, sub(b, 1)))) (0 where b = 0) and mul(g, mul(pow(a, b), log(a))) "
    "(0 where a = ±0 and b >= 0; NaN for a < 0)",
    algebraic=False,
    samples=(
        sample(
            arg((2, 3), Fraction(1, 2), 2, 3, Fraction(3, 2), Fraction(1, 4), 5),
            arg((3,), Fraction(3, 2), -1, Fraction(1, 2)),
            note="generic point (positive bases, broadcast exponent)",
        ),
        sample(
            arg((3,), -2, Fraction(-1, 2), 3),
            arg((3,), 3, -2, 2),
            kind="boundary",
            note="negative bases to integer exponents: the domain's edge in b (a**b is NaN "
            "for b off the integers), so the derivative to b is NaN",
        ),
        sample(
            arg((4,), 0, 0, -0.0, 2),
            arg((4,), 0, 2, -1, 0),
            kind="boundary",
            note="0**0 = 1, 0**2 = 0 (derivative to b 0), (-0)**-1 = -inf, 2**0 = 1 (to a 0)",
        ),
        sample(
            arg((3,), -8, 1, -1),
            arg((3,), Fraction(1, 3), _NAN, _INF),
            kind="special",
            note="(-8)**(1/3) = NaN, 1**NaN = 1, (-1)**inf = 1",
        ),
    ),
)
