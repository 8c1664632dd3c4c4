"""docs/ENGINES.md's measured table of one engine, rendered from the JSON report of
`python -m conformance --engine NAME` (`python -m conformance.engines.tables REPORT.json`).

Invariants:
- Everything printed is read from the report: one row per op (in the report's order),
  one column per dtype of the run; a cell is forward / VJP max ulp (/ JVP where the
  engine has one; forward only for a forward-only engine), then ` c` when a convention
  other than `signed_zero` was hit, `(N unconstrained)`, `(refused N)`, `refused` when
  every case was refused, and **FAIL** when a case failed. `cases` sums the dtypes.
- Below the table: the ops not covered, the whole graphs (with how many of them the
  engine refused: a refused graph has no error/bound), the conventions hit by random
  and hard cases and those that differ at their defining points, each failure's shrunk
  message and each note, as the report has them. Nothing is measured here.
- A report made by a judge with other conventions than this one (its `meta.conventions`,
  names and sentences) is refused (exit 2, naming the conventions that differ) unless
  `--other-judge` is given: its verdicts are not this judge's (a case it failed may be a
  convention here), so a table rendered from it would not be what `--replay` reproduces.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .conventions import named_conventions

__all__ = ["cell", "judge_differs", "main", "ratio_cell", "render"]

_QUIET = "signed_zero"


def _g(v: float | None) -> str:
    return "—" if v is None else f"{v:.2g}"


def cell(r: dict[str, Any], jvp: bool) -> str:
    """One op x dtype cell (see the module docstring)."""
    if r["cases"] == 0 and r["refused"]:
        return "refused"
    vals = [r["forward_max_ulp"]]
    if r["backward_max_ulp"] is not None:
        vals.append(r["backward_max_ulp"])
        if jvp:
            vals.append(r["jvp_max_ulp"])
    s = " / ".join(_g(v) for v in vals)
    if any(c != _QUIET for c in r["conventions"]):
        s += " c"
    if r["unconstrained"]:
        s += f" ({r['unconstrained']} unconstrained)"
    if r["refused"]:
        s += f" (refused {r['refused']})"
    if r["failures"]:
        s += " **FAIL**"
    return s


def ratio_cell(r: dict[str, Any], jvp: bool) -> str:
    """The worst error ÷ budget of one op x dtype row, forward / VJP (/ JVP); "—" where the
    report has no ratio (written before it was recorded) or the direction was not checked."""
    keys = ["forward_ratio"]
    if r.get("backward_max_ulp") is not None:
        keys.append("backward_ratio")
        if jvp:
            keys.append("jvp_ratio")
    return " / ".join(_g(r.get(k)) for k in keys)


def _table(rep: dict[str, Any], dtypes: list[str]) -> list[str]:
    rows = [r for r in rep["ops"] if r["covered"]]
    jvp = any(r["jvp_max_ulp"] is not None for r in rows)
    by: dict[str, dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(r["op"], {})[r["dtype"]] = r
    out = ["| op | cases | " + " | ".join(dtypes) + " |", "|---" * (len(dtypes) + 2) + "|"]
    for op, cells in by.items():
        n = sum(c["cases"] for c in cells.values())
        body = " | ".join(cell(cells[d], jvp) if d in cells else "—" for d in dtypes)
        out.append(f"| {op} | {n} | {body} |")
    return out


def _by_name(pairs: list[tuple[str, str]]) -> str:
    seen: dict[str, list[str]] = {}
    for name, what in pairs:
        if what not in seen.setdefault(name, []):
            seen[name].append(what)
    return ", ".join(f"`{n}` ({', '.join(w)})" for n, w in seen.items()) or "none"


def _refused(g: dict[str, Any]) -> str:
    return f" ({g['refused']} refused)" if g.get("refused") else ""


def render(rep: dict[str, Any], title: str, head: str) -> str:
    """The doc section for one report: `### title`, the `head` line, the table and the
    lines under it (see the module docstring)."""
    dtypes = list(rep["meta"]["dtypes"])
    parts = [f"### {title}", "", head, "", *_table(rep, dtypes), ""]
    missing = sorted({r["op"] for r in rep["ops"] if not r["covered"]})
    parts += [f"Not covered: {', '.join(missing) or 'none'}.", ""]
    gr = [f"{g['dtype']} {g['graphs']} graphs{_refused(g)}, max error/bound {g['max_ratio']:.2g}"
          for g in rep["graphs"]]  # fmt: skip
    parts += [f"Whole graphs: {'; '.join(gr)}.", ""]
    hit = [(c, r["op"]) for r in rep["ops"] for c in r["conventions"] if c != _QUIET]
    parts += [f"Conventions hit by random and hard cases: {_by_name(sorted(hit))}.", ""]
    differ = [(c["convention"], c["dtype"]) for c in rep["conventions"] if c["differs"]]
    parts += [f"Conventions that differ at their defining points: {_by_name(differ)}.", ""]
    fails = [r for r in rep["ops"] if r["failure"]]
    if fails:
        parts += ["Failures (shrunk):", ""]
        parts += [f"- {r['dtype']} `{r['op']}`: {r['failure']['message']}" for r in fails]
        parts.append("")
    notes = [r for r in rep["ops"] if r["covered"] and r["note"]]
    if notes:
        parts += ["Notes:", ""]
        parts += [f"- {r['dtype']} `{r['op']}`: {r['note']}" for r in notes]
        parts.append("")
    return "\n".join(parts)


def judge_differs(meta: dict[str, Any]) -> list[str]:
    """The conventions on which the judge that made a report (its `meta.conventions`)
    and this one differ: "+name" only here, "-name" only there, "~name" worded otherwise."""
    there, here = meta.get("conventions") or {}, named_conventions()
    out = [f"+{n}" for n in here if n not in there]
    out += [f"-{n}" for n in there if n not in here]
    return out + [f"~{n}" for n in here if n in there and there[n] != here[n]]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.engines.tables", description=__doc__)
    p.add_argument("report", help="the JSON report of python -m conformance --engine NAME")
    p.add_argument("--title", help="the section title (default: the engine's describe())")
    p.add_argument("--head", default="", help="the line under the title (wall time, ...)")
    p.add_argument("--other-judge", action="store_true",
                   help="render a report made by a judge with other conventions")  # fmt: skip
    a = p.parse_args(argv)
    with open(a.report) as f:
        rep = json.load(f)
    meta = rep["meta"]
    differs = judge_differs(meta)
    if differs and not a.other_judge:
        print(
            f"python -m conformance.engines.tables: {a.report} was made by a judge with other "
            f"conventions ({', '.join(differs)}); re-run it, or pass --other-judge",
            file=sys.stderr,
        )
        return 2
    skip = {"engine", "dtypes", "ops", "max_examples", "per_op", "seed", "strict_conventions",
            "python", "conventions", "compile_cache", "engine_arg", "spec_version", "machine",
            "command", "torchlean"}  # fmt: skip
    info = ", ".join(f"{k} {v}" for k, v in meta.items() if k not in skip)
    sys.stdout.write(render(rep, a.title or f"{meta['engine']} ({info})", a.head))
    return 0


if __name__ == "__main__":
    sys.exit(main())
