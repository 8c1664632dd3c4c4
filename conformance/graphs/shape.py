"""Graph builders of the shape family.

Invariants: reshape targets are factorizations of the value's size (simplest first);
`broadcast_to` targets shapes the value broadcasts to; `concat` joins values of one trailing
shape (repeats allowed) within `MAX_ELEMENTS`; `slice` bounds satisfy 0 <= start <= stop <= n;
`swap_adjacent` and `transpose` take values of rank >= 2. `narrow`, `flip`, `roll`, `tile`
and `repeat_interleave` take any value (empty and size-1 axes included; roll's shifts are
signed and may exceed the axis; tile may add leading axes or repeat 0 times) and keep their
output within `MAX_ELEMENTS`.
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


# narrow / flip / roll / tile / repeat_interleave: drawn on any value (empty and size-1
# axes included); roll's shifts are signed and may exceed the axis; tile's repeats may add
# leading axes or be 0; the output stays within MAX_ELEMENTS.


def _narrow(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    d = c.draw(st.integers(0, len(s) - 1))
    start = c.draw(st.integers(0, s[d]))
    c.add("narrow", x, dim=d, start=start, length=c.draw(st.integers(0, s[d] - start)))
    return True


def _flip(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    r = len(c.shapes[x])
    dims = c.draw(st.lists(st.integers(0, max(r - 1, 0)), max_size=r, unique=True))
    c.add("flip", x, dims=tuple(dims))
    return True


def _roll(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    r = len(c.shapes[x])
    if r == 0 or c.draw(st.booleans()):
        c.add("roll", x, shifts=(c.draw(st.integers(-7, 7)),))
        return True
    dims = c.draw(st.lists(st.integers(0, r - 1), min_size=1, max_size=r))
    shifts = c.draw(st.lists(st.integers(-5, 5), min_size=len(dims), max_size=len(dims)))
    c.add("roll", x, shifts=tuple(shifts), dims=tuple(dims))
    return True


def _tile(c: Ctx) -> bool:
    x = c.pick(lambda s: size(s) <= MAX_ELEMENTS // 2)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    reps = tuple(c.draw(st.lists(st.integers(0, 3), max_size=len(s) + 1)))
    full = (1,) * (len(s) - len(reps)) + reps
    if size(s) * size(full) > MAX_ELEMENTS:
        reps = (1,) * len(reps)
    c.add("tile", x, dims=reps)
    return True


def _repeat_interleave(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1 and size(s) <= MAX_ELEMENTS // 2)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    d = c.draw(st.integers(0, len(s) - 1))
    per = c.draw(st.booleans()) and s[d] >= 1
    reps = tuple(
        c.draw(
            st.lists(st.integers(0, 2), min_size=1, max_size=1)
            if not per
            else st.lists(st.integers(0, 2), min_size=s[d], max_size=s[d])
        )
    )
    if size(s) * max(reps) > MAX_ELEMENTS:
        reps = (1,)
    c.add("repeat_interleave", x, repeats=reps, dim=d)
    return True


register(name="narrow", build=_narrow)
register(name="flip", build=_flip)
register(name="roll", build=_roll)
register(name="tile", build=_tile)
register(name="repeat_interleave", build=_repeat_interleave)
