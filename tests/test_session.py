"""The Session API, method by method, in eager and typed-graph modes.

Expected values are worked by hand or come from the spec (`eval_graph`, `backprop_all_ctx`,
`jvp_ctx`, `spec.rng`), never from the runtime under test.
"""

from __future__ import annotations

import threading
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from runtime.backends.base import DTYPE_DOMAIN, to_spec
from runtime.session import Param, Session
from spec.errors import (
    DomainError,
    HookError,
    ShapeError,
    StaleHandleError,
    TorchLeanError,
)
from spec.graph import eval_graph, jvp_ctx

F = Fraction
F32 = np.float32
MODES = ("eager", "typed_graph")
RAT = DTYPE_DOMAIN["exact"]


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


def bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def tape_len(s: Session) -> int:
    return len(s.tape)


# --------------------------------------------------------------------------- construction


def test_defaults() -> None:
    s = Session()
    assert (s.mode, s.device, s.dtype, s.kernels) == ("eager", "cpu", "float32", "fast")
    assert s.grad_enabled is True and s.requires_grad_by_default is True
    assert s.rng.seed == 0 and s.rng.counter == 0
    assert s.generation == 0 and tape_len(s) == 0


@pytest.mark.parametrize(
    "kwargs",
    [{"mode": "lazy"}, {"dtype": "int8"}, {"dtype": "symbolic"}, {"kernels": "turbo"}],
)
def test_bad_construction(kwargs: dict[str, Any]) -> None:
    with pytest.raises(TorchLeanError):
        Session(**kwargs)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.skipif(
    __import__("importlib").util.find_spec("cupy") is not None,
    reason="CuPy is installed: the CUDA path is covered by tests/test_cuda.py",
)
def test_cuda_is_a_clear_error(mode: str) -> None:
    with pytest.raises(TorchLeanError) as ei:
        Session(mode=mode, device="cuda")
    msg = str(ei.value)
    if mode == "typed_graph":
        assert "CPU-only" in msg
    else:
        # this test only runs without a GPU (see the guard below)
        assert "device 'cuda'" in msg
        assert "needs CuPy" in msg or "no usable CUDA device" in msg


def test_owner_ids_distinct_across_threads() -> None:
    owners: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(8)

    def work() -> None:
        barrier.wait()
        mine = [Session().owner for _ in range(40)]
        with lock:
            owners.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(owners) == 320 and len(set(owners)) == 320


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize("mode", MODES)
def test_param_get_set_checked(mode: str) -> None:
    s = Session(mode=mode)
    src = f32([1.0, 2.0])
    p = s.param(src, name="w")
    assert isinstance(p, Param) and p.name == "w" and p.shape == (2,)
    src[0] = 9.0  # param() copied its init
    assert p.get().tolist() == [1.0, 2.0] and p.get().dtype == F32
    with pytest.raises(ShapeError, match="shape"):
        p.set(f32([1.0, 2.0, 3.0]))
    with pytest.raises(ShapeError, match="dtype"):
        p.set(np.array([1.0, 2.0]))  # float64: no silent cast
    assert p.get().tolist() == [1.0, 2.0]
    new = f32([3.0, 4.0])
    p.set(new)
    new[0] = 7.0
    assert p.get().tolist() == [3.0, 4.0]
    assert s.param(f32(1.0)).name != p.name


def test_param_requires_grad_defaults() -> None:
    s = Session(requires_grad_by_default=False)
    assert s.param(f32(1.0)).requires_grad is False
    assert s.param(f32(1.0), requires_grad=True).requires_grad is True
    t = Session()
    assert t.param(f32(1.0)).requires_grad is True
    assert t.param(f32(1.0), requires_grad=False).requires_grad is False


@pytest.mark.parametrize("mode", MODES)
def test_use_records_a_new_snapshot_each_call(mode: str) -> None:
    s = Session(mode=mode)
    p = s.param(f32([1.0, 2.0]))
    a = s.use(p)
    b = s.use(p)
    p.set(f32([5.0, 6.0]))
    c = s.use(p)
    assert (a.id, b.id, c.id) == (0, 1, 2) and tape_len(s) == 3
    assert s.get_value(a).tolist() == [1.0, 2.0] and s.get_value(c).tolist() == [5.0, 6.0]
    if mode == "typed_graph":
        assert s.graph().graph.inputs == ((2,), (2,), (2,))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("grad_enabled", [False, True])
@pytest.mark.parametrize("p_rg", [False, True])
def test_use_leaf_requires_grad(mode: str, grad_enabled: bool, p_rg: bool) -> None:
    s = Session(mode=mode, grad_enabled=grad_enabled)
    p = s.param(f32(1.0), requires_grad=p_rg)
    x = s.use(p)
    assert s.tape.nodes[x.id].requires_grad is (grad_enabled and p_rg)


# --------------------------------------------------------------------------- leaves


@pytest.mark.parametrize("mode", MODES)
def test_leaves(mode: str) -> None:
    s = Session(mode=mode)
    src = f32([1.0, 2.0])
    x = s.input(src, name="x")
    y = s.input([3.0, 4.0], requires_grad=False)
    c = s.const([0.5, 0.25])
    src[0] = 100.0  # input() copied the value
    assert s.get_value(x).tolist() == [1.0, 2.0]
    # a gradient-enabled session's inputs track gradients unless told otherwise
    assert [s.tape.nodes[i].requires_grad for i in (x.id, y.id, c.id)] == [True, False, False]
    assert x.shape == (2,) and x.owner == s.owner and x.generation == 0
    with pytest.raises(TorchLeanError, match="no silent casts"):
        s.input(np.array([1.0, 2.0]))  # a float64 array into a float32 session
    assert tape_len(s) == 3


@pytest.mark.parametrize("mode", MODES)
def test_nats(mode: str) -> None:
    s = Session(mode=mode)
    r = s.input_nat(3)
    q = s.input_nat(0)
    assert (r.slot, q.slot) == (0, 1)
    assert s.get_nat(r) == 3 and s.get_nat(q) == 0
    s.set_nat(r, 1)
    assert s.get_nat(r) == 1
    for bad in (-1, True, 1.5):
        with pytest.raises(TorchLeanError):
            s.input_nat(bad)  # type: ignore[arg-type]
        with pytest.raises(TorchLeanError):
            s.set_nat(r, bad)  # type: ignore[arg-type]
    assert s.get_nat(r) == 1 and s.get_nat(q) == 0
    if mode == "typed_graph":
        assert s.graph().env == [1, 0]


@pytest.mark.parametrize("mode", MODES)
def test_get_value_returns_a_copy(mode: str) -> None:
    s = Session(mode=mode)
    x = s.input(f32([1.0, 2.0]))
    y = s.add(x, x)
    v = s.get_value(y)
    v[0] = 42.0
    w = s.get_value(x)
    w[:] = 0.0
    assert s.get_value(y).tolist() == [2.0, 4.0] and s.get_value(x).tolist() == [1.0, 2.0]
    assert s.get_value(y) is not s.get_value(y)


# --------------------------------------------------------------------------- ops


def _algebraic_program(s: Session, nat: bool = True) -> list[Any]:
    """A program using most algebraic op methods (valid over exact rationals)."""
    a = s.input([[1, -2, F(1, 2)], [3, F(1, 4), -1]], requires_grad=True)
    b = s.input([F(1, 2), -1, 2], requires_grad=True)
    c = s.input([[1, 2], [F(1, 2), -1], [2, 0]])
    r = s.input_nat(1) if nat else 1
    outs = [
        s.add(a, b),
        s.sub(a, b),
        s.mul(a, b),
        s.div(a, s.clamp(b, lo=F(1, 4), hi=3)),
        s.neg(a),
        s.scale(a, c=F(3, 2)),
        s.relu(a),
        s.abs(a),
        s.maximum(a, b),
        s.minimum(a, b),
        s.sum(a),
        s.reduce_sum(a, axis=0),
        s.matmul(a, c),
        s.linear(b, s.transpose(c), s.select(c, index=0)),
        s.reshape(a, shape=(3, 2)),
        s.swap_adjacent(a, axis=0),
        s.broadcast_to(s.reshape(b, shape=(1, 3)), shape=(2, 3)),
        s.concat(a, a),
        s.slice(a, start=1, stop=2),
        s.select(a, index=r),
        s.index_select(a, indices=[1, 1, 0]),
        s.scatter_add(a, indices=[1, 1], size=3),
        s.mean(a),
        s.reduce_mean(a, axis=1),
        s.mse_loss(a, s.broadcast_to(b, shape=(2, 3))),
        s.inv(s.clamp(a, lo=F(1, 2), hi=2)),
        s.detach(a),
    ]
    outs.append(s.const([[1, 2, 3], [4, 5, 6]]))
    outs.append(s.add(outs[-1], a) * 2)
    return outs


def _float_program(s: Session) -> list[Any]:
    a = s.input([[1.0, -2.0, 0.5], [3.0, 0.25, -1.5]], requires_grad=True)
    t = s.input([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    return [
        s.tanh(a),
        s.exp(a),
        s.log(s.abs(a)),
        s.sqrt(s.abs(a)),
        s.sin(a),
        s.cos(a),
        s.sigmoid(a),
        s.softplus(a),
        s.gelu(a),
        s.silu(a),
        s.safe_log(a),
        s.softmax(a),
        s.log_softmax(a),
        s.cross_entropy(a, t),
    ]


def _assert_values_match_spec(s: Session) -> None:
    rec = s.graph()
    D = DTYPE_DOMAIN[s.dtype]
    want = eval_graph(D, rec.graph, rec.inputs, rec.env).tensors
    assert len(want) == tape_len(s)
    for i, w in enumerate(want):
        got = to_spec(s.tape.nodes[i].value, s.dtype)
        assert got.same(D, w), (i, got, w)


@pytest.mark.parametrize("dtype", ["exact", "float32"])
def test_op_methods_match_spec_eval(dtype: str) -> None:
    s = Session(mode="typed_graph", dtype=dtype, kernels="ordered")
    outs = _algebraic_program(s)
    assert all(o.owner == s.owner for o in outs)
    _assert_values_match_spec(s)
    assert s.graph().graph.nodes[-1].op == "mul"
    e = Session(mode="eager", dtype=dtype, kernels="ordered")
    outs_e = _algebraic_program(e)
    assert [o.id for o in outs] == [o.id for o in outs_e]
    for o, oe in zip(outs, outs_e, strict=True):
        assert o.shape == oe.shape
        if dtype == "exact":
            assert fr(s.get_value(o)) == fr(e.get_value(oe))
        else:
            assert bits(s.get_value(o)) == bits(e.get_value(oe))


def test_float_op_methods_match_spec_eval() -> None:
    s = Session(mode="typed_graph", dtype="float32", kernels="ordered")
    _float_program(s)
    _assert_values_match_spec(s)
    e = Session(mode="eager", dtype="float32", kernels="ordered")
    _float_program(e)
    assert [bits(n.value) for n in s.tape.nodes] == [bits(n.value) for n in e.tape.nodes]


@pytest.mark.parametrize("mode", MODES)
def test_op_hand_values(mode: str) -> None:
    s = Session(mode=mode, dtype="exact")
    x = s.input([1, 2, 3])
    m = s.input([[1, 2], [3, 4]])
    r = s.input_nat(1)
    assert fr(s.get_value(s.add(x, x))) == [2, 4, 6]
    assert fr(s.get_value(s.sub(x, s.const(F(1, 2))))) == [F(1, 2), F(3, 2), F(5, 2)]
    assert fr(s.get_value(s.mul(x, x))) == [1, 4, 9]
    assert fr(s.get_value(s.div(x, s.const(3)))) == [F(1, 3), F(2, 3), 1]
    assert fr(s.get_value(s.neg(x))) == [-1, -2, -3]
    assert fr(s.get_value(s.scale(x, c=F(1, 3)))) == [F(1, 3), F(2, 3), 1]
    assert fr(s.get_value(s.relu(s.neg(x)))) == [0, 0, 0]
    assert fr(s.get_value(s.sum(x))) == [6]
    assert fr(s.get_value(s.matmul(m, m))) == [7, 10, 15, 22]
    assert fr(s.get_value(s.select(m, index=r))) == [3, 4]
    assert fr(s.get_value(s.reshape(m, shape=(4,)))) == [1, 2, 3, 4]
    # mse = ((1-0)^2 + (2-0)^2 + (3-0)^2) / 3
    assert fr(s.get_value(s.mse_loss(x, s.scale(x, c=0)))) == [F(14, 3)]
    assert fr(s.get_value(s.op("sum", x))) == [6]


@pytest.mark.parametrize("mode", MODES)
def test_python_operators(mode: str) -> None:
    s = Session(mode=mode, dtype="exact")
    x = s.input([1, 2])
    y = s.input([4, 8])
    m = s.input([[1, 2], [3, 4]])
    v = s.input([[1], [1]])
    cases = [
        (x + y, [5, 10]),
        (x - y, [-3, -6]),
        (x * y, [4, 16]),
        (x / y, [F(1, 4), F(1, 4)]),
        (-x, [-1, -2]),
        (x + 1, [2, 3]),
        (1 + x, [2, 3]),
        (x - F(1, 2), [F(1, 2), F(3, 2)]),
        (3 - x, [2, 1]),
        (2 * x, [2, 4]),
        (x * 0.5, [F(1, 2), 1]),
        (1 / y, [F(1, 4), F(1, 8)]),
        (y / 2, [2, 4]),
        (m @ v, [3, 7]),
    ]
    for ref, want in cases:
        assert fr(s.get_value(ref)) == [F(w) for w in want]
    if mode == "typed_graph":
        assert [n.op for n in s.graph().graph.nodes][:5] == ["add", "sub", "mul", "div", "neg"]


@pytest.mark.parametrize("mode", MODES)
def test_bad_ops_change_nothing(mode: str) -> None:
    s = Session(mode=mode, dtype="float32")
    x = s.input(f32([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    y = s.input(f32([1.0, 2.0]))
    s.relu(x)

    def snapshot() -> Any:
        g = s.graph() if mode == "typed_graph" else None
        return tape_len(s), None if g is None else (g.graph.inputs, len(g.graph.nodes))

    before = snapshot()
    bad = [
        lambda: s.add(x, y),  # (2,3) and (2,) do not broadcast
        lambda: s.matmul(x, 2.0),  # the scalar becomes a const, then the shape rule fails
        lambda: x @ 2.0,
        lambda: s.matmul(2.0, x),
        lambda: s.reshape(x, shape=(4,)),
        lambda: s.select(x, index=5),
        lambda: s.op("no_such_op", x),
        lambda: s.scale(x),  # missing attribute
        lambda: s.mse_loss(x, 1.0),
    ]
    for call in bad:
        with pytest.raises(TorchLeanError):
            call()
        assert snapshot() == before
    with pytest.raises(AttributeError):
        s.no_such_method  # noqa: B018


def test_exact_division_by_zero_scalar_changes_nothing() -> None:
    for mode in MODES:
        s = Session(mode=mode, dtype="exact")
        x = s.input([1, 2])
        s.neg(x)
        n = tape_len(s)
        with pytest.raises(DomainError):
            s.div(x, 0)
        with pytest.raises(DomainError):
            _ = x / 0
        with pytest.raises(DomainError):
            s.tanh(x)
        assert tape_len(s) == n
        if mode == "typed_graph":
            assert [nd.op for nd in s.graph().graph.nodes] == ["neg"]


# --------------------------------------------------------------------------- reset


@pytest.mark.parametrize("mode", MODES)
def test_reset_tape(mode: str) -> None:
    s = Session(mode=mode, seed=5)
    owner = s.owner
    p = s.param(f32(2.0))
    x = s.use(p)
    s.dropout(None, s.input(f32([1.0, 2.0])), 0.5)
    counter = s.rng.counter
    assert counter == 1
    s.reset_tape()
    assert s.generation == 1 and tape_len(s) == 0 and s.owner == owner
    assert s.rng.counter == counter and s.rng.seed == 5
    assert float(p.get()) == 2.0
    with pytest.raises(StaleHandleError):
        s.get_value(x)
    y = s.use(p)
    assert y.id == 0 and y.generation == 1 and float(s.get_value(y)) == 2.0
    if mode == "typed_graph":
        assert s.graph().graph.inputs == ((),) and s.graph().env == []


# --------------------------------------------------------------------------- detach


def test_detach_eager_structure() -> None:
    s = Session(dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    d = s.detach(x)
    node = s.tape.nodes[d.id]
    assert node.parents == (x.id,) and node.requires_grad is False and node.backward is None
    assert fr(s.get_value(d)) == [1, 2]
    y = s.mul(d, x)  # y = d * x, d frozen: dy/dx = d only
    grads = s.backward_dense_all(y, ex([1, 1]))
    assert fr(grads[x.id]) == [1, 2] and fr(grads[d.id]) == [0, 0]
    grads = s.backward_dense_all(d, ex([3, 4]))
    assert fr(grads[d.id]) == [3, 4] and fr(grads[x.id]) == [0, 0]


def test_detach_typed_graph() -> None:
    s = Session(mode="typed_graph", dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    d = s.detach(x)
    y = s.mul(d, x)
    assert [n.op for n in s.graph().graph.nodes] == ["detach", "mul"]
    assert fr(s.get_value(d)) == [1, 2]
    assert fr(s.vjp(y, ex([1, 1]), x)) == [1, 2]
    assert fr(s.vjp(d, ex([5, 5]), x)) == [0, 0]
    assert fr(s.jvp_leaf(d, x, ex([1, 1]))) == [0, 0]
    assert fr(s.jvp_leaf(y, x, ex([1, 1]))) == [1, 2]
    assert s.check_link().ok


# --------------------------------------------------------------------------- reverse mode


@pytest.mark.parametrize("mode", MODES)
def test_backward_hand_values(mode: str) -> None:
    s = Session(mode=mode, dtype="exact")
    x = s.input([1, 2, 3], requires_grad=True)
    w = s.input([2, F(1, 2), -1], requires_grad=False)  # frozen
    y = s.mul(x, x)
    z = s.mul(y, w)
    loss = s.sum(z)
    unused = s.neg(x)
    # d/dx sum(w x^2) = 2 w x
    grads = s.backward_scalar_dense_all(loss)
    assert len(grads) == tape_len(s)
    assert fr(grads[x.id]) == [4, 2, -6]
    assert fr(grads[w.id]) == [0, 0, 0]  # frozen leaf
    assert fr(grads[y.id]) == [2, F(1, 2), -1]
    assert fr(grads[unused.id]) == [0, 0, 0]  # unreached
    assert fr(grads[loss.id]) == [1]
    assert s.grad(grads, x) is grads[x.id]
    grads = s.backward_dense_all(z, ex([1, 0, 2]))
    assert fr(grads[x.id]) == [4, 0, -12]
    assert fr(s.vjp(z, ex([1, 0, 2]), x)) == [4, 0, -12]
    assert fr(s.vjp(z, ex([1, 1, 1]), w)) == [0, 0, 0]
    # a frozen output keeps its own seed
    assert fr(s.backward_dense_all(w, ex([7, 8, 9]))[w.id]) == [7, 8, 9]


@pytest.mark.parametrize("mode", MODES)
def test_backward_argument_checks(mode: str) -> None:
    s = Session(mode=mode, dtype="float32")
    x = s.input(f32([1.0, 2.0]), requires_grad=True)
    y = s.mul(x, x)
    with pytest.raises(ShapeError):
        s.backward_scalar_dense_all(y)
    with pytest.raises(ShapeError):
        s.backward_dense_all(y, f32([1.0, 2.0, 3.0]))
    with pytest.raises(TorchLeanError):
        s.backward_dense_all(y, np.array([1.0, 2.0]))  # float64 seed
    grads = s.backward_dense_all(y, [1.0, 1.0])  # lists are converted in the session dtype
    assert grads[x.id].tolist() == [2.0, 4.0] and grads[x.id].dtype == F32
    with pytest.raises(ShapeError):
        s.grad(grads[:1], x)


@pytest.mark.parametrize("mode", MODES)
def test_inference_session(mode: str) -> None:
    s = Session(mode=mode, dtype="exact", grad_enabled=False)
    p = s.param([1, 2])
    x = s.input([3, 4], requires_grad=True)
    w = s.use(p)
    y = s.mul(x, w)
    loss = s.sum(y)
    assert not any(n.requires_grad for n in s.tape.nodes)
    assert fr(s.get_value(y)) == [3, 8] and fr(s.get_value(loss)) == [11]
    grads = s.backward_scalar_dense_all(loss)
    assert [fr(g) for g in grads] == [[0, 0], [0, 0], [0, 0], [1]]
    with pytest.raises(TorchLeanError, match="inference session"):
        s.sgd_step_all(1, grads)
    assert fr(p.get()) == [1, 2]


# --------------------------------------------------------------------------- hooks


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ["exact", "float32"])
def test_hook_doubling(mode: str, dtype: str) -> None:
    s = Session(mode=mode, dtype=dtype, kernels="ordered")
    x = s.input([1, 2], requires_grad=True)
    y = s.scale(x, c=3)
    z = s.sum(y)
    one = ex(1) if dtype == "exact" else f32(1)
    seen: list[int] = []

    def at_y(i: int, g: Any) -> Any:
        seen.append(i)
        return g * 2 if i == y.id else g

    grads = s.backward_dense_all_with_hook(z, one, at_y)
    # seed 001: backward_dense_all first, then the hook pointwise over the dense array, in
    # id order; only y's own entry doubles (the hook never runs inside the sweep)
    assert seen == [x.id, y.id, z.id]
    assert fr(grads[x.id]) == [3, 3] and fr(grads[y.id]) == [2, 2] and fr(grads[z.id]) == [1]
    grads = s.backward_dense_all_with_hook(z, one, lambda i, g: g * 2)
    # every entry doubled once: z 1 -> 2, y 1 -> 2, x 3 -> 6 (not compounded along the path)
    assert fr(grads[z.id]) == [2] and fr(grads[y.id]) == [2, 2] and fr(grads[x.id]) == [6, 6]
    plain = s.backward_dense_all(z, one)
    assert fr(plain[x.id]) == [3, 3]


@pytest.mark.parametrize("mode", MODES)
def test_bad_hooks_raise_hook_error(mode: str) -> None:
    s = Session(mode=mode, dtype="float32")
    x = s.input(f32([[1.0, 2.0, 3.0]]), requires_grad=True)
    y = s.scale(x, c=3)
    z = s.sum(y)
    n = tape_len(s)
    with pytest.raises(HookError) as ei:
        s.backward_dense_all_with_hook(z, f32(1.0), lambda i, g: g.reshape(-1) if i == y.id else g)
    msg = str(ei.value)
    assert f"node {y.id}" in msg and "(1, 3)" in msg and "(3,)" in msg
    with pytest.raises(HookError) as ei:
        s.backward_dense_all_with_hook(
            z, f32(1.0), lambda i, g: g.astype(np.float64) if i == x.id else g
        )
    msg = str(ei.value)
    assert f"node {x.id}" in msg and "float32" in msg and "float64" in msg and "(1, 3)" in msg
    # the hook is applied pointwise in id order after the sweep: the first id fails first
    with pytest.raises(HookError, match=f"node {x.id} .*got a NoneType"):
        s.backward_dense_all_with_hook(z, f32(1.0), lambda i, g: None)
    assert tape_len(s) == n


# --------------------------------------------------------------------------- forward mode


def test_jvp_hand_values() -> None:
    s = Session(mode="typed_graph", dtype="exact")
    x = s.input([1, 2], requires_grad=True)
    w = s.input([3, 5], requires_grad=True)
    k = s.input([7, 7])  # frozen
    y = s.mul(s.mul(x, x), w)  # x^2 w
    loss = s.sum(s.add(y, k))
    # d(x^2 w) = 2 x w dx + x^2 dw
    assert fr(s.jvp_leaf(y, x, ex([1, 1]))) == [6, 20]
    assert fr(s.jvp_leaf(y, w, ex([1, 0]))) == [1, 0]
    assert fr(s.jvp_scalar_leaf(loss, x, ex([1, -1]))) == [6 - 20]
    assert fr(s.jvp_dense_all(y, [ex([1, 1]), ex([1, 1]), ex([9, 9])])) == [7, 24]
    # TorchLean: a tangent is given for every leaf, frozen or not
    assert fr(s.jvp_leaf(loss, k, ex([1, 1]))) == [2]
    assert fr(s.jvp_dense_all(loss, [ex([0, 0]), ex([0, 0]), ex([1, 3])])) == [4]
    with pytest.raises(ShapeError):
        s.jvp_dense_all(y, [ex([1, 1]), ex([1, 1])])  # one tangent per leaf
    with pytest.raises(ShapeError):
        s.jvp_dense_all(y, [ex([1, 1]), ex([1]), ex([1, 1])])
    with pytest.raises(ShapeError):
        s.jvp_leaf(y, x, ex([1, 1, 1]))
    with pytest.raises(ShapeError):
        s.jvp_scalar_leaf(y, x, ex([1, 1]))
    with pytest.raises(TorchLeanError, match="not a leaf"):
        s.jvp_leaf(loss, y, ex([1, 1]))


def test_jvp_matches_spec_and_is_adjoint_to_vjp() -> None:
    s = Session(mode="typed_graph", dtype="exact")
    a = s.input([[1, -2], [F(1, 2), 3]], requires_grad=True)
    b = s.input([F(1, 3), 2], requires_grad=True)
    c = s.input([[2, 1], [0, 1]])
    h = s.relu(s.add(s.matmul(a, c), b))
    out = s.mul(s.sub(h, s.scale(a, c=F(1, 2))), s.broadcast_to(b, shape=(2, 2)))
    dxs = [ex([[1, 2], [-1, F(1, 2)]]), ex([3, -2]), ex([[5, 5], [5, 5]])]
    seed = ex([[1, -1], [2, F(1, 4)]])
    jv = s.jvp_dense_all(out, dxs)
    # adjoint to reverse mode over the trainable leaves (c, frozen, has no gradient): its
    # tangent is set to zero on that side
    jv_ab = s.jvp_dense_all(out, [dxs[0], dxs[1], ex([[0, 0], [0, 0]])])
    grads = s.backward_dense_all(out, seed)
    lhs = sum((p * q for p, q in zip(fr(jv_ab), fr(seed), strict=True)), F(0))
    rhs = sum(
        (p * q for i in (a.id, b.id) for p, q in zip(fr(dxs[i]), fr(grads[i]), strict=True)),
        F(0),
    )
    assert lhs == rhs and lhs != 0
    rec = s.graph()
    # every leaf's tangent counts, the frozen c's too (TorchLean: "dxs[i] is the tangent for
    # leaf i"): spec jvp_ctx with all three tangents
    tans = [to_spec(d, "exact") for d in dxs]
    want = jvp_ctx(RAT, rec.graph, rec.inputs, tans, rec.env).tensors[out.id]
    assert fr(jv) == list(want.data) and fr(jv) != fr(jv_ab)


def test_forward_mode_is_typed_graph_only() -> None:
    s = Session(mode="eager")
    x = s.input(f32([1.0]), requires_grad=True)
    loss = s.sum(x)
    for call in (
        lambda: s.jvp_leaf(loss, x, f32([1.0])),
        lambda: s.jvp_scalar_leaf(loss, x, f32([1.0])),
        lambda: s.jvp_dense_all(loss, [f32([1.0])]),
    ):
        with pytest.raises(TorchLeanError, match="typed_graph"):
            call()
