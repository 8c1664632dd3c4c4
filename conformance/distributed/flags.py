"""The cluster flags shared by `python -m conformance`, `python -m conformance.sweep` and
`python -m proofs check`, and `execute`, which runs shards where the flags say.

Invariants:
- `--workers N` (default 1: in this process, exactly as without this package; the
  default of `python -m conformance` is `auto`) runs on an embedded loopback LocalCluster
  of N worker processes; `--workers auto` runs on a pool of one worker process per CPU
  this process may use (`pool`, no Dask; in this process when there is one CPU);
  `--scheduler ADDRESS|FILE` runs on an existing Dask cluster (and overrides `--workers`).
  `--seeds K` (conformance only) repeats every Hypothesis run for K consecutive seeds:
  K times the cases, in K times the shards.
- Process counts (`--workers`, and `python -m proofs check --jobs` through `count_type`)
  are integers from 1 to `MAX_PER_CPU` times the CPUs this process may use, or `auto` for
  `--workers` (`--seeds`
  counts repetitions, not processes, and is not capped);
  `--scheduler` is an existing scheduler file or an address `[scheme://]host:port` (scheme
  tcp, tls, ws, wss, ucx or inproc; port 1-65535). Anything else is an argparse error: one
  line, exit status 2, before anything runs.
- This module imports no runner (the suite, the sweep, the proofs import it, never the
  reverse); `execute` prints only to stderr (the accepted worker count).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from .cluster import DistributedError, Vetting, open_client, run_local, run_shards
from .pool import run_pool

__all__ = [
    "AUTO",
    "MAX_PER_CPU",
    "add_cluster_arguments",
    "count_type",
    "cpus",
    "execute",
    "pool_size",
    "scheduler_address",
    "sharded",
    "uses_cluster",
]

MAX_PER_CPU = 8
"""The most worker processes or jobs per CPU a command accepts."""

AUTO = "auto"
"""`--workers auto`: a pool of one process per CPU (`pool.run_pool`), no Dask."""

_ADDRESS = re.compile(r"^(?:(?:tcp|tls|ws|wss|ucx|inproc)://)?(\[[0-9A-Fa-f:.]+\]|[\w.-]+):(\d+)$")


def cpus() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def count_type(flag: str) -> Callable[[str], int]:
    """An argparse `type` for a count flag: an int from 1 to MAX_PER_CPU x cpus()."""

    def parse(text: str) -> int:
        limit = MAX_PER_CPU * cpus()
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be an integer, got {text!r}") from None
        if not 1 <= n <= limit:
            raise argparse.ArgumentTypeError(
                f"{flag} must be from 1 to {limit} ({MAX_PER_CPU} per CPU, {cpus()} CPUs), got {n}"
            )
        return n

    return parse


def scheduler_address(text: str) -> str:
    """An argparse `type` for --scheduler: an existing scheduler file, or an address."""
    if os.path.isfile(text):
        return text
    m = _ADDRESS.match(text)
    if m is None or not 1 <= int(m.group(2)) <= 65535:
        raise argparse.ArgumentTypeError(
            f"--scheduler wants an existing scheduler file or an address "
            f"[scheme://]host:port (e.g. tcp://10.0.0.5:8786), got {text!r}"
        )
    return text


def _workers_type() -> Callable[[str], int | str]:
    counts = count_type("--workers")

    def parse(text: str) -> int | str:
        if text == AUTO:
            return AUTO
        try:
            return counts(text)
        except argparse.ArgumentTypeError as e:
            raise argparse.ArgumentTypeError(f"{e} (or auto: one process per CPU)") from None

    return parse


def add_cluster_arguments(
    p: argparse.ArgumentParser, *, seeds: bool = False, workers: int | str = 1
) -> None:
    default = "in this process" if workers == 1 else f"{workers}"
    p.add_argument(
        "--workers",
        type=_workers_type(),
        default=workers,
        help="auto: shards on a pool of one worker process per CPU of this machine (no "
        "Dask; the report equals the serial one); N: shards on an embedded local Dask "
        f"cluster of N worker processes (needs torchlean[distributed]); 1: in this "
        f"process (default: {default})",
    )
    p.add_argument(
        "--scheduler",
        type=scheduler_address,
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
    """Whether the flags name a Dask cluster (`--scheduler`, or `--workers N` with N > 1)."""
    return a.scheduler is not None or a.workers not in (1, AUTO)


def pool_size(a: argparse.Namespace) -> int:
    """The processes of `--workers auto` (one per CPU), or 1 when the flags ask for none."""
    return cpus() if a.scheduler is None and a.workers == AUTO else 1


def sharded(a: argparse.Namespace) -> bool:
    """Whether the conformance flags need the shard runner (a cluster, a pool, or several
    seeds)."""
    return uses_cluster(a) or pool_size(a) > 1 or getattr(a, "seeds", 1) != 1


def execute(
    shards: Sequence[tuple[str, Any]],
    fn: Any,
    a: argparse.Namespace,
    on_result: Any = None,
    local_fn: Any = None,
) -> dict[str, Any]:
    """Run shards in this process (`--workers 1`, or `auto` on one CPU), on a pool of
    processes (`--workers auto`) or on the cluster the flags name."""
    if not uses_cluster(a):
        n = pool_size(a)
        if n > 1:
            return run_pool(shards, fn, n, on_result)
        return run_local(shards, local_fn or fn, on_result)
    workers = 1 if a.workers == AUTO else a.workers  # with --scheduler, the cluster's own
    if workers < 1:
        raise DistributedError(f"--workers must be at least 1, got {a.workers}")
    with open_client(workers, a.scheduler) as client:
        vet = Vetting()
        out = run_shards(client, shards, fn, vet=vet, on_result=on_result)
    n = len(vet.accepted)
    print(f"note: {len(shards)} shards on {n} accepted Dask workers", file=sys.stderr)
    return out
