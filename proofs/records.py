"""The theorem records: checked obligations with stable, citable names.

Invariants:
- A theorem name is a stable dotted identifier: `op.<op>.adjoint|derivative|forward` for the
  per-op laws, `link.*`, `graph.*`, `tape.*` and `float.*` for the graph- and
  format-level theorems. A published name keeps its meaning; a changed statement gets a
  new name.
- Every `Theorem` carries its statement in words and as a formula, its `Scope` (ops,
  domains, shapes, graph sizes), the kinds of evidence (`EVIDENCE_KINDS`), a check and a
  status (`STATUSES`), and may carry `aliases`: other names it is cited under (such as
  TorchLean's Lean names); an alias is never another theorem's name. The catalogue of all
  theorems is `proofs.catalogue`; this module holds only the records and imports no
  producer.
- A check is a callable `check(ctx: CheckContext) -> CheckResult`. Checks are
  deterministic: the same sources and the same mode give the same `CheckResult` (result,
  counts, details); timings live only in `CheckResult.seconds`. A failing obligation is
  reported as `passed=False`, never raised; `run_check` turns an unexpected exception into
  a failed result that names the exception.
- Per-op checks look the op up in `spec.ops.OPS` when they run (not when they are
  registered), so a patched op table is what gets checked.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spec.errors import TorchLeanError

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "EVIDENCE_KINDS",
    "RESULTS",
    "STATUSES",
    "CheckContext",
    "CheckResult",
    "ProofError",
    "Scope",
    "Theorem",
    "Witness",
    "run_check",
]

EVIDENCE_KINDS = (
    "symbolic identity",
    "numeric fallback",
    "bounded enumeration",
    "random cases",
    "written proof",
)
"""The kinds of evidence a theorem can rest on: `symbolic identity` (sympy decides an
identity, proof over the reals for the listed cases), `numeric fallback` (identities sympy
cannot decide are evaluated at a few exact rational points: evidence, not proof),
`bounded enumeration` (every graph of a grammar up to stated bounds), `random cases`
(a stated number of pseudo-random cases: testing) and `written proof` (an argument in
prose, not machine-checked). A theorem's `bounds` says the bounds or case counts."""

STATUSES = ("checked", "missing", "known-failing")
"""`checked`: the evidence listed is checked by the run; `missing`: no law written yet (the
check fails); `known-failing`: documents a known bug (the check fails until the bug is
fixed)."""

RESULTS = ("pass", "fail", "undecided (time limit)")
"""A check's result: an obligation that ran past its time limit is undecided, and fails
the run."""

DEFAULT_TIME_LIMIT = 30.0
"""Seconds a per-op obligation may run before it is undecided (scaled by the run's
`time_scale`)."""


class ProofError(TorchLeanError):
    """A proofs-layer error: unknown theorem names, malformed certificates, bad laws."""


@dataclass(frozen=True)
class Scope:
    """What a theorem quantifies over."""

    ops: tuple[str, ...]
    domains: tuple[str, ...]
    shapes: str
    graphs: str = "single op application"

    def summary(self) -> str:
        ops = ", ".join(self.ops) if len(self.ops) <= 8 else f"{len(self.ops)} ops"
        return (
            f"ops: {ops}; domains: {', '.join(self.domains)}; shapes: {self.shapes}; "
            f"graphs: {self.graphs}"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ops": list(self.ops),
            "domains": list(self.domains),
            "shapes": self.shapes,
            "graphs": self.graphs,
        }


@dataclass
class CheckResult:
    """The outcome of one check. `counts` and `details` must be JSON-serialisable and
    deterministic; `seconds` is the only timing."""

    passed: bool
    counts: dict[str, int] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    undecided: bool = False
    """True when the check was stopped at its time limit (then `passed` is False)."""

    @property
    def result(self) -> str:
        if self.undecided:
            return RESULTS[2]
        return RESULTS[0] if self.passed else RESULTS[1]

    def to_json(self) -> dict[str, Any]:
        return {
            "result": self.result,
            "counts": dict(self.counts),
            "details": self.details,
        }


@dataclass
class CheckContext:
    """Run-time settings shared by the checks of one run.

    `quick` selects the small bounds; `jobs` is the number of worker processes a check may
    use; `cache` lets checks share work within a run (e.g. one sweep over the enumerated
    graphs serves several graph theorems); `selected` names every theorem of the run;
    `progress(desc, done, total)` reports progress of long checks (may be None)."""

    quick: bool = False
    jobs: int = 1
    cache: dict[Any, Any] = field(default_factory=dict)
    selected: frozenset[str] = frozenset()
    progress: Callable[[str, int, int], None] | None = None

    def report(self, desc: str, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(desc, done, total)


@dataclass(frozen=True)
class Witness:
    """A falsifier: a small defect (a changed rule, body, accumulation order or kernel)
    that `apply()` installs by monkeypatching, in a worker process of its own, after which
    the theorem's check must fail."""

    defect: str
    apply: Callable[[], None]


@dataclass(frozen=True)
class Theorem:
    """One named obligation. `bounds` states the evidence's bounds or case counts (graph
    grammars, random cases per mode); `group` names theorems that share one worker process
    (and one sweep); `time_limit` is in seconds, per mode (quick, full); `witness` is the
    defect the check must catch."""

    name: str
    statement: str
    formula: str
    scope: Scope
    evidence: tuple[str, ...]
    check: Callable[[CheckContext], CheckResult]
    status: str = "checked"
    sources: tuple[str, ...] = ("spec", "proofs")
    references: tuple[str, ...] = ()
    isolated: bool = False
    """True when the check uses no shared run state (it may run concurrently with others)."""
    bounds: str = ""
    group: str = ""
    time_limit: tuple[float, float] = (DEFAULT_TIME_LIMIT, DEFAULT_TIME_LIMIT)
    witness: Witness | None = None
    aliases: tuple[str, ...] = ()
    """Other names the theorem is cited under (found by `proofs.catalogue.get`); not part
    of the certificate's record of the theorem."""

    def evidence_label(self) -> str:
        """The evidence kinds, with the bounds when there are any."""
        text = " + ".join(self.evidence)
        return f"{text} ({self.bounds})" if self.bounds else text

    def __post_init__(self) -> None:
        bad = [e for e in self.evidence if e not in EVIDENCE_KINDS]
        if bad or not self.evidence:
            raise ProofError(
                f"{self.name}: evidence must be drawn from {EVIDENCE_KINDS} (got {self.evidence})"
            )
        if self.status not in STATUSES:
            raise ProofError(f"{self.name}: status must be one of {STATUSES} (got {self.status!r})")

    def to_json(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "formula": self.formula,
            "scope": self.scope.to_json(),
            "evidence": list(self.evidence),
            "bounds": self.bounds,
            "witness": self.witness.defect if self.witness else None,
            "status": self.status,
            "sources": list(self.sources),
            "references": list(self.references),
        }


def run_check(th: Theorem, ctx: CheckContext) -> CheckResult:
    """Run a theorem's check; an exception becomes a failed result naming it."""
    t0 = time.perf_counter()
    try:
        res = th.check(ctx)
    except Exception as e:  # a crashing check is a failed obligation, reported with its cause
        tb = traceback.extract_tb(e.__traceback__)
        where = ["/".join(f.filename.rsplit("/", 2)[-2:]) + f":{f.lineno}" for f in tb[-3:]]
        res = CheckResult(
            False, {"errors": 1}, {"error": f"{type(e).__name__}: {e}", "where": where}
        )
    res.seconds = time.perf_counter() - t0
    return res
