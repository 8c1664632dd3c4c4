"""The Session: TorchLean's training-loop environment, in eager and typed-graph modes.

Invariants:
- A session owns its tape, its parameters, its integer environment (NatRefs) and its RNG
  counter; nothing is shared between sessions through module state. The only process-wide
  state is the thread-safe counter that hands out owner ids.
- Handles (`TensorRef`, `NatRef`) carry (owner, generation). Every call validates its
  handles *before* doing anything: a foreign or stale handle raises `StaleHandleError`, and
  a failed call leaves the session unchanged (tape, graph, parameters, RNG counter).
- `reset_tape()` drops the recording and bumps the generation; parameters, the owner and the
  RNG counter survive.
- Both modes run every op on the same runtime tape (so they return the same gradients);
  typed-graph mode also records a spec graph (`spec.graph`), requires every leaf and NatRef
  before the first op node, and supports forward mode.
- Gradients are returned as a dense list indexed by tape id, never stored on tensors. After
  a backward, frozen nodes get zero gradients unless the frozen node is the output itself.
- Parameters alias only when they share the same storage cells (never by value or name).
- Devices: `device="cuda"` runs the eager session on the CuPy backend (`runtime.cuda`);
  there is no silent CPU fallback. Tape values and returned gradients are device arrays;
  `get_value` and `Param.get` return host (NumPy) arrays. A parameter keeps a host value
  and a device mirror with TorchLean's invariant: at least one copy is current; a device
  update (`sgd_step_all`) marks the host stale; every public read synchronises.
- Random tensors come from `runtime.rng` (vectorised SplitMix64, the same bits as
  `spec.rng` on every backend).
"""

from __future__ import annotations

import itertools
import os
import threading
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from spec import rng as srng
from spec.errors import DomainError, GraphError, ShapeError, StaleHandleError, TorchLeanError
from spec.graph import Graph, GraphBuilder
from spec.ops import OPS
from spec.shape import as_shape, size
from spec.tensor import Tensor

from .backend import DTYPE_DOMAIN, DTYPES, NUMPY, OBJECT_DTYPES, from_spec, get_backend, to_spec
from .context import KernelContext
from .rng import keep_mask, uniform01
from .tape import Tape, _validated

__all__ = [
    "Cell",
    "NatRef",
    "Param",
    "RecordedGraph",
    "Rng",
    "Session",
    "TensorRef",
    "canonical_indices",
    "group_leaves",
]

_owner_lock = threading.Lock()
_owner_ids = itertools.count(1)


def _next_owner() -> int:
    with _owner_lock:
        return next(_owner_ids)


# --------------------------------------------------------------------------- parameters


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
            self.value_cell.value = _frozen_copy(backend.to_host(dev))
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
            _check_exact_elems(new, f"Param.set({self.name!r})")
        assert self.value_cell is not None and self.host_current is not None
        assert self.device_cell is not None
        self.value_cell.value = _frozen_copy(new)
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


def _check_exact_elems(a: Any, what: str) -> None:
    """An exact-dtype array must hold exact rationals: a float (or None) in an object array
    would pass the dtype check and silently turn exact arithmetic inexact."""
    for v in np.asarray(a).reshape(-1):
        if not isinstance(v, (Fraction, int)) or isinstance(v, bool):
            raise ShapeError(
                f"{what}: exact dtype holds exact rationals only, got {type(v).__name__} {v!r}"
            )


def _is_scalar(x: Any) -> bool:
    """A Python number that an op turns into a frozen const operand."""
    return isinstance(x, (int, float, Fraction)) and not isinstance(x, bool)


def _frozen_copy(a: Any) -> Any:
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


# --------------------------------------------------------------------------- handles


@dataclass(frozen=True)
class TensorRef:
    """A handle to one tape value: id, static shape, owner session and generation."""

    id: int
    shape: tuple[int, ...]
    owner: int
    generation: int
    _session: Any = field(default=None, repr=False, compare=False, hash=False)

    def _s(self) -> Session:
        s = self._session() if self._session is not None else None
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


@dataclass(frozen=True)
class NatRef:
    """A handle to one slot of the session's non-differentiable integer environment."""

    slot: int
    owner: int
    generation: int


@dataclass
class Rng:
    """A SplitMix64 stream: each draw uses key_of(seed, counter) and advances the counter."""

    seed: int
    counter: int = 0

    def next_key(self) -> int:
        k = srng.key_of(self.seed, self.counter)
        self.counter += 1
        return k


@dataclass
class RecordedGraph:
    """The typed graph a session recorded, with its leaf values and environment."""

    graph: Graph
    inputs: list[Tensor]
    env: list[int]
    dtype: str


@dataclass
class LinkCheck:
    ok: bool
    text: str
    kernels: str

    def __bool__(self) -> bool:
        return self.ok


# --------------------------------------------------------------------------- the session


class Session:
    """TorchLean's session. See the module docstring for its invariants."""

    def __init__(
        self,
        mode: str = "eager",
        device: str = "cpu",
        dtype: str = "float32",
        kernels: str = "fast",
        grad_enabled: bool = True,
        requires_grad_by_default: bool = True,
        seed: int = 0,
    ) -> None:
        if mode not in ("eager", "typed_graph"):
            raise TorchLeanError(f"Session: mode must be 'eager' or 'typed_graph', got {mode!r}")
        if device not in ("cpu", "cuda"):
            raise TorchLeanError(f"Session: device must be 'cpu' or 'cuda', got {device!r}")
        if device == "cuda" and mode == "typed_graph":
            raise TorchLeanError("Session: typed_graph mode is CPU-only (device='cpu')")
        if dtype not in DTYPES or dtype == "symbolic":
            raise TorchLeanError(f"Session: unknown dtype {dtype!r}")
        if device == "cuda" and dtype in OBJECT_DTYPES:
            raise TorchLeanError(
                f"Session: device 'cuda' needs a native float dtype, got {dtype!r}"
            )
        self.mode = mode
        self.device = device
        self.dtype = dtype
        self.kernels = kernels
        self.backend = get_backend("cupy" if device == "cuda" else "numpy")
        self.ctx = KernelContext(dtype, kernels, self.backend)
        self._host_ctx: KernelContext | None = None
        self.grad_enabled = grad_enabled
        self.requires_grad_by_default = requires_grad_by_default
        self.owner = _next_owner()
        self.generation = 0
        self.rng = Rng(int(seed))
        self._self_ref = weakref.ref(self)
        self._params: list[Param] = []
        self._reset_recording()

    def _reset_recording(self) -> None:
        self.tape = Tape(self.ctx)
        self._leaf_param: dict[int, Param] = {}
        self._env: list[int] = []
        self._builder = GraphBuilder() if self.mode == "typed_graph" else None
        self._graph_has_nodes = False

    def __repr__(self) -> str:
        return (
            f"Session(mode={self.mode!r}, dtype={self.dtype!r}, kernels={self.kernels!r}, "
            f"owner={self.owner}, generation={self.generation}, tape={len(self.tape)})"
        )

    # ------------------------------------------------------------------ handles
    def _ref(self, i: int) -> TensorRef:
        return TensorRef(
            i, tuple(self.tape.nodes[i].value.shape), self.owner, self.generation, self._self_ref
        )

    def _check(self, x: Any, what: str = "argument") -> int:
        if isinstance(x, NatRef):
            self._check_nat(x, what)  # a stale or foreign NatRef is reported as such first
            raise TorchLeanError(f"{what}: a NatRef was given where a TensorRef is expected")
        if not isinstance(x, TensorRef):
            raise TorchLeanError(f"{what}: expected a TensorRef, got {type(x).__name__}")
        if x.owner != self.owner:
            raise StaleHandleError(
                f"{what}: foreign TensorRef %{x.id} from session "
                f"#{x.owner}; this is session #{self.owner}"
            )
        if x.generation != self.generation:
            raise StaleHandleError(
                f"{what}: stale TensorRef %{x.id} from generation {x.generation}; current "
                f"generation is {self.generation} (reset_tape invalidates every TensorRef and "
                "NatRef)"
            )
        return x.id

    def _check_nat(self, r: Any, what: str = "argument") -> int:
        if not isinstance(r, NatRef):
            raise TorchLeanError(f"{what}: expected a NatRef, got {type(r).__name__}")
        if r.owner != self.owner:
            raise StaleHandleError(
                f"{what}: foreign NatRef slot {r.slot} from session "
                f"#{r.owner}; this is session #{self.owner}"
            )
        if r.generation != self.generation:
            raise StaleHandleError(
                f"{what}: stale NatRef slot {r.slot} from generation {r.generation}; current "
                f"generation is {self.generation} (reset_tape invalidates every TensorRef and "
                "NatRef)"
            )
        return r.slot

    def _array(self, value: Any) -> Any:
        a = self.backend.asarray(value, self.dtype)
        if not self.backend.is_numpy:
            # a host value was uploaded into a fresh array already; copy only the caller's
            # own device array (device arrays cannot be made read-only)
            return self.ctx.xp.asarray(a, copy=True) if a is value else a
        return _frozen_copy(a)

    def _host_array(self, value: Any) -> Any:
        """A host (NumPy) array of the dtype: what parameters store."""
        if isinstance(value, self.backend.array_type) and not self.backend.is_numpy:
            value = self.backend.to_host(value)
        return _frozen_copy(NUMPY.asarray(value, self.dtype))

    def to_host(self, a: Any) -> Any:
        """A NumPy array of a value or gradient this session returned."""
        return self.backend.to_host(a)

    @property
    def host_ctx(self) -> KernelContext:
        """A kernel context with this session's dtype and profile on the host (NumPy): for
        arithmetic on values read back with `get_value` (the session's own on NumPy)."""
        if self.backend.is_numpy:
            return self.ctx
        if self._host_ctx is None:
            self._host_ctx = KernelContext(self.dtype, self.kernels, NUMPY)
        return self._host_ctx

    def _no_leaf_after_ops(self, what: str) -> None:
        if self.mode == "typed_graph" and self._graph_has_nodes:
            raise GraphError(
                f"{what}: cannot add a new leaf after graph nodes have been "
                "created (reset_tape first)"
            )

    # ------------------------------------------------------------------ leaves
    def _leaf(self, value: Any, requires_grad: bool, name: str) -> TensorRef:
        self._no_leaf_after_ops(name)
        i = self.tape.leaf(value, requires_grad=requires_grad and self.grad_enabled, name=name)
        if self._builder is not None:
            self._builder.input(tuple(value.shape))
        return self._ref(i)

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

    def input(self, value: Any, name: str | None = None, requires_grad: bool = False) -> TensorRef:
        return self._leaf(self._array(value), requires_grad, name or "input")

    def const(self, value: Any) -> TensorRef:
        """A frozen constant: a leaf before any op; in typed-graph mode after ops, a `const`
        graph node holding the exact rational of every element."""
        arr = self._array(value)
        if self.mode == "typed_graph" and self._graph_has_nodes:
            return self._const_node(arr)
        return self._leaf(arr, False, "const")

    def _const_node(self, arr: Any) -> TensorRef:
        t = to_spec(arr, self.dtype)
        D = DTYPE_DOMAIN[self.dtype]
        try:
            values = [
                v if isinstance(v, Fraction) else D.to_rational(v)  # type: ignore[attr-defined]
                for v in t.data
            ]
        except DomainError as e:
            raise DomainError(f"const: a typed graph const must be finite ({e})") from None
        attrs = {"shape": tuple(arr.shape), "values": values}
        return self._record("const", [], attrs)

    def input_nat(self, n: int) -> NatRef:
        self._no_leaf_after_ops("input_nat")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TorchLeanError(f"input_nat: expected a non-negative int, got {n!r}")
        self._env.append(n)
        return NatRef(len(self._env) - 1, self.owner, self.generation)

    def get_nat(self, r: NatRef) -> int:
        return self._env[self._check_nat(r, "get_nat")]

    def set_nat(self, r: NatRef, n: int) -> None:
        """Replace a NatRef's value. Eager: later ops read the new value. Typed graph: only
        before the first op node, since the recorded graph reads the environment when it is
        evaluated and earlier nodes were computed with the old value."""
        slot = self._check_nat(r, "set_nat")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise TorchLeanError(f"set_nat: expected a non-negative int, got {n!r}")
        if self.mode == "typed_graph" and self._graph_has_nodes:
            raise GraphError(
                "set_nat: cannot change a NatRef after graph nodes have been "
                "created (reset_tape first)"
            )
        self._env[slot] = n

    def get_value(self, x: TensorRef) -> Any:
        v = self.tape.nodes[self._check(x, "get_value")].value
        if not self.backend.is_numpy:
            return self.backend.to_host(v)
        return np.array(v, copy=True)

    # ------------------------------------------------------------------ ops
    def _coerce(self, x: Any, what: str) -> int:
        if _is_scalar(x):
            return self.const(x).id
        return self._check(x, what)

    def _record(self, op: str, args: Sequence[int], attrs: dict[str, Any]) -> TensorRef:
        """Validate, run on the tape, and (typed graph) record: all or nothing."""
        env = tuple(self._env)
        if self._builder is None and op != "detach":
            # eager: Tape.op validates (memoised) before it appends anything
            return self._ref(self.tape.op(op, args, env, **attrs))
        shapes = tuple([tuple(self.tape.nodes[a].value.shape) for a in args])
        norm, _ = _validated(op, attrs, shapes)
        if op == "detach":
            (a,) = args
            i = self.tape.add_node("detach", self.tape.nodes[a].value, False, (a,), None)
        else:
            i = self.tape.op(op, list(args), env, **norm)
        if self._builder is not None:
            self._builder.node(op, *args, **norm)  # cannot fail: same checks as above
            self._graph_has_nodes = True
        return self._ref(i)

    def op(self, name: str, *args: Any, **attrs: Any) -> TensorRef:
        """Apply op `name` of the table to TensorRefs (NatRef attributes read the env)."""
        if name not in OPS:
            raise GraphError(f"unknown op {name!r}")
        # Every handle is validated before anything is created (Python scalars become
        # consts only afterwards) ...
        ids: list[int] = []
        for k, a in enumerate(args):
            if not _is_scalar(a):
                ids.append(self._check(a, f"{name}: input {k}"))
        plain = len(ids) == len(args)
        for key, v in list(attrs.items()):
            if isinstance(v, NatRef):
                slot = self._check_nat(v, f"{name}: attribute {key}")
                if name == "select" and key == "index":
                    attrs.pop("index")
                    attrs["env_slot"] = slot
                else:
                    attrs[key] = self._env[slot]
        if plain:  # no scalar to turn into a const: _record is all or nothing by itself
            return self._record(name, ids, attrs)
        # ... and a failure after a scalar became a const (a shape error, exact division by
        # zero) drops that const again: a failed call leaves the recording unchanged.
        mark = self._mark()
        try:
            ids = [self._coerce(a, f"{name}: input {k}") for k, a in enumerate(args)]
            return self._record(name, ids, attrs)
        except BaseException:
            self._rollback(mark)
            raise

    def _mark(self) -> tuple[int, int, int, int, bool]:
        b = self._builder
        return (
            len(self.tape.nodes),
            len(b._inputs) if b else 0,
            len(b._nodes) if b else 0,
            len(b._shapes) if b else 0,
            self._graph_has_nodes,
        )

    def _rollback(self, mark: tuple[int, int, int, int, bool]) -> None:
        n, n_in, n_nodes, n_shapes, has_nodes = mark
        del self.tape.nodes[n:]
        if self._builder is not None:
            del self._builder._inputs[n_in:]
            del self._builder._nodes[n_nodes:]
            del self._builder._shapes[n_shapes:]
        self._graph_has_nodes = has_nodes

    def detach(self, x: TensorRef) -> TensorRef:
        """Eager: a frozen node with parent x and no contributions; typed graph: the spec
        `detach` op (identity forward, zero JVP and VJP), frozen on the tape as well."""
        return self.op("detach", x)

    if TYPE_CHECKING:  # the op methods are attached below, one per op of the table

        def __getattr__(self, name: str) -> Callable[..., TensorRef]: ...

    def reset_tape(self) -> None:
        """Drop the recording; bump the generation (parameters and RNG survive)."""
        self.generation += 1
        self._reset_recording()

    # ------------------------------------------------------------------ reverse mode
    def _seed(self, out: int, seed: Any) -> Any:
        s = self._grad_array(seed)
        self.tape._check_grad(out, s, "seed")
        if self.ctx.exact:
            _check_exact_elems(s, "seed")
        return s

    def _grad_array(self, g: Any) -> Any:
        """A gradient or seed as a backend array (host arrays are moved to the device;
        no casts: a wrong dtype is reported by the tape's check)."""
        if isinstance(g, self.backend.array_type):
            return g
        if isinstance(g, np.generic):  # a NumPy scalar keeps its dtype (no casts)
            g = np.asarray(g)
        if isinstance(g, np.ndarray):
            return g if self.backend.is_numpy else self.backend.from_host(g)
        return self.backend.asarray(g, self.dtype)

    def backward_dense_all(
        self, out: TensorRef, seed: Any, hook: Callable[[int, Any], Any] | None = None
    ) -> list[Any]:
        i = self._check(out, "backward_dense_all")
        return self.tape.backward_dense_all(i, self._seed(i, seed), self._wrap_hook(hook))

    def _wrap_hook(self, hook: Callable[[int, Any], Any] | None) -> Any:
        """Exact dtype: NumPy turns arithmetic on a 0-d object array into a bare Fraction, so
        `lambda i, g: g * 2` would "change the dtype" of every scalar gradient; such a
        result is given back its 0-d array form. Anything else is checked by the tape."""
        if hook is None or not self.ctx.exact:
            return hook

        def wrapped(i: int, g: Any) -> Any:
            h = hook(i, g)
            if isinstance(h, Fraction) and getattr(g, "shape", None) == ():
                return self.ctx.arr(h)
            return h

        return wrapped

    def backward_scalar_dense_all(self, loss: TensorRef) -> list[Any]:
        i = self._check(loss, "backward_scalar_dense_all")
        if loss.shape != ():
            raise ShapeError(
                f"backward_scalar_dense_all: loss %{i} has shape {loss.shape}, expected a scalar ()"
            )
        return self.tape.backward_dense_all(i, self.ctx.const(1))

    def backward_dense_all_with_hook(
        self, out: TensorRef, seed: Any, hook: Callable[[int, Any], Any]
    ) -> list[Any]:
        return self.backward_dense_all(out, seed, hook)

    def grad(self, grads: Sequence[Any], x: TensorRef) -> Any:
        i = self._check(x, "grad")
        if len(grads) != len(self.tape):
            raise ShapeError(f"grad: {len(grads)} gradients for a tape of {len(self.tape)}")
        return grads[i]

    def vjp(self, out: TensorRef, seed: Any, x: TensorRef) -> Any:
        xi = self._check(x, "vjp")
        return self.backward_dense_all(out, seed)[xi]

    # ------------------------------------------------------------------ forward mode
    def _typed_only(self, what: str) -> None:
        if self.mode != "typed_graph":
            raise TorchLeanError(
                f"{what}: forward mode needs a typed_graph session (this one is eager)"
            )

    def _num_leaves(self) -> int:
        return 0 if self._builder is None else len(self._builder._inputs)

    def jvp_dense_all(self, out: TensorRef, dxs: Sequence[Any]) -> Any:
        """Tangent of `out` given one tangent per leaf (frozen leaves contribute zero)."""
        self._typed_only("jvp_dense_all")
        oi = self._check(out, "jvp_dense_all")
        n = self._num_leaves()
        if len(dxs) != n:
            raise ShapeError(f"jvp_dense_all: {len(dxs)} tangents for {n} leaves")
        tans = {}
        for i, dx in enumerate(dxs):
            t = self._seed(i, dx)
            tans[i] = t
        return self.tape.forward_tangents(tans)[oi]

    def jvp_leaf(self, out: TensorRef, x: TensorRef, dx: Any) -> Any:
        self._typed_only("jvp_leaf")
        oi, xi = self._check(out, "jvp_leaf"), self._check(x, "jvp_leaf")
        if xi >= self._num_leaves():
            raise TorchLeanError(f"jvp_leaf: %{xi} is not a leaf")
        return self.tape.forward_tangents({xi: self._seed(xi, dx)})[oi]

    def jvp_scalar_leaf(self, loss: TensorRef, x: TensorRef, dx: Any) -> Any:
        self._typed_only("jvp_scalar_leaf")
        if loss.shape != ():
            raise ShapeError(f"jvp_scalar_leaf: loss has shape {loss.shape}, expected ()")
        return self.jvp_leaf(loss, x, dx)

    # ------------------------------------------------------------------ optimizer step
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
            self.tape._check_grad(leaf, garr[leaf], "sgd_step_all")
            if self.ctx.exact:
                _check_exact_elems(grads[leaf], f"sgd_step_all: gradient for node {leaf}")
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

    # ------------------------------------------------------------------ randomness
    def init_rng(self, seed: int) -> Rng:
        return Rng(int(seed))

    def fresh_seed(self) -> int:
        """The only entropy source: 64 bits from the operating system."""
        return int.from_bytes(os.urandom(8), "little")

    def split_rng(self, rng: Rng) -> tuple[Rng, Rng]:
        a, b = srng.split(rng.next_key())
        return Rng(a), Rng(b)

    def _key(self, rng: Rng | None) -> int:
        return (rng or self.rng).next_key()

    def _probability(self, p: Any, what: str) -> Fraction:
        """p as an exact rational in [0, 1] (a float is its exact binary64 value)."""
        try:
            q = Fraction(p)
        except (TypeError, ValueError, OverflowError):
            raise DomainError(f"{what}: p must be a number in [0, 1], got {p!r}") from None
        if not 0 <= q <= 1:
            raise DomainError(f"{what}: p must be in [0, 1], got {p!r}")
        return q

    def rand_uniform(self, shape: Sequence[int], rng: Rng | None = None) -> TensorRef:
        """u_i = spec.rng.uniform(D, key, i) in row-major order, one RNG advance (after
        the shape is validated: a failed call does not move the RNG)."""
        shape = as_shape(shape, "rand_uniform")
        D = DTYPE_DOMAIN[self.dtype]
        key = self._key(rng)
        n = size(shape)
        if self.dtype in OBJECT_DTYPES:
            t = Tensor(tuple(shape), tuple(srng.uniform(D, key, i) for i in range(n)))
            return self.const(from_spec(t, self.dtype))
        u = uniform01(self.backend, key, n, self.dtype)
        return self.const(self.ctx.xp.reshape(u, tuple(shape)))

    def bernoulli_mask(
        self, shape: Sequence[int], p: float | Fraction, rng: Rng | None = None
    ) -> TensorRef:
        """1 where kept (u >= p), 0 where dropped, as a frozen constant (shape and p are
        validated before the RNG advances)."""
        shape = as_shape(shape, "bernoulli_mask")
        q = self._probability(p, "bernoulli_mask")
        key = self._key(rng)
        n = size(shape)
        if self.dtype in OBJECT_DTYPES:
            D = DTYPE_DOMAIN[self.dtype]
            t = Tensor(
                tuple(shape), tuple(D.one() if srng.mask(key, i, q) else D.zero() for i in range(n))
            )
            return self.const(from_spec(t, self.dtype))
        xp = self.ctx.xp
        keep = xp.reshape(keep_mask(self.backend, key, n, q), tuple(shape))
        return self.const(xp.where(keep, self.ctx.const(1), self.ctx.const(0)))

    def dropout(
        self, rng: Rng | None, x: TensorRef, p: float | Fraction, train: bool = True
    ) -> TensorRef:
        """p outside [0, 1] raises; not training or p = 0: x itself; p = 1: x scaled by 0;
        else div(mul(x, mask), 1 − p) with one RNG advance."""
        self._check(x, "dropout")
        q = self._probability(p, "dropout")
        if not train or q == 0:
            return x
        if q == 1:
            return self.op("scale", x, c=0)
        m = self.bernoulli_mask(x.shape, q, rng)
        return self.op("div", self.op("mul", x, m), self.const(self._scalar(1 - q)))

    def _scalar(self, q: Fraction) -> Any:
        return from_spec(Tensor((), (DTYPE_DOMAIN[self.dtype].from_rational(q),)), self.dtype)

    # ------------------------------------------------------------------ typed graph
    def graph(self) -> RecordedGraph:
        """The recorded spec graph with its leaf values (typed-graph mode)."""
        if self._builder is None:
            raise TorchLeanError("graph(): only typed_graph sessions record a graph")
        g = self._builder.build()
        inputs = [to_spec(self.tape.nodes[i].value, self.dtype) for i in range(g.num_inputs)]
        return RecordedGraph(g, inputs, list(self._env), self.dtype)

    def check_link(self, seed: int = 0) -> LinkCheck:
        """Runtime backward_dense_from(lower(g)) vs spec backprop_all_ctx(g) on the recorded
        graph, with a full pseudo-random seed (spec RNG). Exact dtype: exact equality; IEEE:
        bit equality, computed with the `ordered` kernels (the fast kernels are checked by
        per-node bounds in the conformance suite, not bitwise)."""
        from .linkcheck import link_check

        rec = self.graph()
        ok, text = link_check(rec.graph, rec.inputs, rec.env, self.dtype, seed)
        return LinkCheck(ok, text, "exact" if self.dtype in OBJECT_DTYPES else "ordered")


def _op_method(name: str) -> Callable[..., TensorRef]:
    def method(self: Session, *args: Any, **attrs: Any) -> TensorRef:
        return self.op(name, *args, **attrs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The `{name}` op of the table: {OPS[name].doc}"
    return method


# Every op of the table is a Session method with the table's name (const and detach have
# their own methods above).
for _name in OPS:
    if _name not in ("const", "detach"):
        if hasattr(Session, _name):
            raise TorchLeanError(f"op {_name!r} clashes with a Session attribute")
        setattr(Session, _name, _op_method(_name))
