"""The Session state machine catches planted versions of the seed-fidelity regressions:
inputs that do not track gradients, results that alias session state, entries that share
memory, gradient lists refused after more ops, and Python scalars that become leaves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import runtime.session.core as core
from conformance.session_machine import run_session_machine
from runtime.session import GradientList, Session
from spec.errors import ShapeError

ORIGINAL_INPUT = Session.input


def input_not_tracking(self: Session, value: Any, name: str | None = None,
                       requires_grad: bool | None = None) -> Any:  # fmt: skip
    """The old default: inputs frozen unless told otherwise."""
    return ORIGINAL_INPUT(self, value, name, bool(requires_grad))


def gradients_uncopied(self: Session, grads: Any) -> GradientList:
    """Entries handed out as the sweep left them (the session's constants, the seed)."""
    return GradientList(list(grads), self.owner, self.generation)


def gradients_copied_once(self: Session, grads: Any) -> GradientList:
    """Each distinct array copied once: no session state, but entries share memory."""
    memo: dict[int, Any] = {}
    out = [memo.setdefault(id(g), self.ctx.xp.array(g, copy=True)) for g in grads]
    return GradientList(out, self.owner, self.generation)


def strict_length(grads: Any, tape_len: int, what: str) -> int:
    """The old rule: a list must have the tape's length now."""
    if len(grads) != tape_len:
        raise ShapeError(f"{what}: {len(grads)} gradients for a tape of {tape_len}")
    return len(grads)


def scalar_leaf_before_ops(self: Session, value: Any, what: str = "const") -> Any:
    """The old rule: a scalar is a leaf before the first op, a const node after."""
    return self.const(value, what)


PLANTS: dict[str, tuple[Callable[[pytest.MonkeyPatch], None], str]] = {
    "inputs_frozen": (lambda m: m.setattr(Session, "input", input_not_tracking), "requires_grad"),
    "aliasing": (lambda m: m.setattr(Session, "_gradients", gradients_uncopied), "shares the seed"),
    "shared_entries": (
        lambda m: m.setattr(Session, "_gradients", gradients_copied_once),
        "share memory",
    ),
    "list_refused": (
        lambda m: m.setattr(core, "gradient_list_length", strict_length),
        "gradients for a tape",
    ),
    "scalar_leaf": (
        lambda m: m.setattr(Session, "frozen_const", scalar_leaf_before_ops),
        "a scalar became a leaf",
    ),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_the_machine_catches_the_planted_regression(
    plant: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    apply, needle = PLANTS[plant]
    apply(monkeypatch)
    row = run_session_machine(10, seed=0, shrink=False)
    assert row.failed == 1 and row.failure is not None, plant
    assert needle in row.failure["message"], row.failure["message"]
