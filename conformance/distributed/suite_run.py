"""The sharded conformance run behind `python -m conformance --workers/--scheduler/--seeds`
(the flags are `flags`).

Invariants:
- `run_sharded` returns the same rows as `conformance.cli.run` for the same flags (only
  `seconds` differs: it is the sum of the shards' times), on a cluster, on the process
  pool of `--workers auto` or in this process, and prints only to stderr:
  refused workers, the shard count, and the progress bar (on a terminal).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from runtime.backends import Backend

from ..suite import Property, Row
from .cluster import DistributedError
from .flags import execute, pool_size, uses_cluster
from .suite_shards import Shard, local_runner, merge, plan, run_shard

__all__ = ["run_sharded"]


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
        spread = uses_cluster(a) or pool_size(a) > 1
        results = execute(
            [(sh.id, sh) for sh in (_by_cost(shards) if spread else shards)],
            run_shard,
            a,
            on_result=lambda sid, r: bar.update(sum(x["cases"] for x in r["rows"] if x)),
            local_fn=local_runner,
        )
    finally:
        bar.close()
    rows, _ = merge(shards, results)
    return rows


def _by_cost(shards: Sequence[Shard]) -> list[Shard]:
    """Largest first (a better packing on a cluster or pool; the merge restores the
    order)."""
    return sorted(shards, key=lambda sh: -sh.cost)


def _bar(total: int):  # type: ignore[no-untyped-def]
    from tqdm import tqdm

    return tqdm(
        total=total, file=sys.stderr, disable=not sys.stderr.isatty(), unit="case", leave=False
    )
