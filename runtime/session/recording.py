"""Recording and rollback: the tape, the integer environment and, in typed-graph mode,
the spec graph, appended all or nothing.

Invariants:
- Both modes run every op on the same runtime tape (so they return the same gradients);
  typed-graph mode also records a spec graph (`spec.graph.GraphBuilder`) and requires every
  leaf and NatRef before the first op node.
- An op call validates every handle before anything is created; a failed call leaves the
  recording unchanged (tape, graph, environment): a const made from a Python scalar is
  rolled back with the tape and the graph when the op then fails.
- `reset_tape()` drops the recording and bumps the generation; parameters, the owner and
  the RNG counter survive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spec.errors import GraphError, TorchLeanError
from spec.graph import GraphBuilder
from spec.ops import OPS

from ..engine.tape import Tape, validated
from .handles import NatRef, TensorRef
from .params import Param, is_scalar
from .state import SessionState

__all__ = ["Recording"]


class Recording(SessionState):
    """The session part that records ops on the tape (and the typed graph)."""

    def _reset_recording(self) -> None:
        self.tape = Tape(self.ctx)
        self._leaf_param: dict[int, Param] = {}
        self._env: list[int] = []
        self._builder = GraphBuilder() if self.mode == "typed_graph" else None
        self._graph_has_nodes = False

    def _no_leaf_after_ops(self, what: str) -> None:
        if self.mode == "typed_graph" and self._graph_has_nodes:
            raise GraphError(
                f"{what}: cannot add a new leaf after graph nodes have been "
                "created (reset_tape first)"
            )

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

    def _coerce(self, x: Any, what: str) -> int:
        if is_scalar(x):
            return self.const(x).id
        return self._check(x, what)

    def _record(self, op: str, args: Sequence[int], attrs: dict[str, Any]) -> TensorRef:
        """Validate, run on the tape, and (typed graph) record: all or nothing."""
        env = tuple(self._env)
        if self._builder is None and op != "detach":
            # eager: Tape.op validates (memoised) before it appends anything
            return self._ref(self.tape.op(op, args, env, **attrs))
        shapes = tuple([tuple(self.tape.nodes[a].value.shape) for a in args])
        norm, _ = validated(op, attrs, shapes)
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
            if not is_scalar(a):
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
            b.num_inputs if b else 0,
            b.num_nodes if b else 0,
            b.num_values if b else 0,
            self._graph_has_nodes,
        )

    def _rollback(self, mark: tuple[int, int, int, int, bool]) -> None:
        n, n_in, n_nodes, n_shapes, has_nodes = mark
        del self.tape.nodes[n:]
        if self._builder is not None:
            self._builder.truncate(n_in, n_nodes, n_shapes)
        self._graph_has_nodes = has_nodes

    def detach(self, x: TensorRef) -> TensorRef:
        """Eager: a frozen node with parent x and no contributions; typed graph: the spec
        `detach` op (identity forward, zero JVP and VJP), frozen on the tape as well."""
        return self.op("detach", x)

    def reset_tape(self) -> None:
        """Drop the recording; bump the generation (parameters and RNG survive)."""
        self.generation += 1
        self._reset_recording()
