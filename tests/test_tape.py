"""runtime.engine.tape: TorchLean's tape rules, checked on hand-worked cases.

Expected values are worked out by hand (with exact binary fractions chosen so every
rounding is known) or with the spec domains; never read back from the tape itself.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from runtime.engine.context import KernelContext
from runtime.engine.tape import Tape
from spec.domains import BINARY32
from spec.errors import DomainError, GraphError, ShapeError

F32 = np.float32


def f32(*xs: float) -> np.ndarray:
    return np.array(xs, dtype=F32)


def bits(a: Any) -> list[int]:
    return [int(b) for b in np.asarray(a, dtype=F32).reshape(-1).view(np.uint32)]


def snapshot(tape: Tape) -> list[int]:
    return [id(n) for n in tape.nodes]


def const_backward(*pairs: tuple[int, Any], log: list | None = None, tag: str = "") -> Any:
    """A node backward that ignores its cotangent and emits fixed (id, grad) pairs."""

    def backward(g: Any) -> list[tuple[int, Any]]:
        if log is not None:
            log.append((tag, g))
        return list(pairs)

    return backward


# --------------------------------------------------------------------------- construction


def test_add_node_returns_old_length() -> None:
    t = Tape()
    assert len(t) == 0
    assert t.add_node("a", f32(1), True, (), None) == 0
    assert t.add_node("b", f32(2), False, (0,), None) == 1
    assert t.add_node("c", f32(3), True, (0, 1), None) == 2
    assert len(t) == 3
    assert [n.name for n in t.nodes] == ["a", "b", "c"]
    assert t.nodes[2].parents == (0, 1)


def test_add_node_rejects_bad_parent_ids() -> None:
    t = Tape()
    t.leaf(f32(1))
    for bad in (1, -1, True, 0.0):
        with pytest.raises(GraphError, match="invalid tape id"):
            t.add_node("x", f32(1), True, (bad,), None)
    assert len(t) == 1


def test_leaf() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    v = f32(1, 2)
    i = t.leaf(v)
    j = t.leaf(f32(3), requires_grad=False, name="w")
    assert (i, j) == (0, 1)
    n = t.nodes[0]
    assert n.name == "leaf" and n.requires_grad and n.parents == () and n.backward is None
    assert n.value is v
    assert t.nodes[1].name == "w" and not t.nodes[1].requires_grad
    assert t.value(1).tolist() == [3.0]
    with pytest.raises(GraphError):
        t.value(2)


def test_op_appends_one_node_with_the_right_value() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    a = t.leaf(f32(1.5, -2))
    b = t.leaf(f32(4))
    c = t.op("mul", [a, b])
    assert c == 2 and len(t) == 3
    assert t.nodes[c].name == "mul" and t.nodes[c].parents == (a, b)
    assert t.value(c).dtype == F32 and t.value(c).tolist() == [6.0, -8.0]
    d = t.op("scale", [c], c=Fraction(1, 2))
    assert t.value(d).tolist() == [3.0, -4.0]


@pytest.mark.parametrize(
    ("name", "args", "attrs", "err", "match"),
    [
        ("add", [0, 7], {}, GraphError, "invalid tape id 7"),
        ("add", [0, -1], {}, GraphError, "invalid tape id -1"),
        ("add", [0, 2], {}, ShapeError, "add"),  # (2, 3) + (4,) do not broadcast
        ("relu", [0], {"alpha": 1}, GraphError, "unknown attributes"),
        ("scale", [0], {}, GraphError, "missing attribute 'c'"),
        ("add", [0], {}, GraphError, "wrong number of arguments"),
        ("log", [1], {}, DomainError, "log"),  # contains 0
        ("log", [3], {}, DomainError, "log"),  # contains a negative value
        ("log", [4], {}, DomainError, "log"),  # contains NaN
        ("no_such_op", [0], {}, GraphError, "unknown op"),
    ],
)
def test_failing_op_leaves_the_tape_unchanged(
    name: str, args: list[int], attrs: dict, err: type, match: str
) -> None:
    t = Tape(KernelContext("float32", "ordered"))
    t.leaf(np.ones((2, 3), dtype=F32))  # 0
    t.leaf(f32(1, 0, 2))  # 1
    t.leaf(f32(1, 2, 3, 4))  # 2
    t.leaf(f32(1, -2))  # 3
    t.leaf(f32(np.nan, 1))  # 4
    before = snapshot(t)
    with pytest.raises(err, match=match):
        t.op(name, args, **attrs)
    assert len(t) == 5
    assert snapshot(t) == before


def test_log_of_positive_values_is_accepted() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    x = t.leaf(f32(1, 2**-149))  # the smallest subnormal is > 0
    y = t.op("log", [x])
    assert bits(t.value(y))[0] == 0  # log(1) = +0


@pytest.mark.parametrize(
    ("rg_a", "rg_b"), [(False, False), (False, True), (True, False), (True, True)]
)
def test_requires_grad_is_the_or_of_the_inputs(rg_a: bool, rg_b: bool) -> None:
    t = Tape()
    a = t.leaf(f32(1), requires_grad=rg_a)
    b = t.leaf(f32(2), requires_grad=rg_b)
    c = t.op("add", [a, b])
    assert t.nodes[c].requires_grad == (rg_a or rg_b)
    assert (t.nodes[c].backward is None) == (not (rg_a or rg_b))
    d = t.op("neg", [a])
    assert t.nodes[d].requires_grad == rg_a
    e = t.op("concat", [a, a, b])
    assert t.nodes[e].requires_grad == (rg_a or rg_b)


# --------------------------------------------------------------------------- backward_dense


def test_backward_dense_skips_unreached_and_frozen_nodes() -> None:
    calls: list = []
    t = Tape()
    x = t.leaf(f32(1))  # 0
    w = t.leaf(f32(2), requires_grad=False)  # 1, frozen
    # 2: unreached from the output (nothing downstream uses it)
    t.add_node("side", f32(0), True, (x,), const_backward((x, f32(100)), log=calls, tag="side"))
    # 3: frozen op node (its backward must never run)
    t.add_node("frozen", f32(0), False, (w,), const_backward((w, f32(7)), log=calls, tag="fz"))
    # 4: the output, emits to x, to the frozen leaf, and to the frozen node
    out = t.add_node(
        "out",
        f32(0),
        True,
        (x, w, 3),
        const_backward((x, f32(3)), (w, f32(5)), (3, f32(9)), log=calls, tag="out"),
    )
    grads = t.backward_dense(out, f32(1))
    assert [c[0] for c in calls] == ["out"]
    assert len(grads) == 5
    assert grads[1] is None and grads[2] is None and grads[3] is None  # dropped / unreached
    assert grads[0].tolist() == [3.0]
    assert grads[4].tolist() == [1.0]


def test_first_contribution_is_stored_as_is() -> None:
    t = Tape()
    x = t.leaf(f32(1, 2))
    c = f32(5, -0.0)
    out = t.add_node("out", f32(0), True, (x,), const_backward((x, c)))
    grads = t.backward_dense(out, f32(1))
    assert grads[x] is c  # not copied, not added to a zero
    assert bits(grads[x])[1] == 0x80000000  # -0 stays -0 (0 + -0 would be +0)


def test_negative_zero_from_a_real_op_stays_negative_zero() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    x = t.leaf(f32(3))
    y = t.op("neg", [x])
    grads = t.backward_dense(y, f32(0.0))
    assert bits(grads[x]) == [0x80000000]  # -(+0) = -0, stored as is


def test_later_contributions_are_existing_plus_new_in_emission_order() -> None:
    # Reverse sweep visits ids 3, 2, 1: contributions to x arrive as 1.0, then 2**-24, then
    # 2**-24. Left to right in binary32: 1 + 2**-24 is a tie -> 1 (even), twice: exactly 1.
    # Any other association, e.g. (2**-24 + 2**-24) + 1 = 1 + 2**-23, differs.
    t = Tape()
    x = t.leaf(f32(0))  # 0
    tiny = f32(2.0**-24)
    n1 = t.add_node("n1", f32(0), True, (x,), const_backward((x, tiny)))
    n2 = t.add_node("n2", f32(0), True, (x, n1), const_backward((x, tiny), (n1, f32(0))))
    n3 = t.add_node("n3", f32(0), True, (x, n2), const_backward((x, f32(1)), (n2, f32(0))))
    grads = t.backward_dense(n3, f32(1))
    assert bits(grads[x]) == bits(f32(1.0))
    # the same three contributions in the order (tiny, tiny, 1) give 1 + 2**-23
    want_other = BINARY32.add(
        BINARY32.add(BINARY32.from_float(2.0**-24), BINARY32.from_float(2.0**-24)), BINARY32.one()
    )
    assert float(want_other) == 1 + 2**-23


def test_order_within_one_node_and_existing_on_the_left() -> None:
    # Object arrays of strings make `+` non-commutative: the result spells the order.
    t = Tape(KernelContext("exact", "ordered"))

    def s(v: str) -> np.ndarray:
        a = np.empty(1, dtype=object)
        a[0] = v
        return a

    x = t.leaf(np.array([Fraction(0)], dtype=object))
    n1 = t.add_node("n1", s(""), True, (x,), const_backward((x, s("d"))))
    n2 = t.add_node(
        "n2",
        s(""),
        True,
        (x, n1),
        const_backward((x, s("a")), (n1, s("")), (x, s("b")), (x, s("c"))),
    )
    grads = t.backward_dense(n2, s(""))
    assert grads[x][0] == "abcd"


def test_wrong_shaped_contribution_raises_shape_error() -> None:
    t = Tape()
    x = t.leaf(f32(1, 2, 3))
    out = t.add_node("bad", f32(0), True, (x,), const_backward((x, f32(1, 2))))
    with pytest.raises(ShapeError) as e:
        t.backward_dense(out, f32(1))
    msg = str(e.value)
    assert "node 1" in msg and "node 0" in msg and "(2,)" in msg and "(3,)" in msg


def test_wrong_dtype_contribution_raises_shape_error() -> None:
    t = Tape()
    x = t.leaf(f32(1))
    out = t.add_node("bad", f32(0), True, (x,), const_backward((x, np.ones(1))))
    with pytest.raises(ShapeError, match="float64"):
        t.backward_dense(out, f32(1))


def test_contribution_to_a_later_id_is_a_graph_error() -> None:
    t = Tape()
    x = t.leaf(f32(1))
    out = t.add_node("bad", f32(0), True, (x,), const_backward((1, f32(1))))
    with pytest.raises(GraphError, match="emitted a gradient for id 1"):
        t.backward_dense(out, f32(1))


def test_backward_dense_errors() -> None:
    t = Tape()
    x = t.leaf(f32(1, 2))
    y = t.op("neg", [x])
    for bad in (2, -1, True, None):
        with pytest.raises(GraphError, match="invalid tape id"):
            t.backward_dense(bad, f32(1, 1))  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match=r"expected shape \(2,\)"):
        t.backward_dense(y, f32(1, 1, 1))
    with pytest.raises(ShapeError):
        t.backward_dense(y, np.ones(2))  # float64 seed on a float32 tape


# --------------------------------------------------------------------------- dense_all / from


def test_backward_dense_all_fills_unreached_slots_with_zeros() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    x = t.leaf(f32(1, 2))  # 0
    w = t.leaf(np.ones((2, 2), dtype=F32), requires_grad=False)  # 1 frozen
    side = t.op("neg", [x])  # 2 unreached
    y = t.op("mul", [x, x])  # 3
    grads = t.backward_dense_all(y, f32(1, -0.0))
    assert len(grads) == 4
    for i, shape in ((w, (2, 2)), (side, (2,))):
        assert grads[i].shape == shape and grads[i].dtype == F32
        assert all(b == 0 for b in bits(grads[i]))  # +0, not -0
    # mul(x, x): x*g + x*g -> [2*1*1, 2*2*(-0)] = [2, -0]
    assert bits(grads[x]) == bits(f32(2, -0.0))


def test_fan_in_mul_x_x() -> None:
    t = Tape(KernelContext("float32", "ordered"))
    x = t.leaf(f32(3, -1.5, 0.25))
    y = t.op("mul", [x, x])
    grads = t.backward_dense(y, f32(0.5, 2, -4))
    assert grads[x].tolist() == [3.0, -6.0, -2.0]  # 2 * x * g, by hand
    te = Tape(KernelContext("exact", "ordered"))
    xe = te.leaf(np.array([Fraction(1, 3), Fraction(-7, 5)], dtype=object))
    ye = te.op("mul", [xe, xe])
    g = np.array([Fraction(3, 7), Fraction(2)], dtype=object)
    ge = te.backward_dense(ye, g)
    assert list(ge[xe]) == [2 * Fraction(1, 3) * Fraction(3, 7), 2 * Fraction(-7, 5) * 2]


def test_backward_dense_from_runs_every_node_even_on_zero_cotangents() -> None:
    calls: list = []
    t = Tape()
    x = t.leaf(f32(1))  # 0
    w = t.leaf(f32(1), requires_grad=False)  # 1
    t.add_node("a", f32(0), True, (x,), const_backward((x, f32(1)), log=calls, tag="a"))  # 2
    t.add_node("fz", f32(0), False, (w,), const_backward(log=calls, tag="fz"))  # 3
    t.add_node("b", f32(0), True, (x,), const_backward((x, f32(2)), log=calls, tag="b"))  # 4
    zeros = [f32(0) for _ in range(5)]
    grads = t.backward_dense_from(zeros)
    assert [c[0] for c in calls] == ["b", "a"]  # every non-frozen node, last to first
    assert all(bits(c[1]) == [0] for c in calls)
    assert grads[x].tolist() == [3.0]  # 0 + 2 + 1
    # backward_dense from the last node never reaches "a" (nothing links 4 to 2)
    calls.clear()
    t.backward_dense(4, f32(0))
    assert [c[0] for c in calls] == ["b"]


def test_backward_dense_from_length_and_shapes() -> None:
    t = Tape()
    x = t.leaf(f32(1, 2))
    t.op("neg", [x])
    with pytest.raises(ShapeError, match="1 cotangents for a tape of 2 nodes"):
        t.backward_dense_from([f32(0, 0)])
    with pytest.raises(ShapeError, match="3 cotangents for a tape of 2 nodes"):
        t.backward_dense_from([f32(0, 0)] * 3)
    with pytest.raises(ShapeError, match="node 1"):
        t.backward_dense_from([f32(0, 0), f32(0)])
    grads = t.backward_dense_from([f32(1, 1), f32(2, -0.0)])
    assert bits(grads[0]) == bits(f32(-1, 1))  # 1 + (-2), 1 + (+0)
