"""spec.shape: sizes, broadcasting (against NumPy), strides / ravel / unravel, sliding windows."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.errors import ShapeError
from spec.shape import (
    as_shape,
    broadcast_shapes,
    broadcasts_to,
    rank,
    ravel_index,
    size,
    sliding_window_out_dim,
    strides,
    unravel_index,
)

shapes = st.lists(st.integers(0, 4), max_size=4).map(tuple)
nonempty_shapes = st.lists(st.integers(1, 5), max_size=4).map(tuple)


def numpy_broadcasts_to(src, dst) -> bool:
    try:
        np.broadcast_to(np.zeros(src, dtype=np.int8), dst)
    except ValueError:
        return False
    return True


def numpy_broadcast_shapes(a, b):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


# --------------------------------------------------------------------------- size / rank


def test_size_and_rank_hand_worked():
    assert size(()) == 1
    assert rank(()) == 0
    assert size((3,)) == 3
    assert size((2, 3, 4)) == 24
    assert rank((2, 3, 4)) == 3
    assert size((2, 0, 4)) == 0
    assert size((0,)) == 0
    assert rank((0,)) == 1


@given(shapes)
def test_size_rank_match_numpy(s):
    a = np.zeros(s, dtype=np.int8)
    assert size(s) == a.size == math.prod(s)
    assert rank(s) == a.ndim


def test_as_shape_validation():
    assert as_shape([2, 3]) == (2, 3)
    assert as_shape(()) == ()
    assert as_shape(iter([0, 1])) == (0, 1)
    assert isinstance(as_shape([1, 2]), tuple)
    for bad in ([-1], [2, -3], [1.0], [True], ["2"], [None]):
        with pytest.raises(ShapeError):
            as_shape(bad)


# --------------------------------------------------------------------------- broadcasting


def test_broadcasts_to_hand_worked_and_asymmetric():
    assert broadcasts_to((3,), (2, 3))
    assert not broadcasts_to((2, 3), (3,))
    assert broadcasts_to((1,), (0,))
    assert not broadcasts_to((0,), (1,))
    assert broadcasts_to((1, 3), (4, 3))
    assert not broadcasts_to((4, 3), (1, 3))
    assert broadcasts_to((), (2, 5))
    assert not broadcasts_to((2, 5), ())
    assert broadcasts_to((), ())
    assert broadcasts_to((2, 1), (2, 7))
    assert not broadcasts_to((2,), (3,))
    assert not broadcasts_to((3, 1), (2, 1))
    assert broadcasts_to((5, 1, 4), (2, 5, 6, 4))


@given(shapes, shapes)
def test_broadcasts_to_matches_numpy(src, dst):
    assert broadcasts_to(src, dst) == numpy_broadcasts_to(src, dst)


def test_broadcast_shapes_hand_worked():
    assert broadcast_shapes((3,), (2, 3)) == (2, 3)
    assert broadcast_shapes((2, 1), (1, 4)) == (2, 4)
    assert broadcast_shapes((1,), (0,)) == (0,)
    assert broadcast_shapes((0,), (1,)) == (0,)
    assert broadcast_shapes((0,), (2,)) is None
    assert broadcast_shapes((2, 3), (3, 3)) is None
    assert broadcast_shapes((), (4, 1)) == (4, 1)
    assert broadcast_shapes((), ()) == ()
    assert broadcast_shapes((5, 1, 4), (6, 1)) == (5, 6, 4)


@given(shapes, shapes)
def test_broadcast_shapes_matches_numpy(a, b):
    out = broadcast_shapes(a, b)
    assert out == numpy_broadcast_shapes(a, b)
    assert out == broadcast_shapes(b, a)
    if out is not None:
        assert broadcasts_to(a, out)
        assert broadcasts_to(b, out)


# --------------------------------------------------------------------------- strides / indices


def test_strides_hand_worked():
    assert strides(()) == ()
    assert strides((5,)) == (1,)
    assert strides((2, 3, 4)) == (12, 4, 1)
    assert strides((4, 1, 3)) == (3, 3, 1)


@given(nonempty_shapes)
def test_strides_match_numpy(s):
    a = np.zeros(s, dtype=np.int8)  # itemsize 1: byte strides are element strides
    assert strides(s) == a.strides


@given(nonempty_shapes.flatmap(lambda s: st.tuples(st.just(s), st.integers(0, size(s) - 1))))
def test_unravel_ravel_roundtrip_and_numpy(args):
    s, flat = args
    idx = unravel_index(flat, s)
    assert len(idx) == len(s)
    assert all(0 <= i < d for i, d in zip(idx, s, strict=True))
    assert ravel_index(idx, s) == flat
    assert sum(i * st_ for i, st_ in zip(idx, strides(s), strict=True)) == flat
    if s:
        assert idx == tuple(int(v) for v in np.unravel_index(flat, s))


@given(
    nonempty_shapes.flatmap(
        lambda s: st.tuples(st.just(s), st.tuples(*(st.integers(0, d - 1) for d in s)))
    )
)
def test_ravel_unravel_roundtrip(args):
    s, idx = args
    flat = ravel_index(idx, s)
    assert 0 <= flat < size(s)
    assert unravel_index(flat, s) == idx
    if s:
        assert flat == int(np.ravel_multi_index(idx, s))


def test_ravel_unravel_hand_worked():
    assert unravel_index(0, ()) == ()
    assert ravel_index((), ()) == 0
    assert unravel_index(23, (2, 3, 4)) == (1, 2, 3)
    assert unravel_index(5, (2, 3)) == (1, 2)
    assert ravel_index((1, 0, 2), (2, 3, 4)) == 14
    with pytest.raises(ValueError):
        ravel_index((1, 2), (3,))  # rank mismatch


# --------------------------------------------------------------------------- sliding window


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ((5, 3, 1, 0), 3),
        ((5, 3, 2, 1), 3),
        ((7, 3, 2, 0), 3),
        ((4, 2, 2, 1), 3),
        ((3, 3, 1, 0), 1),  # exact fit
        ((6, 3, 2, 0), 2),  # last element uncovered
        ((1, 4, 1, 1), 0),  # padded 3 < kernel 4
        ((0, 1, 1, 0), 0),  # empty input
        ((0, 1, 1, 1), 2),  # padding alone hosts windows
        ((5, 0, 1, 0), 0),  # kernel 0
        ((5, 2, 0, 0), 0),  # stride 0
        ((10, 1, 3, 0), 4),
        ((10, 10, 7, 0), 1),
    ],
)
def test_sliding_window_hand_worked(args, want):
    assert sliding_window_out_dim(*args) == want


@given(st.integers(0, 30), st.integers(0, 12), st.integers(0, 6), st.integers(0, 5))
def test_sliding_window_brute_force(n, k, s, p):
    padded = n + 2 * p
    if k == 0 or s == 0:
        want = 0
    else:
        want = sum(1 for start in range(0, padded, s) if start + k <= padded)
    assert sliding_window_out_dim(n, k, s, p) == want


@pytest.mark.parametrize(
    "args",
    [(-1, 3, 1, 0), (5, -1, 1, 0), (5, 3, -1, 0), (5, 3, 1, -1), (5, 3, 1.0, 0), (True, 1, 1, 0)],
)
def test_sliding_window_rejects_bad_args(args):
    with pytest.raises(ShapeError):
        sliding_window_out_dim(*args)
