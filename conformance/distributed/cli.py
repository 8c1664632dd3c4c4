"""The cluster flags shared by `python -m conformance`, `python -m conformance.sweep` and
`python -m proofs check`, and the sharded conformance run behind them.

Invariants:
- `--workers N` (default 1: in this process, exactly as without this package) runs on an
  embedded loopback LocalCluster of N worker processes; `--scheduler ADDRESS|FILE` runs on
  an existing Dask cluster (and overrides `--workers`). `--seeds K` (conformance only)
  repeats every Hypothesis run for K consecutive seeds: K times the cases, in K times the
  shards.
- `run_sharded` returns the same rows as `conformance.cli.run` for the same flags (only
  `seconds` differs: it is the sum of the shards' times), and prints only to stderr:
  refused workers, the shard count, and the progress bar (on a terminal).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from runtime.backends import Backend

from ..suite import Property, Row
from .cluster import DistributedError, Vetting, open_client, run_local, run_shards
from .suite_shards import Shard, local_runner, merge, plan, run_shard

__all__ = ["add_cluster_arguments", "run_sharded", "sharded", "uses_cluster"]


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


def run_sharded(a: argparse.Namespace, backend: Backend, props: Sequence[Property]) -> list[Row]:
    """The rows of `conformance.cli.run`, computed as shards (see the module invariants)."""
    if not backend.is_numpy and a.session_examples:
        print(
            f"note: the Session state machine runs on NumPy only; skipped for {a.backend!r}",
            file=sys.stderr,
        )
        a.session_examples = 0
    if a.seeds < 1:
        raise DistributedError(f"--seeds must be at least 1, got {a.seeds}")
    shards = plan(
        props,
        max_examples=a.max_examples,
        per_op=a.per_op,
        seed=a.seed,
        seeds=a.seeds,
        session_examples=a.session_examples,
        against=a.against,
    )
    bar = _bar(sum(sh.cost for sh in shards))
    try:
        results = execute(
            [(sh.id, sh) for sh in (_by_cost(shards) if uses_cluster(a) else shards)],
            run_shard,
            a,
            on_result=lambda sid, r: bar.update(r["row"]["cases"]),
            local_fn=local_runner,
        )
    finally:
        bar.close()
    rows, _ = merge(shards, results)
    return rows


def _by_cost(shards: Sequence[Shard]) -> list[Shard]:
    """Largest first (a better packing on the cluster; the merge restores the order)."""
    return sorted(shards, key=lambda sh: -sh.cost)


def _bar(total: int):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(
        total=total, file=sys.stderr, disable=not sys.stderr.isatty(), unit="case", leave=False
    )
