"""Seed fidelity, second pass: each item of the issue against hand-worked values,
in both session modes where the item has a meaning in both.

1. JVP w.r.t. a leaf that does not require gradients (inputs, frozen parameters, constants).
2. `grad(grads, x)` refuses a gradient list of another generation, and checks the entry.
3. `finish()` keeps the training session open; the Result does not change.
4. `set_state` replaces the parameters.
5. Batched `eval`/`loss` of an empty stream is zero.
6. `SessionIR`, `SessionIRState.empty`, `SessionIR.new` and the session-free `grad`.
7. One hook semantics: `Tape.backward_dense_all(hook=...)` equals the Session's.
8. `jvp_scalar_leaf` returns a scalar; `selected_backends`; the trainer's loss graph is
   recorded once per shape signature, with bit-for-bit the same results.
"""

from __future__ import annotations

from fractions import Fraction as F
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.engine.context import KernelContext
from runtime.engine.tape import Tape
from runtime.nn import BatchNorm1d, Dropout, Linear, ReLU, Sequential
from runtime.optim import SGD
from runtime.session import Session, SessionIR, SessionIRState, grad
from runtime.trainer import Trainer
from spec.errors import ShapeError, StaleHandleError, TorchLeanError

MODES = ("eager", "typed_graph")
DTYPES = ("float32", "exact")


def arr(dtype: str, vals: Any) -> np.ndarray:
    """`vals` as an array of the session dtype (Fractions for "exact")."""
    if dtype == "exact":
        a = np.asarray(vals, dtype=object)
        return np.vectorize(F, otypes=[object])(a) if a.shape else np.asarray(F(a.item()))
    return np.asarray(vals, dtype=np.float32)


def nums(a: Any) -> list[F]:
    return [v if isinstance(v, F) else F(float(v)) for v in np.asarray(a).reshape(-1)]


# --------------------------------------------------------------------------- 1. JVP


@pytest.mark.parametrize("dtype", DTYPES)
def test_jvp_of_a_leaf_that_does_not_require_gradients(dtype: str) -> None:
    # the case: x = input([1, 2]) (requires_grad False), y = x * x,
    # jvp_leaf(y, x, [1/4, 0]) = 2 x dx = [1/2, 0] (it was [0, 0])
    s = Session("typed_graph", dtype=dtype)
    x = s.input(arr(dtype, [1, 2]))
    y = s.mul(x, x)
    assert nums(s.jvp_leaf(y, x, arr(dtype, [F(1, 4), 0]))) == [F(1, 2), 0]
    assert nums(s.jvp_dense_all(y, [arr(dtype, [F(1, 4), 0])])) == [F(1, 2), 0]
    loss = s.sum(y)
    assert nums(s.jvp_scalar_leaf(loss, x, arr(dtype, [1, 1]))) == [6]  # 2*1 + 2*2


@pytest.mark.parametrize("dtype", DTYPES)
def test_jvp_of_frozen_parameters_and_constants(dtype: str) -> None:
    s = Session("typed_graph", dtype=dtype)
    w = s.use(s.param(arr(dtype, [3, -1]), requires_grad=False))  # a frozen parameter
    c = s.const(arr(dtype, [2, 5]))  # a constant leaf (before any op)
    x = s.input(arr(dtype, [1, 4]), requires_grad=True)
    out = s.add(s.mul(w, x), s.mul(c, c))  # w x + c^2
    # d = x dw + w dx + 2 c dc
    assert nums(s.jvp_leaf(out, w, arr(dtype, [1, 1]))) == [1, 4]
    assert nums(s.jvp_leaf(out, c, arr(dtype, [1, -1]))) == [4, -10]
    dxs = [arr(dtype, [1, 0]), arr(dtype, [0, 1]), arr(dtype, [1, 1])]
    assert nums(s.jvp_dense_all(out, dxs)) == [1 + 3, -1 + 10]
    # a detached value and a const made after ops carry no tangent (spec: zero JVP)
    d = s.add(s.detach(w), s.const(arr(dtype, [1, 1])))
    assert nums(s.jvp_leaf(d, w, arr(dtype, [7, 7]))) == [0, 0]


def test_jvp_in_an_inference_session() -> None:
    # grad_enabled=False: no leaf requires gradients, forward mode still works
    s = Session("typed_graph", dtype="exact", grad_enabled=False)
    x = s.input(arr("exact", [3]), requires_grad=True)
    y = s.mul(s.mul(x, x), x)  # x^3: 3 x^2 dx
    assert nums(s.jvp_leaf(y, x, arr("exact", [F(1, 3)]))) == [9]


def test_forward_mode_in_eager_mode_is_refused_with_a_clear_error() -> None:
    # deliberate difference (docs/ARCHITECTURE.md): forward mode needs the typed graph
    s = Session("eager")
    x = s.input([1.0, 2.0])
    y = s.mul(x, x)
    with pytest.raises(TorchLeanError, match="forward mode needs a typed_graph session"):
        s.jvp_leaf(y, x, [0.25, 0.0])


# --------------------------------------------------------------------------- 2. grad


@pytest.mark.parametrize("mode", MODES)
def test_grad_refuses_a_list_of_an_earlier_generation(mode: str) -> None:
    s = Session(mode)
    x = s.input([1.0], requires_grad=True)
    old = s.backward_dense_all(s.scale(x, c=2), [1.0])  # d(2x)/dx = 2
    assert nums(s.grad(old, x)) == [2]
    s.reset_tape()
    x2 = s.input([3.0], requires_grad=True)
    new = s.backward_dense_all(s.mul(x2, x2), [1.0])  # same tape length; d(x^2)/dx = 6
    assert nums(s.grad(new, x2)) == [6]
    with pytest.raises(StaleHandleError, match="stale gradient list from generation 0"):
        s.grad(old, x2)  # it used to return the old tape's 2.0
    with pytest.raises(StaleHandleError, match="stale gradient list"):
        grad(old, x2)  # the session-free grad too


@pytest.mark.parametrize("mode", MODES)
def test_grad_checks_the_entry_shape_and_dtype(mode: str) -> None:
    s = Session(mode)
    x = s.input([1.0, 2.0], requires_grad=True)
    y = s.sum(x)
    plain = list(s.backward_dense_all(y, 1.0))
    bad_shape = [np.zeros(3, np.float32), plain[1]]
    bad_dtype = [np.zeros(2, np.float64), plain[1]]
    with pytest.raises(ShapeError, match=r"grad: gradient for node 0 .*shape \(3,\)"):
        s.grad(bad_shape, x)
    with pytest.raises(ShapeError, match="dtype float64"):
        s.grad(bad_dtype, x)
    with pytest.raises(ShapeError, match=r"has shape \(3,\); expected shape \(2,\)"):
        grad(bad_shape, x)
    other = Session(mode)
    ox = other.input([1.0, 2.0], requires_grad=True)
    foreign = other.backward_dense_all(other.sum(ox), 1.0)
    with pytest.raises(StaleHandleError, match="foreign gradient list"):
        s.grad(foreign, x)


# --------------------------------------------------------------------------- 3-5. trainer


def linear_run(mode: str, lr: Any = 0.125) -> Any:
    """A Linear(1, 1) run at w = 1, b = 0: on x = 2, t = 0 the loss (2w + b)^2 = 4 has
    gradients dL/dw = 2(2w + b) 2 = 8 and dL/db = 2(2w + b) = 4."""
    trainer = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(lr), mode=mode)
    return trainer.open_typed("float32", initial_state=[[[1.0]], [0.0]])


@pytest.mark.parametrize("mode", MODES)
def test_training_continues_after_finish_without_changing_the_result(mode: str) -> None:
    run = linear_run(mode)
    res = run.finish(before=4.0)
    run.step(([2.0], [0.0]))  # w = 1 - 8/8 = 0, b = 0 - 4/8 = -1/2; it used to raise
    assert [nums(a) for a in run.state()] == [[0], [F(-1, 2)]]
    assert [nums(a) for a in res.state()] == [[1], [0]]
    assert nums(res.predict([3.0])) == [3] and nums(run.predict([3.0])) == [F(-1, 2)]
    assert res.report["updates"] == 0 and run.steps() == 1


@pytest.mark.parametrize("mode", MODES)
def test_set_state_replaces_the_parameters(mode: str, tmp_path: Path) -> None:
    run = Trainer(Sequential(Linear(2, 1)), optimizer=SGD(0.5), mode=mode).open()
    run.set_state([[[2.0, -1.0]], [0.5]])
    assert run.predict([3.0, 4.0]) == 2 * 3 - 4 + 0.5
    assert run.loss(([3.0, 4.0], [2.5])) == 0.0
    before = [a.tobytes() for a in run.state()]
    for bad, err in (
        ([[[2.0, -1.0]]], ShapeError),  # one tensor short
        ([[[2.0, -1.0, 0.0]], [0.5]], ShapeError),  # a wrong shape
        ([[["a", "b"]], [0.5]], TorchLeanError),  # not numbers
        ("not a list", TorchLeanError),
    ):
        with pytest.raises(err):
            run.set_state(bad)  # type: ignore[arg-type]
        assert [a.tobytes() for a in run.state()] == before  # nothing changed


@pytest.mark.parametrize("mode", MODES)
def test_empty_batched_eval_and_loss_are_zero(mode: str) -> None:
    run = linear_run(mode)
    assert nums(run.eval([])) == [0] and nums(run.loss([], batch=True)) == [0]
    assert nums(run.finish().eval([])) == [0]
    assert nums(run.eval([([2.0], [0.0]), ([1.0], [1.0])])) == [2]  # (4 + 0) / 2
    typed = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(F(1, 8)), mode=mode)
    exact = typed.open_typed("exact")
    assert exact.eval([]) == F(0) and isinstance(exact.eval([]), F)
    assert exact.eval([([F(1)], [F(0)])]) != 0  # a real mean is still a mean


# --------------------------------------------------------------------------- 6. SessionIR


def test_session_ir_names_are_the_typed_graph_session() -> None:
    s = SessionIR.new(dtype="exact")
    assert isinstance(s, Session) and s.mode == "typed_graph" and s.dtype == "exact"
    assert s.state() == SessionIRState.empty("exact")
    x = s.input(arr("exact", [1, 2]), requires_grad=True)
    w = s.input(arr("exact", [3, 5]), requires_grad=True)
    loss = s.sum(s.mul(x, w))  # d/dx = w, d/dw = x
    g = s.backward_scalar_dense_all(loss)
    assert nums(grad(g, x)) == [3, 5] and nums(grad(g, w)) == [1, 2]
    assert nums(s.backward_dense_all(loss, arr("exact", 2))[x.id]) == [6, 10]
    st = s.state()
    assert st.graph.num_inputs == 2 and len(st.graph.nodes) == 2 and st.dtype == "exact"
    assert st != SessionIRState.empty("exact")
    s.reset_tape()
    assert s.state() == SessionIRState.empty("exact")
    assert st.graph.num_inputs == 2  # a state is a copy
    with pytest.raises(TorchLeanError):
        SessionIR(dtype="nonsense")


@pytest.mark.parametrize("mode", MODES)
def test_session_free_grad_reads_eager_and_typed_lists(mode: str) -> None:
    s = Session(mode)
    x = s.input([1.0, 2.0], requires_grad=True)
    g = s.backward_scalar_dense_all(s.sum(s.mul(x, x)))
    assert nums(grad(g, x)) == [2, 4]
    with pytest.raises(TorchLeanError, match="expected a TensorRef"):
        grad(g, 0)  # type: ignore[arg-type]
    with pytest.raises(ShapeError, match="outside a list of 1"):
        grad(g[:1], s.sum(x))


# --------------------------------------------------------------------------- 7. one hook


def _hook_tape(dtype: str) -> tuple[Tape, int]:
    """x = 3; y = x*x; z = y + x; w = relu(z): dense gradients [7, 1, 1, 1]."""
    t = Tape(KernelContext(dtype, "ordered"))
    x = t.leaf(arr(dtype, 3))
    y = t.op("mul", [x, x])
    z = t.op("add", [y, x])
    return t, t.op("relu", [z])


@pytest.mark.parametrize("dtype", DTYPES)
def test_tape_hook_is_applied_pointwise_after_the_sweep(dtype: str) -> None:
    t, w = _hook_tape(dtype)
    doubled = t.backward_dense_all(w, arr(dtype, 1), hook=lambda i, g: g * 2)
    # the seed's [14, 2, 2, 2]; the hook inside the sweep gave [104, 8, 4, 2]
    assert [nums(g) for g in doubled] == [[14], [2], [2], [2]]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_session_and_tape_hooks_agree(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype, kernels="ordered")
    x = s.input(arr(dtype, 3), requires_grad=True)
    w = s.relu(s.add(s.mul(x, x), x))
    got = s.backward_dense_all_with_hook(w, arr(dtype, 1), lambda i, g: g * 2)
    t, tw = _hook_tape(dtype)
    want = t.backward_dense_all(tw, arr(dtype, 1), hook=lambda i, g: g * 2)
    assert [nums(g) for g in got] == [nums(g) for g in want] == [[14], [2], [2], [2]]


def test_tape_backward_dense_has_no_hook() -> None:
    t, w = _hook_tape("float32")
    with pytest.raises(TypeError):
        t.backward_dense(w, arr("float32", 1), lambda i, g: g)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- 8.


@pytest.mark.parametrize("dtype", ("float32", "float64", "bfloat16", "exact"))
def test_jvp_scalar_leaf_is_a_scalar_of_the_session_dtype(dtype: str) -> None:
    s = Session("typed_graph", dtype=dtype)
    x = s.input(arr("exact", [1, 2]) if dtype == "exact" else [1.0, 2.0], requires_grad=True)
    loss = s.sum(s.mul(x, x))
    v = s.jvp_scalar_leaf(loss, x, s.get_value(x))  # 2 x . x = 10
    assert not isinstance(v, np.ndarray) and np.ndim(v) == 0
    if dtype == "exact":
        assert type(v) is F and v == 10
    else:
        assert v.dtype == s.backend.dtype(dtype) and float(v) == 10.0


@pytest.mark.parametrize("mode", MODES)
def test_selected_backends_in_first_use_order(mode: str) -> None:
    s = Session(mode, kernels="ordered")
    assert s.selected_backends == ()
    x = s.input([1.0, -2.0], requires_grad=True)
    w = s.input([1.0, 2.0, 3.0])
    y = s.relu(s.mul(x, x))
    s.mul(y, x)  # mul again: no new entry
    with pytest.raises(ShapeError):
        s.add(x, w)
    assert s.selected_backends[:2] == ("mul:numpy/ordered", "relu:numpy/ordered")
    assert "add:numpy/ordered" not in s.selected_backends  # a refused op is not accepted
    before = s.selected_backends
    s.reset_tape()
    assert s.selected_backends == before  # the session's record, not the tape's
    z = s.input([1.0, 2.0], requires_grad=True)
    s.tanh(z)
    assert s.selected_backends == (*before, "tanh:numpy/ordered")


def _data(shapes: str) -> list[Any]:
    one = [([1.0, 2.0], [0.5]), ([0.0, -1.0], [1.0]), ([3.0, 1.0], [-1.0])]
    batch = [([[1.0, 0.5], [2.0, -1.0]], [[1.0], [0.0]])]
    return one if shapes == "one" else [one[0], *batch, one[1], *batch, one[2]]


def _reference_steps(
    mode: str, dtype: str, samples: list[Any], start: list[Any]
) -> tuple[list[Any], list[Any]]:
    """Each step on a fresh training session (so every loss graph is a new recording):
    the final state and each step's loss."""
    state, losses = start, []
    for sm in samples:
        t = Trainer(Sequential(Linear(2, 3), ReLU(), Linear(3, 1)), optimizer=SGD(0.125), mode=mode)
        fresh = t.open_typed(dtype, initial_state=state)
        losses.append(fresh.step(sm, loss=True))
        assert fresh.loss_graphs_recorded() == 1
        state = fresh.state()
    return state, losses


def _key(dtype: str, a: Any) -> Any:
    return tuple(nums(a)) if dtype == "exact" else np.asarray(a).tobytes()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", ("float32", "exact"))
@pytest.mark.parametrize("shapes", ("one", "two"))
def test_loss_graph_recorded_once_per_shape_signature(mode: str, dtype: str, shapes: str) -> None:
    trainer = Trainer(
        Sequential(Linear(2, 3), ReLU(), Linear(3, 1)), optimizer=SGD(0.125), mode=mode
    )
    run = trainer.open_typed(dtype)
    start = run.state()
    # "one": three steps of one shape; "two": five steps alternating two shapes, each seen
    # again after the other (exact state grows with every step, so no more steps than that)
    samples = _data(shapes)
    losses = [run.step(sm, loss=True) for sm in samples]
    assert run.loss_graphs_recorded() == (1 if shapes == "one" else 2)
    want_state, want_losses = _reference_steps(mode, dtype, samples, start)
    # bit for bit the state and every loss of a fresh recording per step
    assert [_key(dtype, a) for a in run.state()] == [_key(dtype, a) for a in want_state]
    assert [_key(dtype, v) for v in losses] == [_key(dtype, v) for v in want_losses]
    assert len({_key(dtype, v) for v in losses}) > 1  # the samples' losses differ


@pytest.mark.parametrize("mode", MODES)
def test_forwards_that_depend_on_more_than_shapes_are_recorded_every_time(mode: str) -> None:
    data = _data("one")
    for layer in (Dropout(0.5), BatchNorm1d(3)):
        run = Trainer(
            Sequential(Linear(2, 3), layer, Linear(3, 1)), optimizer=SGD(0.125), mode=mode
        ).open()
        for sm in data:
            run.step(sm)
        assert run.loss_graphs_recorded() == len(data), layer
    run = Trainer(
        Sequential(Linear(2, 3), Dropout(0.0), Linear(3, 1)), optimizer=SGD(0.125), mode=mode
    ).open()
    for sm in data:
        run.step(sm)
    assert run.loss_graphs_recorded() == 1  # p = 0 draws nothing
