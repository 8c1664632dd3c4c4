"""Per-op laws: one module per op family, the shared core, and the obligation checks.

`proofs.laws.core` holds the law record (`OpLaw`, `Case`), registration by keyword
arguments (`law(op=..., ...)`), the regions and the shared sympy helpers, and `LAWS`, the
lookup of an op's law. One module per op family (the same family names as `spec.ops`)
writes its ops' laws: elementwise, transcendental, reduce, linalg, shape, index, softmax,
loss, conv, pool, norm, attention, embed. `proofs.laws.checks` checks the obligations
`op.<name>.adjoint|derivative|forward` and registers them (`register_all`, called by
`proofs.registry`).

Invariants:
- Importing `proofs.laws` imports every family module, so `LAWS`
  holds every written law; no family module imports another, and `core` imports none.
- Importing runs no check; `register_all` registers theorems in the op table's order.
"""

from __future__ import annotations

from . import (
    attention,
    conv,
    elementwise,
    embed,
    index,
    linalg,
    loss,
    norm,
    pool,
    reduce,
    shape,
    softmax,
    transcendental,
)
from .checks import check_obligation, register_all
from .core import LAWS, OBLIGATIONS, OpLaw

__all__ = ["FAMILIES", "LAWS", "OBLIGATIONS", "OpLaw", "check_obligation", "register_all"]

FAMILIES = {
    "elementwise": elementwise,
    "transcendental": transcendental,
    "reduce": reduce,
    "linalg": linalg,
    "shape": shape,
    "index": index,
    "softmax": softmax,
    "loss": loss,
    "conv": conv,
    "pool": pool,
    "norm": norm,
    "attention": attention,
    "embed": embed,
}
"""The family modules by family name (each writes its ops' laws into `LAWS` on import)."""
