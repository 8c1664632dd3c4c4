"""Graph builders of the elementwise family.

Invariants: binary ops broadcast (partners drawn within `MAX_ELEMENTS`); over rationals
`div`'s right operand and `inv`'s argument are made strictly positive (a guard clamp with
0 < lo <= hi, or a positive const), so no division by zero can occur there; `clamp` draws
lo <= hi; `const` draws a shape from `INPUT_SHAPES`.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from spec.shape import broadcast_shapes, size

from .core import (
    INPUT_SHAPES,
    MAX_ELEMENTS,
    NONNEG_RAT,
    RAT,
    Builder,
    Ctx,
    broadcast_partners,
    guarded_unary,
    register,
    unary,
)

__all__: list[str] = []


def _binary(op: str, positive_rhs: bool = False) -> Builder:
    """A broadcasting binary op. With `positive_rhs` over rationals the right operand is
    made strictly positive (a guard clamp or a positive const)."""

    def build(c: Ctx) -> bool:
        a = c.pick()
        if a is None or not c.room(1):
            return False
        sa = c.shapes[a]
        guard = positive_rhs and c.kind == "rational"
        use_const = c.room(2) and c.draw(st.integers(0, 3)) == 3
        if use_const:
            b = c.const(c.draw(st.sampled_from(broadcast_partners(sa))), positive=guard)
        else:
            others = c.candidates(
                lambda s: (o := broadcast_shapes(sa, s)) is not None and size(o) <= MAX_ELEMENTS
            )
            b = c.draw(st.sampled_from([a] + [i for i in others if i != a]))
            if guard:
                if not c.room(2):
                    return False
                b = c.positive(b)
        if not positive_rhs and c.draw(st.booleans()):
            a, b = b, a
        c.add(op, a, b)
        return True

    return build


def _scale(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("scale", x, c=c.draw(RAT | st.just(Fraction(1, 3))))
    return True


def _clamp(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    lo = c.draw(RAT)
    hi = lo + c.draw(NONNEG_RAT)
    c.add("clamp", x, lo=lo, hi=hi)
    return True


def _const(c: Ctx) -> bool:
    if not c.room(1):
        return False
    c.const(c.draw(st.sampled_from(INPUT_SHAPES)))
    return True


register(name="add", build=_binary("add"))
register(name="mul", build=_binary("mul"))
register(name="neg", build=unary("neg"))
register(name="sub", build=_binary("sub"))
register(name="scale", build=_scale)
register(name="relu", build=unary("relu"))
register(name="abs", build=unary("abs"))
register(name="maximum", build=_binary("maximum"))
register(name="minimum", build=_binary("minimum"))
register(name="clamp", build=_clamp)
register(name="detach", build=unary("detach"))
register(name="const", build=_const)
register(name="div", build=_binary("div", positive_rhs=True))
register(name="inv", build=guarded_unary("inv", always=False))
register(name="sqrt", build=unary("sqrt"))
