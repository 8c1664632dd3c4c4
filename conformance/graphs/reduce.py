"""Graph builders of the reduce family.

Invariants: `mean` and `reduce_mean` divide by a size >= 1 (they only take values, or axes,
that are non-empty), so they never divide by zero; `reduce_max` reduces a non-empty axis;
`sum` and `reduce_sum` accept empty values. `logsumexp` reduces a non-empty dim; `var` and
`std` a dim of length n with n - correction >= 1 (correction 0 or 1), so their division is
by a positive count. `cumsum` scans any axis (empty ones included) with exclusive and
reverse drawn.
"""

from __future__ import annotations

from hypothesis import strategies as st

from spec.shape import size

from .core import Builder, Ctx, register, unary_builder

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


register(name="sum", build=unary_builder("sum"))
register(name="reduce_sum", build=_reduce("reduce_sum"))
register(name="mean", build=_mean)
register(name="reduce_mean", build=_reduce("reduce_mean"))
register(name="reduce_max", build=_reduce_max)


def _logsumexp(c: Ctx) -> bool:
    x = c.pick(lambda s: any(d >= 1 for d in s))
    if x is None or not c.room(1):
        return False
    dims = [i for i, d in enumerate(c.shapes[x]) if d >= 1]
    c.add("logsumexp", x, dim=c.draw(st.sampled_from(dims)))
    return True


def _var(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick(lambda s: any(d >= 1 for d in s))
        if x is None or not c.room(1):
            return False
        corr = c.draw(st.sampled_from((1, 0)))
        dims = [i for i, d in enumerate(c.shapes[x]) if d - corr >= 1]
        if not dims:
            corr, dims = 0, [i for i, d in enumerate(c.shapes[x]) if d >= 1]
        c.add(op, x, dim=c.draw(st.sampled_from(dims)), correction=corr)
        return True

    return build


register(name="logsumexp", build=_logsumexp)
register(name="var", build=_var("var"))
register(name="std", build=_var("std"))


def _cumsum(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    attrs = {"dim": c.draw(st.integers(0, len(c.shapes[x]) - 1))}
    for flag in ("exclusive", "reverse"):
        if c.draw(st.booleans()):
            attrs[flag] = True
    c.add("cumsum", x, **attrs)
    return True


register(name="cumsum", build=_cumsum)
