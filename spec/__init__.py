"""torchlean's reference semantics: shapes, scalar domains, tensors, the op table, the typed
SSA graph IR with eval / jvp_ctx / backprop_ctx / backprop_all_ctx, and the RNG.

`spec` imports nothing from `runtime`, `proofs` or `conformance`. `__version__` is the
version of the semantics (`spec.version`), recorded in every report and certificate.
"""

from .domains import (
    BFLOAT16,
    BINARY32,
    DOMAINS,
    FLOAT16,
    FLOAT64,
    RATIONAL,
    SYMBOLIC,
    Domain,
    IEEEDomain,
    domain_by_name,
)
from .errors import (
    CheckpointError,
    DomainError,
    GraphError,
    HookError,
    ShapeError,
    StaleHandleError,
    TorchLeanError,
)
from .graph import (
    Graph,
    GraphBuilder,
    Node,
    backprop_all_ctx,
    backprop_ctx,
    eval_graph,
    format_graph,
    jvp_ctx,
    node_vjp_dense,
)
from .ops import OPS, OpDef, get_op
from .probe import FloatEnvironmentError, check_float_environment, check_subnormals
from .serialize import graph_from_json, graph_to_json, tensor_from_dict, tensor_to_dict
from .shape import Shape, broadcast_shapes, broadcasts_to, size, sliding_window_out_dim
from .tensor import SomeTensor, Tensor, TensorPack, dot, dot_list
from .validate import validate_graph
from .version import __version__

check_float_environment()

__all__ = [
    "BFLOAT16",
    "BINARY32",
    "DOMAINS",
    "FLOAT16",
    "FLOAT64",
    "OPS",
    "RATIONAL",
    "SYMBOLIC",
    "CheckpointError",
    "Domain",
    "DomainError",
    "FloatEnvironmentError",
    "Graph",
    "GraphBuilder",
    "GraphError",
    "HookError",
    "IEEEDomain",
    "Node",
    "OpDef",
    "Shape",
    "ShapeError",
    "SomeTensor",
    "StaleHandleError",
    "Tensor",
    "TensorPack",
    "TorchLeanError",
    "__version__",
    "backprop_all_ctx",
    "backprop_ctx",
    "broadcast_shapes",
    "broadcasts_to",
    "check_float_environment",
    "check_subnormals",
    "domain_by_name",
    "dot",
    "dot_list",
    "eval_graph",
    "format_graph",
    "get_op",
    "graph_from_json",
    "graph_to_json",
    "jvp_ctx",
    "node_vjp_dense",
    "size",
    "sliding_window_out_dim",
    "tensor_from_dict",
    "tensor_to_dict",
    "validate_graph",
]
