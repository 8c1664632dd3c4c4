"""Per-op laws of the transcendental family: exp, log, safe_log, tanh, sigmoid, softplus,
gelu, silu, sin, cos.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- exp is characterised by y' = y, y(0) = 1 and log by exp(y) = x (x > 0); tanh is written
  through exp, sin and cos in Euler form; the gelu constant is recomputed with mpmath.
- safe_log's kink at 2⁻²⁴ takes maximum's tie, dx/(2·2⁻²⁴); softplus at 0 is compared with
  the derivative of the independent definition (σ(0) = 1/2).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import sympy

from spec.tensor import Tensor

from ..decide import lt
from .core import (
    SMALL_SHAPES,
    UNARY_SHAPES,
    Arr,
    Case,
    kinked_unary,
    law,
    pattern,
    rat,
    ufunc,
    unary_free,
    vlog,
    vmax,
)

_vtanh_def = ufunc(lambda v: (sympy.exp(v) - sympy.exp(-v)) / (sympy.exp(v) + sympy.exp(-v)), 1)


def _exp_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    X = c[0].data
    for k, y in enumerate(out.data):
        res += [sympy.diff(y, X[k]) - y, y.subs(X[k], 0) - 1]
        res += [sympy.diff(y, X[j]) for j in range(len(X)) if j != k]
    return res


law(
    op="exp",
    cases=unary_free(),
    definition_text="the solution of y' = y, y(0) = 1, elementwise",
    derivative_text="jvp = exp(x)·dx",
    characterize=_exp_char,
)

__all__: list[str] = []


def _log_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    for x, y in zip(v[0].data, out.data, strict=True):
        res += [sympy.exp(y) - x, bool(y.is_real)]
    return res


law(
    op="log",
    cases=[Case((s,), pattern("pos")) for s in UNARY_SHAPES],
    definition_text=(
        "the real inverse of exp: exp(y) = x with y real, for x > 0 (the op's precondition)"
    ),
    derivative_text="jvp = dx/x for x > 0",
    characterize=_log_char,
)

law(
    op="tanh",
    cases=unary_free(),
    definition_text="(e^x - e^-x)/(e^x + e^-x)",
    derivative_text="jvp = (1 - tanh²x)·dx",
    definition=lambda v, a, e: _vtanh_def(v[0]),
)

law(
    op="sin",
    cases=unary_free(),
    definition_text="(e^{ix} - e^{-ix})/(2i)",
    derivative_text="jvp = cos(x)·dx",
    definition=lambda v, a, e: ufunc(
        lambda x: (sympy.exp(sympy.I * x) - sympy.exp(-sympy.I * x)) / (2 * sympy.I), 1
    )(v[0]),
)

law(
    op="cos",
    cases=unary_free(),
    definition_text="(e^{ix} + e^{-ix})/2",
    derivative_text="jvp = -sin(x)·dx",
    definition=lambda v, a, e: ufunc(
        lambda x: (sympy.exp(sympy.I * x) + sympy.exp(-sympy.I * x)) / 2, 1
    )(v[0]),
)

law(
    op="sigmoid",
    cases=unary_free(SMALL_SHAPES),
    definition_text="1/(1 + exp(-x))",
    derivative_text="jvp = σ(x)(1 - σ(x))·dx",
    definition=lambda v, a, e: ufunc(lambda x: 1 / (1 + sympy.exp(-x)), 1)(v[0]),
)

law(
    op="softplus",
    cases=kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    definition_text="log(1 + exp(x)) (the spec computes max(x, 0) + log(1 + exp(-|x|)))",
    derivative_text=(
        "jvp = σ(x)·dx everywhere; at x = 0 the composed subgradient (maximum's tie 1/2 plus "
        "abs'(0) = 0) gives σ(0) = 1/2, the true derivative, compared with the derivative of the "
        "independent definition"
    ),
    definition=lambda v, a, e: ufunc(lambda x: sympy.log(1 + sympy.exp(x)), 1)(v[0]),
    conv_jvp="definition",
)


def _gelu_c() -> sympy.Rational:
    """The binary64 nearest to sqrt(2/pi), computed here with mpmath (not taken from spec)."""
    with mpmath.workdps(50):
        f = float(mpmath.sqrt(2 / mpmath.pi))
    return rat(Fraction(f))


_GELU_K = sympy.Rational(44715, 10**6)

law(
    op="gelu",
    cases=unary_free(SMALL_SHAPES),
    definition_text=(
        "x/2·(1 + tanh(c·(x + k·x³))) with c = the binary64 nearest sqrt(2/π) (0.7978845608028654, "
        "as an exact rational) and k = 0.044715"
    ),
    derivative_text="jvp = d/dx of the tanh form (smooth)",
    definition=lambda v, a, e: ufunc(
        lambda x: x / 2 * (1 + sympy.tanh(_gelu_c() * (x + _GELU_K * x**3))), 1
    )(v[0]),
)

law(
    op="silu",
    cases=unary_free(SMALL_SHAPES),
    definition_text="x/(1 + exp(-x))",
    derivative_text="jvp = (σ(x) + x·σ'(x))·dx",
    definition=lambda v, a, e: ufunc(lambda x: x / (1 + sympy.exp(-x)), 1)(v[0]),
)

_EPS = Fraction(1, 2**24)


def _safe_log_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    eps = rat(_EPS)

    def f(x: Any, dx: Any) -> Any:
        if lt(eps, x):
            return dx / x
        if lt(x, eps):
            return sympy.Integer(0)
        return dx / (2 * eps)

    return ufunc(f, 2)(v[0], d[0])


law(
    op="safe_log",
    cases=kinked_unary(
        [("above", _EPS), ("below", _EPS)],
        [("at", _EPS)],
        [("above", _EPS), ("below", _EPS), ("at", _EPS)],
        shapes=((), (3,)),
    ),
    definition_text="log(max(x, 2⁻²⁴)) with max as (a + b + |a - b|)/2",
    derivative_text=(
        "jvp = dx/x for x > 2⁻²⁴, 0 for x < 2⁻²⁴; at x = 2⁻²⁴ maximum's tie gives dx/(2·2⁻²⁴)"
    ),
    definition=lambda v, a, e: vlog(vmax(v[0], rat(_EPS))),
    conv_jvp=_safe_log_conv,
)
