"""`python -m conformance.sweep` as shards: ranges of the 2**32 binary32 bit patterns, with
a resumable progress file.

Invariants:
- `plan` cuts `[start, stop)` of each function into ranges of `shard_size` patterns
  (function order, then ascending ranges); a shard runs `conformance.crmath_sweep.run_sweep` on its
  range with the run's chunk size, so the elements checked and every count are those of
  the serial sweep. `merge` adds the counts and seconds per function in range order and
  keeps the first `MAX_EXAMPLES` examples in that order: the serial summary, except
  `seconds` (the sum of the shards' times).
- The progress file is JSON lines: one header naming the run (functions, range, chunk,
  shard size, the fingerprint digest of the code and libraries), then one line per
  finished shard, appended and flushed as each arrives. Resuming with a file whose header
  differs is refused, naming the fields that differ; a torn last line (an interrupted
  write) is ignored; shards already in the file are not re-run.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from spec.errors import TorchLeanError

from ..crmath_sweep import MAX_EXAMPLES, FnSummary, run_sweep
from .env import digest, fingerprint

__all__ = ["SweepProgressError", "SweepShard", "load_progress", "merge", "plan", "run_sweep_shard"]

HEADER_KIND = "torchlean crmath sweep progress"


class SweepProgressError(TorchLeanError):
    """A progress file that does not belong to this sweep."""


@dataclass(frozen=True)
class SweepShard:
    fn: str
    lo: int
    hi: int
    chunk: int

    @property
    def id(self) -> str:
        return f"{self.fn}:{self.lo:#010x}-{self.hi:#010x}"


def plan(
    fns: Sequence[str], start: int, stop: int, chunk: int, shard_size: int
) -> list[SweepShard]:
    if shard_size < 1:
        raise ValueError(f"shard size must be >= 1, got {shard_size}")
    return [
        SweepShard(fn, lo, min(lo + shard_size, stop), chunk)
        for fn in fns
        for lo in range(start, stop, shard_size)
    ]


def run_sweep_shard(sh: SweepShard) -> dict[str, Any]:
    """The shard's `FnSummary` as a dict."""
    return asdict(run_sweep([sh.fn], sh.lo, sh.hi, sh.chunk)[sh.fn])


def merge(shards: Sequence[SweepShard], results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """{fn: FnSummary} over every shard, in the serial order (see the module invariants)."""
    out: dict[str, FnSummary] = {}
    counts = [f.name for f in dataclasses.fields(FnSummary) if f.name not in ("fn", "examples")]
    fn_order = {fn: i for i, fn in enumerate(dict.fromkeys(sh.fn for sh in shards))}
    for sh in sorted(shards, key=lambda sh: (fn_order[sh.fn], sh.lo)):
        r = results[sh.id]
        s = out.setdefault(sh.fn, FnSummary(sh.fn))
        for k in counts:
            setattr(s, k, getattr(s, k) + r[k])
        s.examples = (s.examples + r["examples"])[:MAX_EXAMPLES]
    return out


def header(
    fns: Sequence[str], start: int, stop: int, chunk: int, shard_size: int
) -> dict[str, Any]:
    return {
        "kind": HEADER_KIND,
        "fns": list(fns),
        "start": start,
        "stop": stop,
        "chunk": chunk,
        "shard_size": shard_size,
        "fingerprint": digest(fingerprint()),
    }


def load_progress(path: str, want: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The finished shards recorded in `path` ({} when it does not exist yet)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        lines = f.read().splitlines()
    try:
        head = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        head = {}
    if head.get("kind") != HEADER_KIND:
        raise SweepProgressError(f"{path} is not a sweep progress file")
    diff = [
        f"{k}: file {head.get(k)!r} vs this run {v!r}" for k, v in want.items() if head.get(k) != v
    ]
    if diff:
        raise SweepProgressError(
            f"{path} belongs to another sweep ({'; '.join(diff)}); remove it or pass another "
            "--progress file"
        )
    done: dict[str, dict[str, Any]] = {}
    for k, line in enumerate(lines[1:], start=2):
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            if k == len(lines):  # a torn last line: that shard runs again
                break
            raise SweepProgressError(f"{path}:{k}: not a JSON record") from None
        done[rec["id"]] = rec["summary"]
    return done


class ProgressFile:
    """Appends finished shards to the progress file (writing the header first if new)."""

    def __init__(self, path: str, head: dict[str, Any]) -> None:
        fresh = not os.path.exists(path)
        if not fresh:  # drop a torn last line before appending
            with open(path, "rb") as f:
                data = f.read()
            if data and not data.endswith(b"\n"):
                with open(path, "wb") as f:
                    f.write(data[: data.rfind(b"\n") + 1])
        self.f = open(path, "a")
        if fresh:
            self._line(head)

    def _line(self, obj: dict[str, Any]) -> None:
        self.f.write(json.dumps(obj) + "\n")
        self.f.flush()
        os.fsync(self.f.fileno())

    def add(self, sid: str, summary: dict[str, Any]) -> None:
        self._line({"id": sid, "summary": summary})

    def close(self) -> None:
        self.f.close()


def run_planned(
    shards: Sequence[SweepShard],
    progress_path: str | None,
    head: dict[str, Any],
    execute: Callable[..., dict[str, Any]],
    on_elements: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Run the shards not yet in the progress file through `execute(pairs, fn,
    on_result=...)`; return the merged summaries."""
    done = load_progress(progress_path, head) if progress_path else {}
    todo = [sh for sh in shards if sh.id not in done]
    if on_elements is not None:
        on_elements(sum(sh.hi - sh.lo for sh in shards if sh.id in done))
    log = ProgressFile(progress_path, head) if progress_path else None

    def got(sid: str, r: dict[str, Any]) -> None:
        if log is not None:
            log.add(sid, r)
        if on_elements is not None:
            on_elements(r["elements"])

    try:
        new = execute([(sh.id, sh) for sh in todo], run_sweep_shard, on_result=got)
    finally:
        if log is not None:
            log.close()
    return merge(shards, {**done, **new})
