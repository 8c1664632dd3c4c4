"""Running a selection of theorems.

Invariants:
- `run_theorems` returns one `(Theorem, CheckResult)` per selected theorem, in registry
  order, whatever `jobs` is; results do not depend on `jobs` or on scheduling.
- Isolated theorems (`Theorem.isolated`: the per-op obligations) are independent and,
  with `jobs > 1`, run in a pool of forked worker processes (each worker looks its
  theorem up by name and runs it with `jobs=1`). Graph and float theorems run in the
  calling process and use their own worker pools for their sweeps. With `jobs == 1`
  everything runs in the calling process, so a monkeypatched op table is what gets
  checked.
- `on_result(theorem, result)` is called once per theorem as results arrive, and
  `on_start(theorem)` before each theorem that runs in the calling process (for progress
  reporting); neither may affect the results.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence

from .registry import CheckContext, CheckResult, Theorem, get, run_check

__all__ = ["default_jobs", "run_theorems"]


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _run_named(job: tuple[str, bool]) -> tuple[str, CheckResult]:
    name, quick = job
    return name, run_check(get(name), CheckContext(quick=quick, jobs=1))


def run_theorems(
    ths: Sequence[Theorem],
    *,
    quick: bool,
    jobs: int = 1,
    on_result: Callable[[Theorem, CheckResult], None] | None = None,
    on_start: Callable[[Theorem], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[tuple[Theorem, CheckResult]]:
    """Run the checks of `ths` (see the module invariants)."""
    ctx = CheckContext(
        quick=quick, jobs=jobs, selected=frozenset(t.name for t in ths), progress=progress
    )
    results: dict[str, CheckResult] = {}

    def done(th: Theorem, r: CheckResult) -> None:
        results[th.name] = r
        if on_result is not None:
            on_result(th, r)

    pooled = [t for t in ths if t.isolated] if jobs > 1 else []
    rest = [t for t in ths if t not in pooled]
    if pooled:
        by_name = {t.name: t for t in pooled}
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            for name, r in pool.imap_unordered(_run_named, [(t.name, quick) for t in pooled]):
                done(by_name[name], r)
    for t in rest:
        if on_start is not None:
            on_start(t)
        done(t, run_check(t, ctx))
    return [(t, results[t.name]) for t in ths]
