"""Running a selection of theorems, each under a time limit, in worker processes.

Invariants:
- Every check runs in a forked worker process that leads its own process group; the
  parent waits for it with a deadline and, when a theorem runs past its time limit
  (`Theorem.time_limit` for the mode, times `time_scale`), kills the whole group (the
  worker and any pool it started) and records the theorem as "undecided (time limit)",
  which fails the run. No check can hang the run; a worker that dies records a failed
  result naming its exit code. The parent never runs a check itself.
- `run_theorem(name, ...)` is the public per-theorem entry point (one worker, one
  theorem); `run_theorems` schedules a selection: isolated theorems (the per-op
  obligations, the kernel laws) run `jobs` at a time with `jobs=1` each; the others run one
  at a time with `jobs` workers of their own, theorems of the same `Theorem.group` in one
  worker so that they share one sweep (a group stopped at a time limit leaves its
  remaining theorems undecided).
- With `witness=True` each theorem runs alone in its worker after its `Witness.apply()`
  installed the defect there (the parent's tables are never changed).
- Results come back in registry order whatever `jobs` is; they do not depend on `jobs` or
  on scheduling. `on_start(theorem)` and `on_result(theorem, result)` are called as
  workers report (for progress bars); they may not affect the results.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from .registry import CheckContext, CheckResult, Theorem, get, run_check

__all__ = ["default_jobs", "run_theorem", "run_theorems"]

_MP = multiprocessing.get_context("fork")


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _worker(names: Sequence[str], quick: bool, jobs: int, witness: bool, conn: Connection) -> None:
    """A worker process: run `names` in order with one shared context; report over `conn`."""
    os.setpgid(0, 0)
    try:
        ctx = CheckContext(
            quick=quick,
            jobs=jobs,
            selected=frozenset(names),
            progress=lambda d, a, b: conn.send(("progress", d, a, b)),
        )
        for name in names:
            conn.send(("start", name))
            th = get(name)
            if witness:
                if th.witness is None:
                    conn.send(("result", name, CheckResult(False, {}, {"error": "no witness"})))
                    continue
                th.witness.apply()
            conn.send(("result", name, run_check(th, ctx)))
    finally:
        conn.close()
        os._exit(0)


@dataclass
class _Unit:
    names: list[str]
    jobs: int
    proc: Any = None
    conn: Connection | None = None
    current: str | None = None
    started: float = 0.0
    pending: list[str] = field(default_factory=list)


def _limit(th: Theorem, quick: bool, scale: float) -> float:
    return th.time_limit[0 if quick else 1] * scale


def _kill(u: _Unit) -> None:
    try:
        os.killpg(u.proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    u.proc.join()
    if u.conn is not None:
        u.conn.close()


class _Scheduler:
    def __init__(
        self,
        quick: bool,
        scale: float,
        witness: bool,
        on_start: Callable[[Theorem], None] | None,
        on_result: Callable[[Theorem, CheckResult], None] | None,
        progress: Callable[[str, int, int], None] | None,
    ) -> None:
        self.quick, self.scale, self.witness = quick, scale, witness
        self.on_start, self.on_result, self.progress = on_start, on_result, progress
        self.results: dict[str, CheckResult] = {}

    def _done(self, name: str, r: CheckResult) -> None:
        self.results[name] = r
        if self.on_result is not None:
            self.on_result(get(name), r)

    def _start(self, u: _Unit) -> None:
        parent, child = _MP.Pipe(duplex=False)
        u.proc = _MP.Process(
            target=_worker, args=(u.names, self.quick, u.jobs, self.witness, child)
        )
        u.proc.start()
        child.close()
        u.conn, u.pending = parent, list(u.names)

    def _message(self, u: _Unit, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "start":
            u.current, u.started = msg[1], time.perf_counter()
            if self.on_start is not None:
                self.on_start(get(msg[1]))
        elif kind == "progress":
            if self.progress is not None:
                self.progress(*msg[1:])
        else:
            u.pending.remove(msg[1])
            u.current = None
            self._done(msg[1], msg[2])

    def _stop(self, u: _Unit, why: str, undecided: bool) -> None:
        """Kill a unit's workers; its running and remaining theorems get `why`."""
        _kill(u)
        for name in list(u.pending):
            running = name == u.current
            secs = time.perf_counter() - u.started if running else 0.0
            text = why if running else f"not run: {why} while {u.current} ran"
            r = CheckResult(False, {}, {"error": text}, secs, undecided=undecided)
            self._done(name, r)
        u.pending = []

    def run(self, units: list[_Unit], cap: int) -> None:
        queue, active = list(units), []
        try:
            while queue or active:
                while queue and len(active) < cap:
                    u = queue.pop(0)
                    self._start(u)
                    active.append(u)
                now = time.perf_counter()
                deadlines = [
                    u.started + _limit(get(u.current), self.quick, self.scale)
                    for u in active
                    if u.current is not None
                ]
                timeout = max(0.0, min(deadlines) - now) if deadlines else 1.0
                for conn in wait([u.conn for u in active if u.conn is not None], timeout):
                    u = next(x for x in active if x.conn is conn)
                    try:
                        self._message(u, conn.recv())
                    except (EOFError, OSError):
                        u.proc.join()
                        if u.pending:
                            self._stop(u, f"worker exited with code {u.proc.exitcode}", False)
                        u.conn.close()
                        u.conn = None
                now = time.perf_counter()
                for u in active:
                    if u.current is not None and u.conn is not None:
                        limit = _limit(get(u.current), self.quick, self.scale)
                        if now - u.started > limit:
                            self._stop(u, f"undecided: time limit of {limit:.0f} s", True)
                            u.conn = None
                active = [u for u in active if u.conn is not None]
        finally:
            for u in active:
                if u.conn is not None:
                    _kill(u)


def run_theorems(
    ths: Sequence[Theorem],
    *,
    quick: bool,
    jobs: int = 1,
    time_scale: float = 1.0,
    witness: bool = False,
    on_result: Callable[[Theorem, CheckResult], None] | None = None,
    on_start: Callable[[Theorem], None] | None = None,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[tuple[Theorem, CheckResult]]:
    """Run the checks of `ths` (see the module invariants)."""
    sched = _Scheduler(quick, time_scale, witness, on_start, on_result, progress)
    isolated = [_Unit([t.name], 1) for t in ths if t.isolated]
    rest: list[_Unit] = []
    groups: dict[str, _Unit] = {}
    for t in ths:
        if t.isolated:
            continue
        if t.group and not witness:
            if t.group not in groups:
                groups[t.group] = _Unit([], jobs)
                rest.append(groups[t.group])
            groups[t.group].names.append(t.name)
        else:
            rest.append(_Unit([t.name], jobs))
    sched.run(isolated, max(1, jobs))
    sched.run(rest, 1)
    return [(t, sched.results[t.name]) for t in ths]


def run_theorem(
    name: str, *, quick: bool, jobs: int = 1, time_scale: float = 1.0, witness: bool = False
) -> CheckResult:
    """One theorem in a worker process under its time limit (the per-theorem entry point,
    e.g. for distributing a run)."""
    return run_theorems(
        [get(name)], quick=quick, jobs=jobs, time_scale=time_scale, witness=witness
    )[0][1]
