"""The cluster flags shared by `python -m conformance`, `python -m conformance.sweep` and
`python -m proofs check`, and `execute`, which runs shards where the flags say.

Invariants:
- `--workers N` (default 1: in this process, exactly as without this package) runs on an
  embedded loopback LocalCluster of N worker processes; `--scheduler ADDRESS|FILE` runs on
  an existing Dask cluster (and overrides `--workers`). `--seeds K` (conformance only)
  repeats every Hypothesis run for K consecutive seeds: K times the cases, in K times the
  shards.
- Process counts (`--workers`, and `python -m proofs check --jobs` through `count_type`)
  are integers from 1 to `MAX_PER_CPU` times the CPUs this process may use (`--seeds`
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

__all__ = [
    "MAX_PER_CPU",
    "add_cluster_arguments",
    "count_type",
    "cpus",
    "execute",
    "scheduler_address",
    "sharded",
    "uses_cluster",
]

MAX_PER_CPU = 8
"""The most worker processes or jobs per CPU a command accepts."""

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


def add_cluster_arguments(p: argparse.ArgumentParser, *, seeds: bool = False) -> None:
    p.add_argument(
        "--workers",
        type=count_type("--workers"),
        default=1,
        help="shards on an embedded local Dask cluster of N worker processes (default 1: "
        "in this process); needs torchlean[distributed]",
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
