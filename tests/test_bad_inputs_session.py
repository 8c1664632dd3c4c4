"""The Session's bad-input battery: every case asserts the error class, a key
phrase of the message (naming the argument), and that nothing changed: tape length, the
generation, every parameter's bits and the RNG state. A few fault cases (a `MemoryError`
while a random tensor is allocated) assert the same invariants for a non-torchlean error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

import runtime.session.streams as streams_mod
from runtime.session import Session
from spec.errors import (
    DomainError,
    GraphError,
    HookError,
    ShapeError,
    StaleHandleError,
    TorchLeanError,
)


@dataclass
class Env:
    s: Session
    x: Any  # a float input (2,)
    p: Any  # a parameter (2,)
    y: Any  # an op result (), on the tape
    other: Session  # another session with the same layout
    other_y: Any  # its op result ()
    s_three: Any = None  # a (3, 2) input
    snap: Any = None


def _make(dtype: str, mode: str) -> Env:
    def build(s: Session) -> tuple[Any, Any, Any, Any]:
        vals: Any = [1, 2] if dtype == "exact" else np.array([1.0, 2.0], dtype=dtype)
        p = s.param(vals, name="w")
        x = s.input(vals, requires_grad=True)
        three = [[1] * 2] * 3 if dtype == "exact" else np.ones((3, 2), dtype=dtype)
        t3 = s.input(three)
        w = s.use(p)
        y = s.sum(s.mul(x, w))
        return x, p, y, t3

    s = Session(mode=mode, dtype=dtype, seed=7)
    x, p, y, t3 = build(s)
    other = Session(mode=mode, dtype=dtype, seed=7)
    other_y = build(other)[2]
    return Env(s, x, p, y, other, other_y, t3)


def _state(e: Env) -> tuple[Any, ...]:
    s = e.s
    params = tuple(
        (q.name, np.asarray(q.get()).tobytes() if q.dtype != "exact" else repr(q.get().tolist()))
        for q in s.store.params
    )
    return (len(s.tape), s.generation, params, s.rng.seed, s.rng.counter, s.graph_has_nodes)


def _one(e: Env) -> Any:
    return 1 if e.s.dtype == "exact" else np.array(1.0, dtype=e.s.dtype)


Case = tuple[str, Callable[[Env], Any], type[BaseException], str]

# Session construction: (id, kwargs, error, phrase)
CONSTRUCTION: list[tuple[str, dict[str, Any], type[BaseException], str]] = [
    ("seed-float", {"seed": 1.7}, DomainError, "seed must be an int"),
    ("seed-str", {"seed": "1"}, DomainError, "seed must be an int"),
    ("seed-bool", {"seed": True}, DomainError, "seed must be an int"),
    ("seed-none", {"seed": None}, DomainError, "seed must be an int"),
    ("seed-too-big", {"seed": 2**64}, DomainError, "seed must be in"),
    ("seed-too-small", {"seed": -(2**63) - 1}, DomainError, "seed must be in"),
    ("grad-enabled-str", {"grad_enabled": "no"}, TorchLeanError, "grad_enabled must be a bool"),
    ("grad-enabled-int", {"grad_enabled": 1}, TorchLeanError, "grad_enabled must be a bool"),
    ("grad-enabled-none", {"grad_enabled": None}, TorchLeanError, "grad_enabled must be a bool"),
    (
        "requires-grad-default-str",
        {"requires_grad_by_default": "yes"},
        TorchLeanError,
        "requires_grad_by_default must be a bool",
    ),
    ("mode", {"mode": "graph"}, TorchLeanError, "mode must be"),
    ("device", {"device": "tpu"}, TorchLeanError, "device must be"),
    ("dtype", {"dtype": "int8"}, TorchLeanError, "unknown dtype"),
    ("dtype-symbolic", {"dtype": "symbolic"}, TorchLeanError, "unknown dtype"),
    ("kernels", {"kernels": "slow"}, TorchLeanError, "unknown kernel profile"),
]

BAD_VALUES: list[tuple[str, Any, type[BaseException], str]] = [
    ("none", None, DomainError, "got None"),
    ("list-with-none", [1.0, None], DomainError, "got NoneType"),
    ("ragged", [[1.0, 2.0], [3.0]], ShapeError, "ragged"),
    ("ragged-deep", [[[1.0], [2.0]], [[3.0]]], ShapeError, "ragged"),
    ("complex", 1 + 2j, DomainError, "got complex"),
    ("complex-list", [1.0, 2j], DomainError, "got complex"),
    ("numpy-complex", np.complex128(1 + 1j), DomainError, "got complex128"),
    ("str", "1.5", DomainError, "got str"),
    ("str-list", ["1", "2"], DomainError, "got str"),
    ("bytes", b"12", DomainError, "got bytes"),
    ("object", object(), DomainError, "got object"),
    ("dict", {"a": 1}, DomainError, "got dict"),
    ("huge-int", 10**400, DomainError, "out of range"),
    ("huge-int-list", [1, 10**400], DomainError, "out of range"),
    ("huge-fraction", Fraction(10**400, 3), DomainError, "out of range"),
    ("array-wrong-dtype", np.array([1.0, 2.0], dtype=np.float16), TorchLeanError, "no silent"),
]

EXACT_BAD_VALUES: list[tuple[str, Any, type[BaseException], str]] = [
    ("nan", float("nan"), DomainError, "cannot hold nan"),
    ("inf-list", [1.0, float("inf")], DomainError, "cannot hold inf"),
    ("object-array-with-float", np.array([Fraction(1), 0.5], dtype=object), DomainError, "float"),
    ("object-array-with-none", np.array([None, 1], dtype=object), DomainError, "NoneType"),
    ("str-fraction", "1/2", DomainError, "got str"),
]


def _leaf_cases(values: list[tuple[str, Any, type[BaseException], str]]) -> list[Case]:
    out: list[Case] = []
    for vid, v, err, phrase in values:
        # each message names the argument ("input: ...") and says what was wrong
        out.append((f"input-{vid}", lambda e, v=v: e.s.input(v), err, f"input: |{phrase}"))
        out.append((f"const-{vid}", lambda e, v=v: e.s.const(v), err, f"const: |{phrase}"))
        out.append((f"param-{vid}", lambda e, v=v: e.s.param(v), err, f"param: |{phrase}"))
    return out


OP_CASES: list[Case] = [
    ("op-scalar-none", lambda e: e.s.add(e.x, None), TorchLeanError, "expected a TensorRef"),
    ("op-scalar-str", lambda e: e.s.add(e.x, "1"), TorchLeanError, "expected a TensorRef"),
    ("op-scalar-complex", lambda e: e.s.mul(e.x, 2j), TorchLeanError, "expected a TensorRef"),
    ("op-scalar-huge", lambda e: e.s.add(e.x, 10**400), DomainError, "add: input 1"),
    (
        "op-positional-twice",
        lambda e: e.s.reshape(e.x, (2, 1), shape=(2, 1)),
        GraphError,
        "given both positionally and by keyword",
    ),
    ("op-too-many-positionals", lambda e: e.s.scale(e.x, 1, 2), GraphError, "positionally"),
    ("op-dim-twice", lambda e: e.s.sum(e.x, 0, dim=0), GraphError, "dim given both"),
    ("matmul-1d-mismatch", lambda e: e.s.matmul(e.x, e.s_three), ShapeError, "matmul"),
    ("matmul-0d", lambda e: e.s.matmul(e.y, e.x), ShapeError, "matmul"),
    ("unknown-op", lambda e: e.s.op("nope", e.x), GraphError, "unknown op"),
]


def _stale_grads(e: Env) -> None:
    g = e.s.backward_scalar_dense_all(e.y)
    e.s.reset_tape()
    x2 = e.s.input(_vals(e), requires_grad=True)
    w2 = e.s.use(e.p)
    e.s.sum(e.s.mul(x2, w2))
    e.snap = _state(e)  # the state to keep from here on
    e.s.sgd_step_all(0.1, g)


def _vals(e: Env) -> Any:
    return [1, 2] if e.s.dtype == "exact" else np.array([1.0, 2.0], dtype=e.s.dtype)


def _grads(e: Env) -> Any:
    return e.s.backward_scalar_dense_all(e.y)


def _foreign(e: Env) -> Any:
    return e.other.backward_scalar_dense_all(e.other_y)


SGD_CASES: list[Case] = [
    ("lr-bool", lambda e: e.s.sgd_step_all(True, _grads(e)), DomainError, "lr must be a real"),
    ("lr-str", lambda e: e.s.sgd_step_all("0.1", _grads(e)), DomainError, "lr must be a real"),
    ("lr-none", lambda e: e.s.sgd_step_all(None, _grads(e)), DomainError, "lr must be a real"),
    ("lr-complex", lambda e: e.s.sgd_step_all(0.1j, _grads(e)), DomainError, "lr must be a real"),
    ("lr-nan", lambda e: e.s.sgd_step_all(float("nan"), _grads(e)), DomainError, "finite"),
    ("lr-inf", lambda e: e.s.sgd_step_all(float("inf"), _grads(e)), DomainError, "finite"),
    ("lr-np-nan", lambda e: e.s.sgd_step_all(np.float32("nan"), _grads(e)), DomainError, "finite"),
    ("lr-negative", lambda e: e.s.sgd_step_all(-0.1, _grads(e)), DomainError, ">= 0"),
    (
        "lr-neg-fraction",
        lambda e: e.s.sgd_step_all(Fraction(-1, 3), _grads(e)),
        DomainError,
        ">= 0",
    ),
    ("lr-overflow-int", lambda e: e.s.sgd_step_all(10**400, _grads(e)), DomainError, "range"),
    ("grads-foreign", lambda e: e.s.sgd_step_all(0.1, _foreign(e)), StaleHandleError, "foreign"),
    ("grads-stale", _stale_grads, StaleHandleError, "stale gradient list"),
    ("grads-short", lambda e: e.s.sgd_step_all(0.1, _grads(e)[:-1]), ShapeError, "gradients for"),
]

BACKWARD_CASES: list[Case] = [
    ("seed-none", lambda e: e.s.backward_dense_all(e.y, None), DomainError, "seed"),
    ("seed-str", lambda e: e.s.backward_dense_all(e.y, "1"), DomainError, "seed"),
    ("seed-ragged", lambda e: e.s.backward_dense_all(e.x, [[1], [2, 3]]), ShapeError, "seed"),
    (
        "hook-none",
        lambda e: e.s.backward_dense_all_with_hook(e.y, _one(e), None),
        TorchLeanError,
        "hook is None",
    ),
    (
        "hook-not-callable",
        lambda e: e.s.backward_dense_all_with_hook(e.y, _one(e), 3),
        HookError,
        "must be callable",
    ),
    (
        "hook-wrong-shape",
        lambda e: e.s.backward_dense_all_with_hook(
            e.y, _one(e), lambda i, g: g.reshape(-1) if i == e.y.id else g
        ),
        HookError,
        "expected shape () dtype",
    ),
    (
        "hook-returns-none",
        lambda e: e.s.backward_dense_all_with_hook(e.y, _one(e), lambda i, g: None),
        HookError,
        "node 0",
    ),
]

RNG_CASES: list[Case] = [
    ("rand-negative-shape", lambda e: e.s.rand_uniform((-1,)), TorchLeanError, "rand_uniform"),
    ("rand-str-shape", lambda e: e.s.rand_uniform("ab"), TorchLeanError, "rand_uniform"),
    ("mask-p-too-big", lambda e: e.s.bernoulli_mask((2,), 2), DomainError, "p must be in"),
    ("mask-p-str", lambda e: e.s.bernoulli_mask((2,), "x"), DomainError, "p must be"),
    ("dropout-p-negative", lambda e: e.s.dropout(None, e.x, -0.5), DomainError, "p must be in"),
    ("init-rng-float", lambda e: e.s.init_rng(1.5), DomainError, "seed must be an int"),
    ("init-rng-too-big", lambda e: e.s.init_rng(2**70), DomainError, "seed must be in"),
]

CASES: list[Case] = _leaf_cases(BAD_VALUES) + OP_CASES + SGD_CASES + BACKWARD_CASES + RNG_CASES
EXACT_CASES: list[Case] = _leaf_cases(EXACT_BAD_VALUES)
SKIP_EXACT = {"input-array-wrong-dtype", "const-array-wrong-dtype", "param-array-wrong-dtype"}
SKIP_EXACT |= {f"{k}-huge-{w}" for k in ("input", "const", "param") for w in ("int", "fraction")}
SKIP_EXACT |= {"input-huge-int-list", "const-huge-int-list", "param-huge-int-list"}
SKIP_EXACT |= {"op-scalar-huge", "lr-overflow-int", "lr-np-nan"}


def _run_case(e: Env, fn: Callable[[Env], Any], err: type[BaseException], phrase: str) -> None:
    e.snap = _state(e)
    with pytest.raises(err) as info:
        fn(e)
    for part in phrase.split("|"):  # every '|'-separated part must appear
        assert part in str(info.value), str(info.value)
    if isinstance(info.value, Exception) and err is not MemoryError:
        assert isinstance(info.value, TorchLeanError), type(info.value)
    assert _state(e) == e.snap


@pytest.mark.parametrize("mode", ["eager", "typed_graph"])
@pytest.mark.parametrize(("cid", "fn", "err", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_float32(mode: str, cid: str, fn: Any, err: Any, phrase: str) -> None:
    _run_case(_make("float32", mode), fn, err, phrase)


@pytest.mark.parametrize(
    ("cid", "fn", "err", "phrase"),
    [c for c in CASES if c[0] not in SKIP_EXACT] + EXACT_CASES,
    ids=[c[0] for c in CASES if c[0] not in SKIP_EXACT] + [c[0] for c in EXACT_CASES],
)
def test_bad_input_exact(cid: str, fn: Any, err: Any, phrase: str) -> None:
    _run_case(_make("exact", "eager"), fn, err, phrase)


@pytest.mark.parametrize(
    ("cid", "kwargs", "err", "phrase"), CONSTRUCTION, ids=[c[0] for c in CONSTRUCTION]
)
def test_bad_session_construction(cid: str, kwargs: dict[str, Any], err: Any, phrase: str) -> None:
    with pytest.raises(err, match=phrase.replace("(", r"\(")):
        Session(**kwargs)


@pytest.mark.parametrize("call", ["rand_uniform", "bernoulli_mask", "dropout"])
def test_memory_error_in_random_tensors_leaves_rng_and_tape(
    monkeypatch: pytest.MonkeyPatch, call: str
) -> None:
    e = _make("float32", "eager")
    snap = _state(e)

    def boom(*a: Any, **k: Any) -> Any:
        raise MemoryError("simulated allocation failure")

    monkeypatch.setattr(streams_mod, "uniform01", boom)
    monkeypatch.setattr(streams_mod, "keep_mask", boom)
    run = {
        "rand_uniform": lambda: e.s.rand_uniform((4,)),
        "bernoulli_mask": lambda: e.s.bernoulli_mask((4,), 0.5),
        "dropout": lambda: e.s.dropout(None, e.x, 0.5),
    }[call]
    with pytest.raises(MemoryError):
        run()
    assert _state(e) == snap
    explicit = e.s.init_rng(3)
    with pytest.raises(MemoryError):
        e.s.rand_uniform((4,), explicit)
    assert explicit.counter == 0
    monkeypatch.undo()
    e.s.rand_uniform((4,))
    assert e.s.rng.counter == snap[4] + 1  # a successful draw advances once


def test_counts() -> None:
    """The battery's size (reported in the README's reliability section)."""
    n_float = 2 * len(CASES)
    n_exact = len([c for c in CASES if c[0] not in SKIP_EXACT]) + len(EXACT_CASES)
    assert n_float + n_exact + len(CONSTRUCTION) >= 200
