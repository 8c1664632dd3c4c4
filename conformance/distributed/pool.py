"""`--workers auto`: shards on a pool of worker processes of this machine, without Dask.

Invariants:
- `run_pool(shards, fn, workers)` returns exactly one result per shard id, the result of
  `fn(payload)` computed in a worker process, whatever order they finish in; the merge
  (`suite_shards.merge` and the sweep's and proofs' own) puts them back in plan order, so
  a pooled run reports what the serial run reports.
- Workers are processes forked from this one where the platform has `fork` (they inherit
  its imports and its loaded Hypothesis profile; nothing is shared after the fork), else
  spawned. A shard that raises ends the run with `DistributedError` naming the shard; a
  worker that dies does too (the pool is broken), never a silently missing result.
- Payloads are submitted in the given order (callers put the costliest first: a long
  shard started last would be the run's tail); the results do not depend on the order.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from .cluster import DistributedError

__all__ = ["run_pool"]


def _context() -> Any:
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def run_pool(
    shards: Sequence[tuple[str, Any]],
    fn: Callable[[Any], Any],
    workers: int,
    on_result: Callable[[str, Any], None] | None = None,
) -> dict[str, Any]:
    """{shard id: fn(payload)} computed on `workers` processes (see the invariants)."""
    if workers < 1:
        raise DistributedError(f"a pool needs at least 1 worker, got {workers}")
    results: dict[str, Any] = {}
    with ProcessPoolExecutor(max_workers=workers, mp_context=_context()) as ex:
        running: dict[Future[Any], str] = {ex.submit(fn, p): sid for sid, p in shards}
        try:
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for fut in done:
                    sid = running.pop(fut)
                    try:
                        results[sid] = fut.result()
                    except Exception as e:
                        raise DistributedError(
                            f"shard {sid} failed in a worker process: {type(e).__name__}: {e}"
                        ) from e
                    if on_result is not None:
                        on_result(sid, results[sid])
        except BaseException:
            for fut in running:
                fut.cancel()
            raise
    return results
