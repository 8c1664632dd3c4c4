"""torchlean's checked obligations with stable, citable names.

`proofs.registry` holds the theorems: per-op laws (`op.<name>.adjoint|derivative|forward`,
`proofs.laws`), the graph-level link, adjointness, prefix and tape theorems
(`proofs.graph_laws`, over the bounded grammar of `proofs.enumeration`) and the IEEE
bit-equality theorem (`proofs.float_laws`). `python -m proofs check` re-runs them and
writes a certificate (`proofs.run_certificate`); see proofs/README.md.

Invariants: importing `proofs` runs no check; `proofs` imports `spec`, and `runtime` /
`conformance` only for the theorems that are about them; nothing in `spec` or `runtime`
imports `proofs`.
"""

from .registry import (
    EVIDENCE_KINDS,
    STATUSES,
    CheckContext,
    CheckResult,
    ProofError,
    Scope,
    Theorem,
    get,
    run_check,
    select,
    theorems,
)

__all__ = [
    "EVIDENCE_KINDS",
    "STATUSES",
    "CheckContext",
    "CheckResult",
    "ProofError",
    "Scope",
    "Theorem",
    "get",
    "run_check",
    "select",
    "theorems",
]
