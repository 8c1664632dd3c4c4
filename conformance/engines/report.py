"""`python -m conformance --engine NAME`: run one engine, print its table, write the JSON
and Markdown reports.

Invariants:
- Exit codes: 0 when no op failed (and, with `--strict-conventions`, no convention other
  than `signed_zero` differs), 1 otherwise, 2 when the engine is not available here (the
  message names the package to pip install) or a flag is invalid.
- The reports are `<prefix>.json` (every row, the meta data) and `<prefix>.md` (the same
  tables and every failure with its reproducer); both are written before the summary line.
- `--engine NAME --replay FILE` re-runs a per-node reproducer on that engine.
- Without `--report`, the prefix is `report_prefix(NAME)`: `conformance-engine-` and NAME
  with every character outside [A-Za-z0-9._-] replaced by `_` (one file name in the
  working directory, never the main suite's `conformance-report`).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
from dataclasses import asdict
from typing import Any

from spec.ops import OPS

from . import load_engine
from .base import EngineUnavailable
from .conventions import CONVENTIONS, SIGNED_ZERO
from .run import EngineRun, OpRow, replay_node, run_engine

__all__ = ["engine_main", "markdown", "report_prefix", "write_engine_reports"]

_IEEE = ("float64", "float32", "bfloat16", "float16")
FORWARD_ONLY = (
    "forward only: this engine has no autograd; only forward values were judged (the "
    "backward columns are not checked, never passed)"
)


def report_prefix(engine: str) -> str:
    """The default report prefix of `--engine NAME` (see the module docstring)."""
    return "conformance-engine-" + re.sub(r"[^A-Za-z0-9._-]", "_", engine)


def _note(r: OpRow) -> str:
    parts = [r.note] if r.note else []
    if r.unconstrained:
        parts.append(f"{r.unconstrained} elements may overflow in the dtype (not compared)")
    return "; ".join(parts)


def _u(v: float | None) -> str:
    return "—" if v is None else f"{v:.3g}"


def markdown(run: EngineRun, meta: dict[str, Any]) -> str:
    """The report as Markdown: per dtype x op, whole graphs, conventions, failures."""
    parts = [f"# Engine report: {meta['engine']}", ""]
    if run.forward_only:
        parts += [FORWARD_ONLY, ""]
    parts += ["```", json.dumps(meta, indent=1), "```", ""]
    parts += [
        "| dtype | op | cases | fwd max ulp | bwd max ulp | jvp max ulp | conventions | "
        "failures | note |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in run.ops:
        if not r.covered:
            continue
        parts.append(
            f"| {r.dtype} | {r.op} | {r.cases} | {_u(r.forward_max_ulp)} | "
            f"{_u(r.backward_max_ulp)} | {_u(r.jvp_max_ulp)} | {', '.join(r.conventions)} | "
            f"{r.failures} | {_note(r)} |"
        )
    missing = sorted({r.op for r in run.ops if not r.covered})
    parts += ["", f"Not covered (no entry in `ops`): {', '.join(missing) or 'none'}.", ""]
    parts += [
        "## Whole graphs",
        "",
        "| dtype | graphs | max ulp | max error / propagated bound | non-finite | refused |",
        "|---|---|---|---|---|---|",
    ]
    for g in run.graphs:
        parts.append(
            f"| {g.dtype} | {g.graphs} | {g.max_ulp:.3g} | {g.max_ratio:.3g} | {g.nonfinite} | "
            f"{g.refused} |"
        )
    parts += [
        "",
        "## Conventions at their defining points",
        "",
        "| dtype | convention | op | differs | spec | engine |",
        "|---|---|---|---|---|---|",
    ]
    for c in run.conventions:
        parts.append(
            f"| {c.dtype} | {c.convention} | {c.op} | {'yes' if c.differs else 'no'} | "
            f"{' / '.join(c.spec)} | {' / '.join(c.engine_value)} |"
        )
    for r in run.ops:
        if r.failure:
            parts += [
                "",
                f"## FAILED: {r.op} / {r.dtype}",
                "",
                r.failure["message"],
                "",
                "Reproducer (JSON):",
                "",
                "```json",
                json.dumps(r.failure["repro"]),
                "```",
            ]
    return "\n".join(parts) + "\n"


def write_engine_reports(run: EngineRun, prefix: str, meta: dict[str, Any]) -> tuple[str, str]:
    jpath, mpath = f"{prefix}.json", f"{prefix}.md"
    with open(jpath, "w") as f:
        json.dump({"meta": meta, **asdict(run)}, f, indent=1)
    with open(mpath, "w") as f:
        f.write(markdown(run, meta))
    return jpath, mpath


def _print(run: EngineRun) -> None:
    if run.forward_only:
        print(FORWARD_ONLY)
    print(
        f"{'dtype':<10}{'op':<16}{'cases':>6}{'fwd ulp':>9}{'bwd ulp':>9}{'jvp ulp':>9}"
        f"{'fail':>6}  conventions"
    )
    for r in run.ops:
        if r.covered:
            print(
                f"{r.dtype:<10}{r.op:<16}{r.cases:>6}{_u(r.forward_max_ulp):>9}"
                f"{_u(r.backward_max_ulp):>9}{_u(r.jvp_max_ulp):>9}{r.failures:>6}  "
                f"{', '.join(r.conventions)}"
            )
    for g in run.graphs:
        print(
            f"whole graphs {g.dtype}: {g.graphs} graphs, max {g.max_ulp:.3g} ulp, "
            f"max error/bound {g.max_ratio:.3g}"
        )
    for c in run.conventions:
        if c.differs:
            print(f"convention {c.dtype} {c.convention}: spec {c.spec} engine {c.engine_value}")
    for r in run.ops:
        if r.failure:
            print(f"\nFAILED {r.op}/{r.dtype}: {r.failure['message']}")
            print("reproducer (save as FILE, then --engine NAME --replay FILE):")
            print(json.dumps(r.failure["repro"]))


def _dtypes(a: argparse.Namespace, supported: tuple[str, ...]) -> list[str]:
    if a.dtype == "all":
        return [d for d in _IEEE if d in supported]
    asked = a.dtype.split(",")
    bad = [d for d in asked if d not in _IEEE]
    if bad:
        raise EngineUnavailable(f"--dtype: {bad[0]!r} is not one of {', '.join(_IEEE)}")
    return [d for d in asked if d in supported]


def engine_main(a: argparse.Namespace) -> int:
    """The `--engine` mode of `python -m conformance` (see the module docstring)."""
    try:
        engine = load_engine(a.engine)
        dtypes = _dtypes(a, engine.dtypes)
    except EngineUnavailable as e:
        print(f"python -m conformance: skipped: {e}", file=sys.stderr)
        return 2
    if a.replay:
        with open(a.replay) as f:
            res = replay_node(engine, json.load(f))
        print("ok" if res.wrong is None else f"FAILED: {res.wrong}")
        return 0 if res.wrong is None else 1
    ops = a.ops.split(",") if a.ops else None
    unknown = [o for o in ops or () if o not in OPS]
    if unknown:
        print(f"python -m conformance: --ops: unknown op {unknown[0]!r}", file=sys.stderr)
        return 2
    run = run_engine(engine, dtypes, ops, max_examples=a.max_examples, per_op=a.per_op, seed=a.seed)
    meta = {
        **engine.describe(),
        "dtypes": dtypes,
        "ops": ops or "all",
        "max_examples": a.max_examples,
        "per_op": a.per_op,
        "seed": a.seed,
        "strict_conventions": a.strict_conventions,
        "python": platform.python_version(),
        "conventions": {c.name: c.sentence for c in (*CONVENTIONS, SIGNED_ZERO)},
    }
    _print(run)
    jpath, mpath = write_engine_reports(run, a.report, meta)
    failed = run.failed(a.strict_conventions)
    nf, nrows = sum(r.failures for r in run.ops), sum(r.failures > 0 for r in run.ops)
    print(
        f"\n{sum(r.cases for r in run.ops)} node checks, {nf} failing in {nrows} op rows"
        f"{' (strict conventions)' if a.strict_conventions else ''}; reports: {jpath}, {mpath}"
    )
    return 1 if failed else 0
