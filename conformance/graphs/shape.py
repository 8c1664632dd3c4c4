"""Graph builders of the shape family.

Invariants: reshape targets are factorizations of the value's size (simplest first);
`broadcast_to` targets shapes the value broadcasts to; `concat` joins values of one trailing
shape (repeats allowed) within `MAX_ELEMENTS`; `slice` bounds satisfy 0 <= start <= stop <= n;
`swap_adjacent` and `transpose` take values of rank >= 2.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from spec.shape import Shape, size

from .core import MAX_ELEMENTS, Ctx, broadcast_targets, configured, factorizations, register

__all__: list[str] = []


def _reshape(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("reshape", x, shape=c.draw(st.sampled_from(factorizations(size(c.shapes[x])))))
    return True


def _swap_adjacent(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 2)
    if x is None or not c.room(1):
        return False
    c.add("swap_adjacent", x, axis=c.draw(st.integers(0, len(c.shapes[x]) - 2)))
    return True


def _transpose(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 2)
    if x is None or not c.room(1):
        return False
    c.add("transpose", x)
    return True


def _broadcast_to(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("broadcast_to", x, shape=c.draw(st.sampled_from(broadcast_targets(c.shapes[x]))))
    return True


def _concat(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    tail = c.shapes[x][1:]
    same = [x] + [i for i in c.candidates(lambda s: len(s) >= 1 and s[1:] == tail) if i != x]
    args = [x]
    total = size(c.shapes[x])
    for _ in range(c.draw(st.integers(0, 2))):
        y = c.draw(st.sampled_from(same))
        if total + size(c.shapes[y]) > MAX_ELEMENTS:
            break
        args.append(y)
        total += size(c.shapes[y])
    c.add("concat", *args)
    return True


def _slice(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    n = c.shapes[x][0]
    start = c.draw(st.integers(0, n))
    stop = c.draw(st.integers(start, n))
    c.add("slice", x, start=start, stop=stop)
    return True


register(name="reshape", build=_reshape)
register(name="broadcast_to", build=_broadcast_to)
register(name="slice", build=_slice)
register(name="concat", build=_concat)
register(name="swap_adjacent", build=_swap_adjacent)
register(name="transpose", build=_transpose)


# pad: every mode, a nonzero constant, negative pads (crop), reflect at its limit (n-1),
# circular over a whole period, two padded axes.
_PAD: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(3,)], {"pad": (1, 1)}),
    ([(2, 2)], {"pad": (1, 0, 0, 1), "value": Fraction(-3, 2)}),
    ([(1, 3)], {"pad": (2, 2), "mode": "reflect"}),
    ([(2, 2)], {"pad": (1, 1, 1, 0), "mode": "replicate"}),
    ([(2, 2)], {"pad": (2, 1), "mode": "circular"}),
    ([(2, 3)], {"pad": (-1, 1), "mode": "reflect"}),
    ([(2, 1, 3)], {"pad": (0, -2, 1, 1), "mode": "constant"}),
    ([(2, 2)], {"pad": (1, 1, 1, -1), "mode": "circular"}),
]

register(name="pad", build=configured("pad", _PAD))
