"""The parameter store: storage cells, parameters and the session's optimizer step.

Invariants:
- A `ParameterStore` owns a session's parameters and the map from the `use` leaves of the
  current tape to their parameters; `reset_tape` clears the map (`clear_leaves`), never
  the parameters.
- A `Param` is a name plus storage cells (host value, device mirror, host-current flag); it
  is not on the tape, and `Session.use` snapshots its current value as a new leaf.
- Parameters alias only when they share the same storage cells (never by value or name):
  `canonical_indices` and `group_leaves` compare storage identities.
- A parameter keeps a host value and a device mirror with TorchLean's invariant: at least
  one copy is current; a device update (`sgd_step_all`) marks the host stale; every public
  read synchronises.
- `sgd_step_all` validates everything (session kind, gradient count, each gradient's shape
  and dtype, exact elements) before it mutates any parameter; a `GradientList` of the
  current generation covers the leaves recorded before its backward (a leaf recorded later
  has a zero gradient and is not updated through it); the gradients of leaves that
  alias one storage are summed in leaf order and the current storage updated once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

from spec.errors import ShapeError, StaleHandleError, TorchLeanError

from ..backends.base import NUMPY, Backend
from ..engine.context import KernelContext
from ..engine.tape import Tape
from .gradients import gradient_list_length

__all__ = [
    "Cell",
    "Param",
    "ParameterStore",
    "canonical_indices",
    "check_exact_elems",
    "frozen_copy",
    "grad_array",
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


def grad_array(backend: Backend, dtype: str, g: Any, what: str = "gradient") -> Any:
    """A gradient or seed as a `backend` array (host arrays are moved to the device; no
    casts: a wrong dtype is reported by the tape's check)."""
    if isinstance(g, backend.array_type):
        return g
    if isinstance(g, np.generic):  # a NumPy scalar keeps its dtype (no casts)
        g = np.asarray(g)
    if isinstance(g, np.ndarray):
        return g if backend.is_numpy else backend.from_host(g)
    return backend.asarray(g, dtype, what)


class ParameterStore:
    """A session's parameters: creation, the leaves that snapshot them, the SGD step."""

    def __init__(self, owner: int, dtype: str, ctx: KernelContext) -> None:
        self._owner = owner
        self._dtype = dtype
        self._ctx = ctx
        self._backend = ctx.backend
        self._params: list[Param] = []
        self._leaf_param: dict[int, Param] = {}

    @property
    def params(self) -> tuple[Param, ...]:
        """Every parameter created, in creation order."""
        return tuple(self._params)

    @property
    def leaf_params(self) -> Mapping[int, Param]:
        """The parameter behind each `use` leaf of the current tape (read-only)."""
        return MappingProxyType(self._leaf_param)

    def _host_array(self, value: Any) -> Any:
        """A host (NumPy) array of the dtype: what parameters store."""
        if isinstance(value, self._backend.array_type) and not self._backend.is_numpy:
            value = self._backend.to_host(value)
        return frozen_copy(NUMPY.asarray(value, self._dtype, "param"))

    def param(
        self, init: Any, name: str | None, requires_grad: bool | None, default_requires_grad: bool
    ) -> Param:
        """A new parameter holding `init` (`requires_grad` None: the default)."""
        value = self._host_array(init)
        rg = default_requires_grad if requires_grad is None else bool(requires_grad)
        p = Param(
            name or f"p{len(self._params)}",
            Cell(value),
            Cell(None),
            Cell(True),
            rg,
            self._dtype,
            self._owner,
        )
        self._params.append(p)
        return p

    def leaf_value(self, p: Param) -> Any:
        """The current value of this store's parameter `p` on the session's device (what
        a `use` leaf holds); a foreign parameter raises `StaleHandleError`."""
        if not isinstance(p, Param):
            raise TorchLeanError(f"use: expected a Param, got {type(p).__name__}")
        if p.owner != self._owner:
            raise StaleHandleError(
                f"use: foreign parameter {p.name!r} from session "
                f"#{p.owner}; this is session #{self._owner}"
            )
        return p.device_value(self._backend)

    def bind_leaf(self, leaf: int, p: Param) -> None:
        """Record that tape node `leaf` snapshots `p` (the step updates `p` through it)."""
        self._leaf_param[leaf] = p

    def clear_leaves(self) -> None:
        """Forget every leaf (the tape was dropped); the parameters stay."""
        self._leaf_param = {}

    def sgd_step(self, lr: float | Fraction, grads: Sequence[Any], tape: Tape) -> None:
        """p <- p - g*lr for every parameter used on `tape`; the gradients of leaves that
        alias one storage are summed (leaf order) and the *current* storage updated once.
        Everything is validated before anything is mutated."""
        n = gradient_list_length(grads, len(tape), "sgd_step_all")
        ctx, backend = self._ctx, self._backend
        # a leaf recorded after the list's backward has no entry: its gradient is zero
        leaf_param = {leaf: p for leaf, p in self._leaf_param.items() if leaf < n}
        garr = {leaf: grad_array(backend, self._dtype, grads[leaf]) for leaf in leaf_param}
        for leaf in leaf_param:
            tape.check_grad(leaf, garr[leaf], "sgd_step_all")
            if ctx.exact:
                check_exact_elems(grads[leaf], f"sgd_step_all: gradient for node {leaf}")
        lr_c = ctx.const(Fraction(lr))
        updates = []
        for first, leaves in group_leaves(leaf_param):
            p = leaf_param[first]
            if not p.requires_grad:
                continue
            g = garr[leaves[0]]
            for leaf in leaves[1:]:
                g = ctx.arr(g + garr[leaf])
            cur = p.device_value(backend)
            if tuple(cur.shape) != tuple(g.shape):
                raise ShapeError(
                    f"sgd_step_all: parameter {p.name!r} now has shape "
                    f"{tuple(cur.shape)}, gradient has {tuple(g.shape)}"
                )
            with np.errstate(all="ignore"):
                updates.append((p, ctx.arr(cur - g * lr_c)))
        for p, v in updates:
            if backend.is_numpy:
                p.set(v)
            else:
                p.set_device(backend, v)
