"""Graph builders of the piecewise family.

Invariants: prelu takes a value of rank >= 1 (one time in four a const holding zeros, its
kink) and a weight of its channel count (axis 1) or of one element, materialised (an
existing value, a reshape or a const); where takes two broadcastable values and a 0/1 mask
whose shape is a broadcast partner of theirs (so the mask may widen the result), all-0 and
all-1 masks included. Both are rational-safe (picks and products only).
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from spec.shape import broadcast_shapes, size

from .core import MAX_ELEMENTS, RAT, Ctx, broadcast_partners, register

__all__: list[str] = []

_Q = Fraction


def _prelu(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1 and size(s) > 0)
    if x is None or not c.room(2):
        return False
    s = c.shapes[x]
    if c.room(3) and c.draw(st.integers(0, 3)) == 3:
        vals = c.draw(st.lists(st.just(_Q(0)) | RAT, min_size=size(s), max_size=size(s)))
        x = c.add("const", shape=s, values=vals)
    n = s[1] if len(s) > 1 else 1
    w = c.materialize(c.draw(st.sampled_from([(n,), (1,)])), reserve=1)
    if w is None or not c.room(1):
        return False
    c.add("prelu", x, w)
    return True


def _where(c: Ctx) -> bool:
    a = c.pick()
    if a is None or not c.room(1):
        return False
    sa = c.shapes[a]
    others = c.candidates(
        lambda s: (o := broadcast_shapes(sa, s)) is not None and size(o) <= MAX_ELEMENTS
    )
    b = c.draw(st.sampled_from([a] + [i for i in others if i != a]))
    out = broadcast_shapes(sa, c.shapes[b]) or sa
    ms = c.draw(st.sampled_from(broadcast_partners(out)))
    n = size(ms)
    mask = c.draw(
        st.lists(st.integers(0, 1), min_size=n, max_size=n) | st.just([0] * n) | st.just([1] * n)
    )
    if size(broadcast_shapes(out, ms) or out) > MAX_ELEMENTS:
        return False
    c.add("where", a, b, mask=tuple(mask), mask_shape=ms)
    return True


register(name="prelu", build=_prelu)
register(name="where", build=_where)
