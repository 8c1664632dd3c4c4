"""The generated parts of the documentation, written by one command (`python -m proofs
readme`) and checked equal to the code by the tests: docs/OPS.md, docs/THEOREMS.md, the
theorem table of proofs/README.md, README.md's op count, docs/ARCHITECTURE.md's family table.

Invariants:
- Each `Generated` names a file and either the whole file (`begin` None: docs/OPS.md) or
  the text between two marker lines (`<!-- NAME:begin ... -->` and `<!-- NAME:end -->`);
  its text is a function of the code alone (the op table, the theorem catalogue).
- `write_all` rewrites only what differs and returns the paths it changed; `stale` returns
  the paths whose generated part differs, writing nothing. A marker that is missing raises
  `ProofError` naming the file and the marker.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from spec.doc import op_table_markdown
from spec.ops import FAMILIES, OPS

from . import theorem_index
from .catalogue import select
from .records import ProofError

__all__ = [
    "GENERATED",
    "Generated",
    "family_table",
    "op_count",
    "readme_table",
    "stale",
    "write_all",
]

ROOT = Path(__file__).resolve().parent.parent


def family_table() -> str:
    """docs/ARCHITECTURE.md's table of the families and their ops, in table order."""
    lines = ["| family | ops |", "|---|---|"]
    for family in FAMILIES:
        names = " ".join(n for n, op in OPS.items() if op.family == family)
        lines.append(f"| `{family}` | {names} |")
    return "\n".join(lines)


def op_count() -> str:
    """README.md's sentence on the size of the table."""
    prims = sum(op.kind == "primitive" for op in OPS.values())
    held = {op.family for op in OPS.values()}
    return (
        f"The table holds {len(OPS)} ops ({prims} primitives, {len(OPS) - prims} composites) "
        f"in {len(held)} families."
    )


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def readme_table() -> str:
    """The Markdown table of every theorem (embedded in proofs/README.md)."""
    lines = ["| theorem | evidence | status | scope |", "|---|---|---|---|"]
    for t in select(()):
        scope = t.scope.shapes if t.name.startswith("op.") else t.scope.graphs
        scope = _clip(scope.replace("|", "\\|"), 160)
        ev = _clip(t.evidence_label().replace("|", "\\|"), 120)
        lines.append(f"| `{t.name}` | {ev} | {t.status} | {scope} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Generated:
    path: str
    text: Callable[[], str]
    begin: str | None = None

    def current(self, root: Path) -> str:
        return (root / self.path).read_text()

    def render(self, old: str) -> str:
        """`old` with its generated part replaced by the code's."""
        if self.begin is None:
            return self.text()
        start, end = f"<!-- {self.begin}:begin", f"<!-- {self.begin}:end -->"
        if start not in old or end not in old:
            raise ProofError(f"{self.path}: the marker {start} ... {end} is missing")
        head = old.index("\n", old.index(start)) + 1
        tail = old.index(end)
        return old[:head] + self.text().strip() + "\n" + old[tail:]


GENERATED = (
    Generated("docs/OPS.md", op_table_markdown),
    Generated("docs/THEOREMS.md", theorem_index.markdown),
    Generated("proofs/README.md", readme_table, "theorem-table"),
    Generated("README.md", op_count, "op-count"),
    Generated("docs/ARCHITECTURE.md", family_table, "family-table"),
)
"""Every generated part of the documentation."""


def stale(root: Path = ROOT) -> list[str]:
    return [g.path for g in GENERATED if g.render(g.current(root)) != g.current(root)]


def write_all(root: Path = ROOT) -> list[str]:
    changed = []
    for g in GENERATED:
        old = g.current(root)
        new = g.render(old)
        if new != old:
            (root / g.path).write_text(new)
            changed.append(g.path)
    return changed
