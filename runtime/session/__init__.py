"""The Session: TorchLean's training-loop environment, in eager and typed-graph modes.

Invariants:
- `Session` (`runtime.session.core`) is a thin facade composed of named parts, each in its
  own module: handles and their checks (`handles`), recording and rollback (`recording`),
  the parameter store (`params`), random streams (`streams`), the typed graph and the link
  check (`link`); the state they share is declared in `state`.
- Every public name of the session API is importable from `runtime.session`.
"""

from .core import Session
from .handles import NatRef, TensorRef
from .link import LinkCheck, RecordedGraph
from .params import Cell, Param, canonical_indices, group_leaves
from .streams import Rng

__all__ = [
    "Cell",
    "LinkCheck",
    "NatRef",
    "Param",
    "RecordedGraph",
    "Rng",
    "Session",
    "TensorRef",
    "canonical_indices",
    "group_leaves",
]
