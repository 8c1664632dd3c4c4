"""Graph builders of the elementwise family.

Invariants: binary ops broadcast (partners drawn within `MAX_ELEMENTS`); over rationals
`div`'s right operand and `inv`'s argument are made strictly positive (a guard clamp with
0 < lo <= hi, or a positive const), so no division by zero can occur there; `clamp` draws
lo <= hi; `const` draws a shape from `INPUT_SHAPES`.

The kinked activations: `kinked(op, kinks)` applies the op to an existing value or, one time in
four, to a fresh const whose entries are drawn from the op's kinks and thresholds (leaky_relu
and sign at 0, relu6 at 0 and 6, hardsigmoid/hardswish at ±3, softsign at 0), so the
conventions there are exercised; hardtanh draws min_val <= max_val; the variadic add_n,
maximum_n, minimum_n, mean_n take 2 or 3 mutually broadcastable values, the first
candidate of each further argument being the first one (ties across arguments). Their
denominators (6, 1 + |x|, the argument count) are nonzero, so they are rational-safe.
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
    unary_builder,
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
register(name="neg", build=unary_builder("neg"))
register(name="sub", build=_binary("sub"))
register(name="scale", build=_scale)
register(name="relu", build=unary_builder("relu"))
register(name="abs", build=unary_builder("abs"))
register(name="maximum", build=_binary("maximum"))
register(name="minimum", build=_binary("minimum"))
register(name="clamp", build=_clamp)
register(name="detach", build=unary_builder("detach"))
register(name="const", build=_const)
register(name="div", build=_binary("div", positive_rhs=True))
register(name="inv", build=guarded_unary("inv", always=False))
register(name="sqrt", build=unary_builder("sqrt"))


def kinked(op: str, kinks: tuple[Fraction, ...], **attr_draws: st.SearchStrategy) -> Builder:
    """The unary op on an existing value or (one time in four) on a const of kink values."""

    def build(c: Ctx) -> bool:
        x = c.pick()
        if x is None or not c.room(1):
            return False
        if c.room(2) and c.draw(st.integers(0, 3)) == 3:
            s = c.shapes[x]
            vals = c.draw(
                st.lists(st.sampled_from(kinks) | RAT, min_size=size(s), max_size=size(s))
            )
            x = c.add("const", shape=s, values=vals)
        c.add(op, x, **{k: c.draw(v) for k, v in attr_draws.items()})
        return True

    return build


def _hardtanh(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    lo = c.draw(RAT)
    c.add("hardtanh", x, min_val=lo, max_val=lo + c.draw(NONNEG_RAT))
    return True


def _variadic(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        a = c.pick()
        if a is None or not c.room(1):
            return False
        args, out = [a], c.shapes[a]
        for _ in range(c.draw(st.integers(1, 2))):
            others = c.candidates(
                lambda s, cur=out: (
                    (o := broadcast_shapes(cur, s)) is not None and size(o) <= MAX_ELEMENTS
                )
            )
            b = c.draw(st.sampled_from([a] + [i for i in others if i != a]))
            args.append(b)
            out = broadcast_shapes(out, c.shapes[b]) or out
        c.add(op, *args)
        return True

    return build


_Q = Fraction
register(
    name="leaky_relu",
    build=kinked("leaky_relu", (_Q(0),), negative_slope=RAT | st.just(_Q(1, 100))),
)
register(name="sign", build=kinked("sign", (_Q(0),)))
register(name="hardtanh", build=_hardtanh)
register(name="relu6", build=kinked("relu6", (_Q(0), _Q(6))))
register(name="hardsigmoid", build=kinked("hardsigmoid", (_Q(-3), _Q(3))))
register(name="hardswish", build=kinked("hardswish", (_Q(-3), _Q(3))))
register(name="softsign", build=kinked("softsign", (_Q(0),)))
for _op in ("add_n", "maximum_n", "minimum_n", "mean_n"):
    register(name=_op, build=_variadic(_op))
