"""docs/VERIFICATION.md's VNN-COMP table is `scripts/vnncomp.py --render docs/vnncomp` of the
committed results (VNN-COMP's results CSV format) and reference extract, and the table's
counting is right on hand-made rows (a wrong answer is counted, never hidden)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.scripts_load import load_script

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- vnncomp-table: begin -->\n", "<!-- vnncomp-table: end -->"


def _script() -> Any:
    return load_script("vnncomp")


def test_the_docs_table_is_the_committed_results_rendered() -> None:
    doc = (ROOT / "docs" / "VERIFICATION.md").read_text(encoding="utf-8")
    shown = doc[doc.index(BEGIN) + len(BEGIN) : doc.index(END)]
    assert shown == _script().render(str(ROOT / "docs" / "vnncomp")), (
        "docs/VERIFICATION.md's VNN-COMP table is stale: "
        "python scripts/vnncomp.py --render docs/vnncomp"
    )


def test_no_committed_answer_contradicts_the_reference() -> None:
    v = _script()
    table = v.render(str(ROOT / "docs" / "vnncomp"))
    rows = [r.split("|") for r in table.splitlines()[2:]]
    assert rows and all(int(r[6]) == 0 for r in rows), table


def test_counting_golden() -> None:
    v = _script()
    ref = {("n.onnx", "prop_1.vnnlib"): ("unsat", 2.0), ("n.onnx", "prop_2.vnnlib"): ("sat", 4.0)}
    rows = [
        ("acasxu", "n.onnx", "prop_1.vnnlib", "sat", 1.0),  # wrong: the reference says unsat
        ("acasxu", "n.onnx", "prop_2.vnnlib", "timeout", 9.0),
    ]
    got = v.table(rows, ref).splitlines()
    assert got[2] == (
        "| acasxu prop_1 | 1 | 1 | 1 | 0 | 1 | 0 / 0 / 0 | 1.0 s / 1.0 s | 2.0 s / 2.0 s |"
    )
    assert got[3] == ("| acasxu prop_2 | 1 | 0 | 0 | 0 | 0 | 0 / 1 / 0 | — | 4.0 s / 4.0 s |")
