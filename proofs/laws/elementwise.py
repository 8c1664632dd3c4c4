"""Per-op laws of the elementwise family: add, sub, neg, mul, scale, div, inv, maximum,
minimum, abs, relu, clamp, sqrt, detach, const, leaky_relu, sign, hardtanh, relu6,
hardsigmoid, hardswish, softsign, add_n, maximum_n, minimum_n, mean_n.

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
- leaky_relu'(0) = slope; sign's JVP and VJP are zero; hardtanh/relu6/hardsigmoid take
  clamp's 0 at their bounds; hardswish' is 0 at −3 and 1 at 3; softsign' is 1 at 0;
  maximum_n/minimum_n split a tie as nested binary ties (written here as an independent
  left fold of the pairwise rule).
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
    fixed,
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


_SLOPE = Fraction(1, 10)
_KINK0 = kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)])

law(
    op="leaky_relu",
    cases=kinked_unary(
        ["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)], attrs={"negative_slope": _SLOPE}
    ),
    definition_text="max(x, 0) + s·min(x, 0), s = negative_slope",
    derivative_text="jvp = dx for x > 0, s·dx for x < 0; at the kink the slope: s·dx",
    definition=lambda v, a, e: arr(vmax(v[0], 0) + rat(a["negative_slope"]) * vmin(v[0], 0)),
    conv_jvp=lambda v, d, a, e: ufunc(
        lambda x, dx: dx if lt(0, x) else rat(a["negative_slope"]) * dx, 2
    )(v[0], d[0]),
)

law(
    op="sign",
    cases=[Case(c.shapes, c.region, c.attrs, kind="convention") for c in _KINK0],
    definition_text="x/|x| for x != 0, and 0 at 0",
    derivative_text=(
        "jvp = 0 and vjp = 0 everywhere (piecewise constant; at the jump 0 by declaration)"
    ),
    definition=lambda v, a, e: ufunc(sympy.sign, 1)(v[0]),
    conv_jvp=lambda v, d, a, e: arr(np.zeros(v[0].shape, dtype=object) * 0),
    conv_vjp=lambda v, g, a, e: [arr(np.zeros(v[0].shape, dtype=object) * 0)],
)


def _window_conv(lo: Any, hi: Any, inside: Callable[[Any, Any], Any], top: Any = 0) -> Any:
    """dx·inside(x) for lo < x < hi, top·dx for x >= hi, 0 for x <= lo (bounds included)."""

    def conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
        L, H = lo(a), hi(a)

        def f(x: Any, dx: Any) -> Any:
            if lt(L, x) and lt(x, H):
                return inside(x, dx)
            return top * dx if not lt(x, H) else 0

        return ufunc(f, 2)(v[0], d[0])

    return conv


def _clamped(lo: Fraction, hi: Fraction) -> list[Any]:
    smooth = [("below", lo), ("between", lo, hi), ("above", hi)]
    kinks = [("at", lo), ("at", hi)]
    return [smooth, kinks, smooth + kinks]


_HT = {"min_val": Fraction(-1), "max_val": Fraction(2)}
law(
    op="hardtanh",
    cases=kinked_unary(*_clamped(_HT["min_val"], _HT["max_val"]), attrs=_HT),
    definition_text="min(max(x, min_val), max_val)",
    derivative_text="jvp = dx strictly inside the bounds, 0 outside and at the bounds",
    definition=lambda v, a, e: vmin(vmax(v[0], rat(a["min_val"])), rat(a["max_val"])),
    conv_jvp=_window_conv(
        lambda a: rat(a["min_val"]), lambda a: rat(a["max_val"]), lambda x, dx: dx
    ),
)
law(
    op="relu6",
    cases=kinked_unary(*_clamped(Fraction(0), Fraction(6))),
    definition_text="min(max(x, 0), 6)",
    derivative_text="jvp = dx for 0 < x < 6, 0 elsewhere (0 at 0 and at 6)",
    definition=lambda v, a, e: vmin(vmax(v[0], 0), 6),
    conv_jvp=_window_conv(lambda a: 0, lambda a: 6, lambda x, dx: dx),
)
law(
    op="hardsigmoid",
    cases=kinked_unary(*_clamped(Fraction(-3), Fraction(3))),
    definition_text="min(max(x + 3, 0), 6)/6",
    derivative_text="jvp = dx/6 for -3 < x < 3, 0 elsewhere (0 at ±3)",
    definition=lambda v, a, e: arr(vmin(vmax(v[0] + 3, 0), 6) / 6),
    conv_jvp=_window_conv(lambda a: -3, lambda a: 3, lambda x, dx: dx / 6),
)
law(
    op="hardswish",
    cases=kinked_unary(*_clamped(Fraction(-3), Fraction(3))),
    definition_text="x·min(max(x + 3, 0), 6)/6",
    derivative_text=(
        "jvp = (2x + 3)/6·dx for -3 < x < 3, dx for x > 3, 0 for x < -3; at x = -3: 0, at "
        "x = 3: dx (the clamp's 0 at its bounds, as PyTorch's)"
    ),
    definition=lambda v, a, e: arr(v[0] * vmin(vmax(v[0] + 3, 0), 6) / 6),
    conv_jvp=_window_conv(lambda a: -3, lambda a: 3, lambda x, dx: (2 * x + 3) / 6 * dx, top=1),
)
law(
    op="softsign",
    cases=_KINK0,
    definition_text="x/(1 + |x|)",
    derivative_text="jvp = dx/(1 + |x|)²; at x = 0: dx",
    definition=lambda v, a, e: ufunc(lambda x: x / (1 + sympy.Abs(x)), 1)(v[0]),
    conv_jvp=lambda v, d, a, e: ufunc(lambda x, dx: dx / (1 + sympy.Abs(x)) ** 2, 2)(v[0], d[0]),
)

_N_SHAPES: tuple[tuple[Shape, ...], ...] = (
    ((), ()),
    ((3,), (3,), (3,)),
    ((2, 3), (3,), (2, 1)),
)


def _fold(v: list[Arr], step: Callable[[Arr, Arr], Arr]) -> Arr:
    acc = v[0]
    for x in v[1:]:
        acc = step(acc, x)
    return arr(acc)


law(
    op="add_n",
    cases=[Case(s, free()) for s in _N_SHAPES],
    definition_text="x0 + x1 + ... with NumPy broadcasting",
    derivative_text="jvp = Σ dx_i (linear)",
    definition=lambda v, a, e: _fold(v, lambda p, q: p + q),
)
law(
    op="mean_n",
    cases=[Case(s, free()) for s in _N_SHAPES],
    definition_text="(x0 + x1 + ...)/n with NumPy broadcasting, n the argument count",
    derivative_text="jvp = Σ dx_i / n (linear)",
    definition=lambda v, a, e: arr(_fold(v, lambda p, q: p + q) / len(v)),
)


def _nmax_conv(larger: bool) -> tuple[Callable[..., Arr], Callable[..., list[Arr]]]:
    """The nested pairwise rule, folded left: (m, dm) <- pick((m, dm), (x, dx)); a tie gives
    the mean of the two tangents, and the VJP splits g the same way back through the fold."""
    pick, _ = _max_conv(larger)

    def jvp(v: list[Arr], d: list[Arr], attrs: Any, env: Any) -> Arr:
        vs = np.broadcast_arrays(*v)
        ds = np.broadcast_arrays(*d)
        m, dm = arr(vs[0]), arr(ds[0])
        for x, dx in zip(vs[1:], ds[1:], strict=True):
            m, dm = (
                vmax(m, x) if larger else vmin(m, x),
                pick([m, arr(x)], [dm, arr(dx)], attrs, env),
            )
        return dm

    def vjp(v: list[Arr], g: Arr, attrs: Any, env: Any) -> list[Arr]:
        vs = [arr(x) for x in np.broadcast_arrays(*v)]
        prefix = [vs[0]]
        for x in vs[1:-1]:
            prefix.append(vmax(prefix[-1], x) if larger else vmin(prefix[-1], x))
        out: list[Arr] = [arr(np.zeros(x.shape, dtype=object) * 0) for x in vs]
        cur = g
        for k in range(len(vs) - 1, 0, -1):
            dd = [arr(np.zeros(g.shape, dtype=object) * 0)] * 2
            ga = pick([prefix[k - 1], vs[k]], [cur, dd[0]], attrs, env)
            gb = pick([prefix[k - 1], vs[k]], [dd[1], cur], attrs, env)
            out[k] = gb
            cur = ga
        out[0] = cur
        return [_reduce_to(o, x.shape) for o, x in zip(out, v, strict=True)]

    return jvp, vjp


_N_FIXED = (
    Case(
        ((3,), (3,), (3,)),
        fixed({0: (1, -2, 2), 1: (1, 3, 2), 2: (1, -2, 0)}),
        kind="convention",
    ),
    Case(((2, 2), (2,), ()), fixed({0: (1, 2, 3, 4), 1: (2, 0), 2: (2,)}), kind="convention"),
)

for _name, _larger, _sym in (("maximum_n", True, "+"), ("minimum_n", False, "-")):
    _j, _v = _nmax_conv(_larger)
    law(
        op=_name,
        cases=[Case(c.shapes, c.region) for c in _max_cases()] + list(_N_FIXED),
        definition_text=(
            f"the left fold of (a + b {_sym} |a - b|)/2 over the arguments, NumPy broadcasting"
        ),
        derivative_text=(
            "jvp and vjp = the left fold of the pairwise rule (a strict winner takes the "
            "tangent; a tie takes the mean of the two, so a three-way tie gives 1/4, 1/4, 1/2 "
            "to the arguments in order)"
        ),
        definition=(lambda v, a, e, L=_larger: _fold(v, (lambda p, q: vmax(p, q)) if L else vmin)),
        conv_jvp=_j,
        conv_vjp=_v,
    )
