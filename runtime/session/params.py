"""The parameter store: storage cells, parameters and the session's optimizer step.

Invariants:
- A `Param` is a name plus storage cells (host value, device mirror, host-current flag); it
  is not on the tape, and `Session.use` snapshots its current value as a new leaf.
- Parameters alias only when they share the same storage cells (never by value or name):
  `canonical_indices` and `group_leaves` compare storage identities.
- A parameter keeps a host value and a device mirror with TorchLean's invariant: at least
  one copy is current; a device update (`sgd_step_all`) marks the host stale; every public
  read synchronises.
- `sgd_step_all` validates everything (session kind, gradient count, each gradient's shape
  and dtype, exact elements) before it mutates any parameter; the gradients of leaves that
  alias one storage are summed in leaf order and the current storage updated once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import ShapeError, StaleHandleError, TorchLeanError

from ..backends.base import NUMPY
from .handles import TensorRef
from .state import SessionState

__all__ = [
    "Cell",
    "Param",
    "ParameterStore",
    "canonical_indices",
    "check_exact_elems",
    "frozen_copy",
    "group_leaves",
    "is_scalar",
]


class Cell:
    """A mutable storage cell. Parameter identity is the identity of its cells."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"Cell({self.value!r})"


@dataclass(eq=False)
class Param:
    """A mutable parameter: a name plus storage cells (host value, device mirror,
    host-current flag). It is not on the tape; `Session.use` snapshots its current value."""

    name: str
    value_cell: Cell | None
    device_cell: Cell | None
    host_current: Cell | None
    requires_grad: bool
    dtype: str
    owner: int

    @property
    def storage(self) -> tuple[int, int, int] | None:
        if self.value_cell is None or self.device_cell is None or self.host_current is None:
            return None
        return (id(self.value_cell), id(self.device_cell), id(self.host_current))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.get().shape)

    def get(self) -> Any:
        """The current host value (downloads the device mirror if the host is stale)."""
        if self.value_cell is None:
            raise TorchLeanError(f"parameter {self.name!r} has no storage")
        assert self.host_current is not None and self.device_cell is not None
        if not self.host_current.value:
            backend, dev = self.device_cell.value
            self.value_cell.value = frozen_copy(backend.to_host(dev))
            self.host_current.value = True
        return self.value_cell.value

    def device_value(self, backend: Any) -> Any:
        """The current value on `backend`'s device (uploads the host value when the mirror
        is missing, stale or on another backend)."""
        if backend.is_numpy:
            return self.get()
        assert self.device_cell is not None and self.host_current is not None
        mirror = self.device_cell.value
        if mirror is None or mirror[0] is not backend:
            host = self.get()
            mirror = (backend, backend.from_host(host))
            self.device_cell.value = mirror
        return mirror[1]

    def set_device(self, backend: Any, value: Any) -> None:
        """A device update: the mirror becomes the current copy and the host is stale."""
        assert self.device_cell is not None and self.host_current is not None
        self.device_cell.value = (backend, value)
        self.host_current.value = False

    def set(self, value: Any) -> None:
        """Replace the value (same shape and dtype; no silent casts)."""
        old = self.get()
        new = np.asarray(value)
        if new.dtype != old.dtype:
            raise ShapeError(f"Param.set({self.name!r}): dtype {new.dtype} is not {old.dtype}")
        if tuple(new.shape) != tuple(old.shape):
            raise ShapeError(
                f"Param.set({self.name!r}): shape {tuple(new.shape)} is not {tuple(old.shape)}"
            )
        if self.dtype == "exact":
            check_exact_elems(new, f"Param.set({self.name!r})")
        assert self.value_cell is not None and self.host_current is not None
        assert self.device_cell is not None
        self.value_cell.value = frozen_copy(new)
        self.host_current.value = True
        self.device_cell.value = None  # the mirror is stale: uploaded again on next use

    def renamed(self, name: str) -> Param:
        """The same storage under another name (an alias)."""
        return Param(
            name,
            self.value_cell,
            self.device_cell,
            self.host_current,
            self.requires_grad,
            self.dtype,
            self.owner,
        )


def check_exact_elems(a: Any, what: str) -> None:
    """An exact-dtype array must hold exact rationals: a float (or None) in an object array
    would pass the dtype check and silently turn exact arithmetic inexact."""
    for v in np.asarray(a).reshape(-1):
        if not isinstance(v, (Fraction, int)) or isinstance(v, bool):
            raise ShapeError(
                f"{what}: exact dtype holds exact rationals only, got {type(v).__name__} {v!r}"
            )


def is_scalar(x: Any) -> bool:
    """A Python number that an op turns into a frozen const operand."""
    return isinstance(x, (int, float, Fraction)) and not isinstance(x, bool)


def frozen_copy(a: Any) -> Any:
    out = np.array(a, copy=True)
    out.flags.writeable = False
    return out


def canonical_indices(params: Sequence[Param | None]) -> list[int | None]:
    """For each registration, the index of the first registration with the same storage
    (None stays None). Names and values play no part."""
    first: dict[tuple[int, int, int], int] = {}
    out: list[int | None] = []
    for i, p in enumerate(params):
        if p is None:
            out.append(None)
            continue
        key = p.storage
        if key is None:
            out.append(i)
            continue
        out.append(first.setdefault(key, i))
    return out


def group_leaves(leaves: Mapping[int, Param]) -> list[tuple[int, list[int]]]:
    """Group leaf ids by parameter storage, in increasing leaf id order: each group is
    (first leaf id, all leaf ids). A parameter without storage is a group of its own."""
    groups: dict[Any, tuple[int, list[int]]] = {}
    for leaf in sorted(leaves):
        storage = leaves[leaf].storage
        key: Any = ("solo", leaf) if storage is None else storage
        if key not in groups:
            groups[key] = (leaf, [])
        groups[key][1].append(leaf)
    return sorted(groups.values())


class ParameterStore(SessionState):
    """The session part that owns the parameters: creation, use on the tape, the step."""

    def _host_array(self, value: Any) -> Any:
        """A host (NumPy) array of the dtype: what parameters store."""
        if isinstance(value, self.backend.array_type) and not self.backend.is_numpy:
            value = self.backend.to_host(value)
        return frozen_copy(NUMPY.asarray(value, self.dtype))

    def param(self, init: Any, name: str | None = None, requires_grad: bool | None = None) -> Param:
        """A mutable parameter (not on the tape)."""
        value = self._host_array(init)
        rg = self.requires_grad_by_default if requires_grad is None else bool(requires_grad)
        p = Param(
            name or f"p{len(self._params)}",
            Cell(value),
            Cell(None),
            Cell(True),
            rg,
            self.dtype,
            self.owner,
        )
        self._params.append(p)
        return p

    def use(self, p: Param) -> TensorRef:
        """A new leaf holding the parameter's current value (a snapshot)."""
        if not isinstance(p, Param):
            raise TorchLeanError(f"use: expected a Param, got {type(p).__name__}")
        if p.owner != self.owner:
            raise StaleHandleError(
                f"use: foreign parameter {p.name!r} from session "
                f"#{p.owner}; this is session #{self.owner}"
            )
        r = self._leaf(p.device_value(self.backend), p.requires_grad, f"use({p.name})")
        self._leaf_param[r.id] = p
        return r

    def sgd_step_all(self, lr: float | Fraction, grads: Sequence[Any]) -> None:
        """p ← p − g·lr for every parameter used on this tape; the gradients of leaves that
        alias one storage are summed (leaf order) and the *current* storage updated once.
        Everything is validated before anything is mutated."""
        if not self.grad_enabled:
            raise TorchLeanError(
                "sgd_step_all: this is an inference session "
                "(grad_enabled=False); it has no trainable leaves"
            )
        if len(grads) != len(self.tape):
            raise ShapeError(
                f"sgd_step_all: {len(grads)} gradients for a tape of {len(self.tape)} nodes"
            )
        garr = {leaf: self._grad_array(grads[leaf]) for leaf in self._leaf_param}
        for leaf in self._leaf_param:
            self.tape.check_grad(leaf, garr[leaf], "sgd_step_all")
            if self.ctx.exact:
                check_exact_elems(grads[leaf], f"sgd_step_all: gradient for node {leaf}")
        lr_c = self.ctx.const(Fraction(lr))
        updates = []
        for first, leaves in group_leaves(self._leaf_param):
            p = self._leaf_param[first]
            if not p.requires_grad or not self.grad_enabled:
                continue
            g = garr[leaves[0]]
            for leaf in leaves[1:]:
                g = self.ctx.arr(g + garr[leaf])
            cur = p.device_value(self.backend)
            if tuple(cur.shape) != tuple(g.shape):
                raise ShapeError(
                    f"sgd_step_all: parameter {p.name!r} now has shape "
                    f"{tuple(cur.shape)}, gradient has {tuple(g.shape)}"
                )
            with np.errstate(all="ignore"):
                updates.append((p, self.ctx.arr(cur - g * lr_c)))
        for p, v in updates:
            if self.backend.is_numpy:
                p.set(v)
            else:
                p.set_device(self.backend, v)
