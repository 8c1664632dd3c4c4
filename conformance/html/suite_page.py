"""The HTML report of a `python -m conformance` run, rendered from its JSON report.

Invariants:
- Input is the JSON report (`{"meta": ..., "rows": [...]}`, `conformance.reports`);
  output is `DIR/index.html` and, per failure, `DIR/repro/failure-K.json` holding exactly
  the reproducer the page shows (K counts failures from 1 in row order).
- The page holds, in this order: the summary (verdict, cases, ops covered, versions,
  machine, seed, the command that reproduces the run), each failure (anchor `failure-K`)
  with its shrunk graph, reproducer and the command that replays it from DIR, one row per
  op drawn in a focused run (anchor `op-NAME`: cases, failures, worst error as a fraction
  of its budget, max ulp, a plot when matplotlib is present), one row per property run.
- `DIR/ops.html` is docs/OPS.md rendered from `spec.doc.op_table_markdown`, the code that
  writes the docs file: the page's op table and the docs never disagree.
- Wall times are not on the page (the JSON has them): the same report renders to the same
  bytes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from spec.doc import op_table_markdown
from spec.report_page import (
    Raw,
    anchor_id,
    code_block,
    document,
    environment,
    esc,
    markdown_html,
    summary_list,
    table,
    write_bundle,
)

from . import plots

__all__ = ["op_rows", "op_table_page", "replay_command", "suite_html", "write_suite_html"]


def replay_command(repro: dict[str, Any], meta: dict[str, Any], path: str) -> str:
    """The command that replays the reproducer saved at `path` (relative to the report)."""
    cmd = f"python -m conformance --replay {path} --backend {repro.get('backend') or 'numpy'}"
    if meta.get("against"):
        cmd += f" --against {meta['against']}"
    return cmd


def op_rows(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per op (in order of first appearance): cases, failed, worst ratio, max ulp and the
    plot points (dtype, worst ratio, failed) of each property run that focused on it."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        for op, e in (r.get("per_op") or {}).items():
            o = out.setdefault(
                op, {"runs": 0, "cases": 0, "failed": 0, "ratio": 0.0, "ulp": 0.0, "points": []}
            )
            o["runs"] += 1
            o["cases"] += int(e["cases"])
            o["failed"] += int(e["failed"])
            o["ratio"] = max(o["ratio"], e["worst_bound_ratio"])
            o["ulp"] = max(o["ulp"], e["max_ulp"])
            o["points"].append((r["dtype"], e["worst_bound_ratio"], bool(e["failed"])))
    return out


def _verdict(ok: bool) -> Raw:
    return Raw('<span class="pass">PASS</span>' if ok else '<span class="fail">FAIL</span>')


def _summary(rep: dict[str, Any], ops: dict[str, Any]) -> list[str]:
    meta, rows = rep["meta"], rep["rows"]
    failed = [r for r in rows if r["failed"]]
    total = sum(r["cases"] for r in rows)
    items: list[tuple[str, Any]] = [
        ("verdict", _verdict(not failed and total > 0)),
        ("cases", total),
        ("property runs", f"{len(rows)} ({len(failed)} failing)"),
        ("ops covered", len(ops)),
        ("backend", meta.get("backend")),
        ("against", meta.get("against") or "—"),
        ("seed", "derandomised" if meta.get("seed") is None else meta["seed"]),
        ("cases per property", f"{meta.get('max_examples')} + {meta.get('per_op')} per op"),
    ]
    items += environment(meta)
    cmd = meta.get("command") or "python -m conformance"
    return [
        '<h2 id="summary">Summary</h2>',
        summary_list(items),
        "<p>Reproduce this run:</p>",
        code_block(cmd),
        '<p>The op table (docs/OPS.md) is beside this page: <a href="ops.html">ops.html</a>.</p>',
    ]


def _properties(rows: Sequence[dict[str, Any]]) -> list[str]:
    body = [
        (r["property"], r["dtype"], r["kernels"], r["cases"], r["passed"], r["failed"],
         r["ops_covered"], f"{r['max_ulp']:.3g}", f"{r['worst_bound_ratio']:.4g}")
        for r in rows
    ]  # fmt: skip
    head = ("property", "dtype", "kernels", "cases", "passed", "failed", "ops", "max ulp",
            "worst error / bound")  # fmt: skip
    return ['<h2 id="properties">Property runs</h2>', table(head, body)]


def _ops(ops: dict[str, dict[str, Any]]) -> list[str]:
    parts = ['<h2 id="ops">Per op</h2>']
    parts.append(
        '<p class="note">Over the cases focused on each op (its graphs use that op, plus '
        "the helper nodes the generator inserts). Worst error / budget: the largest ratio of "
        "a node's error to its stated bound (fast kernels; ordered and exact runs compare "
        "bits, ratio 0); 1 is the budget. Plot: one point per property run, by dtype.</p>"
    )
    if not plots.available():
        parts.append(f'<p class="note">{esc(plots.NO_PLOTS)}</p>')
    body, ids = [], []
    for op, o in ops.items():
        uri = plots.ratio_strip(o["points"])
        img = Raw(f'<img class="plot" alt="worst error / budget of {esc(op)}" src="{uri}">')
        verdict = _verdict(not o["failed"])
        body.append((op, o["runs"], o["cases"], o["failed"], verdict, f"{o['ratio']:.4g}",
                     f"{o['ulp']:.3g}", img if uri else "—"))  # fmt: skip
        ids.append(anchor_id("op", op))
    head = ("op", "property runs", "cases", "failed", "verdict", "worst error / budget",
            "max ulp", "plot")  # fmt: skip
    parts.append(table(head, body, row_ids=ids))
    return parts


def _failures(rep: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    parts, files = ['<h2 id="failures">Failures</h2>'], dict[str, str]()
    failed = [r for r in rep["rows"] if r.get("failure")]
    if not failed:
        return [*parts, "<p>None.</p>"], files
    for k, r in enumerate(failed, 1):
        f = r["failure"]
        rel = f"repro/failure-{k}.json"
        text = json.dumps(f.get("repro"))
        files[rel] = text + "\n"
        parts += [
            f'<h3 id="failure-{k}">{k}. {esc(r["property"])} / {esc(r["dtype"])} / '
            f"{esc(r['kernels'])}</h3>",
            f"<p>{esc(f.get('message') or '')}</p>",
            f"<p>Where: {esc(f.get('op') or '(not located)')}</p>",
            "<p>Shrunk graph:</p>",
            code_block(f.get("graph_text") or ""),
            f'<p>Reproducer (<a href="{esc(rel)}">{esc(rel)}</a>):</p>',
            code_block(text),
            "<p>Replay it (in this report's directory):</p>",
            code_block(replay_command(f.get("repro") or {}, rep["meta"], rel)),
        ]
    return parts, files


def op_table_page() -> str:
    """docs/OPS.md (`spec.doc.op_table_markdown`) as a page: the same cells."""
    return document("The op table", [markdown_html(op_table_markdown())])


def suite_html(rep: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The page and the files beside it (relative path -> text)."""
    ops = op_rows(rep["rows"])
    fails, files = _failures(rep)
    files["ops.html"] = op_table_page()
    parts = [*_summary(rep, ops), *fails, *_ops(ops), *_properties(rep["rows"])]
    return document("Conformance report", parts), files


def write_suite_html(rep: dict[str, Any], out_dir: str) -> str:
    """Write the page and its reproducers into `out_dir`; the page's path."""
    return write_bundle(out_dir, *suite_html(rep))
