"""The conv and pool families' closed-form shape rules agree with their bodies: the same
output shape, or the same error (class and message), on random configurations."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from spec.errors import TorchLeanError
from spec.ops.table import OPS

CONV = [f"conv{n}d" for n in (1, 2, 3)] + [f"conv_transpose{n}d" for n in (1, 2, 3)]
POOL = [f"{k}_pool{n}d" for n in (1, 2, 3) for k in ("avg", "max")]
ADAPTIVE = [f"adaptive_{k}_pool{n}d" for n in (1, 2, 3) for k in ("avg", "max")]


def _nd(op: str) -> int:
    return int(op[-2])


def _ints(nd: int, lo: int, hi: int) -> st.SearchStrategy[tuple[int, ...]]:
    return st.one_of(
        st.tuples(*[st.integers(lo, hi)] * nd),
        st.tuples(st.integers(lo, hi)),
        st.tuples(*[st.integers(lo, hi)] * (2 * nd)),
    )


@st.composite
def _config(draw, op: str):
    nd = _nd(op)
    batch = draw(st.sampled_from([(), (1,), (2,)]))
    c = draw(st.integers(1, 4))
    dims = tuple(draw(st.integers(0, 6)) for _ in range(nd))
    x = (*batch, c, *dims)
    a: dict = {}
    opt = lambda key, s: a.__setitem__(key, draw(s)) if draw(st.booleans()) else None  # noqa: E731
    if op in ADAPTIVE:
        opt("output_size", _ints(nd, 0, 4))
        return [x], a
    if op in POOL:
        a["kernel_size"] = draw(_ints(nd, 0, 4))
        for key, lo, hi in (("stride", 0, 3), ("padding", -1, 2), ("dilation", 1, 2)):
            opt(key, _ints(nd, lo, hi))
        opt("ceil_mode", st.booleans())
        return [x], a
    g = draw(st.integers(1, 2))
    k = tuple(draw(st.integers(0, 3)) for _ in range(draw(st.sampled_from([nd, nd - 1, nd]))))
    cout = draw(st.integers(1, 4))
    w = (c, cout, *k) if "transpose" in op else (cout, draw(st.integers(1, 4)), *k)
    shapes = [x, w] + (
        [(draw(st.sampled_from([cout, cout * g, 1])),)] if draw(st.booleans()) else []
    )
    a["groups"] = g
    for key, lo, hi in (("stride", 0, 3), ("padding", -1, 2), ("dilation", 0, 2)):
        opt(key, _ints(nd, lo, hi))
    if "transpose" in op:
        opt("output_padding", _ints(nd, 0, 2))
    return shapes, a


def _outcome(f):
    try:
        return ("ok", f())
    except TorchLeanError as e:
        return (type(e).__name__, str(e))


@settings(max_examples=300, deadline=None)
@given(data=st.data(), op=st.sampled_from(CONV + POOL + ADAPTIVE))
def test_closed_form_shape_is_the_bodys(data, op: str) -> None:
    shapes, a = data.draw(_config(op))
    d = OPS[op]
    closed = _outcome(lambda: d.shape(shapes, a))
    body = _outcome(lambda: d.body(shapes, a).shapes[-1])
    if body[0] == "ShapeError" and not body[1].startswith(f"{op}: "):
        body = (body[0], f"{op}: {body[1]}")  # the composite's wrapper names the op
    assert closed == body, (op, shapes, a)


def test_a_large_convolution_is_validated_without_its_body() -> None:
    """A ResNet stem at 224x224: the shape rule answers without building the 1.8-million
    entry im2col index list (the body cache stays as it was)."""
    d = OPS["conv2d"]
    before = len(d.body.bodies)
    got = d.shape([(1, 3, 224, 224), (64, 3, 7, 7)], {"stride": (2, 2), "padding": (3, 3)})
    assert got == (1, 64, 112, 112)
    assert len(d.body.bodies) == before
