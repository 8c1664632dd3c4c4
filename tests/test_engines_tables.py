"""`conformance.engines.tables`: docs/ENGINES.md's measured table rendered from a JSON
report, cell by cell (hand-written report, expected lines written out)."""

from __future__ import annotations

import json
from typing import Any

from conformance.engines.conventions import named_conventions
from conformance.engines.tables import main, render


def _row(dtype: str, op: str, **kw: Any) -> dict[str, Any]:
    base = {"engine": "e", "dtype": dtype, "op": op, "covered": True, "cases": 2,
            "forward_max_ulp": 0.5, "backward_max_ulp": 0.25, "jvp_max_ulp": 1.0,
            "conventions": [], "failures": 0, "refused": 0, "note": None, "failure": None,
            "unconstrained": 0}  # fmt: skip
    return {**base, **kw}


def test_render_cells_and_lines() -> None:
    rep = {
        "meta": {"engine": "e", "dtypes": ["float64", "float32"]},
        "ops": [
            _row("float64", "sqrt", conventions=["signed_zero", "sqrt_grad_at_zero"]),
            _row(
                "float64",
                "div",
                failures=1,
                unconstrained=3,
                failure={"message": "div forward element 0: too far"},
            ),
            _row("float64", "erf", covered=False),
            _row("float32", "sqrt", cases=0, refused=2, note="refused: unsupported: no"),
            _row("float32", "div", conventions=["signed_zero"], forward_max_ulp=0.0123),
        ],
        "graphs": [
            {"dtype": "float64", "graphs": 3, "max_ratio": 0.01234},
            {"dtype": "float32", "graphs": 5, "max_ratio": 0.0, "refused": 5},
        ],
        "conventions": [
            {"convention": "sqrt_grad_at_zero", "dtype": "float32", "differs": True},
            {"convention": "x", "dtype": "float64", "differs": False},
        ],
    }
    text = render(rep, "e (v 1)", "head line")
    assert text.splitlines()[:8] == [
        "### e (v 1)",
        "",
        "head line",
        "",
        "| op | cases | float64 | float32 |",
        "|---|---|---|---|",
        "| sqrt | 2 | 0.5 / 0.25 / 1 c | refused |",
        "| div | 4 | 0.5 / 0.25 / 1 (3 unconstrained) **FAIL** | 0.012 / 0.25 / 1 |",
    ]
    assert "Not covered: erf." in text
    assert (
        "Whole graphs: float64 3 graphs, max error/bound 0.012; float32 5 graphs (5 refused), "
        "max error/bound 0." in text
    )
    assert "hard cases: `sqrt_grad_at_zero` (sqrt)." in text
    assert "defining points: `sqrt_grad_at_zero` (float32)." in text
    assert "- float64 `div`: div forward element 0: too far" in text
    assert "- float32 `sqrt`: refused: unsupported: no" in text


def _report(conventions: dict[str, str]) -> dict[str, Any]:
    return {
        "meta": {"engine": "e", "dtypes": ["float64"], "conventions": conventions},
        "ops": [_row("float64", "group_norm")],
        "graphs": [{"dtype": "float64", "graphs": 0, "max_ratio": 0.0}],
        "conventions": [],
    }


def test_a_report_of_a_judge_with_other_conventions_is_refused(tmp_path: Any, capsys: Any) -> None:
    here = named_conventions()
    older = {n: s for n, s in here.items() if n != "group_norm_folded_affine"}
    older["a_dropped_convention"] = "gone"
    older["sqrt_grad_at_zero"] = "worded otherwise"
    path = tmp_path / "old.json"
    path.write_text(json.dumps(_report(older)))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert "(+group_norm_folded_affine, -a_dropped_convention, ~sqrt_grad_at_zero)" in err
    assert main([str(path), "--other-judge"]) == 0
    assert "| group_norm | 2 | 0.5 / 0.25 / 1 |" in capsys.readouterr().out
    path.write_text(json.dumps(_report(here)))
    assert main([str(path)]) == 0
