"""The op table: every op declared once, in the module of its family, with its shape rule,
spec forward/JVP/VJP (or composite body) and samples.

Invariants:
- Importing `spec.ops` registers every family into `OPS`, in the order of `FAMILIES`
  (`table.load_families` imports `spec.ops.<family>` for each, so the family list is written
  once, in `table.FAMILIES`); `OPS` is complete whenever `spec.ops` is imported.
- `spec.ops.<family>` imports only `table` and `builders` (never this package), so the
  package has no import cycle; the normative evaluation order is stated in `table`.
"""

from __future__ import annotations

from .table import (
    FAMILIES,
    OPS,
    SAMPLE_KINDS,
    AttrSpec,
    OpDef,
    Sample,
    expand,
    families_holding,
    get_op,
    load_families,
    register,
    unbroadcast,
)

# Each family registers its ops on import, in the order of FAMILIES; the re-exports below
# come after, so they cannot change that order.
load_families(__name__, FAMILIES)

# isort: off
from .attention import default_attention_scale, neg_inf  # noqa: E402
from .builders import conv_out_dim  # noqa: E402
from .linalg import matmul_operands  # noqa: E402
from .norm import LN_EPS  # noqa: E402
from .transcendental import GELU_C, GELU_K, SAFE_LOG_EPS  # noqa: E402

# isort: on

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
    "families_holding",
    "get_op",
    "load_families",
    "matmul_operands",
    "neg_inf",
    "register",
    "unbroadcast",
]
