"""Seed fidelity, third pass: each item against hand-worked values, in both session modes
and in float32 and float64.

1. Inputs of a gradient-enabled session track gradients (TorchLean's `gradEnabled`).
2. A returned gradient list is not session state: editing it changes nothing later.
3. No two returned entries share memory with each other or with the caller's seed.
4. A gradient list stays valid for its generation however many ops follow.
5. One rule for Python scalars in typed graphs, whatever their position.
6. Trainer `open_typed` scalar results are scalars of the dtype.
7. TorchLean names: `SessionIR.grad` without a session, the fully qualified link theorem,
   `RngState`.
8. gelu's default is the exact erf form; `group_norm`, `instance_norm` and `batch_norm`
   take `torch.nn.functional`'s order and defaults (hand-worked values; the comparison with
   torch itself is in tests/test_session_torch_defaults.py).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs.cli import main as proofs_main
from runtime.nn import Linear, Sequential
from runtime.optim import SGD
from runtime.session import Rng, RngState, Session, SessionIR, grad
from runtime.trainer import Trainer
from spec.errors import ShapeError, StaleHandleError, TorchLeanError

MODES = ("eager", "typed_graph")
FLOATS = ("float32", "float64")
CASES = list(itertools.product(MODES, FLOATS))


def a(dtype: str, vals: Any) -> np.ndarray:
    return np.asarray(vals, dtype=dtype)


def square_sum(mode: str, dtype: str) -> tuple[Session, Any, Any]:
    """x = [1, 2], y = sum(x * x): dy/dx = 2x = [2, 4]."""
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [1, 2]))
    return s, x, s.sum(s.mul(x, x))


# --------------------------------------------------------------------------- 1. inputs


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_input_gradients_are_not_silently_zero(mode: str, dtype: str) -> None:
    s, x, y = square_sum(mode, dtype)
    assert s.vjp(y, a(dtype, 1), x).tolist() == [2, 4]
    assert s.grad(s.backward_scalar_dense_all(y), x).tolist() == [2, 4]
    assert s.tape.nodes[x.id].requires_grad


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_inputs_opt_out_and_inference_sessions(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [1, 2]), requires_grad=False)
    w = s.input(a(dtype, [3, 5]))
    y = s.sum(s.mul(x, w))
    g = s.backward_scalar_dense_all(y)
    assert g[x.id].tolist() == [0, 0] and g[w.id].tolist() == [1, 2]
    inf = Session(mode, dtype=dtype, grad_enabled=False)
    assert not inf.tape.nodes[inf.input(a(dtype, [1, 2])).id].requires_grad
    with pytest.raises(TorchLeanError, match="requires_grad"):
        s.input(a(dtype, [1]), requires_grad="yes")


# --------------------------------------------------------------------------- 2. aliasing


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_editing_a_returned_list_does_not_reach_the_session(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [1, 2]), requires_grad=True)  # explicit: independent of item 1
    z = s.input(a(dtype, [0, 0]))
    y = s.sum(s.mul(x, x))
    g = s.backward_scalar_dense_all(y)
    g[y.id][...] = 0  # the loss entry: the seed of one
    assert s.get_value(s.sigmoid(z)).tolist() == [0.5, 0.5]  # 1 / (1 + exp(-0))
    assert s.grad(s.backward_scalar_dense_all(y), x).tolist() == [2, 4]
    for t in g:  # every entry is the caller's to edit
        t[...] = 0
    assert s.vjp(y, a(dtype, 1), x).tolist() == [2, 4]
    assert s.get_value(s.sigmoid(z)).tolist() == [0.5, 0.5]


def test_tangents_are_fresh_arrays() -> None:
    s = Session("typed_graph", dtype="float64")  # forward mode needs a typed graph
    x = s.input(a("float64", [1, 2]))
    dx = a("float64", [1, 1])
    t = s.jvp_leaf(x, x, dx)  # the output is the leaf: its tangent is the caller's dx
    dx[...] = 7
    assert t.tolist() == [1, 1]
    t[...] = 3
    assert s.jvp_leaf(x, x, a("float64", [1, 1])).tolist() == [1, 1]


# --------------------------------------------------------------------------- 3. sharing


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_entries_share_memory_with_nothing(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    p = s.input(a(dtype, [1, 2]), requires_grad=True)
    q = s.input(a(dtype, [3, 4]), requires_grad=True)
    c = s.add(p, q)
    seed = a(dtype, [1, 1])
    g = s.backward_dense_all(c, seed)
    seed[...] = 7
    assert g[p.id].tolist() == [1, 1]
    for t in g:
        t *= 0.5
    assert [g[i].tolist() for i in (p.id, q.id, c.id)] == [[0.5, 0.5]] * 3
    for u, v in itertools.combinations(g, 2):
        assert not np.shares_memory(u, v)


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_hook_results_are_copied(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    p = s.input(a(dtype, [1, 2]), requires_grad=True)
    q = s.input(a(dtype, [3, 4]), requires_grad=True)
    c = s.add(p, q)
    shared = {}

    def hook(i: int, t: Any) -> Any:
        t *= 2  # in place: must not reach the session
        return shared.setdefault(t.shape, t)

    g = s.backward_dense_all_with_hook(c, a(dtype, [1, 1]), hook)
    assert [g[i].tolist() for i in (p.id, q.id, c.id)] == [[2, 2]] * 3
    g[p.id][...] = 9
    assert g[q.id].tolist() == [2, 2]
    assert s.backward_dense_all(c, a(dtype, [1, 1]))[p.id].tolist() == [1, 1]


# --------------------------------------------------------------------------- 4. later ops


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_a_list_stays_valid_after_more_ops(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    w = s.param(a(dtype, [1, 2]))
    wr = s.use(w)
    x = s.input(a(dtype, [3, 5]), requires_grad=True)
    y = s.sum(s.mul(wr, x))
    g = s.backward_scalar_dense_all(y)
    later = s.mul(y, y)  # ops recorded after the backward
    s.relu(later)
    assert s.grad(g, wr).tolist() == [3, 5] and s.grad(g, x).tolist() == [1, 2]
    assert grad(g, x).tolist() == [1, 2]
    with pytest.raises(ShapeError, match="recorded after this list's backward"):
        s.grad(g, later)
    s.sgd_step_all(0.5, g)
    assert w.get().tolist() == [1 - 1.5, 2 - 2.5]
    g.append(g[0])  # a list edited after the backward is not its tape's any more
    with pytest.raises(ShapeError, match="made for"):
        s.grad(g, x)
    with pytest.raises(ShapeError, match="gradients for a tape"):
        s.grad(list(g[:-1]), x)  # a plain list has no provenance: the tape's length now


def test_a_leaf_used_after_the_backward_is_not_stepped() -> None:
    s = Session("eager", dtype="float64")
    w = s.param(a("float64", [1, 2]))
    wr = s.use(w)
    g = s.backward_scalar_dense_all(s.sum(s.mul(wr, wr)))
    v = s.param(a("float64", [7]))
    s.use(v)  # an eager leaf after the list's backward: not in the list
    s.sgd_step_all(0.25, g)
    assert w.get().tolist() == [0.5, 1.0] and v.get().tolist() == [7]


def test_a_stale_list_is_still_refused() -> None:
    s, _, y = square_sum("eager", "float64")
    g = s.backward_scalar_dense_all(y)
    s.reset_tape()
    x2 = s.input(a("float64", [1, 2]))
    with pytest.raises(StaleHandleError):
        s.grad(g, x2)


# --------------------------------------------------------------------------- 5. scalars


@pytest.mark.parametrize("dtype", FLOATS)
def test_scalars_in_typed_graphs_are_consts_at_any_position(dtype: str) -> None:
    s = Session("typed_graph", dtype=dtype)
    x = s.input(a(dtype, [1, 2]))
    y = s.mul(x, 2.0)  # the first op: formerly a second leaf
    z = s.add(3, s.mul(0.5, y))  # later ops, scalars first
    dx = [a(dtype, [1, -1])]
    assert s.jvp_dense_all(y, dx).tolist() == [2, -2]
    assert s.jvp_dense_all(z, dx).tolist() == [1, -1]
    assert s.get_value(z).tolist() == [4, 5]
    assert s.graph().graph.num_inputs == 1
    g = s.backward_dense_all(z, a(dtype, [1, 1]))
    assert s.grad(g, x).tolist() == [1, 1]


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_a_failed_call_with_scalars_records_nothing(mode: str, dtype: str) -> None:
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [1, 2]))
    n = len(s.tape)
    with pytest.raises(TorchLeanError):
        s.matmul(x, 2.0)  # a 0-d operand
    assert len(s.tape) == n and not s.graph_has_nodes
    s2 = Session(mode, dtype=dtype)
    x2 = s2.input(a(dtype, [1, 2]))
    assert s2.get_value(s2.where(x2, 0.0, mask=(1, 0), mask_shape=(2,))).tolist() == [1, 0]


# --------------------------------------------------------------------------- 6. trainer


@pytest.mark.parametrize(("dtype", "kind"), [("float32", np.float32), ("float64", np.float64)])
@pytest.mark.parametrize("mode", MODES)
def test_typed_trainer_scalars_are_scalars_of_the_dtype(mode: str, dtype: str, kind: Any) -> None:
    """y = w·x + b with w = 1/2, b = 1/4 at x = 1, t = 0: mse = (3/4)² = 9/16."""
    run = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(Fraction(1, 4)), mode=mode).open_typed(
        dtype, initial_state=[[[Fraction(1, 2)]], [Fraction(1, 4)]]
    )
    sample = ([Fraction(1)], [Fraction(0)])
    for v in (run.loss(sample), run.eval([sample, sample]), run.step(sample, loss=True)):
        assert type(v) is kind and v == 0.5625
    assert type(run.eval([])) is kind and run.eval([]) == 0
    exact = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(Fraction(1, 4)), mode=mode)
    ex = exact.open_typed("exact", initial_state=[[[Fraction(1, 2)]], [Fraction(1, 4)]])
    assert ex.loss(sample) == Fraction(9, 16) and type(ex.loss(sample)) is Fraction


# --------------------------------------------------------------------------- 7. names


def test_session_ir_grad_without_a_session() -> None:
    s = SessionIR(dtype="float64")
    x = s.input(a("float64", [1, 2]))
    g = s.backward_scalar_dense_all(s.sum(s.mul(x, x)))
    assert SessionIR.grad(g, x).tolist() == [2, 4]  # on the class: session-free
    assert s.grad(g, x).tolist() == [2, 4]  # on a session: the session's own checks
    other = SessionIR(dtype="float64")
    with pytest.raises(StaleHandleError):
        other.grad(g, x)


def test_rng_state_is_torchlean_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert RngState is Rng
    s = Session()
    assert isinstance(s.rng, RngState) and isinstance(s.init_rng(3), RngState)


def test_link_theorem_under_its_fully_qualified_name(capsys: pytest.CaptureFixture[str]) -> None:
    name = "Runtime.Autograd.Torch.backwardDenseFrom_compileAuxData_eq_backpropAllCtx"
    assert proofs_main(["show", name]) == 0
    out = capsys.readouterr().out
    assert out.startswith("link.backward_dense_from_lower_eq_backprop_all_ctx\n")
    assert name in out


# --------------------------------------------------------------------------- 8. F defaults


PHI_1 = 0.8413447460685429  # Φ(1) = (1 + erf(1/√2)) / 2: gelu(1) in the erf form


@pytest.mark.parametrize("mode", MODES)
def test_gelu_default_is_the_erf_form(mode: str) -> None:
    s = Session(mode, dtype="float64")
    x = s.input(a("float64", [0, 1, -1]))
    y = s.get_value(s.gelu(x))
    assert y[0] == 0 and abs(y[1] - PHI_1) < 1e-15 and abs(y[2] + (1 - PHI_1)) < 1e-15
    t = s.get_value(s.gelu(x, approximate="tanh"))
    tanh_1 = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert abs(t[1] - tanh_1) < 1e-15 and abs(t[1] - y[1]) > 1e-4


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_group_and_instance_norm_take_f_order(mode: str, dtype: str) -> None:
    """x (1, 2, 2) = [[1, 3], [5, 9]]: each channel has mean m, var d² and normalises to
    ±d / sqrt(d² + 1e-5); one group over both channels has mean 4.5 and var 8.75."""
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [[[1, 3], [5, 9]]]))
    w, b = s.input(a(dtype, [2, 3])), s.input(a(dtype, [1, -1]))  # leaves before ops
    inst = s.get_value(s.instance_norm(x)).reshape(-1)
    grp2 = s.get_value(s.group_norm(x, 2)).reshape(-1)
    grp1 = s.get_value(s.group_norm(x, 1)).reshape(-1)
    tol = 1e-6 if dtype == "float32" else 1e-14
    want2 = [-1 / math.sqrt(1 + 1e-5), 1 / math.sqrt(1 + 1e-5)]
    want2 += [-2 / math.sqrt(4 + 1e-5), 2 / math.sqrt(4 + 1e-5)]
    want1 = [(v - 4.5) / math.sqrt(8.75 + 1e-5) for v in (1, 3, 5, 9)]
    for got, want in ((inst, want2), (grp2, want2), (grp1, want1)):
        assert np.allclose(got, want, rtol=tol, atol=tol)
    aff = s.get_value(s.group_norm(x, 2, w, bias=b)).reshape(-1)
    assert np.allclose(aff, [2 * want2[0] + 1, 2 * want2[1] + 1, 3 * want2[2] - 1,
                             3 * want2[3] - 1], rtol=tol, atol=tol)  # fmt: skip
    with pytest.raises(TorchLeanError, match="num_groups"):
        s.group_norm(x, w, b)  # the table's order is not F's
    with pytest.raises(TorchLeanError, match="running statistics"):
        s.instance_norm(x, w, b)


@pytest.mark.parametrize(("mode", "dtype"), CASES)
def test_batch_norm_takes_f_order(mode: str, dtype: str) -> None:
    """Evaluation mode (F's default) with running mean [1, 2] and var [4, 0]: (x − m) /
    sqrt(v + 1e-5); training mode uses the batch's statistics."""
    s = Session(mode, dtype=dtype)
    x = s.input(a(dtype, [[3, 2], [5, 4]]))
    m, v = s.input(a(dtype, [1, 2])), s.input(a(dtype, [4, 0]))
    ev = s.get_value(s.batch_norm(x, m, v)).reshape(-1)
    e = 1e-5
    want = [2 / math.sqrt(4 + e), 0, 4 / math.sqrt(4 + e), 2 / math.sqrt(e)]
    tol = 1e-5 if dtype == "float32" else 1e-12
    assert np.allclose(ev, want, rtol=tol, atol=tol)
    tr = s.get_value(s.batch_norm(x, None, None, training=True)).reshape(-1)
    one = 1 / math.sqrt(1 + e)
    assert np.allclose(tr, [-one, -one, one, one], rtol=tol, atol=tol)
    with pytest.raises(TorchLeanError, match="running statistics"):
        s.batch_norm(x, m, v, training=True)


# --------------------------------------------------------------------------- a property
STEP = st.tuples(
    st.sampled_from(("add", "sub", "mul")),
    st.sampled_from([0, 1]),
    st.sampled_from([None, 2, Fraction(1, 2), -1.5]),  # None: the previous value
)


def _program(mode: str, dtype: str, steps: list[Any]) -> tuple[Session, list[Any], Any]:
    s = Session(mode, dtype=dtype)
    vals = [s.input(a(dtype, [1, -2])), s.input(a(dtype, [0.5, 3]))]
    for op, pos, c in steps:
        x = vals[-1]
        other = vals[-2] if c is None else c
        vals.append(getattr(s, op)(*((other, x) if pos == 0 else (x, other))))
    return s, vals, s.backward_dense_all(vals[-1], a(dtype, [1, 1]))


@given(steps=st.lists(STEP, min_size=1, max_size=6), more=st.integers(0, 3))
def test_lists_are_private_and_stay_valid(steps: list[Any], more: int) -> None:
    """Random chains of binary ops with Python scalars at either position: both modes give
    the same gradients bit for bit, the typed graph has only the caller's two leaves, no
    two entries share memory, and the list answers `grad` after `more` further ops."""
    for dtype in FLOATS:
        (se, ve, ge), (st_, vt, gt) = (_program(m, dtype, steps) for m in MODES)
        assert [e.tobytes() for e in ge] == [e.tobytes() for e in gt]
        assert st_.graph().graph.num_inputs == 2
        for s, vals, g in ((se, ve, ge), (st_, vt, gt)):
            assert not any(np.shares_memory(u, v) for u, v in itertools.combinations(g, 2))
            for _ in range(more):
                s.neg(vals[-1])
            for v in vals:
                assert s.grad(g, v).tobytes() == g[v.id].tobytes()
