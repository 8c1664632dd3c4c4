"""The cluster flags shared by `python -m conformance`, `python -m conformance.sweep` and
`python -m proofs check`, and `execute`, which runs shards where the flags say.

Invariants:
- `--workers N` (default 1: in this process, exactly as without this package) runs on an
  embedded loopback LocalCluster of N worker processes; `--scheduler ADDRESS|FILE` runs on
  an existing Dask cluster (and overrides `--workers`). `--seeds K` (conformance only)
  repeats every Hypothesis run for K consecutive seeds: K times the cases, in K times the
  shards.
- This module imports no runner (the suite, the sweep, the proofs import it, never the
  reverse); `execute` prints only to stderr (the accepted worker count).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .cluster import DistributedError, Vetting, open_client, run_local, run_shards

__all__ = ["add_cluster_arguments", "execute", "sharded", "uses_cluster"]


def add_cluster_arguments(p: argparse.ArgumentParser, *, seeds: bool = False) -> None:
    p.add_argument(
        "--workers",
        type=int,
        default=1,
        help="shards on an embedded local Dask cluster of N worker processes (default 1: "
        "in this process); needs torchlean[distributed]",
    )
    p.add_argument(
        "--scheduler",
        default=None,
        metavar="ADDRESS",
        help="shards on an existing Dask cluster: scheduler address (tcp://host:8786) or "
        "scheduler file; its workers must match this checkout (source hash, libraries)",
    )
    if seeds:
        p.add_argument(
            "--seeds",
            type=int,
            default=1,
            help="repeat every Hypothesis run for K seeds SEED..SEED+K-1 (SEED default 0): "
            "K times the cases, as K times the shards (default 1)",
        )


def uses_cluster(a: argparse.Namespace) -> bool:
    return a.scheduler is not None or a.workers != 1


def sharded(a: argparse.Namespace) -> bool:
    """Whether the conformance flags need the shard runner (a cluster, or several seeds)."""
    return uses_cluster(a) or getattr(a, "seeds", 1) != 1


def execute(
    shards: Sequence[tuple[str, Any]],
    fn: Any,
    a: argparse.Namespace,
    on_result: Any = None,
    local_fn: Any = None,
) -> dict[str, Any]:
    """Run shards in this process (`--workers 1`) or on the cluster the flags name."""
    if not uses_cluster(a):
        return run_local(shards, local_fn or fn, on_result)
    if a.workers < 1:
        raise DistributedError(f"--workers must be at least 1, got {a.workers}")
    with open_client(a.workers, a.scheduler) as client:
        vet = Vetting()
        out = run_shards(client, shards, fn, vet=vet, on_result=on_result)
    n = len(vet.accepted)
    print(f"note: {len(shards)} shards on {n} accepted Dask workers", file=sys.stderr)
    return out
