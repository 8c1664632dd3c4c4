"""The HTML reports (conformance.html, spec.report_page): a small run with a planted
failure renders to a page that parses, links only to files it wrote, has one row per op
drawn and each failure's replay command, which replayed from the page's text reproduces the
failure; the same run renders to the same bytes; `--compare` flags a planted regression;
the docs tables and the pages hold the same cells.

The planted failure of the suite is a plug-in namespace whose `exp` is 1% high (the same
kind of namespace as tests/test_backend_plugins.py), named by import path, so the replay
command loads it again."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformance.__main__ import main
from conformance.cli import parse_args, report, run, select
from conformance.html.compare import compare
from conformance.html.suite_page import op_table_page, suite_html
from spec.doc import op_table_markdown
from spec.report_page import links_of, markdown_page, markdown_tables
from tests.html_check import assert_self_contained, parse, plain

ROOT = Path(__file__).resolve().parent.parent
SMALL_OPS = ("exp", "add", "neg")


class NumpyWrap:
    """A namespace forwarding to NumPy, except the functions set on the instance."""

    def __init__(self, **over: Any) -> None:
        self.__dict__.update(over)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


OFF_EXP = NumpyWrap(exp=lambda x: np.exp(x) * x.dtype.type(1.01))
GOOD = NumpyWrap()


# ---------------------------------------------------------------- the suite's page


def _suite_run(tmp: Path, backend: str) -> tuple[int, Path]:
    a = parse_args(
        ["--backend", backend, "--dtype", "float32", "--kernels", "fast", "--max-examples", "2",
         "--per-op", "1", "--session-examples", "0", "--workers", "1",
         "--report", str(tmp / "run"), "--html", str(tmp / "html")]
    )  # fmt: skip
    b, props = select(a)
    props = [p for p in props if p.name == "node_bounds"]
    props = [replace(p, ops=SMALL_OPS) for p in props]
    return report(a, b, run(a, b, props)), tmp / "html"


@pytest.fixture(scope="module")
def failing_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path, bytes]:
    tmp = tmp_path_factory.mktemp("suite")
    code, out = _suite_run(tmp, f"{__name__}:OFF_EXP")
    first = (out / "index.html").read_bytes()
    code2, _ = _suite_run(tmp, f"{__name__}:OFF_EXP")
    assert code2 == code
    return code, out, first


def test_the_page_parses_and_links_only_to_files_it_wrote(failing_run: Any) -> None:
    code, out, _ = failing_run
    assert code == 1
    page = (out / "index.html").read_text()
    p = parse(page)
    plots = {"img"} if importlib.util.find_spec("matplotlib") else set()
    assert {"html", "head", "body", "table"} | plots <= p.tags
    assert_self_contained(page, out, p.ids)
    assert "ops.html" in links_of(page) and "repro/failure-1.json" in links_of(page)


def test_one_row_per_op_drawn(failing_run: Any) -> None:
    _, out, _ = failing_run
    rep = json.loads((out.parent / "run.json").read_text())
    drawn = {op for r in rep["rows"] for op in r["per_op"]}
    assert drawn and drawn <= set(SMALL_OPS)
    rows = [i for i in parse((out / "index.html").read_text()).row_ids if i.startswith("op-")]
    assert sorted(rows) == sorted(f"op-{op}" for op in drawn)
    assert rep["meta"]["spec_version"] and rep["meta"]["command"].startswith("python -m conf")


def test_replaying_the_pages_command_reproduces_the_failure(
    failing_run: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _ = failing_run
    p = parse((out / "index.html").read_text())
    cmds = [t.strip() for t in p.pres if t.startswith("python -m conformance --replay")]
    assert len(cmds) == 1
    argv = shlex.split(cmds[0])
    path = argv[argv.index("--replay") + 1]
    shown = [t for t in p.pres if t.lstrip().startswith("{")]
    assert json.loads((out / path).read_text()) == json.loads(shown[0])
    monkeypatch.chdir(out)
    capsys.readouterr()
    assert main(argv[3:]) == 1
    assert capsys.readouterr().out.startswith("FAILED")
    # the same reproducer on a correct namespace passes: the failure is the planted exp
    good = json.loads((out / path).read_text())
    good["backend"] = f"{__name__}:GOOD"
    (out / "good.json").write_text(json.dumps(good))
    assert main(["--replay", "good.json", "--backend", f"{__name__}:GOOD"]) == 0


def test_the_same_run_renders_the_same_bytes(failing_run: Any) -> None:
    _, out, first = failing_run
    assert (out / "index.html").read_bytes() == first
    rep = json.loads((out.parent / "run.json").read_text())
    assert suite_html(rep)[0].encode() == first


def test_a_passing_run_says_pass_and_has_no_replay(tmp_path: Path) -> None:
    code, out = _suite_run(tmp_path, f"{__name__}:GOOD")
    page = (out / "index.html").read_text()
    assert code == 0 and '<span class="pass">PASS</span>' in page
    assert "--replay" not in page and not (out / "repro").exists()


# ---------------------------------------------------------------- --compare


def _rep(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {"meta": {"backend": "numpy"}, "rows": rows}


def _row(prop: str, failed: int, ratio: float, ops: dict[str, Any]) -> dict[str, Any]:
    return {"property": prop, "dtype": "float32", "kernels": "fast", "failed": failed,
            "worst_bound_ratio": ratio, "per_op": ops}  # fmt: skip


def test_compare_flags_a_planted_regression(tmp_path: Path, capsys: Any) -> None:
    ok = {"exp": {"failed": 0, "worst_bound_ratio": 0.25}}
    bad = {"exp": {"failed": 1, "worst_bound_ratio": 3.0}}
    a = _rep([_row("node_bounds", 0, 0.25, ok), _row("link", 0, 0.0, {})])
    b = _rep([_row("node_bounds", 1, 3.0, bad), _row("link", 0, 0.0, {})])
    changes = {(c.severity, c.key) for c in compare(a, b)}
    assert ("regression", "node_bounds/float32/fast") in changes
    assert ("regression", "op exp") in changes and ("worse", "op exp") in changes
    assert not [c for c in compare(a, a)]
    for name, rep in (("a", a), ("b", b)):
        (tmp_path / f"{name}.json").write_text(json.dumps(rep))
    html = tmp_path / "cmp"
    assert main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                 "--html", str(html)]) == 1  # fmt: skip
    assert "regression  node_bounds/float32/fast" in capsys.readouterr().out
    assert "passes in A, fails in B" in (html / "index.html").read_text()
    assert main(["--compare", str(tmp_path / "a.json"), str(tmp_path / "a.json")]) == 0
    assert main(["--compare", str(tmp_path / "b.json"), str(tmp_path / "a.json")]) == 0
    lost = _rep([_row("node_bounds", 0, 0.25, ok)])
    assert ("regression", "link/float32/fast") in {(c.severity, c.key) for c in compare(a, lost)}


def test_compare_refuses_reports_of_different_kinds(tmp_path: Path, capsys: Any) -> None:
    (tmp_path / "s.json").write_text(json.dumps(_rep([])))
    (tmp_path / "e.json").write_text(json.dumps({"meta": {"engine": "x"}, "ops": []}))
    (tmp_path / "x.json").write_text("[1]")
    assert main(["--compare", str(tmp_path / "s.json"), str(tmp_path / "e.json")]) == 2
    assert main(["--compare", str(tmp_path / "s.json"), str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and all(e.startswith("python -m conformance: --compare") for e in err)


# ---------------------------------------------------------------- docs tables and pages


def test_the_op_table_page_has_exactly_the_docs_cells() -> None:
    docs = (ROOT / "docs" / "OPS.md").read_text()
    assert docs == op_table_markdown()
    (head, rows), = markdown_tables(docs)  # fmt: skip
    (table,) = parse(op_table_page()).tables
    unmark = [[plain(c) for c in r] for r in [head, *rows]]
    assert table == unmark
    assert len(rows) > 100


def test_markdown_page_writes_images_beside_it(tmp_path: Path) -> None:
    md = "# t\n\n| a | b |\n|---|---|\n| `x\\|y` | **2** |\n\n```\ncode <here>\n```\n"
    path = markdown_page(str(tmp_path), "T", md, {"command": "cmd --x"}, {"p.png": b"\x89PNG"})
    page = Path(path).read_text()
    p = parse(page)
    assert_self_contained(page, tmp_path, p.ids)
    assert (tmp_path / "p.png").read_bytes() == b"\x89PNG"
    assert p.tables[-1] == [["a", "b"], ["x|y", "2"]]
    assert "code <here>" in p.pres and "cmd --x" in p.pres


def test_without_matplotlib_the_page_has_tables_only_and_says_so(
    failing_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance.html import plots

    _, out, _ = failing_run
    rep = json.loads((out.parent / "run.json").read_text())
    monkeypatch.setattr(plots, "available", lambda: False)
    page, _ = suite_html(rep)
    assert plots.NO_PLOTS in page and "<img" not in page and "op-exp" in page


def test_an_unwritable_html_dir_is_one_line_and_exit_2(tmp_path: Path, capsys: Any) -> None:
    afile = tmp_path / "f"
    afile.write_text("")
    for argv in (
        ["--html", str(afile), "--max-examples", "1"],
        ["--html", str(tmp_path / "no" / "such"), "--max-examples", "1"],
        ["--engine", "autograd", "--html", str(afile)],
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--html" in err, err
    assert not (tmp_path / "no").exists()


def test_a_saved_report_renders_to_the_runs_page(failing_run: Any, tmp_path: Path) -> None:
    from conformance.html.__main__ import main as render_main

    _, out, first = failing_run
    assert render_main([str(out.parent / "run.json"), str(tmp_path / "again")]) == 0
    assert (tmp_path / "again" / "index.html").read_bytes() == first
    assert render_main([str(tmp_path / "again" / "index.html"), str(tmp_path / "x")]) == 2


def _no_plots(page: str) -> str:
    """The page as it reads without its plots (which depend on the matplotlib build)."""
    from conformance.html.plots import NO_PLOTS

    page = re.sub(r'<img class="plot"[^>]*>', "—", page)
    return page.replace(f'<p class="note">{NO_PLOTS}</p>\n', "")


@pytest.mark.parametrize("name", ["conformance", "engine-autograd"])
def test_the_published_samples_are_their_reports_rendered(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conformance.html import plots
    from conformance.html.__main__ import main as render_main

    monkeypatch.setattr(plots, "available", lambda: False)  # compared without plots: faster

    sample = ROOT / "docs" / "reports" / name
    assert render_main([str(sample / "report.json"), str(tmp_path)]) == 0
    for page in tmp_path.rglob("*"):
        if page.is_file():
            rel = page.relative_to(tmp_path)
            assert _no_plots(page.read_text()) == _no_plots((sample / rel).read_text()), (
                f"docs/reports/{name}/{rel} is stale: python -m conformance.html "
                f"docs/reports/{name}/report.json docs/reports/{name}"
            )
