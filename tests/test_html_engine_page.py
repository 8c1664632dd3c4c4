"""The HTML report of an engine run (`--engine NAME --html DIR`): a tiny engine with a
planted error (HIPS autograd with exp 8 float32 ulps high), its page parses, links only to
files it wrote, has one row per op covered, its docs table section has exactly the cells of
docs/ENGINES.md's renderer, and its replay command, run from the page's text, reproduces
the failure; `--compare` of the engine with the correct one flags the regression."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from conformance.__main__ import main
from conformance.engines.tables import render
from spec.report_page import markdown_tables
from tests.html_check import assert_self_contained, parse, plain

anp = pytest.importorskip("autograd.numpy", reason="pip install autograd")
from conformance.engines.autograd_engine import AutogradEngine  # noqa: E402


class SloppyExpEngine(AutogradEngine):
    """exp's forward 8 float32 ulps high."""

    name = "autograd-sloppy-exp"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        **AutogradEngine.ops,
        "exp": lambda x: anp.exp(x) * np.float32(1 + 8 * 2.0**-23),
    }


def _run(tmp: Path, engine: str, tag: str) -> tuple[int, Path]:
    argv = ["--engine", engine, "--ops", "exp,add", "--dtype", "float32", "--max-examples",
            "3", "--per-op", "1", "--report", str(tmp / tag), "--html", str(tmp / tag)]  # fmt: skip
    return main(argv), tmp / tag


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("engine")
    bad_code, bad = _run(tmp, f"{__name__}:SloppyExpEngine", "bad")
    good_code, good = _run(tmp, "autograd", "good")
    assert (bad_code, good_code) == (1, 0)
    return bad, good


def test_the_engine_page(runs: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    bad, _ = runs
    page = (bad / "index.html").read_text()
    p = parse(page)
    assert_self_contained(page, bad, p.ids)
    rep = json.loads((bad.parent / "bad.json").read_text())
    covered = {r["op"] for r in rep["ops"] if r["covered"]}
    assert "exp" in covered
    assert sorted(i for i in p.row_ids if i.startswith("op-")) == sorted(f"op-{o}" for o in covered)
    cmds = [t.strip() for t in p.pres if "--replay" in t]
    assert len(cmds) == sum(bool(r["failure"]) for r in rep["ops"]) >= 1
    monkeypatch.chdir(bad)
    capsys.readouterr()
    assert main(shlex.split(cmds[0])[3:]) == 1


def test_the_docs_table_section_has_the_docs_cells(runs: Any) -> None:
    bad, _ = runs
    rep = json.loads((bad.parent / "bad.json").read_text())
    md = render(rep, rep["meta"]["engine"], "")
    tables = parse((bad / "index.html").read_text()).tables
    (head, rows), = markdown_tables(md)  # fmt: skip
    assert tables[-1] == [[plain(c) for c in r] for r in [head, *rows]]


def test_compare_flags_the_sloppy_engine(runs: Any, capsys: Any) -> None:
    bad, good = runs
    a, b = str(good.parent / "good.json"), str(bad.parent / "bad.json")
    assert main(["--compare", a, b]) == 1
    assert "regression  float32/exp: passes in A, fails in B" in capsys.readouterr().out
