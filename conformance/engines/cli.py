"""`python -m conformance --engine NAME`: parse the engine flags, run, report, exit.

Invariants:
- Exit codes: 0 when no op failed (and, with `--strict-conventions`, no convention other
  than `signed_zero` differs); 1 otherwise; 2 when the engine is not available here (the
  message names the package to pip install), a flag is invalid, none of the asked dtypes
  is one the engine runs, or the run made no node check at all (nothing was judged, so
  nothing passed). Each exit 2 is one line on stderr.
- `--engine NAME --replay FILE` re-runs a per-node reproducer on that engine
  (`replay.replay`: one line, exit 0/1/2).
- The reports (`report`) are written before the summary line; with `--html DIR` the HTML
  report (`conformance.html.engine_page`) is rendered from the JSON report just written.
  The JSON meta records the spec version, the machine and the command line.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

from spec.ops import OPS
from spec.report_page import machine, package_version, page_dir_problem
from spec.version import __version__ as SPEC_VERSION

from ..html.engine_page import write_engine_html
from . import load_engine
from .base import Engine, EngineUnavailable
from .conventions import named_conventions
from .replay import replay
from .report import print_run, write_engine_reports
from .run import EngineRun, run_engine

__all__ = ["engine_main"]

_IEEE = ("float64", "float32", "bfloat16", "float16")


def _dtypes(a: argparse.Namespace, supported: tuple[str, ...]) -> list[str]:
    if a.dtype == "all":
        return [d for d in _IEEE if d in supported]
    asked = a.dtype.split(",")
    bad = [d for d in asked if d not in _IEEE]
    if bad:
        raise EngineUnavailable(f"--dtype: {bad[0]!r} is not one of {', '.join(_IEEE)}")
    ok = [d for d in asked if d in supported]
    if not ok:
        raise EngineUnavailable(
            f"--dtype: the engine runs none of {', '.join(asked)} (it runs {', '.join(supported)})"
        )
    return ok


def _meta(engine: Engine, a: argparse.Namespace, dtypes: list[str], ops: Any) -> dict[str, Any]:
    return {
        **engine.describe(),
        "dtypes": dtypes,
        "ops": ops or "all",
        "max_examples": a.max_examples,
        "per_op": a.per_op,
        "seed": a.seed,
        "strict_conventions": a.strict_conventions,
        "python": platform.python_version(),
        "conventions": named_conventions(),
        "engine_arg": a.engine,
        "torchlean": package_version("torchlean"),
        "spec_version": SPEC_VERSION,
        "machine": machine(),
        "command": getattr(a, "command", None),
    }


def _summary(run: EngineRun, a: argparse.Namespace, paths: tuple[str, str]) -> int:
    nf, nrows = sum(r.failures for r in run.ops), sum(r.failures > 0 for r in run.ops)
    print(
        f"\n{run.node_checks} node checks, {nf} failing in {nrows} op rows"
        f"{' (forward only)' if run.forward_only else ''}"
        f"{' (strict conventions)' if a.strict_conventions else ''}; reports: {paths[0]}, "
        f"{paths[1]}"
    )
    if run.node_checks == 0:
        print(
            "python -m conformance: no node check ran (no op of --ops that the engine covers "
            "was drawn): nothing was judged",
            file=sys.stderr,
        )
        return 2
    return 1 if run.failed(a.strict_conventions) else 0


def engine_main(a: argparse.Namespace) -> int:
    """The `--engine` mode of `python -m conformance` (see the module docstring)."""
    try:
        engine = load_engine(a.engine)
        dtypes = _dtypes(a, engine.dtypes)
    except EngineUnavailable as e:
        print(f"python -m conformance: skipped: {e}", file=sys.stderr)
        return 2
    problem = page_dir_problem(a.html) if getattr(a, "html", None) else ""
    if problem:
        print(f"python -m conformance: {problem}", file=sys.stderr)
        return 2
    if a.replay:
        return replay(engine, a.replay, a.strict_conventions)
    ops = a.ops.split(",") if a.ops else None
    unknown = [o for o in ops or () if o not in OPS]
    if unknown:
        print(f"python -m conformance: --ops: unknown op {unknown[0]!r}", file=sys.stderr)
        return 2
    run = run_engine(engine, dtypes, ops, max_examples=a.max_examples, per_op=a.per_op, seed=a.seed)
    print_run(run)
    paths = write_engine_reports(run, a.report, _meta(engine, a, dtypes, ops))
    if getattr(a, "html", None):
        with open(paths[0]) as f:
            paths = (paths[0], f"{paths[1]}, {write_engine_html(json.load(f), a.html)}")
    return _summary(run, a, paths)
