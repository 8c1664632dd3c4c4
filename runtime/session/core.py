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
  TorchLean's `grad` is "the non-mutating counterpart of reading x.grad": every array a
  session hands out (gradient entries, tangents, values) is a fresh copy, so no caller edit
  reaches the session, the caller's seed or another returned entry. A gradient list stays
  valid for its generation however many ops follow (see `gradients`).
- Leaves track gradients when the session does (TorchLean's `gradEnabled`: "Whether newly
  recorded leaves track gradients. Inference sessions set this to false: ... parameter and
  input leaves are recorded with requiresGrad = false"): `input` defaults to
  `requires_grad=True` in a gradient-enabled session; `const` leaves never track.
- One rule for a Python scalar given as an op argument, at any position: eager, a frozen
  leaf; typed graph, a `const` graph node (so forward mode's leaves are the caller's).
- Parameters alias only when they share the same storage cells (never by value or name).
- Devices: `device="cuda"` runs the eager session on the CuPy backend (`runtime.backends.cuda`);
  there is no silent CPU fallback. Tape values and returned gradients are device arrays;
  `get_value` and `Param.get` return host (NumPy) arrays. A parameter keeps a host value
  and a device mirror with TorchLean's invariant: at least one copy is current; a device
  update (`sgd_step_all`) marks the host stale; every public read synchronises.
- Random tensors come from `runtime.engine.rng` (vectorised SplitMix64, the same bits as
  `spec.rng` on every backend).
- `Session` is a facade over the parts of this package, each an object it owns and reaches
  through public names only: `recording` (tape, environment, typed graph, rollback),
  `store` (parameters), `streams` (RNG) and `export` (typed graph, link check). This module
  holds construction, handle checks, leaves, values and the reverse and forward passes,
  orchestrates the parts in each public method (validate handles, then call the parts),
  and attaches one method per op of the table.
- Per-op speed: a call with exactly the op's arity of TensorRefs of this session and
  generation and no attribute takes a fast path (`PLAIN_ARITY`; the op methods have one
  specialised for one and for two arguments) that checks every handle's exact type, owner
  and generation and records through `Recording.record_plain` (the one- and two-argument
  methods inline it in eager mode through `Recording.plain`, and build the TensorRef as
  `tensor_ref` does); every other call (and every failing check) goes through
  `Session.op`'s full argument handling, so the errors are the same. `Session.op` is the
  reference the op methods must equal (tests/test_session_fastpath_kernels.py).
- Op methods take the table's order (tensors, then attributes) except where PyTorch's
  differs: `torch_calls.TORCH_METHODS` (`batch_norm`, `group_norm`, `instance_norm`) take
  `torch.nn.functional`'s signature and defaults; `Session.op(name, ...)` is always the
  table's order.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy as np

from spec.errors import GraphError, ShapeError, TorchLeanError
from spec.ops import OPS
from spec.ops.shape import chunk_ranges, split_ranges
from spec.probe import check_float_environment

from ..backends.base import DTYPES, NUMPY, OBJECT_DTYPES
from ..backends.registry import get_backend
from ..engine.context import KernelContext
from ..engine.tape import Tape
from .calls import (
    check_flag,
    check_seed,
    matmul_plan,
    matmul_result_shape,
    op_arguments,
    rng_guard,
)
from .gradients import (
    GradientList,
    apply_hook,
    check_gradient_list,
    gradient_list_length,
    learning_rate,
)
from .handles import (
    NatRef,
    TensorRef,
    TensorRefFields,
    check_nat_ref,
    check_tensor_ref,
    tensor_ref,
)
from .link import GraphExport, LinkCheck, RecordedGraph
from .params import Param, ParameterStore, check_exact_elems, frozen_copy, grad_array, is_scalar
from .recording import Mark, Recording, typed_const_attrs
from .streams import RandomStreams, Rng
from .torch_calls import TORCH_METHODS

__all__ = ["Session"]

# Per-op dispatch, computed once from the table: the ops whose call with exactly `arity`
# current TensorRefs and no attribute needs none of `Session.op`'s argument handling
# (`op_arguments` leaves it unchanged, no scalar becomes a const, no NatRef is read).
# `matmul` is not one: a 1-D operand goes through `_matmul_1d`.
PLAIN_ARITY: dict[str, int] = {
    name: d.arity for name, d in OPS.items() if d.arity is not None and name != "matmul"
}

_owner_lock = threading.Lock()
_owner_ids = itertools.count(1)


def _next_owner() -> int:
    with _owner_lock:
        return next(_owner_ids)


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
        check_flag(grad_enabled, "Session: grad_enabled")
        check_flag(requires_grad_by_default, "Session: requires_grad_by_default")
        seed = check_seed(seed, "Session: seed")
        if dtype not in OBJECT_DTYPES:
            check_float_environment()  # live: a library may have enabled FTZ/DAZ since
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
        # how many values `get_value` handed out: a caller that records a program can tell
        # whether the program read values back into Python (then it may depend on them)
        self.values_read = 0
        self._streams = RandomStreams(seed, dtype, self.ctx)
        self._self_ref = weakref.ref(self)
        self._store = ParameterStore(self.owner, dtype, self.ctx)
        self._recording = Recording(self.ctx, typed=mode == "typed_graph")
        self._export = GraphExport(self._recording, dtype)

    def __repr__(self) -> str:
        return (
            f"Session(mode={self.mode!r}, dtype={self.dtype!r}, kernels={self.kernels!r}, "
            f"owner={self.owner}, generation={self.generation}, tape={len(self.tape)})"
        )

    def _array(self, value: Any, what: str) -> Any:
        a = self.backend.asarray(value, self.dtype, what)
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

    # ------------------------------------------------------------------ parts
    @property
    def recording(self) -> Recording:
        """The recording part: tape, integer environment and (typed graph) spec graph."""
        return self._recording

    @property
    def store(self) -> ParameterStore:
        """The parameter store part: parameters and the leaves that snapshot them."""
        return self._store

    @property
    def streams(self) -> RandomStreams:
        """The random streams part: the session's RNG and random tensor values."""
        return self._streams

    @property
    def export(self) -> GraphExport:
        """The graph export part: the recorded typed graph and its link check."""
        return self._export

    @property
    def tape(self) -> Tape:
        """The runtime tape of the current recording."""
        return self._recording.tape

    @property
    def rng(self) -> Rng:
        """The session's own RNG stream (used when a draw is given no `rng`)."""
        return self._streams.rng

    @rng.setter
    def rng(self, rng: Rng) -> None:
        self._streams.rng = rng

    @property
    def graph_has_nodes(self) -> bool:
        """Whether the typed graph has op nodes yet (then no new leaf or NatRef change)."""
        return self._recording.has_nodes

    # ------------------------------------------------------------------ handles
    def _ref(self, i: int) -> TensorRef:
        return tensor_ref(
            i,
            tuple(self._recording.tape.nodes[i].value.shape),
            self.owner,
            self.generation,
            self._self_ref,
        )

    def _plain(self, name: str, given: tuple[Any, ...]) -> TensorRef | None:
        """The fast path of an op call: `name` in `PLAIN_ARITY`, no attribute, and `given`
        exactly its arity of TensorRefs (exact type) of this session and generation. Then
        it is `_record(name, ids, {})`, which `op` would reach after the same checks;
        otherwise None (and nothing done): `op` runs its full argument handling."""
        owner, gen = self.owner, self.generation
        for a in given:
            if type(a) is not TensorRef or a.owner != owner or a.generation != gen:
                return None
        i, shape = self._recording.record_plain(name, tuple([a.id for a in given]))
        return tensor_ref(i, shape, owner, gen, self._self_ref)

    def _check(self, x: Any, what: str = "argument") -> int:
        return check_tensor_ref(x, self.owner, self.generation, what)

    def _check_nat(self, r: Any, what: str = "argument") -> int:
        return check_nat_ref(r, self.owner, self.generation, what)

    # ------------------------------------------------------------------ leaves
    def _leaf(self, value: Any, requires_grad: bool, name: str) -> TensorRef:
        return self._ref(self._recording.leaf(value, requires_grad and self.grad_enabled, name))

    def input(
        self, value: Any, name: str | None = None, requires_grad: bool | None = None
    ) -> TensorRef:
        """An input leaf holding a copy of `value`. TorchLean (`gradEnabled`): "Whether
        newly recorded leaves track gradients. Inference sessions set this to false: ...
        parameter and input leaves are recorded with requiresGrad = false": in a session
        with gradients enabled an input tracks gradients unless `requires_grad=False`
        (data that no gradient is wanted for, as PyTorch's default for data tensors); in
        an inference session no leaf does."""
        rg = True if requires_grad is None else check_flag(requires_grad, "input: requires_grad")
        return self._leaf(self._array(value, "input"), rg, name or "input")

    def const(self, value: Any, what: str = "const") -> TensorRef:
        """A frozen constant: a leaf before any op; in typed-graph mode after ops, a `const`
        graph node holding the exact rational of every element."""
        arr = self._array(value, what)
        if self._recording.has_nodes:
            return self._record("const", [], typed_const_attrs(arr, self.dtype))
        return self._leaf(arr, False, "const")

    def get_value(self, x: TensorRef) -> Any:
        """A host copy of `x`'s value (counted in `values_read`)."""
        v = self.tape.nodes[self._check(x, "get_value")].value
        self.values_read += 1
        if not self.backend.is_numpy:
            return self.backend.to_host(v)
        return np.array(v, copy=True)

    def split(
        self, x: TensorRef, split_size_or_sections: int | Sequence[int], dim: int = 0
    ) -> tuple[TensorRef, ...]:
        """torch.split: one `narrow` node per piece (graph nodes have one output); an int is
        every piece's size but the last's, a list each piece's size (summing to the axis)."""
        d = self._split_dim("split", x, dim)
        pieces = split_ranges("split", x.shape[d], split_size_or_sections)
        return tuple(self.op("narrow", x, dim=d, start=s, length=n) for s, n in pieces)

    def chunk(self, x: TensorRef, chunks: int, dim: int = 0) -> tuple[TensorRef, ...]:
        """torch.chunk: pieces of ceil(n / chunks) (the last smaller, maybe fewer pieces),
        one `narrow` node each."""
        d = self._split_dim("chunk", x, dim)
        pieces = chunk_ranges("chunk", x.shape[d], chunks)
        return tuple(self.op("narrow", x, dim=d, start=s, length=n) for s, n in pieces)

    def _split_dim(self, op: str, x: TensorRef, dim: int) -> int:
        self._check(x, op)
        r = len(x.shape)
        if not -r <= dim < r:
            raise ShapeError(f"{op}: dim out of range (expected {-r} <= dim < {r}, got {dim})")
        return dim % r

    if TYPE_CHECKING:  # the op methods are attached below, one per op of the table

        def __getattr__(self, name: str) -> Callable[..., TensorRef]: ...

    # ------------------------------------------------------------------ reverse mode
    def _seed(self, out: int, seed: Any) -> Any:
        s = self._grad_array(seed, "seed")
        self.tape.check_grad(out, s, "seed")
        if self.ctx.exact:
            check_exact_elems(s, "seed")
        return s

    def _grad_array(self, g: Any, what: str = "gradient") -> Any:
        """A gradient or seed as a backend array (see `params.grad_array`)."""
        return grad_array(self.backend, self.dtype, g, what)

    @staticmethod
    def _owned(g: Any) -> Any:
        """A fresh array holding `g` (NumPy and CuPy arrays alike): what a caller receives
        is never session state."""
        return g.copy()

    def _gradients(self, grads: Sequence[Any]) -> GradientList:
        """The caller's list: every entry a fresh array of its own (the sweep shares arrays
        between entries, with the caller's seed and with the session's cached constants;
        none of that reaches the caller, and no edit of an entry reaches the session or
        another entry)."""
        return GradientList([g.copy() for g in grads], self.owner, self.generation)

    def backward_dense_all(
        self, out: TensorRef, seed: Any, hook: Callable[[int, Any], Any] | None = None
    ) -> GradientList:
        """TorchLean's `backwardDenseAll`: one gradient per tape id (a `GradientList`);
        with `hook`, see `backward_dense_all_with_hook`."""
        i = self._check(out, "backward_dense_all")
        dense = self.tape.backward_dense_all(i, self._seed(i, seed))
        if hook is None:
            return self._gradients(dense)
        # the hook sees fresh arrays (an in-place hook cannot reach the session), and its
        # results are copied in turn (a hook may return one array for several ids)
        owned = [self._owned(g) for g in dense]
        names = [n.name for n in self.tape.nodes]
        return self._gradients(apply_hook(hook, owned, names, self.ctx.exact, self.ctx.arr))

    def backward_scalar_dense_all(self, loss: TensorRef) -> GradientList:
        """TorchLean's `backwardScalarDenseAll`: `backward_dense_all(loss, 1)` for a scalar
        loss."""
        i = self._check(loss, "backward_scalar_dense_all")
        if loss.shape != ():
            raise ShapeError(
                f"backward_scalar_dense_all: loss %{i} has shape {loss.shape}, expected a scalar ()"
            )
        return self._gradients(self.tape.backward_dense_all(i, self.ctx.const(1)))

    def backward_dense_all_with_hook(
        self, out: TensorRef, seed: Any, hook: Callable[[int, Any], Any]
    ) -> GradientList:
        """TorchLean's `backwardDenseAllWithHook` (seed 001): `backward_dense_all`, then the
        hook applied pointwise to the dense array, `hook(i, grads[i])` in id order, each
        result checked to keep its gradient's shape and dtype (`HookError` naming the id,
        expected and got; exact dtype: exact rationals only). The hook never runs inside
        the reverse sweep: a doubling hook doubles every gradient once. This is the only
        hook semantics (`Tape.backward_dense_all(hook=...)` is the same function)."""
        if hook is None:
            raise TorchLeanError("backward_dense_all_with_hook: hook is None")
        return self.backward_dense_all(out, seed, hook)

    def grad(self, grads: Sequence[Any], x: TensorRef) -> Any:
        """TorchLean's `grad`: the entry of `x` in a dense gradient list. A `GradientList`
        of another session or generation is refused (`StaleHandleError`, as `sgd_step_all`
        does); one of this generation stays valid however many ops follow its backward
        (TorchLean's list is indexed by node id, and the ids it holds keep their meaning).
        A list whose length is not its tape's (a plain list: the tape's now), an `x`
        recorded after the list's backward, or an entry without `x`'s shape and the
        session's dtype raise `ShapeError`."""
        i = self._check(x, "grad")
        check_gradient_list(grads, self.owner, self.generation, "grad")
        n = gradient_list_length(grads, len(self.tape), "grad")
        if i >= n:
            raise ShapeError(
                f"grad: TensorRef %{i} was recorded after this list's backward (the list "
                f"holds ids 0..{n - 1}); run a backward again for it"
            )
        g = grads[i]
        self.tape.check_grad(i, g, "grad")
        return g

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
        return self._recording.num_leaves

    def jvp_dense_all(self, out: TensorRef, dxs: Sequence[Any]) -> Any:
        """TorchLean's `jvpDenseAll`: "dxs[i] is the tangent for leaf i (same indexing as
        grad/backwardDenseAll)". Every leaf's tangent counts, whether or not the leaf
        requires gradients (inputs, frozen parameters and constants alike: `requires_grad`
        governs reverse mode only); `detach` and typed-graph `const` nodes have a zero
        tangent."""
        self._typed_only("jvp_dense_all")
        oi = self._check(out, "jvp_dense_all")
        n = self._num_leaves()
        if len(dxs) != n:
            raise ShapeError(f"jvp_dense_all: {len(dxs)} tangents for {n} leaves")
        tans = {i: self._seed(i, dx) for i, dx in enumerate(dxs)}
        return self._owned(self.tape.forward_tangents(tans)[oi])

    def jvp_leaf(self, out: TensorRef, x: TensorRef, dx: Any) -> Any:
        """TorchLean's `jvpLeaf`: the tangent of `out` when leaf `x` moves along `dx` and
        every other leaf stays; `x` need not require gradients (see `jvp_dense_all`)."""
        self._typed_only("jvp_leaf")
        oi, xi = self._check(out, "jvp_leaf"), self._check(x, "jvp_leaf")
        if xi >= self._num_leaves():
            raise TorchLeanError(f"jvp_leaf: %{xi} is not a leaf")
        return self._owned(self.tape.forward_tangents({xi: self._seed(xi, dx)})[oi])

    def jvp_scalar_leaf(self, loss: TensorRef, x: TensorRef, dx: Any) -> Any:
        """TorchLean's `jvpScalarLeaf`: `jvp_leaf` for a scalar `loss`, returned as a scalar
        of the session's dtype (a NumPy scalar such as `np.float32`, a `Fraction` for
        "exact"), not a 0-d array."""
        self._typed_only("jvp_scalar_leaf")
        if loss.shape != ():
            raise ShapeError(f"jvp_scalar_leaf: loss has shape {loss.shape}, expected ()")
        return self.to_host(self.jvp_leaf(loss, x, dx))[()]

    @property
    def selected_backends(self) -> tuple[str, ...]:
        """TorchLean's `selectedBackends`: the kernels this session accepted, in first-use
        order, one "op:backend/profile" entry per op (kept across `reset_tape`)."""
        return self._recording.selected_backends

    # ------------------------------------------------------------------ recording
    def input_nat(self, n: int) -> NatRef:
        return NatRef(self._recording.append_nat(n), self.owner, self.generation)

    def get_nat(self, r: NatRef) -> int:
        return self._recording.nat(self._check_nat(r, "get_nat"))

    def set_nat(self, r: NatRef, n: int) -> None:
        """Replace a NatRef's value. Eager: later ops read the new value. Typed graph: only
        before the first op node, since the recorded graph reads the environment when it is
        evaluated and earlier nodes were computed with the old value."""
        self._recording.set_nat(self._check_nat(r, "set_nat"), n)

    def _record(self, op: str, args: Sequence[int], attrs: dict[str, Any]) -> TensorRef:
        """Validate, run on the tape, and (typed graph) record: all or nothing."""
        return self._ref(self._recording.record(op, args, attrs))

    def frozen_const(self, value: Any, what: str = "const") -> TensorRef:
        """A constant an op call adds (a Python scalar argument, a default weight), one rule
        whatever its position and whether ops came before: eager, a frozen leaf; typed
        graph, a `const` graph node (never a leaf, so `jvp_dense_all` takes tangents for
        the caller's leaves only)."""
        if self._recording.typed:
            arr = self._array(value, what)
            return self._record("const", [], typed_const_attrs(arr, self.dtype))
        return self.const(value, what)

    @contextmanager
    def all_or_nothing(self) -> Iterator[None]:
        """Drop everything recorded in the body when it raises."""
        mark = self._recording.mark()
        try:
            yield
        except BaseException:
            self._rollback(mark)
            raise

    def _coerce(self, x: Any, what: str) -> int:
        """The tape id of an op argument; a Python scalar becomes a `frozen_const`."""
        if is_scalar(x):
            return self.frozen_const(x, what).id
        return self._check(x, what)

    def op(self, name: str, *given: Any, **attrs: Any) -> TensorRef:
        """Apply op `name` of the table to TensorRefs (NatRef attributes read the env).
        Attributes may also be given positionally after the tensor arguments, in the op's
        schema order, and `sum`/`mean` with a dimension are `reduce_sum`/`reduce_mean`
        (PyTorch's spellings; see `calls.op_arguments`); `matmul` follows `torch.matmul`
        for 1-D operands."""
        if not attrs and PLAIN_ARITY.get(name) == len(given):
            r = self._plain(name, given)
            if r is not None:
                return r
        if name not in OPS:
            raise GraphError(f"unknown op {name!r}")
        name, args, attrs = op_arguments(name, given, attrs)
        # Every handle is validated before anything is created (Python scalars become
        # consts only afterwards) ...
        ids: list[int] = []
        for k, a in enumerate(args):
            if not is_scalar(a):
                ids.append(self._check(a, f"{name}: input {k}"))
        plain = len(ids) == len(args)
        if name == "matmul" and plain and len(args) == 2 and not attrs:
            plan = matmul_plan(args[0].shape, args[1].shape)
            if plan is not None:
                return self._matmul_1d(args[0], args[1], *plan)
        for key, v in list(attrs.items()):
            if isinstance(v, NatRef):
                slot = self._check_nat(v, f"{name}: attribute {key}")
                if name == "select" and key == "index":
                    attrs.pop("index")
                    attrs["env_slot"] = slot
                else:
                    attrs[key] = self._recording.nat(slot)
        if plain:  # no scalar to turn into a const: _record is all or nothing by itself
            return self._record(name, ids, attrs)
        # ... and a failure after a scalar became a const (a shape error, exact division by
        # zero) drops that const again: a failed call leaves the recording unchanged.
        mark = self._recording.mark()
        try:
            ids = [self._coerce(a, f"{name}: input {k}") for k, a in enumerate(args)]
            return self._record(name, ids, attrs)
        except BaseException:
            self._rollback(mark)
            raise

    def _matmul_1d(
        self, a: TensorRef, b: TensorRef, a2: tuple[int, ...] | None, b2: tuple[int, ...] | None
    ) -> TensorRef:
        """`torch.matmul` with a 1-D operand, through table ops (reshape, matmul, reshape);
        all or nothing."""
        mark = self._recording.mark()
        try:
            A = a if a2 is None else self._record("reshape", [a.id], {"shape": a2})
            B = b if b2 is None else self._record("reshape", [b.id], {"shape": b2})
            out = self._record("matmul", [A.id, B.id], {})
            shape = matmul_result_shape(out.shape, a2 is not None, b2 is not None)
            return self._record("reshape", [out.id], {"shape": shape})
        except BaseException:
            self._rollback(mark)
            raise

    def _rollback(self, mark: Mark) -> None:
        self._recording.rollback(mark)

    def detach(self, x: TensorRef) -> TensorRef:
        """Eager: a frozen node with parent x and no contributions; typed graph: the spec
        `detach` op (identity forward, zero JVP and VJP), frozen on the tape as well."""
        return self.op("detach", x)

    def reset_tape(self) -> None:
        """Drop the recording; bump the generation (parameters and RNG survive)."""
        self.generation += 1
        self._recording.reset()
        self._store.clear_leaves()

    # ------------------------------------------------------------------ parameters
    def param(self, init: Any, name: str | None = None, requires_grad: bool | None = None) -> Param:
        """A mutable parameter (not on the tape)."""
        return self._store.param(init, name, requires_grad, self.requires_grad_by_default)

    def use(self, p: Param) -> TensorRef:
        """A new leaf holding the parameter's current value (a snapshot)."""
        r = self._leaf(self._store.leaf_value(p), p.requires_grad, f"use({p.name})")
        self._store.bind_leaf(r.id, p)
        return r

    def sgd_step_all(self, lr: float | Fraction, grads: Sequence[Any]) -> None:
        """p ← p − g·lr for every parameter used on this tape; the gradients of leaves that
        alias one storage are summed (leaf order) and the *current* storage updated once.
        Everything is validated before anything is mutated: a `GradientList` of another
        session or generation raises `StaleHandleError`; `lr` must be a real, finite
        number >= 0 that is finite in the dtype (else `DomainError`)."""
        if not self.grad_enabled:
            raise TorchLeanError(
                "sgd_step_all: this is an inference session "
                "(grad_enabled=False); it has no trainable leaves"
            )
        check_gradient_list(grads, self.owner, self.generation, "sgd_step_all")
        self._store.sgd_step(learning_rate(lr, self.dtype), grads, self.tape)

    # ------------------------------------------------------------------ random streams
    def init_rng(self, seed: int) -> Rng:
        return self._streams.init_rng(check_seed(seed, "init_rng: seed"))

    def fresh_seed(self) -> int:
        """The only entropy source: 64 bits from the operating system."""
        return self._streams.fresh_seed()

    def split_rng(self, rng: Rng) -> tuple[Rng, Rng]:
        with rng_guard(rng):
            return self._streams.split_rng(rng)

    def rand_uniform(self, shape: Sequence[int], rng: Rng | None = None) -> TensorRef:
        """u_i = spec.rng.uniform(D, key, i) in row-major order, one RNG advance; a failed
        call (bad shape, MemoryError, anything) leaves the RNG counter unchanged."""
        with rng_guard(rng or self.rng):
            return self.const(self._streams.uniform(shape, rng))

    def bernoulli_mask(
        self, shape: Sequence[int], p: float | Fraction, rng: Rng | None = None
    ) -> TensorRef:
        """1 where kept (u >= p), 0 where dropped, as a frozen constant; a failed call
        leaves the RNG counter unchanged."""
        with rng_guard(rng or self.rng):
            return self.const(self._streams.mask(shape, p, rng))

    def dropout(
        self, rng: Rng | None, x: TensorRef, p: float | Fraction, train: bool = True
    ) -> TensorRef:
        """p outside [0, 1] raises; not training or p = 0: x itself; p = 1: x scaled by 0;
        else div(mul(x, mask), 1 − p) with one RNG advance."""
        self._check(x, "dropout")
        q = self._streams.probability(p, "dropout")
        if not train or q == 0:
            return x
        if q == 1:
            return self.op("scale", x, c=0)
        mark = self._recording.mark()
        with rng_guard(rng or self.rng):
            try:
                m = self.bernoulli_mask(x.shape, q, rng)
                return self.op("div", self.op("mul", x, m), self.const(self._streams.scalar(1 - q)))
            except BaseException:
                self._rollback(mark)
                raise

    # ------------------------------------------------------------------ graph export
    def graph(self) -> RecordedGraph:
        """The recorded spec graph with its leaf values (typed-graph mode)."""
        return self._export.graph()

    def check_link(self, seed: int = 0) -> LinkCheck:
        """Runtime backward_dense_from(lower(g)) vs spec backprop_all_ctx(g) on the recorded
        graph (see `GraphExport.check_link`)."""
        return self._export.check_link(seed)


def _method_1(name: str) -> Callable[..., TensorRef]:
    """The op method of a one-argument op (see `_op_method`)."""

    def method(self: Session, *args: Any, **attrs: Any) -> TensorRef:
        if not attrs and len(args) == 1:
            a = args[0]
            owner, gen = self.owner, self.generation
            if type(a) is TensorRef and a.owner == owner and a.generation == gen:
                rec = self._recording
                plain = rec.plain
                if plain is None:
                    i, shape = rec.record_plain(name, (a.id,))
                else:  # `rec.record_plain(name, (a.id,))` inlined (see `Recording.plain`)
                    tape = plain[0]
                    i = tape.op(name, (a.id,), plain[1])
                    if name not in rec.kernels_used:
                        rec.note_kernel(name)
                    shape = tape.nodes[i].value.shape
                r: Any = TensorRefFields()  # `tensor_ref(...)` inlined
                r.id = i
                r.shape = shape
                r.owner = owner
                r.generation = gen
                r.session_ref = self._self_ref
                r.__class__ = TensorRef
                return r
        return self.op(name, *args, **attrs)

    return method


def _method_2(name: str) -> Callable[..., TensorRef]:
    """The op method of a two-argument op (see `_op_method`)."""

    def method(self: Session, *args: Any, **attrs: Any) -> TensorRef:
        if not attrs and len(args) == 2:
            a, b = args
            owner, gen = self.owner, self.generation
            if (
                type(a) is TensorRef
                and type(b) is TensorRef
                and a.owner == owner
                and b.owner == owner
                and a.generation == gen
                and b.generation == gen
            ):
                rec = self._recording
                plain = rec.plain
                if plain is None:
                    i, shape = rec.record_plain(name, (a.id, b.id))
                else:  # `rec.record_plain(name, (a.id, b.id))` inlined
                    tape = plain[0]
                    i = tape.op(name, (a.id, b.id), plain[1])
                    if name not in rec.kernels_used:
                        rec.note_kernel(name)
                    shape = tape.nodes[i].value.shape
                r: Any = TensorRefFields()
                r.id = i
                r.shape = shape
                r.owner = owner
                r.generation = gen
                r.session_ref = self._self_ref
                r.__class__ = TensorRef
                return r
        return self.op(name, *args, **attrs)

    return method


def _op_method(name: str) -> Callable[..., TensorRef]:
    """The Session method of op `name`. A call with exactly the op's arity of TensorRefs
    of this session and generation and no attribute is `Session._plain` inlined (one call
    layer less per op), specialised for one and two arguments (no loop, no comprehension:
    Python 3.11 builds a frame per comprehension), which in eager mode also inline
    `Recording.record_plain` (their reference: `Recording.plain`); any other call goes to
    `Session.op`, which makes the same checks and raises their errors."""
    arity = PLAIN_ARITY.get(name)
    if arity == 1:
        method = _method_1(name)
    elif arity == 2:
        method = _method_2(name)
    else:

        def method(self: Session, *args: Any, **attrs: Any) -> TensorRef:
            if not attrs and len(args) == arity:
                r = self._plain(name, args)
                if r is not None:
                    return r
            return self.op(name, *args, **attrs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"The `{name}` op of the table: {OPS[name].doc}"
    return method


# Every op of the table is a Session method with the table's name (const and detach have
# their own methods above); the ops of `TORCH_METHODS` take F's signature.
for _name in OPS:
    if _name not in ("const", "detach"):
        if hasattr(Session, _name):
            raise TorchLeanError(f"op {_name!r} clashes with a Session attribute")
        setattr(Session, _name, TORCH_METHODS.get(_name) or _op_method(_name))
