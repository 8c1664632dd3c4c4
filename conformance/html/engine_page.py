"""The HTML report of an engine judged by `python -m conformance --engine NAME`, rendered
from its JSON report.

Invariants:
- Input is the engine's JSON report (`{"meta", "ops", "graphs", "conventions",
  "forward_only"}`, `conformance.engines.report`); output is `DIR/index.html` and, per
  failure, `DIR/repro/failure-K.json` holding exactly the reproducer the page shows.
- One row per op covered (anchor `op-NAME`): its cases, one cell per dtype written by
  `conformance.engines.tables.cell` (the code of docs/ENGINES.md's tables), the engine's
  budgets for it, and a plot of the max ulp per dtype and direction (matplotlib).
- The section "As in docs/ENGINES.md" is `conformance.engines.tables.render` of the same
  report, rendered from its Markdown: the page and the docs table never disagree.
- Each failure (anchor `failure-K`, after the summary) has its message, reproducer and the
  command that replays it on the engine from DIR.
"""

from __future__ import annotations

import json
from typing import Any

from spec.report_page import (
    Raw,
    anchor_id,
    code_block,
    document,
    environment,
    esc,
    inline_html,
    markdown_html,
    summary_list,
    table,
    write_bundle,
)

from ..engines.budgets import budget_for
from ..engines.tables import cell, ratio_cell, render
from . import plots

__all__ = ["budget_text", "engine_html", "replay_command", "write_engine_html"]

_SKIP_META = frozenset(
    ("conventions", "dtypes", "ops", "command", "spec_version", "machine", "python", "numpy",
     "engine_arg", "seed", "torchlean")
)  # fmt: skip


def replay_command(meta: dict[str, Any], path: str) -> str:
    """The command that replays the engine reproducer saved at `path` (relative)."""
    name = meta.get("engine_arg") or meta["engine"]
    cmd = f"python -m conformance --engine {name} --replay {path}"
    return cmd + (" --strict-conventions" if meta.get("strict_conventions") else "")


def budget_text(engine: str, dtype: str, op: str) -> str:
    """The forward / backward budgets of an op in a dtype: `ulps [+ per_term·n] (scale)`."""

    def one(direction: str) -> str:
        b = budget_for(engine, dtype, op, direction)
        n = f" + {b.per_term:g}·n" if b.per_term else ""
        return f"{b.ulps:g}{n} ({b.scale})"

    return f"{one('forward')} / {one('backward')}"


def _budgets(engine: str, op: str, dtypes: list[str]) -> str:
    """The budgets per dtype, dtypes with the same budgets named together."""
    by: dict[str, list[str]] = {}
    for d in dtypes:
        by.setdefault(budget_text(engine, d, op), []).append(d)
    return "; ".join(f"{', '.join(ds)}: {text}" for text, ds in by.items())


def _summary(rep: dict[str, Any]) -> list[str]:
    meta, ops = rep["meta"], rep["ops"]
    failing = [r for r in ops if r["failures"]]
    checks = sum(r["cases"] for r in ops)
    verdict = Raw(
        '<span class="fail">FAIL</span>'
        if failing or not checks
        else '<span class="pass">PASS</span>'
    )
    items: list[tuple[str, Any]] = [
        ("engine", meta["engine"]),
        ("verdict", verdict),
        ("node checks", checks),
        ("failing op rows", len(failing)),
        ("ops covered", len({r["op"] for r in ops if r["covered"]})),
        ("dtypes", ", ".join(meta.get("dtypes") or [])),
        ("seed", "derandomised" if meta.get("seed") is None else meta["seed"]),
        ("forward only", "yes" if rep.get("forward_only") else "no"),
    ]
    items += [(k, v) for k, v in meta.items() if k not in _SKIP_META and k != "engine"]
    items += environment(meta)
    cmd = meta.get("command") or f"python -m conformance --engine {meta['engine']}"
    return [
        '<h2 id="summary">Summary</h2>',
        summary_list(items),
        "<p>Reproduce this run:</p>",
        code_block(cmd),
    ]


def _ops(rep: dict[str, Any]) -> list[str]:
    dtypes = list(rep["meta"]["dtypes"])
    rows = [r for r in rep["ops"] if r["covered"]]
    jvp = any(r["jvp_max_ulp"] is not None for r in rows)
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["op"], {})[r["dtype"]] = r
    parts = [
        '<h2 id="ops">Per op</h2>',
        '<p class="note">Cells: forward / VJP max ulp (/ JVP), as in docs/ENGINES.md '
        "(c: a convention other than signed zeros was hit). Budgets: forward / backward, in "
        "ulps of the scale named, n the terms of a reduction. Worst ÷ budget: per dtype, the "
        "largest ratio of an element's error to its own budget, forward / VJP (/ JVP) (above "
        "1: beyond budget; — in reports written before the ratio was recorded). Plot: max "
        "ulp per dtype (blue forward, orange VJP, green JVP).</p>",
    ]
    if not plots.available():
        parts.append(f'<p class="note">{esc(plots.NO_PLOTS)}</p>')
    body, ids = [], []
    for op, cells in by.items():
        vals = [
            (d, direction, float(c[f"{direction}_max_ulp"]))
            for d, c in cells.items()
            for direction in ("forward", "backward", "jvp")
            if c.get(f"{direction}_max_ulp") is not None
        ]
        uri = plots.ulp_bars(vals, None)
        img = Raw(f'<img class="plot" alt="max ulp of {esc(op)}" src="{uri}">') if uri else "—"
        budgets = _budgets(rep["meta"]["engine"], op, list(cells))
        row: list[Any] = [op, sum(c["cases"] for c in cells.values())]
        row += [Raw(inline_html(cell(cells[d], jvp))) if d in cells else "—" for d in dtypes]
        ratios = "; ".join(f"{d}: {ratio_cell(cells[d], jvp)}" for d in dtypes if d in cells)
        body.append([*row, budgets, ratios, img])
        ids.append(anchor_id("op", op))
    head = ["op", "cases", *dtypes, "budgets", "worst ÷ budget", "plot"]
    parts.append(table(head, body, row_ids=ids))
    return parts


def _failures(rep: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    parts, files = ['<h2 id="failures">Failures</h2>'], dict[str, str]()
    failed = [r for r in rep["ops"] if r.get("failure")]
    if not failed:
        return [*parts, "<p>None.</p>"], files
    for k, r in enumerate(failed, 1):
        rel = f"repro/failure-{k}.json"
        text = json.dumps(r["failure"].get("repro"))
        files[rel] = text + "\n"
        parts += [
            f'<h3 id="failure-{k}">{k}. {esc(r["op"])} / {esc(r["dtype"])}</h3>',
            code_block(r["failure"].get("message") or ""),
            f'<p>Reproducer (<a href="{esc(rel)}">{esc(rel)}</a>):</p>',
            code_block(text),
            "<p>Replay it (in this report's directory):</p>",
            code_block(replay_command(rep["meta"], rel)),
        ]
    return parts, files


def engine_html(rep: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """The page and the files beside it (relative path -> text)."""
    fails, files = _failures(rep)
    docs = render(rep, f"{rep['meta']['engine']}", "")
    parts = [
        *_summary(rep),
        *fails,
        *_ops(rep),
        '<h2 id="docs-table">As in docs/ENGINES.md</h2>',
        markdown_html(docs),
    ]
    return document(f"Engine report: {rep['meta']['engine']}", parts), files


def write_engine_html(rep: dict[str, Any], out_dir: str) -> str:
    """Write the page and its reproducers into `out_dir`; the page's path."""
    return write_bundle(out_dir, *engine_html(rep))
