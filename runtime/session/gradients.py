"""Gradient lists, the gradient hook and the learning-rate check of the SGD step.

Invariants:
- `GradientList` is what every backward of a session returns: a `list` (it indexes,
  iterates, compares and slices like the dense list indexed by tape id that it is) that
  also carries the session that made it (`owner`), the tape generation (`generation`) and
  the tape length at the time (`tape_len`). `check_gradient_list` refuses a list from
  another session or another generation (`StaleHandleError`); a plain list or tuple built by
  the caller carries no provenance and is validated element by element as before.
- A `GradientList` stays valid for its generation however many ops follow its backward:
  it holds the ids of the tape it was made on, which keep their meaning
  (`gradient_list_length`); a node recorded later has no entry (it cannot have reached the
  output the backward started from). A plain list must match the tape's length now.
- Every entry of a list a session returns is an array of its own (a copy, made by the
  session): no caller edit of an entry reaches the session, another entry or the seed.
- The gradient hook follows TorchLean's `backwardDenseAllWithHook` (seed 001,
  `Internal.applyGradHook`): the backward runs to completion first, then `apply_hook` maps
  the hook pointwise over the dense array, in id order, checking that each result keeps
  the gradient's shape and dtype (`HookError` naming the id, expected and got). The hook
  never runs inside the sweep, so a doubling hook doubles each gradient once. In the exact
  dtype every element of a hook's result must be an exact rational.
- `grad(grads, x)` is TorchLean's session-free `grad`: it reads `x`'s entry after checking
  the list's provenance against `x` (owner, generation), the id and the entry's shape.
- `learning_rate` accepts a real, finite number >= 0 (int, Fraction, float, NumPy real)
  whose value rounded into the session's format is finite; everything else raises
  `DomainError` before anything is mutated.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import DomainError, ShapeError, StaleHandleError, TorchLeanError

from ..backends.base import DTYPE_DOMAIN
from ..engine.tape import apply_hook
from .handles import TensorRef

__all__ = [
    "GradientList",
    "apply_hook",
    "check_gradient_list",
    "grad",
    "gradient_list_length",
    "learning_rate",
]


class GradientList(list[Any]):
    """A dense gradient list (one entry per tape id) with its provenance."""

    __slots__ = ("generation", "owner", "tape_len")

    def __init__(self, grads: Iterable[Any], owner: int, generation: int) -> None:
        super().__init__(grads)
        self.owner = owner
        self.generation = generation
        self.tape_len = len(self)


def check_gradient_list(grads: Any, owner: int, generation: int, what: str) -> None:
    """A `GradientList` must come from session `owner` at `generation` (else
    `StaleHandleError`); other sequences carry no provenance and pass."""
    if not isinstance(grads, GradientList):
        return
    if grads.owner != owner:
        raise StaleHandleError(
            f"{what}: foreign gradient list from session #{grads.owner}; this is session #{owner}"
        )
    if grads.generation != generation:
        raise StaleHandleError(
            f"{what}: stale gradient list from generation {grads.generation}; current "
            f"generation is {generation} (reset_tape invalidates earlier gradients)"
        )


def gradient_list_length(grads: Any, tape_len: int, what: str) -> int:
    """How many ids `grads` holds, checked: a `GradientList` holds the ids of the tape it
    was made on (its `tape_len`, a prefix of the tape now: ops recorded after its backward
    do not invalidate it); a plain sequence carries no provenance and must hold one entry
    per node of the tape now. Else `ShapeError`."""
    n = len(grads)
    if isinstance(grads, GradientList):
        if n != grads.tape_len or n > tape_len:
            raise ShapeError(
                f"{what}: a gradient list made for {grads.tape_len} nodes now holds {n} "
                f"entries (the tape has {tape_len})"
            )
    elif n != tape_len:
        raise ShapeError(f"{what}: {n} gradients for a tape of {tape_len}")
    return n


def grad(grads: Any, x: TensorRef) -> Any:
    """TorchLean's session-free `grad`: the entry of `x` in the dense gradient list
    `grads`. A `GradientList` must come from `x`'s session and generation (else
    `StaleHandleError`); `x`'s id must index the list and the entry must have `x`'s shape
    (else `ShapeError`). `Session.grad` runs the same checks against the session's tape."""
    if not isinstance(x, TensorRef):
        raise TorchLeanError(f"grad: expected a TensorRef, got {type(x).__name__}")
    check_gradient_list(grads, x.owner, x.generation, "grad")
    if not 0 <= x.id < len(grads):
        raise ShapeError(f"grad: TensorRef %{x.id} is outside a list of {len(grads)} gradients")
    g = grads[x.id]
    shape = getattr(g, "shape", None)
    if shape is None or tuple(shape) != x.shape:
        got = "no shape" if shape is None else f"shape {tuple(shape)}"
        raise ShapeError(f"grad: the gradient of %{x.id} has {got}; expected shape {x.shape}")
    return g


def learning_rate(lr: Any, dtype: str, what: str = "sgd_step_all") -> Fraction:
    """`lr` as an exact rational: a real, finite number >= 0 whose value rounded into
    `dtype` is finite; else `DomainError` naming `what`."""
    if isinstance(lr, (bool, np.bool_)) or not isinstance(
        lr, (int, float, Fraction, np.integer, np.floating)
    ):
        raise DomainError(
            f"{what}: lr must be a real number (int, float or Fraction), got "
            f"{type(lr).__name__} {lr!r:.40}"
        )
    if isinstance(lr, (float, np.floating)) and not math.isfinite(float(lr)):
        raise DomainError(f"{what}: lr must be finite, got {lr!r}")
    q = Fraction(lr.item() if isinstance(lr, np.generic) else lr)
    if q < 0:
        raise DomainError(f"{what}: lr must be >= 0, got {lr!r:.40}")
    D = DTYPE_DOMAIN[dtype]
    if not D.exact:
        if not _finite(D, D.from_rational(q)):
            raise DomainError(
                f"{what}: lr {str(q)[:40]} is out of range for {dtype} (it rounds to infinity)"
            )
    return q


def _finite(D: Any, x: Any) -> bool:
    try:
        D.to_rational(x)
    except DomainError:
        return False
    return True
