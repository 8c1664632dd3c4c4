"""Graph builders of the transcendental family.

Invariants: every op takes any existing value, except `log`, whose argument is always
guarded as `clamp(v, lo, hi)` with lo > 0 (its value precondition holds for every non-NaN
value; see invariant 6 of `conformance.graphs`). `safe_log` is total and needs no guard;
nor does `log1p` (x < -1 gives NaN, x = -1 gives -inf: IEEE values, no precondition).
elu draws alpha from small rationals (0 and negative included), celu from positive ones
(alpha != 0); `gelu` keeps its builder (the default tanh form), so existing seeds draw the
same graphs; its erf form is covered through `erf` and the op's samples.
pow draws its exponent from the integers -3..3 and the fractions ±1/2, 3/2, 1/3 (or any
small rational) and, one time in four, applies to a const of hard bases (0, ±1, negatives,
2); pow_tensor takes two broadcastable values or, one time in four, a const of bases (0,
±1, -2, 2) against a const of exponents (0, 1, 2, -1, 1/2, 3): 0**0, 0 to a negative
power, negative bases to fractions (NaN) and integers.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from spec.shape import broadcast_shapes, size

from .core import (
    MAX_ELEMENTS,
    POS_RAT,
    RAT,
    Builder,
    Ctx,
    broadcast_partners,
    guarded_unary,
    register,
    unary_builder,
)

__all__: list[str] = []

register(name="exp", build=unary_builder("exp"))
register(name="tanh", build=unary_builder("tanh"))
register(name="sin", build=unary_builder("sin"))
register(name="cos", build=unary_builder("cos"))
register(name="safe_log", build=unary_builder("safe_log"))
register(name="log", build=guarded_unary("log", always=True))
register(name="sigmoid", build=unary_builder("sigmoid"))
register(name="softplus", build=unary_builder("softplus"))
register(name="silu", build=unary_builder("silu"))
register(name="gelu", build=unary_builder("gelu"))


def _alpha(op: str, alphas: st.SearchStrategy) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick()
        if x is None or not c.room(1):
            return False
        c.add(op, x, alpha=c.draw(st.just(Fraction(1)) | alphas))
        return True

    return build


register(name="erf", build=unary_builder("erf"))
register(name="log1p", build=unary_builder("log1p"))
register(name="expm1", build=unary_builder("expm1"))
register(name="elu", build=_alpha("elu", RAT))
register(name="celu", build=_alpha("celu", POS_RAT))
register(name="selu", build=unary_builder("selu"))
register(name="mish", build=unary_builder("mish"))

_Q = Fraction
_EXPONENTS = st.sampled_from(
    [_Q(2), _Q(3), _Q(-1), _Q(-2), _Q(0), _Q(1), _Q(-3), _Q(1, 2), _Q(3, 2), _Q(-1, 2), _Q(1, 3)]
)
_BASES = st.sampled_from([_Q(0), _Q(1), _Q(-1), _Q(-2), _Q(2), _Q(1, 2)])


def _hard(c: Ctx, x: int, values: st.SearchStrategy) -> int:
    """x, or (one time in four, room permitting) a const of x's shape from `values`."""
    if c.room(3) and c.draw(st.integers(0, 3)) == 3:
        s = c.shapes[x]
        return c.add(
            "const", shape=s, values=c.draw(st.lists(values, min_size=size(s), max_size=size(s)))
        )
    return x


def _pow(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    x = _hard(c, x, _BASES | RAT)
    c.add("pow", x, exponent=c.draw(_EXPONENTS | RAT))
    return True


def _pow_tensor(c: Ctx) -> bool:
    a = c.pick()
    if a is None or not c.room(1):
        return False
    sa = c.shapes[a]
    if c.room(3) and c.draw(st.integers(0, 3)) == 3:
        a = _hard(c, a, _BASES)
        sb = c.draw(st.sampled_from(broadcast_partners(sa)))
        vals = c.draw(st.lists(_EXPONENTS, min_size=size(sb), max_size=size(sb)))
        b = c.add("const", shape=sb, values=vals)
    else:
        others = c.candidates(
            lambda s: (o := broadcast_shapes(sa, s)) is not None and size(o) <= MAX_ELEMENTS
        )
        b = c.draw(st.sampled_from([a] + [i for i in others if i != a]))
        if c.draw(st.booleans()):
            a, b = b, a
    if not c.room(1):
        return False
    c.add("pow_tensor", a, b)
    return True


register(name="pow", build=_pow)
register(name="pow_tensor", build=_pow_tensor)
