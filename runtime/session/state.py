"""The state every part of a `Session` shares, declared once for the type checker.

Invariants:
- A session is one object composed of named parts (handles, recording, parameter store,
  random streams, graph export and link check); each part is a class of its own module and
  reads and writes only the attributes declared here.
- Nothing here runs: the declarations are annotations, and the methods one part calls on
  another are declared for type checking only (the session's classes define them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

__all__ = ["SessionState"]

if TYPE_CHECKING:
    import weakref

    from spec.graph import GraphBuilder

    from ..backends.base import Backend
    from ..engine.context import KernelContext
    from ..engine.tape import Tape
    from .handles import TensorRef
    from .params import Param
    from .streams import Rng


class SessionState:
    """The attributes of a session (set by `Session.__init__` and `reset_tape`)."""

    mode: str
    device: str
    dtype: str
    kernels: str
    backend: Backend
    ctx: KernelContext
    grad_enabled: bool
    requires_grad_by_default: bool
    owner: int
    generation: int
    rng: Rng
    tape: Tape
    _host_ctx: KernelContext | None
    _self_ref: weakref.ref[Any]
    _params: list[Param]
    _leaf_param: dict[int, Param]
    _env: list[int]
    _builder: GraphBuilder | None
    _graph_has_nodes: bool

    if TYPE_CHECKING:  # defined by the parts; declared here for the parts that call them

        def _ref(self, i: int) -> TensorRef: ...

        def _check(self, x: Any, what: str = "argument") -> int: ...

        def _check_nat(self, r: Any, what: str = "argument") -> int: ...

        def _leaf(self, value: Any, requires_grad: bool, name: str) -> TensorRef: ...

        def _grad_array(self, g: Any) -> Any: ...

        def const(self, value: Any) -> TensorRef: ...

        def op(self, name: str, *args: Any, **attrs: Any) -> TensorRef: ...

        def _record(self, op: str, args: Sequence[int], attrs: dict[str, Any]) -> TensorRef: ...

        def __getattr__(self, name: str) -> Callable[..., TensorRef]: ...
