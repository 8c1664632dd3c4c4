"""The op table: every op declared once, in the module of its family, with its shape rule,
spec forward/JVP/VJP (or composite body) and samples.

Invariants:
- Importing `spec.ops` registers every family into `OPS`, in the order of `FAMILIES`
  (elementwise, transcendental, reduce, linalg, shape, index, softmax, loss, conv, pool,
  norm, attention, embed); `OPS` is complete whenever `spec.ops` is imported.
- `spec.ops.<family>` imports only `table` and `builders` (never this package), so the
  package has no import cycle; the normative evaluation order is stated in `table`.
"""

from __future__ import annotations

# Each family registers its ops on import, in the order of FAMILIES (keep this order).
# isort: off
from . import elementwise as elementwise
from . import transcendental as transcendental
from . import reduce as reduce
from . import linalg as linalg
from . import shape as shape
from . import index as index
from . import softmax as softmax
from . import loss as loss
from . import conv as conv
from . import pool as pool
from . import norm as norm
from . import attention as attention
from . import embed as embed

# isort: on
from .attention import default_attention_scale, neg_inf
from .builders import conv_out_dim
from .linalg import matmul_operands
from .norm import LN_EPS
from .table import (
    FAMILIES,
    OPS,
    SAMPLE_KINDS,
    AttrSpec,
    OpDef,
    Sample,
    expand,
    get_op,
    register,
    unbroadcast,
)
from .transcendental import GELU_C, GELU_K, SAFE_LOG_EPS

__all__ = [
    "FAMILIES",
    "GELU_C",
    "GELU_K",
    "LN_EPS",
    "OPS",
    "SAFE_LOG_EPS",
    "SAMPLE_KINDS",
    "AttrSpec",
    "OpDef",
    "Sample",
    "conv_out_dim",
    "default_attention_scale",
    "expand",
    "get_op",
    "matmul_operands",
    "neg_inf",
    "register",
    "unbroadcast",
]
