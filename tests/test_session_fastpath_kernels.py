"""The eager per-op path's shortcuts and the reference each one
must equal, bit for bit:

- a `unary` kernel with a `ufunc` calls the NumPy function itself on the NumPy IEEE `fast`
  context; its reference is `builders.UNARY_REFERENCE[name]` (the forward through `f`);
- the Session's one- and two-argument op methods inline `Recording.record_plain` in eager
  mode (through `Recording.plain`); their reference is `Session.op`, which records through
  `record_plain` (values, gradients, handles, selected backends and errors all equal);
- `tensor_ref` builds a TensorRef by plain attribute stores and a `__class__` assignment;
  its reference is the dataclass constructor;
- `KernelContext.const` finds an int in its own table; its reference is the Fraction's
  entry;
- `Tape.op` builds its node by storing each field; its reference is `TapeNode(...)`.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import Session
from runtime.engine.context import KernelContext, fp_quiet
from runtime.engine.tape import Tape, TapeNode
from runtime.kernels import KERNELS
from runtime.kernels.builders import UNARY_REFERENCE
from runtime.session.handles import TensorRef, tensor_ref
from spec.errors import TorchLeanError

DTYPES = ("float64", "float32", "float16", "bfloat16")
SPECIALS = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, 1e-3, 20.0, -20.0, 1e4)


def _same(a: Any, b: Any) -> bool:
    """Both None, or arrays of the same type, dtype, shape and bits."""
    if a is None or b is None:
        return a is None and b is None
    return (
        type(a) is type(b)
        and a.dtype == b.dtype
        and a.shape == b.shape
        and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes()
    )


@st.composite
def _operand(draw: Any, dtype: str) -> np.ndarray:
    """An array of `dtype` from raw bit patterns (NaN payloads, subnormals) and specials."""
    dt = KernelContext(dtype).dt
    uint = np.dtype(f"u{dt.itemsize}")
    special_bits = [int(b) for b in np.array(SPECIALS).astype(dt).view(uint)]
    shape = draw(st.sampled_from([(), (0,), (5,), (2, 3)]))
    n = int(np.prod(shape))
    elem = st.one_of(st.integers(0, 2 ** (8 * dt.itemsize) - 1), st.sampled_from(special_bits))
    bits = draw(st.lists(elem, min_size=n, max_size=n))
    return np.array(bits, dtype=uint).view(dt).reshape(shape)


def test_the_fast_forwards_are_the_expected_ops() -> None:
    # every op whose reference is a single NumPy function on this context has one
    assert set(UNARY_REFERENCE) == {
        "neg",
        "abs",
        "sqrt",
        "exp",
        "log",
        "tanh",
        "sin",
        "cos",
        "log1p",
        "expm1",
    }
    assert KernelContext("float32", "fast").numpy_libm
    assert not KernelContext("float32", "ordered").numpy_libm
    assert not KernelContext("exact", "fast").numpy_libm


@given(data=st.data())
def test_unary_forward_equals_its_reference(data: Any) -> None:
    name = data.draw(st.sampled_from(sorted(UNARY_REFERENCE)))
    dtype = data.draw(st.sampled_from(DTYPES))
    ctx = KernelContext(dtype, data.draw(st.sampled_from(["fast", "ordered"])))
    x = data.draw(_operand(dtype))
    with fp_quiet():
        got = KERNELS[name].forward(ctx, [x], {}, ())
        want = UNARY_REFERENCE[name](ctx, [x], {}, ())
    assert _same(got[0], want[0]), (name, dtype, ctx.profile, x, got[0], want[0])
    assert len(got[1]) == len(want[1]) == 2
    for s, r in zip(got[1], want[1], strict=True):
        assert _same(s, r)


def test_unary_forward_on_a_0d_operand_is_a_0d_array() -> None:
    # NumPy's ufuncs give a scalar for a 0-d operand; the kernel gives a 0-d array
    ctx = KernelContext("float32")
    y, saved = KERNELS["tanh"].forward(ctx, [np.array(0.5, dtype=np.float32)], {}, ())
    assert type(y) is np.ndarray and y.shape == () and saved[1] is y
    assert y.tobytes() == np.tanh(np.float32(0.5)).tobytes()


def test_int_constants_are_the_fraction_entries() -> None:
    for dtype in ("float32", "bfloat16", "exact"):
        ctx = KernelContext(dtype)
        for q in (0, 1, 2, -3):
            c = ctx.const(q)
            assert c is ctx.const(q) and c is ctx.const(Fraction(q))
        assert ctx.const(True) is ctx.const(1)
    assert KernelContext("float16").const(70000).tobytes() == np.float16(np.inf).tobytes()


# --------------------------------------------------------------------------- Session

UNARY = ("neg", "tanh", "exp", "log", "sin", "cos", "abs", "sqrt", "relu", "sigmoid", "expm1")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")


@st.composite
def _program(draw: Any) -> list[tuple[str, tuple[int, ...]]]:
    steps = []
    for k in range(draw(st.integers(1, 8))):
        n = 2 + k  # two leaves, then one value per step
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(UNARY)), (draw(st.integers(0, n - 1)),)))
        else:
            a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
            steps.append((draw(st.sampled_from(BINARY)), (a, b)))
    return steps


def _run(s: Session, program: Any, leaves: Any, via_op: bool) -> list[Any]:
    """Every observable of the program: handles, errors, tape values, gradients."""
    vals = [s.input(v, requires_grad=True) for v in leaves]
    seen: list[Any] = []
    for name, picks in program:
        args = [vals[p] for p in picks]
        n = len(s.tape)
        try:
            r = s.op(name, *args) if via_op else getattr(s, name)(*args)
        except TorchLeanError as e:
            assert len(s.tape) == n  # validate before mutate
            seen.append((type(e), str(e)))
            r = args[0]  # the program goes on from the argument
        else:
            assert type(r) is TensorRef and r.session_ref() is s and r.owner == s.owner
            # the fields in the constructor's order, but the owner (two sessions)
            seen.append([kv for kv in vars(r).items() if kv[0] not in ("owner", "session_ref")])
        vals.append(r)
    seen.append(s.selected_backends)
    g = s.backward_scalar_dense_all(s.sum(vals[-1]))
    return seen + [s.to_host(n.value) for n in s.tape.nodes] + [s.to_host(v) for v in g]


@given(
    program=_program(),
    dtype=st.sampled_from(DTYPES),
    kernels=st.sampled_from(["fast", "ordered"]),
    mode=st.sampled_from(["eager", "typed_graph"]),
    seed=st.integers(0, 2**16),
)
def test_op_methods_equal_session_op(
    program: Any, dtype: str, kernels: str, mode: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    dt = KernelContext(dtype).dt
    leaves = [rng.uniform(-2, 2, (2, 3)).astype(dt), rng.uniform(-2, 2, (3,)).astype(dt)]
    got = _run(Session(mode, dtype=dtype, kernels=kernels), program, leaves, via_op=False)
    want = _run(Session(mode, dtype=dtype, kernels=kernels), program, leaves, via_op=True)
    assert len(got) == len(want)
    for u, v in zip(got, want, strict=True):
        assert _same(u, v) if isinstance(u, np.ndarray) else u == v


def test_recording_plain_follows_the_tape_and_environment() -> None:
    s = Session()
    rec = s.recording
    assert rec.plain is not None and rec.plain[0] is rec.tape and rec.plain[1] == ()
    r = s.input_nat(3)
    assert rec.plain[1] is rec.env == (3,)
    s.set_nat(r, 4)
    assert rec.plain[1] is rec.env == (4,)
    old = rec.tape
    s.reset_tape()
    assert rec.plain[0] is rec.tape is not old and rec.plain[1] == ()
    assert Session(mode="typed_graph").recording.plain is None


def test_inlined_record_reads_the_current_environment_and_tape() -> None:
    # An op after set_nat keeps the environment it ran with (as record_plain would), and
    # after the recording is reset directly an old id is refused by the new tape.
    s = Session()
    r = s.input_nat(1)
    x = s.input(np.ones(2, dtype=np.float32))
    y = s.neg(x)
    s.set_nat(r, 2)
    z = s.tanh(y)
    assert s.tape.nodes[y.id].env == (1,) and s.tape.nodes[z.id].env == (2,)
    s.recording.reset()
    with pytest.raises(TorchLeanError, match="invalid tape id"):
        s.neg(z)
    assert len(s.tape) == 0


def test_tensor_ref_has_the_constructors_instance_dictionary() -> None:
    a = tensor_ref(3, (2, 4), 7, 1, None)
    b = TensorRef(3, (2, 4), 7, 1)
    assert type(a) is TensorRef and list(vars(a).items()) == list(vars(b).items())
    assert [f.name for f in dataclasses.fields(a)] == list(vars(a))
    s = Session()
    x = s.input(np.ones(2, dtype=np.float32))
    y = s.neg(x)
    want = TensorRef(y.id, (2,), s.owner, s.generation, y.session_ref)
    assert list(vars(y).items()) == list(vars(want).items()) and y.session_ref() is s
    with pytest.raises(dataclasses.FrozenInstanceError):
        y.owner = 0  # type: ignore[misc]
    assert (-y).shape == (2,)  # the operators reach the session through session_ref


def test_tape_op_node_is_the_constructors() -> None:
    # `Tape.op` stores the node's fields one by one; its reference is `TapeNode(...)`:
    # every field set, to the values the constructor call would give.
    ctx = KernelContext("float32")
    t = Tape(ctx)
    a = t.leaf(np.array([1.0, -2.0], dtype=np.float32))
    b = t.leaf(np.array([3.0, 4.0], dtype=np.float32), requires_grad=False)
    cases = (
        ("neg", (a,), {}, True, (True,)),
        ("add", (a, b), {}, True, (True, False)),
        ("scale", (b,), {"c": 2}, False, (False,)),
    )
    for name, args, attrs, rg, needs in cases:
        xs = [t.nodes[j].value for j in args]
        with fp_quiet():
            y, saved = KERNELS[name].forward(ctx, xs, dict(attrs), (5,))
        node = t.nodes[t.op(name, list(args), (5,), **attrs)]
        kern = KERNELS[name]
        want = TapeNode(name, y, rg, args, None, None, attrs, (5,), kern, saved, needs, ctx)
        assert type(node) is TapeNode
        for f in dataclasses.fields(TapeNode):
            got, ref = getattr(node, f.name), getattr(want, f.name)
            if f.name == "value":
                assert _same(got, ref)
            elif f.name == "saved":
                assert type(got) is type(ref) and repr(got) == repr(ref)
            else:
                assert got == ref and type(got) is type(ref), f.name
