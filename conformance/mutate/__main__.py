"""`python -m conformance.mutate`: run mutants of the catalogue through the suite.

Invariant: only parses flags and sequences the parts (`by_id`, `run_all`, `markdown`);
exit 0 when every applicable mutant was killed and none was not applicable, else 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path

from .catalogue import CATALOGUE, by_id
from .harness import MutantResult, run_baseline
from .report import markdown, progress_line, run_all, score


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m conformance.mutate", description=__doc__)
    p.add_argument("--only", default=None, help="comma list of mutant ids (default: all)")
    p.add_argument("--jobs", type=int, default=1, help="mutants run in parallel (default 1)")
    p.add_argument("--list", action="store_true", help="list the catalogue and exit")
    p.add_argument(
        "--suite-args", default="", help="extra flags for python -m conformance (quoted)"
    )
    p.add_argument("--markdown", default=None, metavar="FILE", help="write the score table")
    p.add_argument("--root", default=".", help="repository root to copy (default .)")
    p.add_argument(
        "--results",
        default=None,
        metavar="FILE",
        help="append each result as a JSON line as soon as it is known",
    )
    p.add_argument(
        "--from-results",
        default=None,
        metavar="FILE",
        help="do not run: write --markdown from a --results file (mutants missing there "
        "are listed as not run)",
    )
    p.add_argument("--note", default="", help="a line for the Markdown header")
    p.add_argument(
        "--baseline",
        action="store_true",
        help="first run the suite unmutated; exit 2 if it fails (kills would be void)",
    )
    return p


def _render(a: argparse.Namespace, mutants: list) -> int:  # type: ignore[type-arg]
    with open(a.from_results) as f:
        results = [MutantResult(**json.loads(line)) for line in f if line.strip()]
    k, n = score(results)
    header = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "suite": "python -m conformance " + " ".join(shlex.split(a.suite_args)),
        "mutants run": f"{len(results)} of {len(mutants)}",
    }
    if a.note:
        header["note"] = a.note
    if a.markdown:
        Path(a.markdown).write_text(markdown(mutants, results, header))
    print(f"{k}/{n} killed; {len(results)} of {len(mutants)} run")
    return 0


def main(argv: list[str] | None = None) -> int:
    a = _parser().parse_args(argv)
    if a.list:
        for m in CATALOGUE:
            print(f"{m.id:<32}{m.file:<38}{m.bug_class}")
        return 0
    mutants = by_id(a.only)
    if a.from_results:
        return _render(a, mutants)
    t0 = time.perf_counter()
    suite_args = shlex.split(a.suite_args)

    def on_result(r: MutantResult) -> None:
        progress_line(r)
        if a.results:
            with open(a.results, "a") as f:
                f.write(json.dumps(asdict(r)) + "\n")

    # the default suite, and each mutant's own suite run, must pass unmutated
    for own in sorted({m.suite for m in mutants}) if a.baseline else []:
        base = run_baseline(Path(a.root).resolve(), [*suite_args, *own])
        if base.status != "survived":
            print(
                f"baseline: the unmutated suite {' '.join(own) or '(default)'} does not pass "
                f"({base.status}: {', '.join(base.killed_by) or base.detail}); no kill would "
                "mean anything",
                file=sys.stderr,
            )
            return 2
    results = run_all(Path(a.root).resolve(), mutants, suite_args, a.jobs, on_result)
    cost = time.perf_counter() - t0
    for r in results:
        extra = r.killed_by[0] if r.killed_by else r.detail
        ttk = f"{r.time_to_kill:.1f}" if r.time_to_kill is not None else "-"
        print(f"{r.id:<32}{r.status:<16}{ttk:>7}  {extra}")
    k, n = score(results)
    print(f"\n{k}/{n} killed ({len(results) - n} not applicable or error); {cost:.0f} s")
    if a.markdown:
        header = {
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "suite": "python -m conformance " + " ".join(suite_args) + " (default budget)"
            if not suite_args
            else "python -m conformance " + " ".join(suite_args),
            "cost": f"{cost:.0f} s wall for {len(results)} mutants with --jobs {a.jobs}",
        }
        Path(a.markdown).write_text(markdown(mutants, results, header))
    return 0 if k == n == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
