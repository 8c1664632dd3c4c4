"""Apply one mutant to a copy of the repository and run the suite there.

Invariants:
- The working tree is never modified: `copy_tree` copies the files git knows (tracked and
  untracked-but-not-ignored) into a fresh temporary directory, `apply` edits the copy.
- A mutant whose snippet is missing, or found more than once, is "not applicable": an
  error of the catalogue, never counted as killed or survived.
- The suite runs as a subprocess (`python -m conformance <suite args> <the mutant's own
  suite flags, `Mutant.suite`: e.g. the onnxruntime engine's run for the ONNX export>
  --fail-fast --report ...`: it stops at the first failing property, the verdict is the same) with
  the copy as its working directory and first on `sys.path`: exit 1 = killed (the report
  names the failing properties), 0 = survived, anything else (crash, timeout) = "error".
- `time_to_kill` is the suite's own time up to and including the first failing property
  (the sum of the report rows' seconds); `wall` is the whole subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .catalogue import Mutant

__all__ = ["MutantResult", "apply", "copy_tree", "run_baseline", "run_mutant", "snippet_count"]


@dataclass
class MutantResult:
    id: str
    status: str  # killed | survived | not-applicable | error
    wall: float = 0.0
    time_to_kill: float | None = None
    killed_by: list[str] = field(default_factory=list)
    detail: str = ""


def _files(root: Path) -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [p for p in out.split("\0") if p]


def copy_tree(root: Path, dest: Path) -> None:
    """Copy the files git knows under `root` into `dest` (created)."""
    for rel in _files(root):
        src = root / rel
        if not src.is_file():
            continue
        tgt = dest / rel
        tgt.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, tgt)


def snippet_count(root: Path, m: Mutant) -> int:
    path = root / m.file
    return path.read_text().count(m.snippet) if path.is_file() else 0


def apply(root: Path, m: Mutant) -> None:
    """Apply `m` to the tree at `root` (raises ValueError unless found exactly once)."""
    n = snippet_count(root, m)
    if n != 1:
        raise ValueError(f"mutant {m.id}: snippet found {n} times in {m.file} (expected 1)")
    path = root / m.file
    path.write_text(path.read_text().replace(m.snippet, m.replacement, 1))


def _killers(report: Path) -> tuple[list[str], float | None]:
    try:
        rows = json.loads(report.read_text())["rows"]
    except (OSError, ValueError, KeyError):
        return [], None
    names, t = [], 0.0
    first: float | None = None
    for r in rows:
        t += r.get("seconds", 0.0)
        if r.get("failed"):
            names.append(f"{r['property']}/{r['dtype']}/{r['kernels']}")
            if first is None:
                first = t
    return names, first


def run_baseline(
    root: Path, suite_args: Sequence[str] = (), timeout: float = 1800.0
) -> MutantResult:
    """The suite on an unmutated copy of `root` ("survived" = it passes): a mutant is only
    killed by a property that passes here."""
    return run_mutant(root, None, suite_args, timeout)


def run_mutant(
    root: Path, m: Mutant | None, suite_args: Sequence[str] = (), timeout: float = 1800.0
) -> MutantResult:
    """Copy `root`, apply `m` (None: no mutant), run the suite in the copy; the result."""
    mid = m.id if m is not None else "baseline"
    with tempfile.TemporaryDirectory(prefix=f"mutant-{mid}-") as tmp:
        work = Path(tmp) / "repo"
        copy_tree(root, work)
        try:
            if m is not None:
                apply(work, m)
        except ValueError as e:
            return MutantResult(mid, "not-applicable", detail=str(e))
        report = Path(tmp) / "report"
        env = dict(os.environ, PYTHONPATH=str(work), PYTHONDONTWRITEBYTECODE="1")
        own = m.suite if m is not None else ()  # the suite run covering the mutant's file
        cmd = [sys.executable, "-m", "conformance", *suite_args, *own, "--fail-fast"]
        cmd += ["--report", str(report)]
        t0 = time.perf_counter()
        try:
            p = subprocess.run(
                cmd, cwd=work, env=env, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return MutantResult(mid, "error", time.perf_counter() - t0, detail="timeout")
        wall = time.perf_counter() - t0
        killers, ttk = _killers(Path(f"{report}.json"))
        if p.returncode == 1:
            return MutantResult(mid, "killed", wall, ttk, killers)
        if p.returncode == 0:
            return MutantResult(mid, "survived", wall)
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or [""]
        return MutantResult(mid, "error", wall, detail=f"exit {p.returncode}: {tail[0][:200]}")
