"""Conformance, the binary32 sweep and the proof checks as deterministic shards on Dask.

Modules: `flags` (the cluster flags and `execute`), `cluster` (Dask clients, vetting),
`pool` (`--workers auto`: a local process pool),
`env` (worker fingerprint), `suite_shards` + `suite_run` (the conformance suite),
`sweep_shards` (the crmath sweep); the theorem shards are `proofs.theorem_shards`
(`proofs` imports `conformance`, never the reverse).

Invariants:
- Dask (`dask[distributed]`, the extra `torchlean[distributed]`) is optional and imported
  only when a cluster is used (`cluster.open_client`); `--workers 1` runs the same shards
  in this process without it, and `--workers auto` (the conformance run's default) on a
  pool of processes of this machine (`pool`), without it too.
- A sharded run reports exactly what the serial run reports for the same flags: shards are
  fixed by the flags alone (`suite_shards.plan`, `sweep_shards.plan`,
  `proofs.theorem_shards.plan`),
  results are keyed by shard id (a re-run shard is never counted twice) and merged in the
  serial order.
- Workers are vetted before they get work (`env.fingerprint`: torchlean version and source
  hash, result-affecting library versions, the float-environment probe).
- Clusters this package starts listen on 127.0.0.1 only and have no dashboard.
"""

from .cluster import NO_DASK, DistributedError
from .flags import AUTO, add_cluster_arguments, execute, sharded, uses_cluster
from .suite_run import run_sharded

__all__ = [
    "AUTO",
    "NO_DASK",
    "DistributedError",
    "add_cluster_arguments",
    "execute",
    "run_sharded",
    "sharded",
    "uses_cluster",
]
