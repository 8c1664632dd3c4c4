"""Session handles: `TensorRef` (one tape value) and `NatRef` (one slot of the integer
environment), and the checks a session runs on them (`check_tensor_ref`, `check_nat_ref`).

Invariants:
- Handles carry (owner, generation). Every session call validates its handles *before*
  doing anything: a foreign or stale handle raises `StaleHandleError` (a NatRef where a
  TensorRef is expected is reported as stale or foreign first, then as a NatRef).
- `reset_tape()` bumps the generation, which invalidates every TensorRef and NatRef.
- A TensorRef holds its session weakly; its operators (+ - * / @ and unary -) call the
  session's op methods.
- `tensor_ref` builds the same TensorRef as the dataclass constructor (same fields,
  equality, hash, repr, immutability, instance dictionary) without its five
  `object.__setattr__` calls (each far slower than a plain attribute store): it fills a
  `TensorRefFields` (a plain class with TensorRef's layout) with ordinary attribute stores,
  then makes it a TensorRef by `__class__` assignment. The session's per-op path inlines it;
  the dataclass constructor is the reference (tests/test_session_fastpath.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spec.errors import StaleHandleError, TorchLeanError

__all__ = [
    "NatRef",
    "TensorRef",
    "TensorRefFields",
    "check_nat_ref",
    "check_tensor_ref",
    "tensor_ref",
]


@dataclass(frozen=True)
class TensorRef:
    """A handle to one tape value: id, static shape, owner session and generation;
    `session_ref` is a weak reference to the owning session (for the operators), outside
    equality, hash and repr."""

    id: int
    shape: tuple[int, ...]
    owner: int
    generation: int
    session_ref: Any = field(default=None, repr=False, compare=False, hash=False)

    def _s(self) -> Any:  # the owning Session (typed Any: core imports this module)
        s = self.session_ref() if self.session_ref is not None else None
        if s is None:
            raise StaleHandleError(f"TensorRef %{self.id}: its session no longer exists")
        return s

    def __add__(self, other: Any) -> TensorRef:
        return self._s().add(self, other)

    def __radd__(self, other: Any) -> TensorRef:
        return self._s().add(other, self)

    def __sub__(self, other: Any) -> TensorRef:
        return self._s().sub(self, other)

    def __rsub__(self, other: Any) -> TensorRef:
        return self._s().sub(other, self)

    def __mul__(self, other: Any) -> TensorRef:
        return self._s().mul(self, other)

    def __rmul__(self, other: Any) -> TensorRef:
        return self._s().mul(other, self)

    def __truediv__(self, other: Any) -> TensorRef:
        return self._s().div(self, other)

    def __rtruediv__(self, other: Any) -> TensorRef:
        return self._s().div(other, self)

    def __matmul__(self, other: Any) -> TensorRef:
        return self._s().matmul(self, other)

    def __neg__(self) -> TensorRef:
        return self._s().neg(self)


class TensorRefFields:
    """A plain class with `TensorRef`'s layout (instance dictionary and weak references, no
    slots), so `__class__ = TensorRef` is allowed: `tensor_ref` builds a TensorRef in one."""


def tensor_ref(
    i: int, shape: tuple[int, ...], owner: int, generation: int, session: Any
) -> TensorRef:
    """`TensorRef(i, shape, owner, generation, session)`, built with plain attribute stores
    (in field order, so the instance dictionary is the constructor's) and one `__class__`
    assignment instead of the frozen dataclass's `object.__setattr__` per field."""
    r: Any = TensorRefFields()
    r.id = i
    r.shape = shape
    r.owner = owner
    r.generation = generation
    r.session_ref = session
    r.__class__ = TensorRef
    return r


@dataclass(frozen=True)
class NatRef:
    """A handle to one slot of the session's non-differentiable integer environment."""

    slot: int
    owner: int
    generation: int


def check_tensor_ref(x: Any, owner: int, generation: int, what: str = "argument") -> int:
    """The tape id of `x`, a TensorRef of session `owner` at `generation`; else raises
    (a NatRef is reported as stale or foreign first, then as a NatRef)."""
    if isinstance(x, NatRef):
        check_nat_ref(x, owner, generation, what)  # a stale or foreign NatRef first
        raise TorchLeanError(f"{what}: a NatRef was given where a TensorRef is expected")
    if not isinstance(x, TensorRef):
        raise TorchLeanError(f"{what}: expected a TensorRef, got {type(x).__name__}")
    if x.owner != owner:
        raise StaleHandleError(
            f"{what}: foreign TensorRef %{x.id} from session #{x.owner}; this is session #{owner}"
        )
    if x.generation != generation:
        raise StaleHandleError(
            f"{what}: stale TensorRef %{x.id} from generation {x.generation}; current "
            f"generation is {generation} (reset_tape invalidates every TensorRef and "
            "NatRef)"
        )
    return x.id


def check_nat_ref(r: Any, owner: int, generation: int, what: str = "argument") -> int:
    """The environment slot of `r`, a NatRef of session `owner` at `generation`; else raises."""
    if not isinstance(r, NatRef):
        raise TorchLeanError(f"{what}: expected a NatRef, got {type(r).__name__}")
    if r.owner != owner:
        raise StaleHandleError(
            f"{what}: foreign NatRef slot {r.slot} from session "
            f"#{r.owner}; this is session #{owner}"
        )
    if r.generation != generation:
        raise StaleHandleError(
            f"{what}: stale NatRef slot {r.slot} from generation {r.generation}; current "
            f"generation is {generation} (reset_tape invalidates every TensorRef and "
            "NatRef)"
        )
    return r.slot
