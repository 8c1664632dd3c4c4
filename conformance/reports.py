"""The conformance suite's result rows and its reports (`<prefix>.json`, `<prefix>.md`).

Invariants:
- A `Row` is one property run for one (dtype, kernels, backend): case counts, the worst
  ulp and bound ratio, seconds, the failure (message, located op, graph, JSON reproducer)
  and the plug-in namespace's call counts; `per_op` the same counts and worsts over the
  cases focused on each op (the runs that guarantee every op is exercised).
- `write_reports` writes the JSON (`{"meta": ..., "rows": [...]}`, rows as dataclass dicts,
  in the given order) and the Markdown (the table, the namespace coverage when a row has
  counts, one section per failure); it imports nothing of the suite. Both files are
  written atomically (`spec.safe_files.write_atomic`: a temporary file and a rename, never
  through a symbolic link); a failure (a full disk, a missing directory) is one
  `FileWriteError` line and leaves any earlier report whole.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spec.safe_files import check_destination, write_atomic

__all__ = ["Row", "coverage_table", "write_reports"]


@dataclass
class Row:
    property: str
    dtype: str
    kernels: str
    backend: str = "numpy"
    cases: int = 0
    passed: int = 0
    failed: int = 0
    max_ulp: float = 0.0
    worst_bound_ratio: float = 0.0
    seconds: float = 0.0
    ops_covered: int = 0
    failure: dict[str, Any] | None = field(default=None)
    namespace_calls: dict[str, int] = field(default_factory=dict)
    # per op, over the cases focused on it: cases, failed, max_ulp, worst_bound_ratio
    per_op: dict[str, dict[str, float]] = field(default_factory=dict)


def _md_table(rows: Sequence[Row]) -> str:
    head = (
        "| property | dtype | kernels | cases | passed | failed | ops covered | max ulp | "
        "worst bound ratio | s |\n|---|---|---|---|---|---|---|---|---|---|"
    )
    lines = [head]
    for r in rows:
        lines.append(
            f"| {r.property} | {r.dtype} | {r.kernels} | {r.cases} | {r.passed} | "
            f"{r.failed} | {r.ops_covered} | {r.max_ulp:.3g} | "
            f"{r.worst_bound_ratio:.3g} | {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def coverage_table(rows: Sequence[Row]) -> str:
    """Namespace function x property/dtype/kernels: how often each was called ("" when no
    row has counts: the NumPy backend calls NumPy directly and is not counted)."""
    cols = [r for r in rows if r.namespace_calls]
    if not cols:
        return ""
    names = sorted({n for r in cols for n in r.namespace_calls})
    head = "| function | " + " | ".join(f"{r.property}/{r.dtype}/{r.kernels}" for r in cols)
    lines = [head + " |", "|---|" + "---|" * len(cols)]
    for n in names:
        lines.append(
            f"| `{n}` | " + " | ".join(str(r.namespace_calls.get(n, 0)) for r in cols) + " |"
        )
    return "\n".join(lines)


def write_reports(rows: Sequence[Row], prefix: str, meta: dict[str, Any]) -> tuple[str, str]:
    """Write `<prefix>.json` and `<prefix>.md` atomically; return their paths
    (`spec.safe_files.FileWriteError` when either cannot be written)."""
    jpath, mpath = f"{prefix}.json", f"{prefix}.md"
    check_destination(jpath)
    check_destination(mpath)
    write_atomic(jpath, json.dumps({"meta": meta, "rows": [asdict(r) for r in rows]}, indent=1))
    parts = [
        "# Conformance report",
        "",
        "```",
        json.dumps(meta, indent=1),
        "```",
        "",
        _md_table(rows),
        "",
    ]
    cov = coverage_table(rows)
    if cov:
        parts += [
            "## Namespace coverage (calls of the plug-in's functions, per property)",
            "",
            cov,
            "",
        ]
    for r in rows:
        if r.failure:
            parts += [
                f"## FAILED: {r.property} / {r.dtype} / {r.kernels}",
                "",
                r.failure.get("message") or "",
                "",
                f"Where: {r.failure.get('op') or '(not located)'}",
                "",
                "```",
                r.failure.get("graph_text", ""),
                "```",
                "",
                "Reproducer (JSON):",
                "",
                "```json",
                json.dumps(r.failure.get("repro")),
                "```",
                "",
            ]
    write_atomic(mpath, "\n".join(parts))
    return jpath, mpath
