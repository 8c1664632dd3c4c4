"""The Session API, continued: random streams, values in the session dtype, the typed
graph and its link check, the parameter step and exact-dtype element checks, in eager and
typed-graph modes (the first part is tests/test_session.py).

Expected values are worked by hand or come from the spec (`eval_graph`, `backprop_all_ctx`,
`jvp_ctx`, `spec.rng`), never from the runtime under test.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import ml_dtypes
import numpy as np
import pytest

import runtime.session.link as rlink
import runtime.session.streams as rstreams
from runtime.backends.base import np_dtype
from runtime.session import (
    GraphExport,
    ParameterStore,
    RandomStreams,
    Recording,
    Rng,
    Session,
)
from spec import rng as srng
from spec.errors import (
    DomainError,
    GraphError,
    ShapeError,
    StaleHandleError,
    TorchLeanError,
)

F = Fraction
F32 = np.float32
MODES = ("eager", "typed_graph")


def f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=F32)


def ex(x: Any) -> np.ndarray:
    """An exact (object) array of Fractions."""
    a = np.array(x, dtype=object)
    out = np.empty(a.shape, dtype=object)
    for idx, v in np.ndenumerate(a):
        out[idx] = Fraction(v)
    return out


def fr(a: Any) -> list[Fraction]:
    """Exact values of an array's elements (IEEE elements are finite here)."""
    return [v if isinstance(v, Fraction) else Fraction(float(v)) for v in np.asarray(a).reshape(-1)]


def tape_len(s: Session) -> int:
    return len(s.tape)


# --------------------------------------------------------------------------- dropout and RNG


@pytest.mark.parametrize("mode", MODES)
def test_dropout_rules(mode: str) -> None:
    s = Session(mode=mode, dtype="exact", seed=11)
    vals = [F(i + 1, 2) for i in range(64)]
    x = s.input(vals)
    n = tape_len(s)
    for p in (-F(1, 10), F(11, 10), -1, 2.0):
        with pytest.raises(DomainError):
            s.dropout(None, x, p)
    assert tape_len(s) == n and s.rng.counter == 0
    assert s.dropout(None, x, 0) is x and s.dropout(None, x, F(1, 2), train=False) is x
    assert tape_len(s) == n and s.rng.counter == 0
    z = s.dropout(None, x, 1)
    assert fr(s.get_value(z)) == [0] * 64
    p = F(1, 3)
    counter = s.rng.counter
    d = s.dropout(None, x, p)
    assert s.rng.counter == counter + 1  # one RNG advance
    key = srng.key_of(11, counter)
    got = fr(s.get_value(d))
    kept = 0
    for i, (g, v) in enumerate(zip(got, vals, strict=True)):
        if srng.sample_unit(key, i) >= p:  # kept: x / (1 - 1/3) = 3x/2
            assert g == v * F(3, 2)
            kept += 1
        else:
            assert g == 0
    assert 0 < kept < 64


def test_dropout_float32_hand_values() -> None:
    s = Session(dtype="float32", kernels="ordered", seed=3)
    x = s.input(f32([1.5] * 32))
    got = s.get_value(s.dropout(None, x, 0.5)).tolist()
    assert set(got) == {0.0, 3.0}  # 1.5 / 0.5
    key = srng.key_of(3, 0)
    assert got == [3.0 if srng.sample_unit(key, i) >= F(1, 2) else 0.0 for i in range(32)]


def test_dropout_same_seed_same_mask_and_counter_survives_reset() -> None:
    a = Session(seed=42)
    b = Session(mode="typed_graph", seed=42)
    c = Session(seed=43)
    masks = []
    for s in (a, b, c):
        x = s.input(f32([1.0] * 64))
        masks.append(s.get_value(s.dropout(None, x, 0.5)).tolist())
    assert masks[0] == masks[1] and masks[0] != masks[2]
    a.reset_tape()
    x = a.input(f32([1.0] * 64))
    second = a.get_value(a.dropout(None, x, 0.5)).tolist()
    fresh = Session(seed=42)
    y = fresh.input(f32([1.0] * 64))
    fresh.dropout(None, y, 0.5)
    assert second == fresh.get_value(fresh.dropout(None, y, 0.5)).tolist()
    assert second != masks[0]


def test_dropout_with_an_explicit_rng() -> None:
    s = Session(dtype="float32")
    rng = s.init_rng(9)
    assert isinstance(rng, Rng) and (rng.seed, rng.counter) == (9, 0)
    x = s.input(f32([2.0] * 16))
    got = s.get_value(s.dropout(rng, x, 0.5)).tolist()
    assert rng.counter == 1 and s.rng.counter == 0
    key = srng.key_of(9, 0)
    assert got == [4.0 if srng.sample_unit(key, i) >= F(1, 2) else 0.0 for i in range(16)]


def test_rng_split_uniform_mask() -> None:
    s = Session(dtype="exact", seed=5)
    r = s.init_rng(77)
    left, right = s.split_rng(r)
    assert r.counter == 1
    assert (left.seed, right.seed) == srng.split(srng.key_of(77, 0))
    assert left.counter == right.counter == 0
    u = s.rand_uniform((2, 3))
    assert u.shape == (2, 3) and s.rng.counter == 1 and not s.tape.nodes[u.id].requires_grad
    key = srng.key_of(5, 0)
    assert fr(s.get_value(u)) == [srng.sample_unit(key, i) for i in range(6)]
    m = s.bernoulli_mask((8,), F(1, 4), rng=left)
    key = srng.key_of(left.seed, 0)
    assert fr(s.get_value(m)) == [1 if srng.sample_unit(key, i) >= F(1, 4) else 0 for i in range(8)]
    assert left.counter == 1 and s.rng.counter == 1


def test_fresh_seed_is_os_entropy(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Session()
    monkeypatch.setattr(rstreams.os, "urandom", lambda n: bytes([1, 2] + [0] * (n - 2)))
    assert s.fresh_seed() == 1 + 2 * 256
    monkeypatch.undo()
    seeds = {s.fresh_seed() for _ in range(4)}
    assert len(seeds) == 4 and all(0 <= v < 2**64 for v in seeds)


# --------------------------------------------------------------------------- dtypes


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16", "exact"])
@pytest.mark.parametrize("mode", MODES)
def test_values_in_the_session_dtype(dtype: str, mode: str) -> None:
    s = Session(mode=mode, dtype=dtype)
    x = s.input([1.5, 2.25], requires_grad=True)
    p = s.param([0.5, -1])
    y = s.mul(s.add(x, s.use(p)), x)
    loss = s.sum(y)
    want_dt = np.dtype(object) if dtype == "exact" else np_dtype(dtype)
    for r in (x, y, loss):
        assert s.get_value(r).dtype == want_dt
    assert p.get().dtype == want_dt
    assert fr(s.get_value(y)) == [F(3), F(9, 4) * F(5, 4)]
    grads = s.backward_scalar_dense_all(loss)
    assert all(g.dtype == want_dt for g in grads)
    # d/dx (x + p) x = 2x + p
    assert fr(grads[x.id]) == [F(7, 2), F(7, 2)]


def test_inputs_round_once_into_the_dtype() -> None:
    # 1/3 = 1.0101010101...b x 2^-2; bfloat16 keeps 8 bits: 1.0101011b x 2^-2
    b = Session(dtype="bfloat16")
    v = b.get_value(b.input([1 / 3]))
    assert v.dtype == np.dtype(ml_dtypes.bfloat16) and float(v[0]) == 0.333984375
    h = Session(dtype="float16")
    assert float(h.get_value(h.input([1 / 3]))[0]) == 1365 / 4096  # 0x3555
    e = Session(dtype="exact")
    assert fr(e.get_value(e.input([F(1, 3)]))) == [F(1, 3)]
    with pytest.raises(DomainError):
        e.input([float("inf")])


# --------------------------------------------------------------------------- typed graph


def test_typed_graph_leaves_before_ops() -> None:
    s = Session(mode="typed_graph", dtype="exact")
    p = s.param([1, 2])
    x = s.input([1, 2], requires_grad=True)
    r = s.input_nat(0)
    y = s.add(x, x)
    n = tape_len(s)
    msg = "cannot add a new leaf after graph nodes have been created (reset_tape first)"
    for call in (lambda: s.input([1]), lambda: s.use(p), lambda: s.input_nat(1)):
        with pytest.raises(GraphError) as ei:
            call()
        assert msg in str(ei.value)
    assert tape_len(s) == n and s.graph().env == [0] and s.get_nat(r) == 0
    c = s.const([F(1, 3), 2])  # a const after ops: a const node
    assert c.id == n and not s.tape.nodes[c.id].requires_grad
    z = s.mul(y, c)
    g = s.graph().graph
    assert g.num_inputs == 1 and [nd.op for nd in g.nodes] == ["add", "const", "mul"]
    assert list(g.nodes[1].attrs["values"]) == [F(1, 3), 2]
    assert fr(s.get_value(z)) == [F(2, 3), 8]
    w = 3 * y  # a Python scalar after ops: a const node too
    assert fr(s.get_value(w)) == [6, 12] and s.graph().graph.nodes[-2].op == "const"
    with pytest.raises(DomainError):
        s.const([float("nan")])
    s.reset_tape()
    assert s.input([1]).id == 0


def test_eager_allows_leaves_after_ops() -> None:
    s = Session(dtype="exact")
    x = s.input([1, 2])
    s.add(x, x)
    z = s.input([3])
    r = s.input_nat(4)
    assert z.id == 2 and s.get_nat(r) == 4
    with pytest.raises(TorchLeanError, match="typed_graph"):
        s.graph()


@pytest.mark.parametrize("mode", MODES)
def test_frozen_leaves_get_zero_gradients(mode: str) -> None:
    s = Session(mode=mode, dtype="float32")
    p = s.param(f32([1.0, 2.0]), requires_grad=False)
    a = s.use(p)
    b = s.input(f32([3.0, 4.0]), requires_grad=True)
    c = s.const(f32([5.0, 6.0]))
    out = s.sum(s.mul(s.mul(a, b), c))
    grads = s.backward_scalar_dense_all(out)
    assert grads[a.id].tolist() == [0.0, 0.0] and grads[c.id].tolist() == [0.0, 0.0]
    assert grads[b.id].tolist() == [5.0, 12.0]


def test_graph_and_check_link() -> None:
    s = Session(mode="typed_graph", dtype="float32", kernels="fast")
    x = s.input(f32([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    r = s.input_nat(1)
    y = s.tanh(s.matmul(x, x))
    s.sum(s.select(y, index=r))
    rec = s.graph()
    assert rec.dtype == "float32" and rec.env == [1] and len(rec.inputs) == 1
    assert rec.inputs[0].shape == (2, 2)
    assert [n.op for n in rec.graph.nodes] == ["matmul", "tanh", "select", "sum"]
    rep = s.check_link()
    assert rep.ok and bool(rep) and "5 values" in rep.text


def test_check_link_reports_the_first_mismatch(monkeypatch: pytest.MonkeyPatch) -> None:
    s = Session(mode="typed_graph", dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    s.sum(s.mul(x, x))
    real_lower = rlink.lower

    def broken_lower(*args: Any, **kwargs: Any) -> Any:
        tape = real_lower(*args, **kwargs)
        tape.nodes[1].value = tape.nodes[1].value + 1  # corrupt value %1
        return tape

    monkeypatch.setattr(rlink, "lower", broken_lower)
    rep = s.check_link()
    assert not rep.ok and not bool(rep)
    assert "value of value %1" in rep.text and "runtime [2, 5]" in rep.text
    assert "spec [1, 4]" in rep.text


# --------------------------------------------------------------------------- sgd


@pytest.mark.parametrize("mode", MODES)
def test_sgd_step_all(mode: str) -> None:
    s = Session(mode=mode, dtype="exact")
    w = s.param([1, 2])
    frozen = s.param([5, 5], requires_grad=False)
    unused = s.param([7])
    x = s.input([3, 4])
    a, f = s.use(w), s.use(frozen)
    loss = s.sum(s.mul(s.mul(a, x), f))
    grads = s.backward_scalar_dense_all(loss)
    assert fr(grads[a.id]) == [15, 20]
    s.sgd_step_all(F(1, 10), grads)
    assert fr(w.get()) == [F(-1, 2), 0]  # [1, 2] - [15, 20] / 10
    assert fr(frozen.get()) == [5, 5] and fr(unused.get()) == [7]
    assert fr(s.get_value(a)) == [1, 2]  # the leaf kept its snapshot
    # ids: x 0, a 1, f 2; only a's entry moves w: [-1/2, 0] - [3, 3] / 2
    s.sgd_step_all(0.5, [ex([1, 1]), ex([3, 3]), ex([2, 2]), *grads[3:]])
    assert fr(w.get()) == [-2, F(-3, 2)] and fr(frozen.get()) == [5, 5]


@pytest.mark.parametrize("mode", MODES)
def test_exact_dtype_refuses_inexact_elements(mode: str) -> None:
    # A float (or None) inside an object array passes a dtype check; it must not get in.
    s = Session(mode=mode, dtype="exact")
    p = s.param([1, 2])
    x = s.use(p)
    loss = s.sum(s.mul(x, x))
    grads = s.backward_scalar_dense_all(loss)
    inexact = np.array([0.5, 1.0], dtype=object)
    for bad in (inexact, np.array([None, None], dtype=object)):
        with pytest.raises(ShapeError, match="exact rationals only"):
            s.sgd_step_all(1, [bad, *grads[1:]])
        with pytest.raises(ShapeError, match="exact rationals only"):
            p.set(bad)
        with pytest.raises(ShapeError, match="exact rationals only"):
            s.backward_dense_all(x, bad)
        if mode == "typed_graph":
            with pytest.raises(ShapeError, match="exact rationals only"):
                s.jvp_leaf(loss, x, bad)
    assert fr(p.get()) == [1, 2] and all(isinstance(v, Fraction) for v in p.get())
    s.sgd_step_all(1, [np.array([1, F(1, 2)], dtype=object), *grads[1:]])  # ints are exact
    assert fr(p.get()) == [0, F(3, 2)] and all(isinstance(v, Fraction) for v in p.get())


def test_set_nat_is_refused_after_graph_nodes_in_typed_mode() -> None:
    s = Session(mode="typed_graph", dtype="exact")
    x = s.input([[1, 2], [3, 4]], requires_grad=True)
    r = s.input_nat(0)
    s.set_nat(r, 1)  # allowed: no node yet
    y = s.select(x, index=r)
    with pytest.raises(GraphError, match="reset_tape"):
        s.set_nat(r, 0)
    assert s.get_nat(r) == 1
    assert fr(s.get_value(y)) == [3, 4]
    assert s.check_link().ok
    e = Session(mode="eager", dtype="exact")
    xe = e.input([[1, 2], [3, 4]])
    re = e.input_nat(0)
    ye = e.select(xe, index=re)
    e.set_nat(re, 1)  # eager: later ops read the new value
    assert fr(e.get_value(ye)) == [1, 2]
    assert fr(e.get_value(e.select(xe, index=re))) == [3, 4]


def test_natref_given_as_tensor_is_a_usage_error_not_a_stale_one() -> None:
    s = Session(dtype="exact")
    r = s.input_nat(0)
    with pytest.raises(TorchLeanError, match="NatRef was given") as ei:
        s.relu(r)
    assert not isinstance(ei.value, StaleHandleError)


# --------------------------------------------------------------------------- the parts


def test_session_is_a_facade_over_its_parts() -> None:
    s = Session(mode="typed_graph", dtype="exact", seed=5)
    parts = (s.recording, s.store, s.streams, s.export)
    assert isinstance(s.recording, Recording) and isinstance(s.store, ParameterStore)
    assert isinstance(s.streams, RandomStreams) and isinstance(s.export, GraphExport)
    assert s.tape is s.recording.tape and s.rng is s.streams.rng
    p = s.param([1, 2], name="w")
    assert s.store.params == (p,)
    x = s.use(p)
    assert dict(s.store.leaf_params) == {x.id: p}
    r = s.input_nat(1)
    assert s.recording.env == (1,) and not s.graph_has_nodes
    m = s.recording.mark()
    with pytest.raises(ShapeError):
        s.matmul(x, 2)  # the scalar became a const leaf, then the op failed: rolled back
    assert s.recording.mark() == m and s.recording.num_leaves == 1
    y = s.select(s.reshape(x, shape=(2, 1)), index=r)
    assert s.graph_has_nodes and s.recording.has_nodes and s.recording.num_leaves == 1
    assert s.graph().graph.num_inputs == 1 and s.check_link().ok
    assert y.shape == (1,)
    s.reset_tape()
    assert (s.recording, s.store, s.streams, s.export) == parts  # the same parts, reset
    assert len(s.tape) == 0 and s.recording.env == () and not s.graph_has_nodes
    assert s.store.params == (p,) and dict(s.store.leaf_params) == {}


def test_no_session_module_reads_another_objects_private_names() -> None:
    # A part reaches another part (and the session its parts) through public names only:
    # a private attribute is read on `self` only, never on another object.
    import ast
    from pathlib import Path

    import runtime.session as rs

    for path in sorted(Path(rs.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                on_self = isinstance(node.value, ast.Name) and node.value.id == "self"
                assert on_self, f"{path.name}:{node.lineno}: .{node.attr} read on another object"
