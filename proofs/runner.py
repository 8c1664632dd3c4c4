"""Running a selection of theorems, each under a time limit, in worker processes.

Invariants:
- Every check runs in a forked worker process that leads its own process group; the
  parent polls it and, when a theorem runs past its time limit (`Theorem.time_limit` for
  the mode, times `time_scale`, in CPU seconds of the whole process group, so that a
  loaded machine does not turn a slow pass into a time-out; or WALL_FACTOR times that in
  wall-clock seconds), kills the whole group (the
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
- Results come back in catalogue order whatever `jobs` is; they do not depend on `jobs` or
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

from .catalogue import CheckContext, CheckResult, Theorem, get, run_check

__all__ = ["WALL_FACTOR", "default_jobs", "group_cpu_seconds", "run_theorem", "run_theorems"]

_MP = multiprocessing.get_context("fork")


def default_jobs() -> int:
    """The number of CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - non-Linux
        return max(1, os.cpu_count() or 1)


def _worker(
    ths: Sequence[Theorem], quick: bool, jobs: int, witness: bool, conn: Connection
) -> None:
    """A worker process (forked: `ths` are the parent's objects, not pickled): run them in
    order with one shared context; report over `conn`."""
    os.setpgid(0, 0)
    try:
        ctx = CheckContext(
            quick=quick,
            jobs=jobs,
            selected=frozenset(t.name for t in ths),
            progress=lambda d, a, b: conn.send(("progress", d, a, b)),
        )
        for th in ths:
            name = th.name
            conn.send(("start", name))
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
    ths: list[Theorem]
    jobs: int
    proc: Any = None
    conn: Connection | None = None
    current: str | None = None
    started: float = 0.0
    cpu0: float = 0.0
    pending: list[str] = field(default_factory=list)


def _limit(th: Theorem, quick: bool, scale: float) -> float:
    return th.time_limit[0 if quick else 1] * scale


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
WALL_FACTOR = 4.0
"""A theorem is also stopped when its wall time exceeds WALL_FACTOR times its limit (so
that a worker blocked without using CPU cannot hang the run either)."""


def group_cpu_seconds(pgid: int) -> float:
    """CPU seconds (user + system, with reaped children) of the live processes of a process
    group, from /proc (Linux); 0.0 where /proc is unavailable (then only the wall limit
    applies)."""
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0.0
    for e in entries:
        if not e.isdigit():
            continue
        try:
            with open(f"/proc/{e}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp, ...
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
    return total / _TICK


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
        self.by_name: dict[str, Theorem] = {}

    def get(self, name: str) -> Theorem:
        return self.by_name[name]

    def _done(self, name: str, r: CheckResult) -> None:
        self.results[name] = r
        if self.on_result is not None:
            self.on_result(self.get(name), r)

    def _start(self, u: _Unit) -> None:
        parent, child = _MP.Pipe(duplex=False)
        u.proc = _MP.Process(target=_worker, args=(u.ths, self.quick, u.jobs, self.witness, child))
        u.proc.start()
        child.close()
        u.conn, u.pending = parent, [t.name for t in u.ths]

    def _message(self, u: _Unit, msg: tuple[Any, ...]) -> None:
        kind = msg[0]
        if kind == "start":
            u.current, u.started = msg[1], time.perf_counter()
            u.cpu0 = group_cpu_seconds(u.proc.pid)
            if self.on_start is not None:
                self.on_start(self.get(msg[1]))
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
                timeout = 0.5 if any(u.current is not None for u in active) else 1.0
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
                        limit = _limit(self.get(u.current), self.quick, self.scale)
                        cpu = group_cpu_seconds(u.proc.pid) - u.cpu0
                        if cpu > limit or now - u.started > WALL_FACTOR * limit:
                            why = (
                                f"undecided: time limit of {limit:.0f} CPU s (used {cpu:.0f} "
                                f"CPU s, {now - u.started:.0f} s wall)"
                            )
                            self._stop(u, why, True)
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
    sched.by_name = {t.name: t for t in ths}
    isolated = [_Unit([t], 1) for t in ths if t.isolated]
    rest: list[_Unit] = []
    groups: dict[str, _Unit] = {}
    for t in ths:
        if t.isolated:
            continue
        if t.group and not witness:
            if t.group not in groups:
                groups[t.group] = _Unit([], jobs)
                rest.append(groups[t.group])
            groups[t.group].ths.append(t)
        else:
            rest.append(_Unit([t], jobs))
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
