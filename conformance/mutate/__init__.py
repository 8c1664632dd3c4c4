"""`python -m conformance.mutate`: the mutation harness of the conformance suite.

It applies each mutant of the catalogue (`catalogue.CATALOGUE`: realistic single-point bugs
in `runtime/`) to a copy of the repository, runs the default `python -m conformance` there
and reports killed / survived / not applicable / time to kill. The published score is in
docs/MUTATION.md.

Invariants: the working tree is never modified (see `harness`); the catalogue is data
(see `catalogue`); the entry point (`__main__`) only parses flags and sequences `run_all`
and `markdown`.
"""

from __future__ import annotations

from .catalogue import CATALOGUE, Mutant, by_id
from .harness import MutantResult, apply, copy_tree, run_mutant, snippet_count
from .report import markdown, run_all

__all__ = [
    "CATALOGUE",
    "Mutant",
    "MutantResult",
    "apply",
    "by_id",
    "copy_tree",
    "markdown",
    "run_all",
    "run_mutant",
    "snippet_count",
]
