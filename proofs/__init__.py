"""torchlean's checked obligations with stable, citable names.

`proofs.catalogue` lists the theorems (records in `proofs.records`): per-op laws
(`op.<name>.adjoint|derivative|forward` and `.vjp_closed_form`, `proofs.laws`), the
graph-level link, adjointness and tape theorems (`proofs.graph_laws`, over the bounded
grammars of `proofs.enumeration` and, op-agnostic, `proofs.opaque_ops`), the kernel laws,
the IEEE bit-equality theorems (`proofs.float_laws`, `proofs.model_graphs`) and verify's op
order (`proofs.verify_laws`); each has a witness (`proofs.witnesses`). `python -m proofs
check` re-runs them in worker processes under time limits (`proofs.runner.run_theorem` for
one) and writes a certificate (`proofs.run_certificate`); see proofs/README.md.

Invariants: importing `proofs` runs no check and registers nothing; `proofs` imports
`spec`, `runtime` and `conformance` (for the theorems about them and the cluster flags);
nothing in `spec`, `runtime` or `conformance` imports `proofs`.
"""

from .catalogue import (
    EVIDENCE_KINDS,
    RESULTS,
    STATUSES,
    CheckContext,
    CheckResult,
    ProofError,
    Scope,
    Theorem,
    Witness,
    get,
    run_check,
    select,
    theorems,
)

__all__ = [
    "EVIDENCE_KINDS",
    "RESULTS",
    "STATUSES",
    "CheckContext",
    "CheckResult",
    "ProofError",
    "Scope",
    "Theorem",
    "Witness",
    "get",
    "run_check",
    "select",
    "theorems",
]
