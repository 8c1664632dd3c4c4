"""Dask plumbing: open a client, vet workers, run keyed shards with re-runs on worker loss.

Invariants:
- Dask is imported only here and only when a client is opened; without it the error names
  the package to install (`dask[distributed]`, torchlean's extra `[distributed]`).
- An embedded cluster (`workers=N`) is a `LocalCluster` of N single-threaded worker
  processes bound to 127.0.0.1, with the scheduler and worker dashboards disabled.
  `scheduler=ADDRESS` connects to an existing scheduler (an address such as
  `tcp://host:8786`, or the path of a scheduler file).
- A worker gets work only after its `env.fingerprint()` equals the driver's (`vet`) and it
  runs one thread (a shard's Hypothesis run and the runtime's caches are per process, not
  made thread-safe): a worker that differs, runs more threads, or cannot even import
  torchlean, is refused once, with a message naming every difference, and never gets a
  shard. Workers that join later (a restarted
  worker, a scaled cluster) are vetted when they are first seen.
- `run_shards` returns exactly one result per shard id. Each shard is submitted with a
  worker restriction to the accepted workers; a shard whose worker is lost is re-run by
  Dask on another accepted worker, or resubmitted by us when none of its allowed workers
  is left. Each result carries the fingerprint digest of the process that computed it and
  is dropped (and that worker refused) if it does not match; a shard id already answered
  is never counted again. A shard task that raises ends the run with `DistributedError`.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import uuid
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spec.errors import TorchLeanError

from .env import differences, digest, fingerprint

__all__ = [
    "NO_DASK",
    "DistributedError",
    "Vetting",
    "import_distributed",
    "open_client",
    "run_local",
    "run_shards",
    "worker_task",
]

NO_DASK = (
    "distributed runs need Dask: the package `dask[distributed]` is not installed "
    "(pip install 'torchlean[distributed]' or pip install 'dask[distributed]')"
)
WAIT_FOR_WORKERS_S = 60.0


class DistributedError(TorchLeanError):
    """A distributed run could not be set up or completed (no Dask, no usable worker, a
    shard that crashed or kept killing its workers)."""


def import_distributed() -> Any:
    try:
        import distributed
    except ImportError as e:
        raise DistributedError(f"{NO_DASK}: {e}") from None
    return distributed


@contextmanager
def open_client(workers: int = 1, scheduler: str | None = None) -> Iterator[Any]:
    """A Dask client: on an existing scheduler, or on an embedded loopback LocalCluster."""
    distributed = import_distributed()
    if scheduler is not None:
        kw = {"scheduler_file": scheduler} if os.path.isfile(scheduler) else {"address": scheduler}
        try:
            client = distributed.Client(timeout="30s", **kw)
        except (OSError, TimeoutError) as e:
            raise DistributedError(f"cannot reach the Dask scheduler {scheduler!r}: {e}") from e
        try:
            yield client
        finally:
            client.close()
        return
    if workers < 1:
        raise DistributedError(f"--workers must be at least 1, got {workers}")
    cluster = distributed.LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
        worker_dashboard_address=None,
        silence_logs=40,  # logging.ERROR: the CLI owns the terminal
    )
    try:
        with distributed.Client(cluster) as client:
            yield client
    finally:
        cluster.close()


def worker_task(fn: Callable[[Any], Any], payload: Any) -> tuple[str, str, Any]:
    """Run `fn(payload)` on a worker; return (fingerprint digest, worker address, result).

    A Dask worker's event-loop thread uses the global `random` module while a task runs,
    which Hypothesis reports as a strategy using `random` (nothing in torchlean uses the
    global `random` state: proofs.decide uses its own `random.Random`); that one warning is
    silenced here."""
    from distributed import get_worker
    from hypothesis.errors import HypothesisWarning

    where = get_worker().address
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message="Do not use the `random` module", category=HypothesisWarning
        )
        return digest(fingerprint()), where, fn(payload)


@dataclass
class Vetting:
    """The workers accepted and refused so far (address -> reason)."""

    here: dict[str, str] = field(default_factory=fingerprint)
    accepted: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)

    def refuse(self, addr: str, reason: str) -> None:
        self.accepted.discard(addr)
        if addr not in self.refused:
            self.refused[addr] = reason
            self.log(f"refused worker {addr}: {reason}")

    def update(self, client: Any) -> set[str]:
        """Vet the workers not seen before; return the accepted ones still alive."""
        info = client.scheduler_info()["workers"]
        alive = set(info)
        new = sorted(alive - self.accepted - set(self.refused))
        for addr in [a for a in new if info[a].get("nthreads", 1) != 1]:
            new.remove(addr)
            self.refuse(
                addr,
                f"it runs {info[addr].get('nthreads')} threads; shards need one thread per "
                "worker process (start it with --nthreads 1)",
            )
        if new:
            got = client.run(fingerprint, workers=new, on_error="return")
            for addr in new:
                fp = got.get(addr)
                if isinstance(fp, BaseException) or not isinstance(fp, dict):
                    self.refuse(
                        addr, f"cannot take its fingerprint (torchlean importable?): {fp!r}"
                    )
                    continue
                diffs = differences(self.here, fp)
                if diffs:
                    self.refuse(addr, "; ".join(diffs))
                else:
                    self.accepted.add(addr)
        return self.accepted & alive


def _wait_for_accepted(client: Any, vet: Vetting, timeout: float) -> set[str]:
    t0 = time.monotonic()
    while True:
        ok = vet.update(client)
        if ok:
            return ok
        if time.monotonic() - t0 > timeout:
            why = "; ".join(f"{a}: {r}" for a, r in vet.refused.items()) or "no worker joined"
            raise DistributedError(f"no usable Dask worker after {timeout:.0f} s ({why})")
        time.sleep(0.5)


def run_shards(
    client: Any,
    shards: Sequence[tuple[str, Any]],
    fn: Callable[[Any], Any],
    *,
    vet: Vetting | None = None,
    on_result: Callable[[str, Any], None] | None = None,
    window_per_worker: int = 2,
    wait_for_workers: float = WAIT_FOR_WORKERS_S,
) -> dict[str, Any]:
    """Run `fn(payload)` for every `(shard_id, payload)` on vetted workers (see the module
    invariants); return {shard_id: result}. Shards are submitted in the given order."""
    from distributed import wait

    vet = vet or Vetting()
    ids = [sid for sid, _ in shards]
    if len(set(ids)) != len(ids):
        raise DistributedError("shard ids must be unique")
    payload = dict(shards)
    queue = deque(ids)
    results: dict[str, Any] = {}
    live: dict[Any, tuple[str, frozenset[str]]] = {}
    token, counter = uuid.uuid4().hex[:8], itertools.count()
    want = digest(vet.here)
    while queue or live:
        ok = _wait_for_accepted(client, vet, wait_for_workers)
        for fut, (sid, allowed) in list(live.items()):
            if not allowed & ok:  # every worker it may run on is gone or refused
                fut.cancel()
                del live[fut]
                queue.appendleft(sid)
        while queue and len(live) < window_per_worker * len(ok):
            sid = queue.popleft()
            if sid in results:
                continue
            fut = client.submit(
                worker_task,
                fn,
                payload[sid],
                key=f"torchlean-{sid}-{token}-{next(counter)}",
                workers=sorted(ok),
                allow_other_workers=False,
                pure=False,
            )
            live[fut] = (sid, frozenset(ok))
        try:
            done, _ = wait(list(live), timeout=1.0, return_when="FIRST_COMPLETED")
        except TimeoutError:  # nothing finished within the tick
            done = set()
        for fut in done:
            sid, _ = live.pop(fut)
            if fut.status == "cancelled":
                queue.appendleft(sid)
                continue
            exc = fut.exception()
            if exc is not None:
                raise DistributedError(f"shard {sid} failed on the cluster: {exc!r}") from exc
            got, where, res = fut.result()
            if got != want:
                vet.refuse(where, f"its result's fingerprint {got} is not this run's {want}")
                queue.appendleft(sid)
                continue
            if sid not in results:
                results[sid] = res
                if on_result is not None:
                    on_result(sid, res)
    return results


def run_local(
    shards: Sequence[tuple[str, Any]],
    fn: Callable[[Any], Any],
    on_result: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """The same shards in this process, in order (what `--workers 1` does)."""
    results: dict[str, Any] = {}
    for sid, p in shards:
        results[sid] = fn(p)
        if on_result is not None:
            on_result(sid, results[sid])
    return results
