"""Per-op laws of the transcendental family: exp, log, safe_log, tanh, sigmoid, softplus,
gelu, silu, sin, cos, erf, log1p, expm1, elu, celu, selu, mish, pow, pow_tensor.

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
- erf's derivative constant is 2/√π to 70 digits (an exact rational: its rounding into any
  format of up to 200 bits is that of 2/√π), so erf and gelu's erf form state their JVP as a
  convention: c·exp(−x²) with that c (recomputed here with mpmath), not sympy's exact
  derivative. elu, celu and selu at 0 take the x <= 0 branch (α, 1 and scale·α).
- pow(x, p) is sympy's x**p: fractional p on x > 0, integer p on every x (negative p on
  x != 0); exponent 0 gives 1 with derivative 0 (PyTorch's, also at x = 0). pow_tensor is
  a**b on a > 0 (b of either sign); at a = 0 with b >= 0 the derivative to b is 0 by
  convention (PyTorch's), to a b·0**(b − 1).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy

from spec.tensor import Tensor

from ..decide import lt
from .core import (
    BINARY_SHAPES,
    SMALL_SHAPES,
    UNARY_SHAPES,
    Arr,
    Case,
    arr,
    fixed,
    free,
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


def _c64(expr: Any) -> sympy.Rational:
    """The binary64 nearest a real constant (mpmath at 50 digits), as an exact rational."""
    with mpmath.workdps(50):
        return rat(Fraction(float(expr())))


def _erf_c() -> sympy.Rational:
    """2/sqrt(pi) to 70 significant digits (mpmath), as an exact rational."""
    with mpmath.workdps(80):
        return rat(Fraction(mpmath.nstr(2 / mpmath.sqrt(mpmath.pi), 70)))


def _gelu_def(v: list[Arr], a: Any, e: Any) -> Arr:
    if a.get("approximate", "none") == "none":
        s = _c64(lambda: 1 / mpmath.sqrt(2))
        return ufunc(lambda x: x / 2 * (1 + sympy.erf(x * s)), 1)(v[0])
    return ufunc(lambda x: x / 2 * (1 + sympy.tanh(_gelu_c() * (x + _GELU_K * x**3))), 1)(v[0])


def _gelu_erf_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    s = _c64(lambda: 1 / mpmath.sqrt(2))
    c = _erf_c()
    return ufunc(
        lambda x, dx: (
            dx / 2 * (1 + sympy.erf(x * s)) + x / 2 * c * sympy.exp(-((x * s) ** 2)) * s * dx
        ),
        2,
    )(v[0], d[0])


law(
    op="gelu",
    cases=[Case((s,), free(), {"approximate": "tanh"}) for s in SMALL_SHAPES]
    + [Case((s,), free(), kind="convention") for s in SMALL_SHAPES],
    definition_text=(
        "approximate='none' (default, as F.gelu): x/2·(1 + erf(s·x)) with s = the binary64 "
        "nearest 1/√2; approximate='tanh': x/2·(1 + tanh(c·(x + k·x³))) with c = the "
        "binary64 nearest sqrt(2/π) (0.7978845608028654, as an exact rational) and "
        "k = 0.044715"
    ),
    derivative_text=(
        "tanh form: d/dx of the definition (smooth); erf form: the chain rule with erf'(z) "
        "stated as c·exp(−z²), c = 2/√π to 70 digits (erf's convention)"
    ),
    definition=_gelu_def,
    conv_jvp=_gelu_erf_conv,
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


law(
    op="erf",
    cases=[Case((s,), free(), kind="convention") for s in SMALL_SHAPES],
    definition_text="the error function 2/√π·∫₀ˣ exp(−t²) dt (sympy's erf)",
    derivative_text=(
        "jvp = c·exp(−x²)·dx with c = 2/√π to 70 significant digits (an exact rational whose "
        "rounding into every format of the table is that of 2/√π): stated as a convention, "
        "since c is not 2/√π exactly"
    ),
    definition=lambda v, a, e: ufunc(sympy.erf, 1)(v[0]),
    conv_jvp=lambda v, d, a, e: ufunc(lambda x, dx: _erf_c() * sympy.exp(-(x**2)) * dx, 2)(
        v[0], d[0]
    ),
)

law(
    op="log1p",
    cases=[Case((s,), pattern(("above", -1))) for s in SMALL_SHAPES],
    definition_text="log(1 + x) for x > −1",
    derivative_text="jvp = dx/(1 + x)",
    definition=lambda v, a, e: ufunc(lambda x: sympy.log(1 + x), 1)(v[0]),
)

law(
    op="expm1",
    cases=unary_free(SMALL_SHAPES),
    definition_text="exp(x) − 1",
    derivative_text="jvp = exp(x)·dx",
    definition=lambda v, a, e: ufunc(lambda x: sympy.exp(x) - 1, 1)(v[0]),
)

_ALPHA = Fraction(3, 2)


def _elu_like(alpha: Any, inner: Any, scale: Any = 1) -> Any:
    """scale·(max(x, 0) + α·(exp(inner(min(x, 0))) − 1)), max/min as (a + b ± |a − b|)/2."""

    def f(x: Any) -> Any:
        mx, mn = (x + sympy.Abs(x)) / 2, (x - sympy.Abs(x)) / 2
        return scale * (mx + alpha * (sympy.exp(inner(mn)) - 1))

    return f


def _elu_conv(slope: Any) -> Any:
    def conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
        return ufunc(lambda x, dx: dx if lt(0, x) else slope(a, x) * dx, 2)(v[0], d[0])

    return conv


_KINKED = kinked_unary(
    ["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)], attrs={"alpha": _ALPHA}
)

law(
    op="elu",
    cases=_KINKED,
    definition_text="max(x, 0) + α·(exp(min(x, 0)) − 1)",
    derivative_text="jvp = dx for x > 0, α·exp(x)·dx for x < 0; at x = 0 the x <= 0 branch: α·dx",
    definition=lambda v, a, e: ufunc(_elu_like(rat(a["alpha"]), lambda m: m), 1)(v[0]),
    conv_jvp=_elu_conv(lambda a, x: rat(a["alpha"]) * sympy.exp(x)),
)

law(
    op="celu",
    cases=_KINKED,
    definition_text="max(x, 0) + α·(exp(min(x, 0)/α) − 1)",
    derivative_text="jvp = dx for x > 0, exp(x/α)·dx for x < 0; at x = 0: dx (smooth there)",
    definition=lambda v, a, e: ufunc(_elu_like(rat(a["alpha"]), lambda m: m / rat(a["alpha"])), 1)(
        v[0]
    ),
    conv_jvp=_elu_conv(lambda a, x: sympy.exp(x / rat(a["alpha"]))),
)


def _selu_consts() -> tuple[sympy.Rational, sympy.Rational]:
    """PyTorch's binary64 SELU constants (its decimal literals read as binary64)."""
    return rat(Fraction(1.6732632423543772848170429916717)), rat(
        Fraction(1.0507009873554804934193349852946)
    )


law(
    op="selu",
    cases=kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    definition_text="scale·(max(x, 0) + α·(exp(min(x, 0)) − 1)), α and scale PyTorch's binary64 "
    "constants",
    derivative_text="jvp = scale·dx for x > 0, scale·α·exp(x)·dx for x <= 0 (elu's branch at 0)",
    definition=lambda v, a, e: ufunc(
        _elu_like(_selu_consts()[0], lambda m: m, _selu_consts()[1]), 1
    )(v[0]),
    conv_jvp=lambda v, d, a, e: ufunc(
        lambda x, dx: (
            _selu_consts()[1] * (dx if lt(0, x) else _selu_consts()[0] * sympy.exp(x) * dx)
        ),
        2,
    )(v[0], d[0]),
)

law(
    op="mish",
    # scalar and 2-element cases only: the symbolic derivative of x·tanh(softplus x) is large
    cases=kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)], shapes=((), (2,))),
    definition_text="x·tanh(log(1 + exp(x)))",
    derivative_text=(
        "jvp = d/dx of the definition; at x = 0 the softplus tie is multiplied by x = 0, so the "
        "composed derivative is the true tanh(log 2)"
    ),
    definition=lambda v, a, e: ufunc(lambda x: x * sympy.tanh(sympy.log(1 + sympy.exp(x))), 1)(
        v[0]
    ),
    conv_jvp="definition",
)


# --------------------------------------------------------------------------- pow


def _pow_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    p = rat(a["exponent"])
    return ufunc(lambda x, dx: sympy.Integer(0) if p == 0 else p * x ** (p - 1) * dx, 2)(v[0], d[0])


def _pow_cases() -> list[Case]:
    cases = [
        Case((s,), pattern("pos"), {"exponent": q})
        for q in (Fraction(3, 2), Fraction(-1, 2), Fraction(1, 3))
        for s in SMALL_SHAPES
    ]
    cases += [Case((s,), free(), {"exponent": q}) for q in (2, 3, 0) for s in SMALL_SHAPES]
    cases += [
        Case((s,), pattern("pos", "neg"), {"exponent": q}) for q in (-1, -2) for s in SMALL_SHAPES
    ]
    cases += [Case(((),), pattern(("at", 0)), {"exponent": q}) for q in (0, 2, 3)]
    return cases


law(
    op="pow",
    cases=_pow_cases(),
    definition_text="x**p (sympy): x > 0 for fractional p, every x for integer p >= 0, x != 0 "
    "for negative p",
    derivative_text="jvp = p·x**(p − 1)·dx; exponent 0: 0 (also at x = 0, PyTorch's)",
    definition=lambda v, a, e: ufunc(lambda x: x ** rat(a["exponent"]), 1)(v[0]),
    conv_jvp=_pow_conv,
)


def _pow_tensor_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    def f(x: Any, y: Any, dx: Any, dy: Any) -> Any:
        da = sympy.Integer(0) if y == 0 else y * x ** (y - 1) * dx
        db = sympy.Integer(0) if (x == 0 and not lt(y, 0)) else x**y * sympy.log(x) * dy
        return da + db

    A, B = np.broadcast_arrays(v[0], v[1])
    dA, dB = np.broadcast_arrays(d[0], d[1])
    return ufunc(f, 4)(A, B, dA, dB)


_POS, _NEG = {"positive": True}, {"negative": True}

law(
    op="pow_tensor",
    cases=[Case(s, free(_POS, _POS)) for s in BINARY_SHAPES]
    + [Case(s, free(_POS, _NEG)) for s in BINARY_SHAPES[:4]]
    + [
        Case(((2,), (2,)), fixed({0: (0, 0), 1: (2, 0)})),
        Case(((), ()), fixed({0: (0,), 1: (3,)})),
    ],
    definition_text="a**b (sympy, NumPy broadcasting) for a > 0; at a = 0 with b >= 0: 0**b",
    derivative_text=(
        "jvp = b·a**(b − 1)·da + a**b·log(a)·db for a > 0; at a = 0 and b >= 0 the "
        "b-derivative is 0 by convention (PyTorch's), the a-derivative b·0**(b − 1) "
        "(0 for b = 0)"
    ),
    definition=lambda v, a, e: arr(np.broadcast_arrays(v[0], v[1])[0] ** v[1]),
    conv_jvp=_pow_tensor_conv,
)
