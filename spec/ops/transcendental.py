"""The transcendental family: exp log safe_log tanh sigmoid softplus gelu silu sin cos.

Invariants:
- exp, log, tanh, sin, cos and sigmoid are primitives rounded once per element (sigmoid is a
  primitive so its derivative y·(1 − y) stays finite where exp(−x) overflows); softplus,
  gelu, silu and safe_log are composites whose bodies are normative.
- log refuses inputs <= 0 or NaN on graph nodes (a precondition); safe_log is total:
  log(maximum(x, SAFE_LOG_EPS)).
- GELU_C and GELU_K are exact rationals cast once; the verifier and the certificate checker
  share them from here.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import DomainError
from ..tensor import Tensor
from .builders import composite, scalar_const, unary
from .table import Attrs, arg, sample

__all__ = ["FAMILY", "GELU_C", "GELU_K", "SAFE_LOG_EPS"]

FAMILY = "transcendental"


unary(
    name="exp",
    family=FAMILY,
    f=lambda D, x, a: D.exp(x),
    push=lambda D, x, y, t, a: D.mul(t, y),
    saves="y",
    doc="exp(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
    ),
)


def _log_pre(D: Domain, xs: list[Tensor], a: Attrs) -> None:
    for i, v in enumerate(xs[0].data):
        if D.is_nan(v) or not D.lt(D.zero(), v):
            raise DomainError(
                f"log: input 0 element {i} is {v}; log refuses inputs <= 0 or NaN (use safe_log)"
            )


unary(
    name="log",
    family=FAMILY,
    f=lambda D, x, a: D.log(x),
    push=lambda D, x, y, t, a: D.div(t, x),
    saves="x",
    doc="natural log; refuses to build on any input <= 0 or NaN",
    algebraic=False,
    precondition=_log_pre,
    samples=(
        sample(arg((3,), Fraction(1, 2), 2, 3), note="generic point"),
        sample(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
            note="a second generic point",
        ),
    ),
)
unary(
    name="tanh",
    family=FAMILY,
    f=lambda D, x, a: D.tanh(x),
    push=lambda D, x, y, t, a: D.mul(t, D.sub(D.one(), D.mul(y, y))),
    saves="y",
    doc="tanh(x); derivative 1 - y*y",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
    ),
)
unary(
    name="sin",
    family=FAMILY,
    f=lambda D, x, a: D.sin(x),
    push=lambda D, x, y, t, a: D.mul(t, D.cos(x)),
    saves="x",
    doc="sin(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
    ),
)
unary(
    name="cos",
    family=FAMILY,
    f=lambda D, x, a: D.cos(x),
    push=lambda D, x, y, t, a: D.neg(D.mul(t, D.sin(x))),
    saves="x",
    doc="cos(x)",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
    ),
)


def _sigmoid(D: Domain, x: Any, a: Attrs) -> Any:
    return D.div(D.one(), D.add(D.one(), D.exp(D.neg(x))))


# A primitive rather than the composite div(1, add(1, exp(neg x))): composed, the
# derivative for x < about -88 (binary32) is (-0)*inf = NaN, because exp(-x) overflows.
# The explicit rule y*(1 - y) stays finite.
unary(
    name="sigmoid",
    family=FAMILY,
    f=_sigmoid,
    push=lambda D, x, y, t, a: D.mul(t, D.mul(y, D.sub(D.one(), y))),
    saves="y",
    doc="div(1, add(1, exp(neg x))); derivative mul(y, sub(1, y))",
    algebraic=False,
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
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
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
    ),
)

GELU_C = Fraction(0.7978845608028654)  # the binary64 nearest sqrt(2/pi), as an exact rational
GELU_K = Fraction(44715, 10**6)


def _gelu_body(b: Any, x: list[int], a: Attrs) -> int:
    x0 = x[0]
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
    body=_gelu_body,
    doc="tanh form: mul(mul(1/2, x), add(1, tanh(mul(c, add(x, mul(k, mul(mul(x,x),x)))))))"
    " with c = binary64 sqrt(2/pi) = 0.7978845608028654 and k = 0.044715, both exact "
    "rationals cast once",
    algebraic=False,
    tags=frozenset({"elementwise"}),
    samples=(
        sample(arg((3,), -1, Fraction(1, 2), 2), note="generic point"),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
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
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            note="a second generic point",
        ),
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
        sample(
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
            note="a second generic point",
        ),
        sample(
            arg((3,), Fraction(1, 33554432), 0, 2),
            kind="boundary",
            note="x below eps = 2**-24 (and 0) reads log(eps)",
        ),
    ),
)
