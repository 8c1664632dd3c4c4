"""Recording and rollback: the tape, the integer environment and, in typed-graph mode,
the spec graph, appended all or nothing.

Invariants:
- A `Recording` owns its tape, its integer environment (the values behind NatRefs), and in
  typed-graph mode its spec graph (`spec.graph.GraphBuilder`) and whether the graph has op
  nodes yet; nothing else writes them.
- Both modes run every op on the same runtime tape (so they return the same gradients);
  typed-graph mode also records the spec graph and requires every leaf and NatRef before
  the first op node.
- `record` is all or nothing: it validates before it appends to the tape or the graph.
  `mark`/`rollback` undo a sequence of appends (the session uses them for an op call whose
  Python scalars became consts before the op failed): a failed call leaves the recording
  unchanged (tape, graph, environment).
- `reset()` drops the recording in place (a new tape, environment and graph).
- `selected_backends` lists the kernels the recording accepted, in first-use order
  (TorchLean's `selectedBackends`); it survives `reset()` and a rollback drops the kernels
  first used by the rolled-back calls.
- The environment is an immutable tuple, replaced (never mutated) by `append_nat` and
  `set_nat`: an op keeps the environment it ran with without a copy per op.
- `plain` is the eager per-op path's state: `(tape, env)` in eager mode (the current tape
  and environment; `reset`, `append_nat` and `set_nat` replace it with theirs), None in
  typed-graph mode. An op without attributes (not `detach`) recorded as
  `tape.op(op, args, env)` followed by `note_kernel(op)` when `op not in kernels_used` is
  `record_plain(op, args)` (its reference), which is `record(op, args, {})`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any, NamedTuple

from spec.errors import DomainError, GraphError, TorchLeanError
from spec.graph import Graph, GraphBuilder

from ..backends.base import DTYPE_DOMAIN, to_spec
from ..engine.context import KernelContext
from ..engine.tape import Tape, validated

__all__ = ["Mark", "Recording", "typed_const_attrs"]


class Mark(NamedTuple):
    """The sizes of a recording at one point, for `Recording.rollback`."""

    tape_nodes: int
    graph_inputs: int
    graph_nodes: int
    graph_values: int
    has_nodes: bool
    selected: int


def typed_const_attrs(arr: Any, dtype: str) -> dict[str, Any]:
    """The attributes of a typed-graph `const` node holding `arr`: its shape and the exact
    rational of every element (a non-finite element raises `DomainError`)."""
    t = to_spec(arr, dtype)
    D = DTYPE_DOMAIN[dtype]
    try:
        values = [v if isinstance(v, Fraction) else D.to_rational(v) for v in t.data]
    except DomainError as e:
        raise DomainError(f"const: a typed graph const must be finite ({e})") from None
    return {"shape": tuple(arr.shape), "values": values}


def _check_nat_value(n: Any, what: str) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TorchLeanError(f"{what}: expected a non-negative int, got {n!r}")


class Recording:
    """A session's recording: the tape, the environment and (typed graph) the spec graph."""

    def __init__(self, ctx: KernelContext, typed: bool) -> None:
        self._ctx = ctx
        self._typed = typed
        self._label = f"{ctx.backend.name}/{ctx.profile}"
        self.kernels_used: dict[str, str] = {}
        """op -> "backend/profile" in first-use order (`selected_backends`); written only
        by the recording (`note_kernel`, `rollback`), read by the Session's per-op path."""
        self.plain: tuple[Tape, tuple[int, ...]] | None = None
        self.reset()

    def reset(self) -> None:
        """Drop everything recorded: a new tape, environment and graph."""
        self._tape = Tape(self._ctx)
        self._env: tuple[int, ...] = ()
        self._builder = GraphBuilder() if self._typed else None
        self._has_nodes = False
        self._sync_plain()

    def _sync_plain(self) -> None:
        self.plain = None if self._typed else (self._tape, self._env)

    # ------------------------------------------------------------------ reading
    @property
    def tape(self) -> Tape:
        """The runtime tape (one node per leaf, const and op)."""
        return self._tape

    @property
    def typed(self) -> bool:
        """Whether a spec graph is recorded (typed-graph mode)."""
        return self._typed

    @property
    def has_nodes(self) -> bool:
        """Whether the spec graph has op nodes yet (always False in eager mode)."""
        return self._has_nodes

    @property
    def num_leaves(self) -> int:
        """The number of leaves of the spec graph (0 in eager mode)."""
        return 0 if self._builder is None else self._builder.num_inputs

    @property
    def env(self) -> tuple[int, ...]:
        """The integer environment, one value per NatRef slot."""
        return self._env

    def nat(self, slot: int) -> int:
        return self._env[slot]

    def build_graph(self) -> Graph:
        """The spec graph recorded so far (typed-graph mode only)."""
        if self._builder is None:
            raise TorchLeanError("build_graph: only a typed recording has a graph")
        return self._builder.build()

    # ------------------------------------------------------------------ appending
    def check_no_nodes(self, what: str) -> None:
        """Typed graph: leaves and NatRefs come before the first op node."""
        if self._typed and self._has_nodes:
            raise GraphError(
                f"{what}: cannot add a new leaf after graph nodes have been "
                "created (reset_tape first)"
            )

    def leaf(self, value: Any, requires_grad: bool, name: str) -> int:
        """Append a leaf holding `value`; its tape id."""
        self.check_no_nodes(name)
        i = self._tape.leaf(value, requires_grad=requires_grad, name=name)
        if self._builder is not None:
            self._builder.input(tuple(value.shape))
        return i

    def append_nat(self, n: int) -> int:
        """Append `n` to the environment; its slot."""
        self.check_no_nodes("input_nat")
        _check_nat_value(n, "input_nat")
        self._env = (*self._env, n)
        self._sync_plain()
        return len(self._env) - 1

    def set_nat(self, slot: int, n: int) -> None:
        """Replace the value of a slot. Typed graph: only before the first op node."""
        _check_nat_value(n, "set_nat")
        if self._typed and self._has_nodes:
            raise GraphError(
                "set_nat: cannot change a NatRef after graph nodes have been "
                "created (reset_tape first)"
            )
        env = list(self._env)
        env[slot] = n  # the list's indexing rules (and IndexError) as before
        self._env = tuple(env)
        self._sync_plain()

    def record(self, op: str, args: Sequence[int], attrs: dict[str, Any]) -> int:
        """Validate, run on the tape, and (typed graph) record: all or nothing. The new
        node's tape id."""
        env = self._env
        if self._builder is None and op != "detach":
            # eager: Tape.op validates (memoised) before it appends anything
            i = self._tape.op(op, args, env, **attrs)
        else:
            shapes = tuple([tuple(self._tape.nodes[a].value.shape) for a in args])
            norm, _ = validated(op, attrs, shapes)
            if op == "detach":
                i = self._tape.detach(args[0])
            else:
                i = self._tape.op(op, list(args), env, **norm)
            if self._builder is not None:
                self._builder.node(op, *args, **norm)  # cannot fail: same checks as above
                self._has_nodes = True
        if op not in self.kernels_used:
            self.note_kernel(op)
        return i

    def note_kernel(self, op: str) -> None:
        """Record that `op`'s kernel was accepted (first use; see `selected_backends`)."""
        self.kernels_used.setdefault(op, self._label)

    def record_plain(self, op: str, args: tuple[int, ...]) -> tuple[int, tuple[int, ...]]:
        """`record(op, args, {})` for an op without attributes: (the new node's tape id,
        its value's shape). Eager: straight to `Tape.op` (which validates before it
        appends); typed graph and `detach` (a frozen node, not a kernel's): `record`. The
        reference of the Session's inlined per-op path (see `plain`)."""
        tape = self._tape
        if self._builder is not None or op == "detach":
            i = self.record(op, args, {})
        else:
            i = tape.op(op, args, self._env)
            if op not in self.kernels_used:
                self.note_kernel(op)
        return i, tape.nodes[i].value.shape

    @property
    def selected_backends(self) -> tuple[str, ...]:
        """TorchLean's `selectedBackends`: the kernels this recording accepted (ran to
        completion), in first-use order, one entry per op as "op:backend/profile". It
        survives `reset()`; a rolled-back call's kernels are dropped again."""
        return tuple(f"{op}:{label}" for op, label in self.kernels_used.items())

    # ------------------------------------------------------------------ rollback
    def mark(self) -> Mark:
        b = self._builder
        return Mark(
            len(self._tape.nodes),
            b.num_inputs if b else 0,
            b.num_nodes if b else 0,
            b.num_values if b else 0,
            self._has_nodes,
            len(self.kernels_used),
        )

    def rollback(self, mark: Mark) -> None:
        """Drop everything appended to the tape and the graph since `mark`."""
        n, n_in, n_nodes, n_shapes, has_nodes, n_selected = mark
        del self._tape.nodes[n:]
        while len(self.kernels_used) > n_selected:
            self.kernels_used.popitem()
        if self._builder is not None:
            self._builder.truncate(n_in, n_nodes, n_shapes)
        self._has_nodes = has_nodes
