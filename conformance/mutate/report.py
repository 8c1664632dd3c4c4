"""Running a set of mutants (in parallel subprocesses) and the Markdown score table.

Invariants: results come back in catalogue order whatever `jobs` is; the score counts
killed among applicable mutants (not-applicable and error are listed, never counted as
killed); progress lines go to stderr only when it is a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .catalogue import Mutant
from .harness import MutantResult, run_mutant

__all__ = ["markdown", "run_all", "score"]


def run_all(
    root: Path,
    mutants: Sequence[Mutant],
    suite_args: Sequence[str] = (),
    jobs: int = 1,
    on_result: Callable[[MutantResult], None] | None = None,
) -> list[MutantResult]:
    def one(m: Mutant) -> MutantResult:
        r = run_mutant(root, m, suite_args)
        if on_result is not None:
            on_result(r)
        return r

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, mutants))


def score(results: Sequence[MutantResult]) -> tuple[int, int]:
    """(killed, applicable)."""
    app = [r for r in results if r.status in ("killed", "survived")]
    return sum(r.status == "killed" for r in app), len(app)


def progress_line(r: MutantResult) -> None:
    if sys.stderr.isatty():
        print(f"{r.id}: {r.status} ({r.wall:.0f} s)", file=sys.stderr)


def markdown(
    mutants: Sequence[Mutant], results: Sequence[MutantResult], header: dict[str, str]
) -> str:
    k, n = score(results)
    lines = [f"- {a}: {b}" for a, b in header.items()]
    lines += [
        f"- score: **{k} / {n} killed**" + (f" ({100 * k / n:.0f}%)" if n else ""),
        "",
        "| id | file | bug class | description | result | killed by (first) | time to kill (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    res = {r.id: r for r in results}
    for m in mutants:
        r = res.get(m.id)
        status = r.status if r else "not run"
        by = r.killed_by[0] if r and r.killed_by else (r.detail if r else "")
        ttk = f"{r.time_to_kill:.1f}" if r and r.time_to_kill is not None else ""
        lines.append(
            f"| `{m.id}` | `{m.file}` | {m.bug_class} | {m.description} | {status} | {by} | {ttk} |"
        )
    return "\n".join(lines) + "\n"
