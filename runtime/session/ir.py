"""TorchLean's proof-linked session names (`SessionIR`, `SessionIRState`, the session-free
`grad`) as thin aliases over the typed-graph `Session`: no second implementation.

Invariants:
- `SessionIR(...)` and `SessionIR.new(...)` are a `Session` in mode "typed_graph" on the CPU
  (TorchLean's `SessionIR.new`: a session over the empty state); every method, including
  `backward_dense_all`, `backward_scalar_dense_all`, `grad` and forward mode, is the
  Session's own; `SessionIR.grad(grads, x)` read on the class (no session) is TorchLean's
  session-free `grad`.
- `SessionIRState` is the recorded state of such a session (`RecordedGraph`: the spec graph,
  its leaf values, the integer environment and the dtype); `SessionIRState.empty(dtype)` is
  TorchLean's `SessionIRState.empty` (no leaves, no nodes, no environment), which is what a
  new `SessionIR` holds (`state()`).
- The link theorem between this session's backward and the spec
  (`Session.check_link`; TorchLean's `backwardDenseFrom_compileAuxData_eq_backpropAllCtx`)
  is checked by the existing proof obligation, not restated here.
"""

from __future__ import annotations

from typing import Any

from spec.graph import Graph

from .core import Session
from .gradients import grad
from .link import RecordedGraph

__all__ = ["SessionIR", "SessionIRState", "grad"]


class SessionIRState(RecordedGraph):
    """TorchLean's `SessionIRState`: the graph, leaf values and environment a typed-graph
    session recorded."""

    @classmethod
    def empty(cls, dtype: str = "float32") -> SessionIRState:
        """TorchLean's `SessionIRState.empty`: no leaves, no nodes, no environment."""
        return cls(Graph(()), [], [], dtype)


class _SessionFreeOrBound:
    """`grad` as TorchLean spells it on both sides: `SessionIR.grad(grads, x)` (read on the
    class) is the session-free `grad`; `s.grad(grads, x)` (read on a session) is the
    session's own `Session.grad`, which also checks `x` and the list against the session."""

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return grad
        return Session.grad.__get__(obj, owner)


class SessionIR(Session):
    """TorchLean's `SessionIR`: the typed-graph `Session` (CPU), under its own name."""

    grad = _SessionFreeOrBound()

    def __init__(
        self,
        dtype: str = "float32",
        kernels: str = "fast",
        grad_enabled: bool = True,
        requires_grad_by_default: bool = True,
        seed: int = 0,
    ) -> None:
        super().__init__(
            "typed_graph", "cpu", dtype, kernels, grad_enabled, requires_grad_by_default, seed
        )

    @classmethod
    def new(cls, dtype: str = "float32", kernels: str = "fast", **options: Any) -> SessionIR:
        """TorchLean's `SessionIR.new`: a session holding `SessionIRState.empty`."""
        return cls(dtype, kernels, **options)

    def state(self) -> SessionIRState:
        """The recorded state now (a copy: later calls do not change it)."""
        rec = self.graph()
        return SessionIRState(rec.graph, rec.inputs, rec.env, rec.dtype)
