"""Graph builders of the linalg family.

Invariants: `matmul`'s left operand has rank >= 2 (an existing value or a 2-D reshape) and
its right operand matches the contraction size with a broadcastable batch; `linear`'s input
has rank 1 or 2, its weight is (out, n_in) and its bias (out,), built from existing values,
reshapes or consts; every result stays within `MAX_ELEMENTS`.
"""

from __future__ import annotations

from hypothesis import strategies as st

from spec.shape import Shape, broadcast_shapes, size

from .core import MAX_ELEMENTS, Ctx, factorizations, register

__all__: list[str] = []


def _two_d(c: Ctx) -> int | None:
    """A value of rank >= 2: an existing one, or a 2-D reshape of an existing value."""
    existing = c.candidates(lambda s: len(s) >= 2)
    if existing and (not c.room(2) or c.draw(st.integers(0, 2)) != 2):
        return int(c.draw(st.sampled_from(existing)))
    if not c.room(2):
        return None
    x = c.draw(st.sampled_from(range(len(c.shapes))))
    shapes = [f for f in factorizations(size(c.shapes[x])) if len(f) == 2]
    return c.add("reshape", x, shape=c.draw(st.sampled_from(shapes)))


def _matmul(c: Ctx) -> bool:
    if not c.shapes or not c.room(1):
        return False
    a = _two_d(c)
    if a is None:
        return False
    sa = c.shapes[a]
    k, batch_a = sa[-1], sa[:-2]

    def fits(s: Shape) -> bool:
        if len(s) < 2 or s[-2] != k:
            return False
        batch = broadcast_shapes(batch_a, s[:-2])
        return batch is not None and size((*batch, sa[-2], s[-1])) <= MAX_ELEMENTS

    existing = c.candidates(fits)
    if existing and (not c.room(2) or c.draw(st.integers(0, 2)) != 2):
        b = c.draw(st.sampled_from(existing))
    else:
        shapes = [(k, n) for n in (1, 2, 3, 0)] + [(2, k, n) for n in (1, 2)]
        shapes = [s for s in shapes if fits(s) and size(s) <= MAX_ELEMENTS]
        if not shapes or not c.room(2):
            return False
        mb = c.materialize(c.draw(st.sampled_from(shapes)), reserve=1)
        if mb is None:
            return False
        b = mb
    c.add("matmul", a, b)
    return True


def _linear(c: Ctx) -> bool:
    if not c.shapes or not c.room(1):
        return False
    existing = c.candidates(lambda s: len(s) in (1, 2))
    if existing and (not c.room(4) or c.draw(st.integers(0, 3)) != 3):
        x = c.draw(st.sampled_from(existing))
    elif c.room(2):
        y = c.draw(st.sampled_from(range(len(c.shapes))))
        x = c.add("reshape", y, shape=(size(c.shapes[y]),))
    else:
        return False
    sx = c.shapes[x]
    n_in, rows = sx[-1], (sx[0] if len(sx) == 2 else 1)
    outs = [o for o in (1, 2, 3) if o * n_in <= MAX_ELEMENTS and o * rows <= MAX_ELEMENTS]
    if not outs:
        return False
    w_existing = c.candidates(lambda s: len(s) == 2 and s[1] == n_in and s[0] in outs)
    use_existing: bool = c.draw(st.booleans())
    if w_existing and use_existing:
        w = int(c.draw(st.sampled_from(w_existing)))
    else:
        mw = c.materialize((c.draw(st.sampled_from(outs)), n_in), reserve=2)
        if mw is None:
            return False
        w = mw
    b = c.materialize((c.shapes[w][0],), reserve=1)
    if b is None:
        return False
    c.add("linear", x, w, b)
    return True


register(name="matmul", build=_matmul)
register(name="linear", build=_linear)
