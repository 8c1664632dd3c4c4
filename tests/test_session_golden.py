"""Golden cases of the Session, worked by hand (never produced by the code under test).

- Alias SGD: two snapshots of one parameter, gradients summed, the current storage updated
  once; a malformed gradient list is rejected before anything changes.
- `canonical_indices` / `group_leaves`: aliasing by storage identity only.
- The requires_grad matrix: every sample of every op of the table x every subset of
  trainable inputs.
- Stale and foreign handles in both modes: rejected, and the failed call changes nothing.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from runtime.backends import DTYPE_DOMAIN, to_spec
from runtime.session import Cell, Param, Session, canonical_indices, group_leaves
from runtime.session.torch_calls import TORCH_METHODS
from spec.errors import ShapeError, StaleHandleError, TorchLeanError
from spec.graph import backprop_all_ctx
from spec.ops import OPS
from spec.tensor import Tensor, TensorPack

F32 = np.float32
MODES = ("eager", "typed_graph")


def f32(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=F32)


# --------------------------------------------------------------------------- alias SGD


def test_alias_sgd_golden() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0), name="p")
    a = s.use(p)  # leaf 0 holds 1
    p.set(f32(5.0))
    b = s.use(p)  # leaf 1 holds 5
    assert (a.id, b.id) == (0, 1)
    s.sgd_step_all(0.25, [f32(2.0), f32(3.0)])
    # 5 - 0.25 * (2 + 3) = 3.75: the *current* value, both gradients, one update.
    assert p.get().dtype == F32 and p.get().shape == ()
    assert float(p.get()) == 3.75
    assert float(s.get_value(a)) == 1.0 and float(s.get_value(b)) == 5.0


def test_alias_sgd_golden_with_more_nodes() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0))
    a = s.use(p)
    p.set(f32(5.0))
    b = s.use(p)
    c = s.add(a, b)  # a third tape id: the gradient list needs three entries
    assert len(s.tape) == 3
    with pytest.raises(ShapeError):
        s.sgd_step_all(0.25, [f32(2.0), f32(3.0)])
    assert float(p.get()) == 5.0
    s.sgd_step_all(0.25, [f32(2.0), f32(3.0), f32(100.0)])
    assert float(p.get()) == 3.75
    assert float(s.get_value(c)) == 6.0


def test_alias_sgd_golden_exact() -> None:
    s = Session(dtype="exact")
    p = s.param(Fraction(1))
    s.use(p)
    p.set(np.array(Fraction(5), dtype=object))
    s.use(p)
    g = [np.array(Fraction(2), dtype=object), np.array(Fraction(3), dtype=object)]
    s.sgd_step_all(Fraction(1, 4), g)
    assert p.get()[()] == Fraction(15, 4)


@pytest.mark.parametrize(
    "grads",
    [
        pytest.param([f32(2.0)], id="too-short"),
        pytest.param([f32(2.0), f32(3.0), f32(4.0)], id="too-long"),
        pytest.param([f32(2.0), f32([3.0])], id="wrong-shape"),
        pytest.param([f32(2.0), np.float64(3.0)], id="wrong-dtype"),
        pytest.param([np.asarray(2.0, dtype=np.float16), f32(3.0)], id="wrong-dtype-first"),
    ],
)
def test_alias_sgd_malformed_gradients_change_nothing(grads: list[Any]) -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0))
    a = s.use(p)
    p.set(f32(5.0))
    b = s.use(p)
    with pytest.raises(ShapeError):
        s.sgd_step_all(0.25, grads)
    assert float(p.get()) == 5.0
    assert float(s.get_value(a)) == 1.0 and float(s.get_value(b)) == 5.0
    assert len(s.tape) == 2


def test_sgd_validates_every_gradient_before_mutating() -> None:
    # q's group comes first and its gradient is fine; p's second leaf is malformed. A step
    # that updated q before looking at p's gradient would leave q changed.
    s = Session(dtype="float32")
    q = s.param(f32([1.0, 2.0]), name="q")
    p = s.param(f32(1.0), name="p")
    s.use(q)
    s.use(p)
    s.use(p)
    with pytest.raises(ShapeError):
        s.sgd_step_all(1.0, [f32([1.0, 1.0]), f32(1.0), f32([1.0])])
    assert q.get().tolist() == [1.0, 2.0]
    assert float(p.get()) == 1.0
    s.sgd_step_all(1.0, [f32([1.0, 1.0]), f32(1.0), f32(2.0)])
    assert q.get().tolist() == [0.0, 1.0]
    assert float(p.get()) == -2.0


# --------------------------------------------------------------------------- aliasing


def _variant(p: Param, **cells: Cell | None) -> Param:
    return Param(
        p.name,
        cells.get("value_cell", p.value_cell),
        cells.get("device_cell", p.device_cell),
        cells.get("host_current", p.host_current),
        p.requires_grad,
        p.dtype,
        p.owner,
    )


def test_canonical_indices_golden() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0), name="p")
    q = s.param(f32(1.0), name="p")  # same value and same name, other storage
    regs = [
        p,
        q,
        p.renamed("other"),
        _variant(p, value_cell=Cell(p.get())),
        _variant(p, device_cell=Cell(None)),
        _variant(p, host_current=Cell(True)),
        s.param(f32([1.0, 2.0]), name="p"),
        None,
        p,
    ]
    assert canonical_indices(regs) == [0, 1, 0, 3, 4, 5, 6, None, 0]


def test_canonical_indices_without_storage_is_its_own() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0))
    bare = _variant(p, value_cell=None)
    assert canonical_indices([bare, bare, p]) == [0, 1, 2]
    assert canonical_indices([]) == []


def test_group_leaves_golden() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0), name="p")
    q = s.param(f32(1.0), name="q")
    bare = _variant(p, value_cell=None)
    groups = group_leaves({40: p, 10: q, 30: bare, 20: p})
    assert groups == [(10, [10]), (20, [20, 40]), (30, [30])]


def test_group_leaves_two_bare_leaves_stay_apart() -> None:
    s = Session(dtype="float32")
    p = s.param(f32(1.0))
    bare = _variant(p, value_cell=None)
    assert group_leaves({5: bare, 2: bare, 3: p}) == [(2, [2]), (3, [3]), (5, [5])]


# --------------------------------------------------------------------------- requires_grad


# Every sample of every op (`OpDef.samples`: ordinary points, ties, signed zeros, boundaries).
SAMPLES = [(n, i) for n in sorted(OPS) for i in range(len(OPS[n].samples))]


def test_samples_fit_the_arity() -> None:
    for name, i in SAMPLES:
        arity = OPS[name].arity
        assert arity is None or arity == len(OPS[name].samples[i].args), (name, i)


def _sample_args(name: str, i: int) -> tuple[list[np.ndarray], dict[str, Any]]:
    smp = OPS[name].samples[i]
    args = [f32([float(v) for v in vals]).reshape(shape) for shape, vals in smp.args]
    return args, dict(smp.attrs)


def _run_op(
    mode: str, name: str, i: int, flags: tuple[bool, ...]
) -> tuple[Session, list[Any], Any]:
    args, attrs = _sample_args(name, i)
    s = Session(mode=mode, dtype="float32", kernels="ordered")
    refs = [s.input(v, requires_grad=f) for v, f in zip(args, flags, strict=True)]
    n = len(s.tape)
    # every op is a session method of the table's name (const: `s.const` makes leaves);
    # the methods with F's signature (`TORCH_METHODS`) are called in the table's order
    # through `s.op`
    if name == "const" or name in TORCH_METHODS:
        out = s.op(name, *refs, **attrs)
    else:
        out = getattr(s, name)(*refs, **attrs)
    assert len(s.tape) == n + 1, f"{name}: exactly one node must be appended"
    assert out.id == n
    return s, refs, out


def _seed(shape: tuple[int, ...]) -> np.ndarray:
    k = int(np.prod(shape)) if shape else 1
    return f32([(i % 5 - 2) / 4 + 1.0 for i in range(k)]).reshape(shape)


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.mark.parametrize(("name", "i"), SAMPLES, ids=[f"{n}-{i}" for n, i in SAMPLES])
def test_requires_grad_matrix(name: str, i: int) -> None:
    args = OPS[name].samples[i].args
    for mode in MODES:
        ref_s, _, ref_out = _run_op(mode, name, i, tuple(True for _ in args))
        seed = _seed(ref_out.shape)
        ref = ref_s.backward_dense_all(ref_out, seed)
        assert _bits(ref[ref_out.id]) == _bits(seed)
        if mode == "typed_graph" and name not in ("const", "detach"):
            _check_against_spec(ref_s, ref, seed)
        for flags in itertools.product((False, True), repeat=len(args)):
            s, refs, out = _run_op(mode, name, i, flags)
            want_flag = any(flags) and name != "detach"
            assert s.tape.nodes[out.id].requires_grad is want_flag, (mode, name, flags)
            grads = s.backward_dense_all(out, seed)
            assert len(grads) == len(refs) + 1
            assert _bits(grads[out.id]) == _bits(seed)
            for r, f in zip(refs, flags, strict=True):
                g = grads[r.id]
                assert g.dtype == F32 and g.shape == r.shape
                if f and name != "detach":
                    assert _bits(g) == _bits(ref[r.id]), (mode, name, flags, r.id)
                else:
                    assert not np.any(g), (mode, name, flags, r.id)
                    assert not np.any(np.signbit(g))


def _check_against_spec(s: Session, grads: list[Any], seed: np.ndarray) -> None:
    """The all-trainable gradients equal spec backprop_all_ctx (one-hot seed at the output)
    as numbers (a first contribution of -0 is stored as is; spec adds it to +0)."""
    rec = s.graph()
    D = DTYPE_DOMAIN["float32"]
    out = rec.graph.num_values - 1
    seeds = [Tensor.zeros(D, sh) for sh in rec.graph.shapes]
    seeds[out] = to_spec(seed, "float32")
    want = backprop_all_ctx(D, rec.graph, rec.inputs, TensorPack.of(seeds), rec.env).tensors
    for i, (g, w) in enumerate(zip(grads, want, strict=True)):
        got = [float(v) for v in g.reshape(-1)]
        # float() of an MPFR value is exact for binary32 values, ±inf and NaN included
        exp = [float(v) for v in w.data]
        assert np.array_equal(np.array(got), np.array(exp), equal_nan=True), (i, got, exp)


# --------------------------------------------------------------------------- stale handles


def _state(s: Session, nats: list[Any]) -> tuple[Any, ...]:
    graph = None
    if s.mode == "typed_graph":
        rec = s.graph()
        graph = (rec.graph.inputs, len(rec.graph.nodes), tuple(rec.env))
    values = tuple(
        _bits(n.value) if n.value.dtype != object else tuple(n.value.reshape(-1))
        for n in s.tape.nodes
    )
    return (
        len(s.tape),
        graph,
        tuple(s.get_nat(r) for r in nats),
        values,
        s.rng.counter,
        s.generation,
    )


def _stale_calls(
    s: Session,
    x: Any,
    sc: Any,
    r: Any,
    bad: Any,
    bad_scalar: Any,
    bad_nat: Any,
    grads: list[Any],
    stale: bool,
) -> list[tuple[str, Any]]:
    one = f32(1.0)
    calls = [
        ("relu", lambda: s.relu(bad)),
        ("add-left", lambda: s.add(bad, x)),
        ("add-right", lambda: s.add(x, bad)),
        ("add-scalar-first", lambda: s.add(2.0, bad)),
        ("operator", lambda: x + bad),
        ("operator-left", lambda: bad + x),
        ("get_value", lambda: s.get_value(bad)),
        ("detach", lambda: s.detach(bad)),
        ("backward", lambda: s.backward_dense_all(bad_scalar, one)),
        ("backward_scalar", lambda: s.backward_scalar_dense_all(bad_scalar)),
        ("backward_hook", lambda: s.backward_dense_all_with_hook(bad_scalar, one, lambda i, g: g)),
        ("grad", lambda: s.grad(grads, bad)),
        ("vjp-x", lambda: s.vjp(sc, one, bad)),
        ("vjp-out", lambda: s.vjp(bad_scalar, one, x)),
        ("dropout", lambda: s.dropout(None, bad, 0.5)),
        ("select-nat", lambda: s.select(x, index=bad_nat)),
        ("get_nat", lambda: s.get_nat(bad_nat)),
        ("set_nat", lambda: s.set_nat(bad_nat, 0)),
        ("nat-as-tensor", lambda: s.relu(bad_nat)),
    ]
    if stale:  # a foreign handle's operators dispatch to its own session, where it is valid
        calls.append(("roperator", lambda: 3.0 * bad))
    if s.mode == "typed_graph":
        calls += [
            ("jvp_leaf-x", lambda: s.jvp_leaf(sc, bad, f32([1.0, 1.0]))),
            ("jvp_leaf-out", lambda: s.jvp_leaf(bad_scalar, x, f32([1.0, 1.0]))),
            ("jvp_scalar_leaf", lambda: s.jvp_scalar_leaf(bad_scalar, x, f32([1.0, 1.0]))),
            ("jvp_dense_all", lambda: s.jvp_dense_all(bad_scalar, [f32([1.0, 1.0])])),
        ]
    return calls


def _program(s: Session) -> tuple[Any, Any, Any, list[Any]]:
    x = s.input(f32([1.0, 2.0]), requires_grad=True)
    r = s.input_nat(1)
    sc = s.sum(s.mul(x, x))
    grads = s.backward_scalar_dense_all(sc)
    return x, sc, r, grads


@pytest.mark.parametrize("mode", MODES)
def test_stale_handles_rejected_and_change_nothing(mode: str) -> None:
    s = Session(mode=mode, dtype="float32", kernels="ordered")
    old_x, old_sc, old_r, _ = _program(s)
    s.reset_tape()
    # The new recording reuses the same ids: %0, the NatRef slot 0, ...
    x, sc, r, grads = _program(s)
    assert (x.id, sc.id, r.slot) == (old_x.id, old_sc.id, old_r.slot)
    s.rng.counter = 3
    before = _state(s, [r])
    for what, call in _stale_calls(s, x, sc, r, old_x, old_sc, old_r, grads, True):
        with pytest.raises(StaleHandleError) as ei:
            call()
        msg = str(ei.value)
        if what != "nat-as-tensor":
            assert "stale" in msg and "generation 0" in msg, (what, msg)
            assert "current generation is 1" in msg and "reset_tape" in msg, (what, msg)
        assert _state(s, [r]) == before, what


@pytest.mark.parametrize("mode", MODES)
def test_foreign_handles_rejected_and_change_nothing(mode: str) -> None:
    other = Session(mode=mode, dtype="float32", kernels="ordered")
    fx, fsc, fr, _ = _program(other)
    fp = other.param(f32(1.0))
    s = Session(mode=mode, dtype="float32", kernels="ordered")
    x, sc, r, grads = _program(s)
    assert (x.id, sc.id, r.slot) == (fx.id, fsc.id, fr.slot)
    before = _state(s, [r])
    other_before = _state(other, [fr])
    for what, call in _stale_calls(s, x, sc, r, fx, fsc, fr, grads, False):
        with pytest.raises(StaleHandleError) as ei:
            call()
        if what != "nat-as-tensor":
            assert "foreign" in str(ei.value), (what, str(ei.value))
        assert _state(other, [fr]) == other_before, what
        assert _state(s, [r]) == before, what
    with pytest.raises(StaleHandleError, match="foreign parameter"):
        s.use(fp)
    assert _state(s, [r]) == before
    assert _state(other, [fr]) == other_before


def test_handle_of_a_dead_session() -> None:
    s = Session(dtype="float32")
    x = s.input(f32([1.0]))
    del s
    import gc

    gc.collect()
    with pytest.raises(StaleHandleError, match="no longer exists"):
        _ = x + x


def test_non_handles_rejected() -> None:
    s = Session(dtype="float32")
    x = s.input(f32([1.0, 2.0]))
    n = len(s.tape)
    with pytest.raises(TorchLeanError):
        s.add(x, f32([1.0, 2.0]))  # arrays must go through input/const
    with pytest.raises(TorchLeanError):
        s.get_nat(x)
    with pytest.raises(TorchLeanError):
        s.use(x)
    assert len(s.tape) == n
