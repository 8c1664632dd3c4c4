"""The Session: TorchLean's training-loop environment, in eager and typed-graph modes.

Invariants:
- `Session` (`runtime.session.core`) is a thin facade that owns named parts, each an object
  of its own module with its own state and a public interface: recording and rollback
  (`recording.Recording`), the parameter store (`params.ParameterStore`), random streams
  (`streams.RandomStreams`), the typed graph and the link check (`link.GraphExport`);
  handles and their checks are in `handles`. No part reads another's private attributes,
  and the session reaches its parts only through their public names.
- TorchLean's proof-linked names (`SessionIR`, `SessionIRState`, the session-free `grad`)
  are aliases over the typed-graph `Session` (`ir`), not a second implementation.
- Every public name of the session API is importable from `runtime.session`.
"""

from .core import Session
from .gradients import GradientList, grad
from .handles import NatRef, TensorRef
from .ir import SessionIR, SessionIRState
from .link import GraphExport, LinkCheck, RecordedGraph
from .params import Cell, Param, ParameterStore, canonical_indices, group_leaves
from .recording import Recording
from .streams import RandomStreams, Rng, RngState

__all__ = [
    "Cell",
    "GradientList",
    "GraphExport",
    "LinkCheck",
    "NatRef",
    "Param",
    "ParameterStore",
    "RandomStreams",
    "RecordedGraph",
    "Recording",
    "Rng",
    "RngState",
    "Session",
    "SessionIR",
    "SessionIRState",
    "TensorRef",
    "canonical_indices",
    "grad",
    "group_leaves",
]
