"""`python -m proofs check --workers N | --scheduler ADDRESS`: theorems as shards.

Invariants:
- Every isolated theorem (`Theorem.isolated`: uses no shared run state) is its own shard,
  run as `proofs.runner` runs it in a pool worker: `CheckContext(quick=..., jobs=1)`.
  The other theorems (graph, link, tape and float theorems, which share one enumeration
  sweep through the run's cache) form one shard, run in one context whose `selected` is
  the whole selection, as the serial runner runs them in the calling process.
- The result is one `(Theorem, CheckResult)` per selected theorem, in the selection's
  order, keyed by theorem name; only `seconds` can differ from a serial run.
- `proofs` imports `conformance.distributed` (the flags and the cluster), never the
  reverse. A cluster error (no Dask, no usable worker) is raised as `ProofError`, which
  `python -m proofs` reports with exit status 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from conformance.distributed.cluster import DistributedError
from conformance.distributed.flags import execute

from .catalogue import CheckContext, ProofError, get, run_check

__all__ = ["plan", "run_theorem_shard", "run_theorems_sharded"]

SHARED = "shared"


def plan(names: Sequence[str], isolated: Sequence[bool], quick: bool) -> list[tuple[str, Any]]:
    """(shard id, payload) pairs: one per isolated theorem, one for all the others."""
    shards: list[tuple[str, Any]] = [
        (f"theorem:{n}", ((n,), (), quick)) for n, iso in zip(names, isolated, strict=True) if iso
    ]
    rest = tuple(n for n, iso in zip(names, isolated, strict=True) if not iso)
    if rest:
        shards.append((f"theorems:{SHARED}", (rest, tuple(names), quick)))
    return shards


def run_theorem_shard(payload: tuple[tuple[str, ...], tuple[str, ...], bool]) -> list[Any]:
    """[(name, CheckResult)] for the shard's theorems, in order, in one context."""
    names, selected, quick = payload
    ctx = CheckContext(quick=quick, jobs=1, selected=frozenset(selected))
    return [(n, run_check(get(n), ctx)) for n in names]


def run_theorems_sharded(
    ths: Sequence[Any],
    *,
    quick: bool,
    args: argparse.Namespace,
    on_result: Callable[[Any, Any], None] | None = None,
) -> list[tuple[Any, Any]]:
    """Run the theorems `ths` as shards on the cluster `args` names (`--workers`,
    `--scheduler`); the results in `ths` order."""
    by_name = {t.name: t for t in ths}
    shards = plan([t.name for t in ths], [t.isolated for t in ths], quick)
    got: dict[str, Any] = {}

    def done(sid: str, rs: list[Any]) -> None:
        for name, r in rs:
            got[name] = r
            if on_result is not None:
                on_result(by_name[name], r)

    try:
        execute(shards, run_theorem_shard, args, on_result=done)
    except DistributedError as e:  # `python -m proofs` reports ProofError, exit status 2
        raise ProofError(str(e)) from e
    return [(t, got[t.name]) for t in ths]
