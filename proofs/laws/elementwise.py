"""Per-op laws of the elementwise family: add, sub, neg, mul, scale, div, inv, maximum,
minimum, abs, relu, clamp, sqrt, detach, const.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- Broadcasting ops are checked on the broadcast pairs of `BINARY_SHAPES` against NumPy
  object-array broadcasting.
- Kinks and ties state their conventions: relu'(0) = 0, abs'(0) = 0, clamp' = 0 at the
  bounds, sqrt' = 0 for x <= 0, maximum/minimum ties give (da + db)/2 and g/2 to each side;
  detach's JVP and VJP are zero by declaration. max is (a + b + |a - b|)/2, |x| is
  sqrt(x²), sqrt is characterised by y² = x, y >= 0.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from spec.shape import Shape
from spec.tensor import Tensor

from ..decide import lt
from .core import (
    BINARY_SHAPES,
    SMALL_SHAPES,
    UNARY_SHAPES,
    Arr,
    Case,
    arr,
    binary_free,
    compare,
    free,
    kinked_unary,
    law,
    pattern,
    rat,
    ufunc,
    unary_free,
    vmax,
    vmin,
)

_HALF = sympy.Rational(1, 2)


def _reduce_to(G: Arr, shape: Shape) -> Arr:
    """Sum a broadcast-shaped array back to `shape` (NumPy sums; independent of spec)."""
    lead = G.ndim - len(shape)
    G = G.sum(axis=tuple(range(lead))) if lead else G
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and G.shape[i] != 1)
    return arr(G.sum(axis=axes, keepdims=True) if axes else G)


law(
    op="add",
    cases=binary_free(),
    definition_text="a + b with NumPy broadcasting",
    derivative_text="jvp = da + db (linear)",
    definition=lambda v, a, e: arr(v[0] + v[1]),
)

__all__: list[str] = []

law(
    op="sub",
    cases=binary_free(),
    definition_text="a - b with NumPy broadcasting",
    derivative_text="jvp = da - db (linear)",
    definition=lambda v, a, e: arr(v[0] - v[1]),
)

law(
    op="mul",
    cases=binary_free(),
    definition_text="a * b with NumPy broadcasting",
    derivative_text="jvp = da·b + a·db",
    definition=lambda v, a, e: arr(v[0] * v[1]),
)

law(
    op="div",
    cases=binary_free({}, {"nonzero": True}),
    definition_text="a / b with NumPy broadcasting, b != 0",
    derivative_text="jvp = da/b - db·a/b² (b != 0)",
    definition=lambda v, a, e: arr(v[0] / v[1]),
)


def _max_cases() -> list[Case]:
    cases = []
    for shapes in BINARY_SHAPES:
        for s in (1, -1, 0):
            cases.append(Case(shapes, compare(s)))
    cases.append(Case(((3,), (3,)), compare(1, -1, 0)))
    return cases


def _max_conv(larger: bool) -> tuple[Callable[..., Arr], Callable[..., list[Arr]]]:
    def win(a: Any, b: Any) -> int:
        if lt(b, a):
            return 1 if larger else -1
        if lt(a, b):
            return -1 if larger else 1
        return 0

    def jvp(v: list[Arr], d: list[Arr], attrs: Any, env: Any) -> Arr:
        f = ufunc(lambda a, b, da, db: {1: da, -1: db, 0: (da + db) * _HALF}[win(a, b)], 4)
        return f(*v, *d)

    def vjp(v: list[Arr], g: Arr, attrs: Any, env: Any) -> list[Arr]:
        A, B = np.broadcast_arrays(v[0], v[1])
        ga = ufunc(lambda a, b, gg: {1: gg, -1: 0, 0: gg * _HALF}[win(a, b)], 3)(A, B, g)
        gb = ufunc(lambda a, b, gg: {1: 0, -1: gg, 0: gg * _HALF}[win(a, b)], 3)(A, B, g)
        return [_reduce_to(ga, v[0].shape), _reduce_to(gb, v[1].shape)]

    return jvp, vjp


for _name, _larger, _sym in (("maximum", True, "+"), ("minimum", False, "-")):
    _j, _v = _max_conv(_larger)
    law(
        op=_name,
        cases=_max_cases(),
        definition_text=f"(a + b {_sym} |a - b|)/2 elementwise with NumPy broadcasting",
        derivative_text=(
            f"jvp = da where a is the strict {'larger' if _larger else 'smaller'}, db where b "
            "is, and (da + db)/2 at a tie; at a tie the VJP gives g/2 to each side (the stated "
            "subgradient), each reduced over broadcast axes"
        ),
        definition=(lambda v, a, e, L=_larger: vmax(v[0], v[1]) if L else vmin(v[0], v[1])),
        conv_jvp=_j,
        conv_vjp=_v,
    )

law(
    op="neg",
    cases=unary_free(),
    definition_text="-x",
    derivative_text="jvp = -dx",
    definition=lambda v, a, e: arr(-v[0]),
)

law(
    op="scale",
    cases=[Case((s,), free(), {"c": Fraction(-3, 2)}) for s in UNARY_SHAPES]
    + [Case(((2,),), free(), {"c": Fraction(0)}), Case(((),), free(), {"c": Fraction(7)})],
    definition_text="c·x with c the exact rational attribute",
    derivative_text="jvp = c·dx",
    definition=lambda v, a, e: arr(rat(a["c"]) * v[0]),
)

law(
    op="relu",
    cases=kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    definition_text="(x + |x|)/2",
    derivative_text="jvp = dx for x > 0, 0 for x < 0; at the kink relu'(0) = 0",
    definition=lambda v, a, e: vmax(v[0], 0),
    conv_jvp=lambda v, d, a, e: ufunc(lambda x, dx: dx if lt(0, x) else 0, 2)(v[0], d[0]),
)

law(
    op="abs",
    cases=kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    definition_text="sqrt(x²)",
    derivative_text="jvp = sign(x)·dx; at the kink abs'(0) = 0",
    definition=lambda v, a, e: ufunc(lambda x: sympy.sqrt(x**2), 1)(v[0]),
    conv_jvp=lambda v, d, a, e: ufunc(
        lambda x, dx: dx if lt(0, x) else (-dx if lt(x, 0) else 0), 2
    )(v[0], d[0]),
)

_LO, _HI = Fraction(-1), Fraction(2)


def _clamp_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    lo, hi = rat(a["lo"]), rat(a["hi"])
    return ufunc(lambda x, dx: dx if (lt(lo, x) and lt(x, hi)) else 0, 2)(v[0], d[0])


_CLAMP_SMOOTH = [("below", _LO), ("between", _LO, _HI), ("above", _HI)]


_CLAMP_KINKS = [("at", _LO), ("at", _HI)]


_CLAMP_DEGENERATE = Case(
    ((3,),), pattern(("below", 1), ("at", 1), ("above", 1)), {"lo": Fraction(1), "hi": Fraction(1)}
)

law(
    op="clamp",
    cases=[
        *kinked_unary(
            _CLAMP_SMOOTH, _CLAMP_KINKS, _CLAMP_SMOOTH + _CLAMP_KINKS, attrs={"lo": _LO, "hi": _HI}
        ),
        _CLAMP_DEGENERATE,
    ],
    definition_text="min(max(x, lo), hi) with max/min as (a + b ± |a - b|)/2",
    derivative_text="jvp = dx for lo < x < hi, 0 for x < lo or x > hi; at the bounds clamp' = 0",
    definition=lambda v, a, e: vmin(vmax(v[0], rat(a["lo"])), rat(a["hi"])),
    conv_jvp=_clamp_conv,
)


def _sqrt_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    for x, y in zip(v[0].data, out.data, strict=True):
        res += [y**2 - x, bool(y.is_nonnegative)]
    return res


law(
    op="sqrt",
    cases=[Case((s,), pattern("pos")) for s in SMALL_SHAPES]
    + [
        Case(((),), pattern(("at", 0))),
        Case(((2,),), pattern("neg"), kind="convention", forward=False),
        Case(((3,),), pattern("pos", ("at", 0), "neg"), forward=False),
    ],
    definition_text=(
        "the non-negative square root: y² = x and y >= 0 (x >= 0; x < 0 is outside the real "
        "forward's scope)"
    ),
    derivative_text="jvp = dx/(2·sqrt x) for x > 0; by convention sqrt' = 0 for x <= 0",
    characterize=_sqrt_char,
    conv_jvp=lambda v, d, a, e: ufunc(lambda x, dx: dx / (2 * sympy.sqrt(x)) if lt(0, x) else 0, 2)(
        v[0], d[0]
    ),
)

law(
    op="detach",
    cases=[Case((s,), free(), kind="convention") for s in UNARY_SHAPES],
    definition_text="the identity x",
    derivative_text=(
        "non-differentiable by declaration (stop-gradient): jvp = 0 and vjp = 0, which is not the "
        "derivative of the identity forward"
    ),
    definition=lambda v, a, e: arr(v[0]),
    conv_jvp=lambda v, d, a, e: arr(np.zeros(v[0].shape, dtype=object) * 0),
    conv_vjp=lambda v, g, a, e: [arr(np.zeros(v[0].shape, dtype=object) * 0)],
)


def _const_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    out = np.empty(len(a["values"]), dtype=object)
    for i, q in enumerate(a["values"]):
        out[i] = rat(q)
    return out.reshape(a["shape"])


law(
    op="const",
    cases=[
        Case((), free(), {"shape": (), "values": (Fraction(1, 3),)}),
        Case((), free(), {"shape": (3,), "values": (Fraction(1, 2), Fraction(-3), Fraction(0))}),
        Case((), free(), {"shape": (2, 2), "values": tuple(Fraction(k, 7) for k in range(4))}),
        Case((), free(), {"shape": (0,), "values": ()}),
    ],
    definition_text="the exact rational values, cast into the domain, in row-major order",
    derivative_text=(
        "no arguments: jvp = 0 (the derivative of a constant) and the VJP is the empty list"
    ),
    definition=_const_def,
)

law(
    op="inv",
    cases=[Case((s,), free({"nonzero": True})) for s in SMALL_SHAPES]
    + [Case(((2,),), pattern("neg"))],
    definition_text="1/x (x != 0)",
    derivative_text="jvp = -dx/x²",
    definition=lambda v, a, e: arr(1 / v[0]),
)
