"""Graph builders of the embed family.

Invariants: `embedding` indexes the rows of a non-empty rank-2 table; `one_hot` draws
1..4 classes and in-range indices; results stay within 12 elements (`MAX_ELEMENTS`).
"""

from __future__ import annotations

from hypothesis import strategies as st

from .core import Ctx, register

__all__: list[str] = []


def _embedding(c: Ctx) -> bool:
    t = c.pick(lambda s: len(s) == 2 and s[0] >= 1)
    if t is None or not c.room(1):
        return False
    v, d = c.shapes[t]
    longest = 4 if d == 0 else max(1, min(4, 12 // max(d, 1)))
    idx = c.draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=longest))
    shape = c.draw(st.sampled_from([None, (1, len(idx))]))
    c.add("embedding", t, indices=idx, shape=shape)
    return True


def _one_hot(c: Ctx) -> bool:
    if not c.room(1):
        return False
    n = c.draw(st.integers(1, 4))
    idx = c.draw(st.lists(st.integers(0, n - 1), max_size=12 // n))
    c.add("one_hot", indices=idx, num_classes=n)
    return True


register(name="embedding", build=_embedding)
register(name="one_hot", build=_one_hot)
