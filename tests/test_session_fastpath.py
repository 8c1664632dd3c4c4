"""The Session's per-op fast path keeps every check of the general path:
`tensor_ref` builds the same TensorRef as the dataclass, and an op method called with
plain TensorRefs validates handles and fails atomically exactly like `Session.op`."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from runtime import Session
from runtime.session.handles import NatRef, TensorRef, tensor_ref
from spec.errors import StaleHandleError, TorchLeanError


def test_tensor_ref_is_the_dataclass() -> None:
    a = tensor_ref(3, (2, 4), 7, 1, None)
    b = TensorRef(3, (2, 4), 7, 1)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert type(a) is TensorRef
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(b)]
    assert dataclasses.replace(a, id=4) == TensorRef(4, (2, 4), 7, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.id = 5  # type: ignore[misc]
    assert a != tensor_ref(3, (2, 4), 7, 2, None)


def _chain(s: Session, via_op: bool) -> list[np.ndarray]:
    x = s.input(np.array([0.5, -1.0, 2.0], dtype=np.float32), requires_grad=True)
    h = x
    for k in range(6):
        name = "tanh" if k % 2 else "neg"
        h = s.op(name, h) if via_op else getattr(s, name)(h)
    h = s.add(h, x) if not via_op else s.op("add", h, x)
    g = s.backward_scalar_dense_all(s.sum(h))
    return [np.asarray(n.value) for n in s.tape.nodes] + [np.asarray(v) for v in g]


@pytest.mark.parametrize("mode", ["eager", "typed_graph"])
def test_method_and_op_agree(mode: str) -> None:
    a, b = _chain(Session(mode=mode), False), _chain(Session(mode=mode), True)
    assert len(a) == len(b)
    for u, v in zip(a, b, strict=True):
        assert u.tobytes() == v.tobytes()


@pytest.mark.parametrize("call", ["method", "op"])
def test_fast_path_checks_handles(call: str) -> None:
    s, other = Session(), Session()
    x = s.input(np.ones(3, dtype=np.float32))
    f = s.tanh if call == "method" else (lambda *a: s.op("tanh", *a))
    y = f(x)
    assert isinstance(y, TensorRef) and y.owner == s.owner and y.shape == (3,)
    n = len(s.tape)
    with pytest.raises(StaleHandleError, match="foreign"):
        f(other.input(np.ones(3, dtype=np.float32)))
    with pytest.raises(TorchLeanError, match="NatRef"):
        f(s.input_nat(2))
    with pytest.raises(TorchLeanError, match="expected a TensorRef"):
        f("x")
    assert len(s.tape) == n
    s.reset_tape()
    with pytest.raises(StaleHandleError, match="stale"):
        f(x)
    assert len(s.tape) == 0


def test_fast_path_failure_leaves_tape_unchanged() -> None:
    s = Session()
    a = s.input(np.ones(3, dtype=np.float32))
    b = s.input(np.ones(4, dtype=np.float32))
    n = len(s.tape)
    with pytest.raises(TorchLeanError):
        s.add(a, b)  # shape mismatch: validated before anything is appended
    with pytest.raises(TorchLeanError):
        s.reshape(a)  # a missing attribute, as through Session.op
    assert len(s.tape) == n


def test_env_snapshot_per_op() -> None:
    s = Session()
    r = s.input_nat(1)
    env = s.recording.env
    s.set_nat(r, 2)
    assert env == (1,) and s.recording.env == (2,) and s.get_nat(r) == 2
    with pytest.raises(IndexError):
        s.recording.set_nat(5, 1)
    assert isinstance(r, NatRef)


@pytest.mark.parametrize("mode", ["eager", "typed_graph"])
@pytest.mark.parametrize("arity", [2, 3])
def test_specialised_fast_paths_check_every_argument(mode: str, arity: int) -> None:
    """The one- and two-argument fast paths and the general one check each handle (any
    position: foreign, stale, not a TensorRef) as `Session.op` does, and append nothing."""
    s, other = Session(mode=mode), Session(mode=mode)
    x = s.input(np.ones((2, 3), dtype=np.float32))
    w = s.input(np.ones((4, 3), dtype=np.float32))
    b = s.input(np.ones(4, dtype=np.float32))
    foreign = other.input(np.ones((2, 3), dtype=np.float32))
    args = [x, x] if arity == 2 else [x, w, b]
    f = s.add if arity == 2 else s.linear
    want = f(*args)
    assert want.shape == ((2, 3) if arity == 2 else (2, 4))
    for k in range(arity):
        for bad, exc, needle in (
            (foreign, StaleHandleError, "foreign"),
            ("x", TorchLeanError, "expected a TensorRef"),
        ):
            n = len(s.tape)
            given = list(args)
            given[k] = bad
            with pytest.raises(exc, match=needle):
                f(*given)
            assert len(s.tape) == n
    s.reset_tape()
    fresh = [s.input(np.ones(a.shape, dtype=np.float32)) for a in args]
    for k in range(arity):
        given = list(fresh)
        given[k] = args[k]  # one handle from the generation before reset_tape
        with pytest.raises(StaleHandleError, match="stale"):
            f(*given)
        assert len(s.tape) == arity
