"""What changed between two JSON reports: two runs of the suite, or two runs (or two
engines) of `--engine` (`python -m conformance --compare A.json B.json [--html DIR]`).

Invariants:
- Both reports must be of one kind (`report_kind`: "suite" has `rows`, "engine" has
  `ops`); otherwise, or when a file is not such a report, `CompareError` (a
  `TorchLeanError`; exit 2 with one line).
- Rows are matched by key: a suite row by (property, dtype, kernels), an op of a suite run
  by its name, an engine row by (dtype, op). Each change is (severity, key, what):
  "regression" — passing in A and failing in B, or present in A and missing in B (coverage
  lost); "worse" / "better" — the worst error / budget (suite) or a max ulp (engine) grew
  or shrank; "fixed" — failing in A, passing in B; "new" — only in B; "convention" — an
  engine hit a convention in B it did not hit in A. Only regressions make the exit code 1.
- Numbers compare exactly as the JSON has them; nothing is re-measured.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spec.errors import TorchLeanError
from spec.report_page import document, environment, summary_list, table, write_page

__all__ = [
    "Change",
    "CompareError",
    "compare",
    "compare_html",
    "compare_main",
    "load_report",
    "report_kind",
]


class CompareError(TorchLeanError):
    """Two reports that cannot be compared."""


@dataclass(frozen=True)
class Change:
    severity: str
    key: str
    what: str


def report_kind(rep: Any) -> str:
    if isinstance(rep, dict) and isinstance(rep.get("meta"), dict):
        if isinstance(rep.get("rows"), list):
            return "suite"
        if isinstance(rep.get("ops"), list):
            return "engine"
    raise CompareError("not a JSON report of python -m conformance (no meta with rows or ops)")


def load_report(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            rep = json.load(f)
    except (OSError, ValueError) as e:
        raise CompareError(f"--compare: cannot read {path!r} ({type(e).__name__}: {e})") from None
    try:
        report_kind(rep)
    except CompareError as e:
        raise CompareError(f"--compare: {path!r} is {e}") from None
    return rep


def _num(v: Any) -> float:
    return float(v) if v is not None else 0.0


def _pair(
    a: dict[str, dict[str, Any]],
    b: dict[str, dict[str, Any]],
    failed: Callable[[dict[str, Any]], bool],
    measures: tuple[str, ...],
) -> list[Change]:
    out: list[Change] = []
    for key, ra in a.items():
        rb = b.get(key)
        if rb is None:
            out.append(Change("regression", key, "in A, missing in B (coverage lost)"))
            continue
        fa, fb = failed(ra), failed(rb)
        if fb and not fa:
            out.append(Change("regression", key, "passes in A, fails in B"))
        elif fa and not fb:
            out.append(Change("fixed", key, "fails in A, passes in B"))
        for m in measures:
            va, vb = _num(ra.get(m)), _num(rb.get(m))
            if vb != va:
                sev = "worse" if vb > va else "better"
                out.append(Change(sev, key, f"{m} {va:.3g} -> {vb:.3g}"))
    out += [Change("new", k, "only in B") for k in b if k not in a]
    return out


def _suite_ops(rep: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rep["rows"]:
        for op, e in (r.get("per_op") or {}).items():
            o = out.setdefault(f"op {op}", {"failed": 0, "worst_bound_ratio": 0.0})
            o["failed"] += e["failed"]
            o["worst_bound_ratio"] = max(o["worst_bound_ratio"], e["worst_bound_ratio"])
    return out


def _suite(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    def rows(rep: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {f"{r['property']}/{r['dtype']}/{r['kernels']}": r for r in rep["rows"]}

    out = _pair(rows(a), rows(b), lambda r: bool(r["failed"]), ("worst_bound_ratio",))
    return out + _pair(
        _suite_ops(a), _suite_ops(b), lambda r: bool(r["failed"]), ("worst_bound_ratio",)
    )


def _engine(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    def rows(rep: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {f"{r['dtype']}/{r['op']}": r for r in rep["ops"] if r["covered"]}

    ra, rb = rows(a), rows(b)
    measures = ("forward_max_ulp", "backward_max_ulp", "jvp_max_ulp")
    out = _pair(ra, rb, lambda r: bool(r["failures"]), measures)
    for key, r in rb.items():
        hit = set(r["conventions"]) - set(ra.get(key, {}).get("conventions", []))
        out += [Change("convention", key, f"hits {c} in B only") for c in sorted(hit)]
    return out


_KINDS: dict[str, Callable[[dict[str, Any], dict[str, Any]], list[Change]]] = {
    "suite": _suite,
    "engine": _engine,
}


def compare(a: dict[str, Any], b: dict[str, Any]) -> list[Change]:
    """The changes from report A to report B (see the module docstring)."""
    ka, kb = report_kind(a), report_kind(b)
    if ka != kb:
        raise CompareError(f"--compare: A is a {ka} report, B is a {kb} report")
    order = ("regression", "fixed", "worse", "better", "convention", "new")
    return sorted(_KINDS[ka](a, b), key=lambda c: order.index(c.severity))


def _label(rep: dict[str, Any], path: str) -> str:
    m = rep["meta"]
    who = m.get("engine") or m.get("backend") or "?"
    return f"{path} ({who}, spec {m.get('spec_version') or '?'})"


def compare_html(a: dict[str, Any], b: dict[str, Any], names: tuple[str, str]) -> str:
    changes = compare(a, b)
    reg = [c for c in changes if c.severity == "regression"]
    verdict = f"{len(reg)} regressions" if reg else "no regression"
    parts = [
        '<h2 id="summary">Summary</h2>',
        summary_list(
            [
                ("A", _label(a, names[0])),
                ("B", _label(b, names[1])),
                ("verdict", verdict),
                ("changes", len(changes)),
                *environment(),
            ]
        ),
        '<h2 id="changes">Changes</h2>',
        table(("severity", "row", "what"), [(c.severity, c.key, c.what) for c in changes])
        if changes
        else "<p>None: the two reports agree on every row.</p>",
    ]
    return document(f"Comparison: {names[0]} vs {names[1]}", parts)


def compare_main(a_path: str, b_path: str, html_dir: str | None) -> int:
    """Print the changes; write `html_dir/index.html` if asked; 1 on a regression, 2 with
    one stderr line when the reports cannot be compared."""
    try:
        a, b = load_report(a_path), load_report(b_path)
        changes = compare(a, b)
    except CompareError as e:
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    for c in changes:
        print(f"{c.severity:<11} {c.key}: {c.what}")
    reg = sum(c.severity == "regression" for c in changes)
    tail = ""
    if html_dir:
        tail = "; report: " + write_page(
            html_dir, "index.html", compare_html(a, b, (a_path, b_path))
        )
    print(f"{len(changes)} changes, {reg} regressions{tail}")
    return 1 if reg else 0
