"""Per-op laws: one module per op family, the shared core, and the obligation checks.

`proofs.laws.core` holds the law record (`OpLaw`, `Case`), registration by keyword
arguments (`law(op=..., ...)`), the regions and the shared sympy helpers, and `LAWS`, the
lookup of an op's law. One module per op family (the same family names as `spec.ops`)
writes its ops' laws; the families are those of the op table
(`spec.ops.families_holding`), loaded in its order. `proofs.laws.checks` checks the
obligations `op.<name>.adjoint|derivative|forward` and returns them as theorems (`checks.theorems`,
read by `proofs.catalogue`).

Invariants:
- Importing `proofs.laws` imports every family module, so `LAWS` holds every written law
  (a missing family module raises `ImportError`); no family module imports another, and
  `core` imports none. Then a composite without a written law gets the law derived from
  its table entry (`proofs.laws.derived`; `DERIVED` names them).
- Importing runs no check and registers no theorem; `checks.theorems` lists them in the op
  table's order.
"""

from __future__ import annotations

from spec.ops import families_holding, load_families

from .checks import check_obligation
from .core import LAWS, OBLIGATIONS, OpLaw
from .derived import write_derived_laws

__all__ = ["DERIVED", "FAMILIES", "LAWS", "OBLIGATIONS", "OpLaw", "check_obligation"]

FAMILIES = load_families(__name__, families_holding())
"""The family modules by family name (each writes its ops' laws into `LAWS` on import)."""

DERIVED = write_derived_laws()
"""The composites whose law is derived from their table entry (`proofs.laws.derived`: no
hand-written law), in table order."""
