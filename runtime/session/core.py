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
- Devices: `device="cuda"` runs the eager session on the CuPy backend (`runtime.backends.cuda`);
  there is no silent CPU fallback. Tape values and returned gradients are device arrays;
  `get_value` and `Param.get` return host (NumPy) arrays. A parameter keeps a host value
  and a device mirror with TorchLean's invariant: at least one copy is current; a device
  update (`sgd_step_all`) marks the host stale; every public read synchronises.
- Random tensors come from `runtime.engine.rng` (vectorised SplitMix64, the same bits as
  `spec.rng` on every backend).
- `Session` is composed of the parts of this package (handles, recording, parameters,
  random streams, graph export); this module holds construction, leaves, values and the
  reverse and forward passes, and attaches one method per op of the table.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from spec.errors import DomainError, ShapeError, TorchLeanError
from spec.ops import OPS

from ..backends.base import DTYPE_DOMAIN, DTYPES, NUMPY, OBJECT_DTYPES, to_spec
from ..backends.registry import get_backend
from ..engine.context import KernelContext
from .handles import HandleChecks, TensorRef
from .link import GraphExport
from .params import Param, ParameterStore, check_exact_elems, frozen_copy
from .recording import Recording
from .streams import RandomStreams, Rng

__all__ = ["Session"]

_owner_lock = threading.Lock()
_owner_ids = itertools.count(1)


def _next_owner() -> int:
    with _owner_lock:
        return next(_owner_ids)


# --------------------------------------------------------------------------- the session


class Session(HandleChecks, Recording, ParameterStore, RandomStreams, GraphExport):
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

    def __repr__(self) -> str:
        return (
            f"Session(mode={self.mode!r}, dtype={self.dtype!r}, kernels={self.kernels!r}, "
            f"owner={self.owner}, generation={self.generation}, tape={len(self.tape)})"
        )

    def _array(self, value: Any) -> Any:
        a = self.backend.asarray(value, self.dtype)
        if not self.backend.is_numpy:
            # a host value was uploaded into a fresh array already; copy only the caller's
            # own device array (device arrays cannot be made read-only)
            return self.ctx.xp.asarray(a, copy=True) if a is value else a
        return frozen_copy(a)

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

    # ------------------------------------------------------------------ leaves
    def _leaf(self, value: Any, requires_grad: bool, name: str) -> TensorRef:
        self._no_leaf_after_ops(name)
        i = self.tape.leaf(value, requires_grad=requires_grad and self.grad_enabled, name=name)
        if self._builder is not None:
            self._builder.input(tuple(value.shape))
        return self._ref(i)

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

    def get_value(self, x: TensorRef) -> Any:
        v = self.tape.nodes[self._check(x, "get_value")].value
        if not self.backend.is_numpy:
            return self.backend.to_host(v)
        return np.array(v, copy=True)

    if TYPE_CHECKING:  # the op methods are attached below, one per op of the table

        def __getattr__(self, name: str) -> Callable[..., TensorRef]: ...

    # ------------------------------------------------------------------ reverse mode
    def _seed(self, out: int, seed: Any) -> Any:
        s = self._grad_array(seed)
        self.tape.check_grad(out, s, "seed")
        if self.ctx.exact:
            check_exact_elems(s, "seed")
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
        return 0 if self._builder is None else self._builder.num_inputs

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
