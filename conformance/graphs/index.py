"""Graph builders of the index family.

Invariants: `select` always uses a literal `index` (never `env_slot`), so drawn graphs
evaluate with `env=()`; indices are in range for their axis (`gather` may also draw the
pad index m, which reads zero); results stay within `MAX_ELEMENTS`.
"""

from __future__ import annotations

from hypothesis import strategies as st

from spec.shape import size

from .core import MAX_ELEMENTS, Builder, Ctx, register

__all__: list[str] = []


def _select(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1 and s[0] >= 1)
    if x is None or not c.room(1):
        return False
    c.add("select", x, index=c.draw(st.integers(0, c.shapes[x][0] - 1)))
    return True


def _index_select(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    inner = size(s[1:])
    longest = 4 if inner == 0 else min(4, MAX_ELEMENTS // inner)
    if s[0] == 0:
        indices: list[int] = []
    else:
        indices = c.draw(st.lists(st.integers(0, s[0] - 1), max_size=longest))
    c.add("index_select", x, indices=indices)
    return True


def _scatter_add(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    inner = size(s[1:])
    biggest = 3 if inner == 0 else max(1, min(3, MAX_ELEMENTS // inner))
    n = c.draw(st.integers(1 if s[0] > 0 else 0, biggest))
    indices = c.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=s[0], max_size=s[0]))
    c.add("scatter_add", x, indices=indices, size=n)
    return True


def _gather(max_elements: int) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick(lambda s: len(s) >= 1)
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        lead, m = size(s[:-1]), s[-1]
        longest = 4 if lead == 0 else min(4, max_elements // lead)
        idx = c.draw(st.lists(st.integers(0, m), max_size=longest))
        shape = c.draw(st.sampled_from([(len(idx),), (1, len(idx))]))
        c.add("gather", x, indices=idx, shape=shape)
        return True

    return build


register(name="select", build=_select)
register(name="index_select", build=_index_select)
register(name="scatter_add", build=_scatter_add)
register(name="gather", build=_gather(MAX_ELEMENTS))
