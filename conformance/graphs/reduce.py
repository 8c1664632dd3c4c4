"""Graph builders of the reduce family.

Invariants: `mean` and `reduce_mean` divide by a size >= 1 (they only take values, or axes,
that are non-empty), so they never divide by zero; `reduce_max` reduces a non-empty axis;
`sum` and `reduce_sum` accept empty values.
"""

from __future__ import annotations

from hypothesis import strategies as st

from spec.shape import size

from .core import Builder, Ctx, register, unary

__all__: list[str] = []


def _mean(c: Ctx) -> bool:
    x = c.pick(lambda s: size(s) >= 1)
    if x is None or not c.room(1):
        return False
    c.add("mean", x)
    return True


def _reduce(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        need_nonempty = op == "reduce_mean"
        x = c.pick(lambda s: any(d >= 1 or not need_nonempty for d in s))
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        axes = [i for i, d in enumerate(s) if d >= 1 or not need_nonempty]
        c.add(op, x, axis=c.draw(st.sampled_from(axes)))
        return True

    return build


def _reduce_max(c: Ctx) -> bool:
    x = c.pick(lambda s: any(d >= 1 for d in s))
    if x is None or not c.room(1):
        return False
    axes = [i for i, d in enumerate(c.shapes[x]) if d >= 1]
    c.add("reduce_max", x, axis=c.draw(st.sampled_from(axes)))
    return True


register(name="sum", build=unary("sum"))
register(name="reduce_sum", build=_reduce("reduce_sum"))
register(name="mean", build=_mean)
register(name="reduce_mean", build=_reduce("reduce_mean"))
register(name="reduce_max", build=_reduce_max)
