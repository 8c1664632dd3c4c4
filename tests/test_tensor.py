"""spec.tensor: Tensor / TensorPack invariants, dot / dot_list, fold order."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spec.domains import BINARY32, RATIONAL
from spec.errors import ShapeError
from spec.shape import size
from spec.tensor import SomeTensor, Tensor, TensorPack, dot, dot_list, fold_add

small_shapes = st.lists(st.integers(0, 3), max_size=3).map(tuple)
fractions = st.fractions(max_denominator=50).filter(lambda q: abs(q) < 1000)


def tensors_of(shape):
    return st.lists(fractions, min_size=size(shape), max_size=size(shape)).map(
        lambda xs: Tensor(shape, tuple(xs))
    )


def packs_of(shapes):
    return st.tuples(*(tensors_of(s) for s in shapes)).map(
        lambda ts: TensorPack(tuple(shapes), tuple(ts))
    )


shape_lists = st.lists(small_shapes, min_size=1, max_size=4)


class PairDomain:
    """A stand-in domain whose `add` records the operand order."""

    def add(self, a, b):
        return (a, b)


def f32(x: float):
    return BINARY32.from_float(x)


# --------------------------------------------------------------------------- Tensor


def test_tensor_rejects_wrong_length():
    with pytest.raises(ShapeError):
        Tensor((2, 3), (1,) * 5)
    with pytest.raises(ShapeError):
        Tensor((2, 3), (1,) * 7)
    with pytest.raises(ShapeError):
        Tensor((), ())
    with pytest.raises(ShapeError):
        Tensor((0,), (1,))
    with pytest.raises(ShapeError):
        Tensor.of([2, -1], [])
    assert Tensor((), (5,)).data == (5,)
    assert Tensor((2, 0), ()).data == ()
    assert Tensor.of([2, 2], iter(range(4))) == Tensor((2, 2), (0, 1, 2, 3))
    assert SomeTensor is Tensor


def test_tensor_is_immutable_and_helpers():
    t = Tensor.full((2, 2), Fraction(3))
    assert t.data == (Fraction(3),) * 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.data = ()  # type: ignore[misc]
    z = Tensor.zeros(RATIONAL, (3,))
    assert z == Tensor((3,), (Fraction(0),) * 3)
    assert t.map(lambda v: v * 2) == Tensor((2, 2), (Fraction(6),) * 4)
    # `same` is shape equality plus the domain's `same` elementwise
    a = Tensor((1,), (BINARY32.from_float(0.0),))
    b = Tensor((1,), (BINARY32.from_float(-0.0),))
    assert not a.same(BINARY32, b)
    assert a.same(BINARY32, a)
    nan1 = Tensor((1,), (BINARY32.from_bits(0x7FC00001),))
    nan2 = Tensor((1,), (BINARY32.from_bits(0xFFFFFFFF),))
    assert nan1.same(BINARY32, nan2)
    assert not Tensor((1, 1), a.data).same(BINARY32, a)


# --------------------------------------------------------------------------- fold order


def test_fold_add_empty_and_single():
    assert fold_add(RATIONAL, []) == 0
    assert BINARY32.to_bits(fold_add(BINARY32, [])) == 0
    assert fold_add(RATIONAL, [Fraction(7)]) == 7
    # a single -0 is returned as is (no `zero + x`, which would turn -0 into +0)
    assert BINARY32.to_bits(fold_add(BINARY32, [f32(-0.0)])) == 0x80000000
    assert fold_add(PairDomain(), [1, 2, 3, 4]) == (((1, 2), 3), 4)


def test_dot_is_a_left_fold_binary32():
    """In binary32 the ulp at 1e8 is 8, so 1e8 + 1 rounds back to 1e8 (1e8 is exact).
    Left fold of [1, 1e8, -1e8]: (1 + 1e8) - 1e8 = 1e8 - 1e8 = 0 (exact sum: 1; a right fold
    or pairwise sum gives 1). Left fold of [1e8, -1e8, 1]: 0 + 1 = 1 (right fold gives
    1e8 + (-1e8 + 1) = 1e8 - 1e8 = 0)."""
    ones = Tensor((3,), (f32(1.0),) * 3)
    a = Tensor((3,), (f32(1.0), f32(1e8), f32(-1e8)))
    assert BINARY32.to_rational(dot(BINARY32, a, ones)) == 0
    b = Tensor((3,), (f32(1e8), f32(-1e8), f32(1.0)))
    assert BINARY32.to_rational(dot(BINARY32, b, ones)) == 1
    # row-major order on a rank-2 tensor: [[1e8, 1], [-1e8, 1]] row-major folds
    # ((1e8 + 1) - 1e8) + 1 = 1; column-major would fold ((1e8 - 1e8) + 1) + 1 = 2
    m = Tensor((2, 2), (f32(1e8), f32(1.0), f32(-1e8), f32(1.0)))
    assert BINARY32.to_rational(dot(BINARY32, m, Tensor.full((2, 2), f32(1.0)))) == 1


def test_dot_products_rounded_before_adding():
    # (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24: the product rounds to 1 + 2**-11 (tie to even
    # dropped 2**-24), then adding -(1 + 2**-11) gives exactly 0. A fused multiply-add would
    # give 2**-24.
    x = BINARY32.from_rational(1 + Fraction(1, 2**12))
    c = BINARY32.from_rational(-(1 + Fraction(1, 2**11)))
    a = Tensor((2,), (x, BINARY32.one()))
    b = Tensor((2,), (x, c))
    assert BINARY32.to_rational(dot(BINARY32, a, b)) == 0


@given(small_shapes.flatmap(lambda s: st.tuples(tensors_of(s), tensors_of(s))))
def test_dot_rational_matches_python_sum(ab):
    a, b = ab
    assert dot(RATIONAL, a, b) == sum(
        (x * y for x, y in zip(a.data, b.data, strict=True)), Fraction(0)
    )


def test_dot_shape_mismatch():
    with pytest.raises(ShapeError):
        dot(RATIONAL, Tensor((2,), (1, 2)), Tensor((1, 2), (1, 2)))


# --------------------------------------------------------------------------- TensorPack


def test_tensor_pack_checks_shapes():
    t2 = Tensor((2,), (Fraction(1), Fraction(2)))
    with pytest.raises(ShapeError):
        TensorPack(((3,),), (t2,))
    with pytest.raises(ShapeError):
        TensorPack(((2,), (2,)), (t2,))
    with pytest.raises(ShapeError):
        TensorPack(((2,),), (t2, t2))
    p = TensorPack.of([t2, Tensor((), (Fraction(5),))])
    assert p.shapes == ((2,), ())
    assert len(p) == 2
    assert p.get(1) == Tensor((), (Fraction(5),))
    for bad in (-1, 2):
        with pytest.raises(ShapeError):
            p.get(bad)
    with pytest.raises(ShapeError):
        TensorPack.single(RATIONAL, [(2,)], 1, t2)
    with pytest.raises(ShapeError):
        TensorPack.single(RATIONAL, [(2,)], -1, t2)
    with pytest.raises(ShapeError):
        TensorPack.single(RATIONAL, [(3,)], 0, t2)  # v has the wrong shape
    with pytest.raises(ShapeError):
        TensorPack.of([]).unsnoc()
    with pytest.raises(ShapeError):
        p.add(RATIONAL, TensorPack.of([t2]))
    with pytest.raises(ShapeError):
        dot_list(RATIONAL, p, TensorPack.of([t2, t2]))
    z = TensorPack.zeros(RATIONAL, [(2,), (1, 3)])
    assert z.tensors == (Tensor((2,), (0, 0)), Tensor((1, 3), (0, 0, 0)))


@given(
    shape_lists.flatmap(
        lambda shapes: st.integers(0, len(shapes) - 1).flatmap(
            lambda i: st.tuples(
                st.just(shapes), st.just(i), packs_of(shapes), tensors_of(shapes[i])
            )
        )
    )
)
def test_dot_list_with_single(args):
    shapes, i, dx, v = args
    single = TensorPack.single(RATIONAL, shapes, i, v)
    assert single.get(i) == v
    for j, s in enumerate(shapes):
        if j != i:
            assert single.get(j) == Tensor(s, (Fraction(0),) * size(s))
    got = dot_list(RATIONAL, dx, single)
    assert got == dot(RATIONAL, dx.get(i), v)
    assert got == sum((x * y for x, y in zip(dx.get(i).data, v.data, strict=True)), Fraction(0))


@given(shape_lists.flatmap(lambda shapes: st.tuples(packs_of(shapes), packs_of(shapes))))
def test_dot_list_is_sum_of_dots(pq):
    p, q = pq
    want = sum(
        (
            x * y
            for a, b in zip(p.tensors, q.tensors, strict=True)
            for x, y in zip(a.data, b.data, strict=True)
        ),
        Fraction(0),
    )
    assert dot_list(RATIONAL, p, q) == want


def test_dot_list_is_a_left_fold_over_the_pack():
    one = f32(1.0)
    p = TensorPack.of([Tensor((), (f32(1.0),)), Tensor((), (f32(1e8),)), Tensor((), (f32(-1e8),))])
    q = TensorPack.of([Tensor((), (one,))] * 3)
    assert BINARY32.to_rational(dot_list(BINARY32, p, q)) == 0
    p2 = TensorPack.of([Tensor((), (f32(1e8),)), Tensor((), (f32(-1e8),)), Tensor((), (one,))])
    assert BINARY32.to_rational(dot_list(BINARY32, p2, q)) == 1


@given(shape_lists.flatmap(lambda shapes: st.tuples(packs_of(shapes), packs_of(shapes))))
def test_pack_add_pointwise(pq):
    p, q = pq
    r = p.add(RATIONAL, q)
    assert r.shapes == p.shapes
    for a, b, c in zip(p.tensors, q.tensors, r.tensors, strict=True):
        assert c.data == tuple(x + y for x, y in zip(a.data, b.data, strict=True))
    # operand order: existing (self) on the left
    pairs = p.add(PairDomain(), q)  # type: ignore[arg-type]
    for a, b, c in zip(p.tensors, q.tensors, pairs.tensors, strict=True):
        assert c.data == tuple(zip(a.data, b.data, strict=True))


def test_pack_add_binary32_hand_worked():
    # elementwise IEEE sums: 1e8 + 1 rounds to 1e8 (ulp 8); -0 + -0 = -0; 1 + 2**-24 ties to 1
    p = TensorPack.of([Tensor((3,), (f32(1e8), f32(-0.0), f32(1.0)))])
    q = TensorPack.of([Tensor((3,), (f32(1.0), f32(-0.0), f32(2.0**-24)))])
    r = p.add(BINARY32, q).get(0).data
    assert [BINARY32.to_bits(v) for v in r] == [0x4CBEBC20, 0x80000000, 0x3F800000]


@given(
    shape_lists.flatmap(
        lambda shapes: st.tuples(packs_of(shapes), small_shapes.flatmap(tensors_of))
    )
)
def test_snoc_unsnoc_inverse(args):
    p, t = args
    q = p.snoc(t)
    assert len(q) == len(p) + 1
    assert q.shapes == (*p.shapes, t.shape)
    assert q.get(len(p)) == t
    assert q.unsnoc() == (p, t)
    init, last = p.unsnoc()
    assert init.snoc(last) == p
    assert len(init) == len(p) - 1


def test_pack_same():
    a = TensorPack.of([Tensor((1,), (f32(0.0),))])
    b = TensorPack.of([Tensor((1,), (f32(-0.0),))])
    assert a.same(BINARY32, a)
    assert not a.same(BINARY32, b)
    assert not a.same(BINARY32, TensorPack.of([Tensor((), (f32(0.0),))]))
