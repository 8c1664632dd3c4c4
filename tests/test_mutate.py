"""The mutation harness: the catalogue applies cleanly to this tree, and a reduced suite
run kills a cheap mutant in a copy (the working tree is left untouched)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conformance.mutate import CATALOGUE, apply, by_id, run_mutant, snippet_count
from conformance.mutate.catalogue import Mutant

ROOT = Path(__file__).resolve().parents[1]
# A reduced suite: float32 ordered properties, 8 cases each (the cheap mutant below is
# killed by `link` within them; the baseline passes the same run).
REDUCED = [
    "--dtype",
    "float32",
    "--kernels",
    "ordered",
    "--max-examples",
    "8",
    "--per-op",
    "0",
    "--session-examples",
    "0",
]


def test_catalogue_is_large_and_unique() -> None:
    assert len(CATALOGUE) >= 30
    assert len({m.id for m in CATALOGUE}) == len(CATALOGUE)
    assert len({m.bug_class for m in CATALOGUE}) >= 10


@pytest.mark.parametrize("m", CATALOGUE, ids=lambda m: m.id)
def test_every_snippet_is_found_exactly_once(m: Mutant) -> None:
    assert snippet_count(ROOT, m) == 1, f"{m.id}: snippet not found once in {m.file}"
    assert m.snippet != m.replacement


def test_apply_refuses_a_missing_snippet(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text("x = 1\n")
    bad = Mutant("t", "f.py", "y = 2", "y = 3", "", "")
    with pytest.raises(ValueError, match="found 0 times"):
        apply(tmp_path, bad)


def test_a_cheap_mutant_is_killed_in_a_copy() -> None:
    (m,) = by_id("fanin_last_wins")
    before = (ROOT / m.file).read_text()
    r = run_mutant(ROOT, m, REDUCED, timeout=300)
    assert r.status == "killed", r
    assert r.killed_by and r.killed_by[0].startswith("link")
    assert (ROOT / m.file).read_text() == before


def test_the_baseline_passes_unmutated() -> None:
    from conformance.mutate.harness import run_baseline

    r = run_baseline(ROOT, REDUCED, timeout=300)
    assert r.id == "baseline" and r.status == "survived", r


def test_a_mutants_own_suite_flags_reach_the_suite(monkeypatch: pytest.MonkeyPatch) -> None:
    """`Mutant.suite` (the run covering the mutant's file, e.g. an engine's judge) is appended
    to the suite's flags, after the caller's; a mutant without one runs the plain suite."""
    import subprocess

    from conformance.mutate import harness

    seen: list[list[str]] = []

    real = subprocess.run

    def fake_run(cmd: list[str], **kw: Any) -> Any:
        if "conformance" not in cmd:
            return real(cmd, **kw)  # the copy's `git ls-files`
        seen.append(list(cmd))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(harness.subprocess, "run", fake_run)
    (own,) = [m for m in CATALOGUE if m.suite]
    (plain,) = by_id("fanin_last_wins")
    assert run_mutant(ROOT, own, ["--seed", "3"]).status == "survived"
    assert run_mutant(ROOT, plain, ["--seed", "3"]).status == "survived"
    tail = seen[0][seen[0].index("conformance") + 1 :]
    assert tail[: 2 + len(own.suite)] == ["--seed", "3", *own.suite]
    assert "--engine" not in seen[1]
