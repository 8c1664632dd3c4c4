"""The engine run's reports: the terminal table, `<prefix>.json` and `<prefix>.md`.

Invariants:
- The reports are `<prefix>.json` (every row, the meta data) and `<prefix>.md` (the same
  tables and every failure with its reproducer); a forward-only engine's reports open with
  `FORWARD_ONLY` and show its backward columns as "—" (never checked, never passed).
- Without `--report`, the prefix is `report_prefix(NAME)`: `conformance-engine-` and NAME
  with every character outside [A-Za-z0-9._-] replaced by `_` (one file name in the
  working directory, never the main suite's `conformance-report`).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from typing import Any

from .run import EngineRun, OpRow

__all__ = ["FORWARD_ONLY", "markdown", "print_run", "report_prefix", "write_engine_reports"]

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


def print_run(run: EngineRun) -> None:
    """The terminal table, whole graphs, differing conventions and failures."""
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
