"""The catalogue: every theorem of `proofs`, looked up by name, alias or dotted prefix.

Invariants:
- The producers are imported here at module level and each returns its theorems
  (`PRODUCERS`, in catalogue order: the per-op laws in the op table's order, their closed
  forms, then the graph, tape, kernel, float, model and verify theorems); no producer
  mutates anything at import or when asked for its theorems. The record types are
  `proofs.records`, which imports no producer.
- The catalogue is built on first use (so a patched op table is what gets listed) and then
  kept; names and aliases are unique across it (`ProofError` otherwise).
- Every op of `spec.ops.OPS` gets its three obligations; an op without a written law gets
  obligations with status "missing" whose checks fail.
- `get` finds a theorem under its name or any of its aliases; `select` matches names
  (exact or dotted prefix) and exact aliases, in catalogue order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from . import float_laws, graph_laws, kernel_laws, model_graphs, verify_laws
from .laws import checks, closed_form
from .records import (
    DEFAULT_TIME_LIMIT,
    EVIDENCE_KINDS,
    RESULTS,
    STATUSES,
    CheckContext,
    CheckResult,
    ProofError,
    Scope,
    Theorem,
    Witness,
    run_check,
)

__all__ = [
    "DEFAULT_TIME_LIMIT",
    "EVIDENCE_KINDS",
    "PRODUCERS",
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

PRODUCERS: tuple[Callable[[], list[Theorem]], ...] = (
    checks.theorems,
    closed_form.theorems,
    graph_laws.theorems,
    kernel_laws.theorems,
    float_laws.theorems,
    model_graphs.theorems,
    verify_laws.theorems,
)
"""Each returns its theorems, in catalogue order."""


class _Catalogue:
    """The theorems by name and by alias, built once from `PRODUCERS`."""

    def __init__(self) -> None:
        self.by_name: dict[str, Theorem] = {}
        self.by_alias: dict[str, Theorem] = {}
        for produce in PRODUCERS:
            for th in produce():
                self._add(th)

    def _add(self, th: Theorem) -> None:
        for key in (th.name, *th.aliases):
            if key in self.by_name or key in self.by_alias:
                raise ProofError(f"theorem name or alias {key!r} used twice")
        self.by_name[th.name] = th
        self.by_alias.update((a, th) for a in th.aliases)
        clash = [a for a in th.aliases if a in self.by_name]
        if clash:
            raise ProofError(f"aliases {clash} of {th.name!r} are theorem names")


_BUILT: list[_Catalogue] = []


def _catalogue() -> _Catalogue:
    if not _BUILT:
        _BUILT.append(_Catalogue())
    return _BUILT[0]


def theorems() -> list[Theorem]:
    """Every theorem, in catalogue order."""
    return list(_catalogue().by_name.values())


def get(name: str) -> Theorem:
    """The theorem named `name`, or cited under the alias `name`."""
    cat = _catalogue()
    th = cat.by_name.get(name) or cat.by_alias.get(name)
    if th is None:
        raise ProofError(f"unknown theorem {name!r} (see `python -m proofs list`)")
    return th


def _matches(name: str, pattern: str) -> bool:
    return name == pattern or name.startswith(pattern.rstrip(".") + ".")


def select(patterns: Iterable[str] = ()) -> list[Theorem]:
    """Theorems named by `patterns` (exact names, exact aliases or dotted prefixes such as
    `op.relu`), in catalogue order; all theorems when `patterns` is empty. A pattern that matches
    nothing raises `ProofError`."""
    aliases = _catalogue().by_alias
    pats = [aliases[p].name if p in aliases else p for p in patterns]
    ths = theorems()
    if not pats:
        return ths
    for p in pats:
        if not any(_matches(t.name, p) for t in ths):
            raise ProofError(f"no theorem matches {p!r} (see `python -m proofs list`)")
    return [t for t in ths if any(_matches(t.name, p) for p in pats)]
