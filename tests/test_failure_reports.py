"""Failure reports point at the bug: the op (and the composite body step), a reproducer for
every property including the Session state machine, and no crash while reporting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import runtime.session as rs
from conformance.locate import locate
from conformance.session_machine import replay_session_machine, run_session_machine
from conformance.session_machine.explain import explain
from conformance.suite import write_reports
from spec.graph import GraphBuilder


def test_locate_names_the_producing_op_and_the_consumers() -> None:
    b = GraphBuilder()
    x = b.input((3,))
    y = b.node("relu", x)
    b.node("mul", y, y)
    g = b.build()
    assert "produced by %1 = relu(%0)" in locate(g, "value of value %1: runtime ... vs spec")
    assert "%2 = mul(%1, %1)" in locate(g, "cotangent of value %1: runtime ... vs spec")


def test_locate_names_the_step_inside_a_composite() -> None:
    b = GraphBuilder()
    x = b.input((2, 3))
    b.node("mean", x)
    g = b.build()

    def recheck(gi: Any, vmap: list[int]) -> str:
        last = gi.num_values - 1
        return f"value of value %{last}: runtime 1 vs spec 2"

    where = locate(g, "value of value %1: runtime 1 vs spec 2", recheck)
    assert "inside the body: step %" in where and "of %1 = mean(%0)" in where


def test_explain_leaves_other_assertions_alone() -> None:
    def f() -> None:
        got, want = [1, 2], [1, 3]
        assert got == want

    with pytest.raises(AssertionError) as e:
        f()
    # explain only reads frames of the session_machine package: others are left as they are
    assert explain(e.value) == f"AssertionError: {e.value}"


def test_a_failing_state_machine_is_reported_and_replayed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(rs.Session, "_rollback", lambda self, mark: None)
    row = run_session_machine(30, seed=1, shrink=False)
    f = row.failure
    assert row.failed == 1 and f is not None
    assert {"message", "op", "graph_text", "repro"} <= set(f)
    assert "got " in f["message"] and "expected " in f["message"]
    assert f["op"].startswith("rule ")
    repro = json.loads(json.dumps(f["repro"]))
    assert repro["property"] == "session_state_machine" and repro["blob"].startswith("b'")
    _, mpath = write_reports([row], str(tmp_path / "r"), {})
    text = Path(mpath).read_text()
    assert "FAILED: session_state_machine" in text and '"blob"' in text
    ok, msg = replay_session_machine(repro)
    assert not ok and msg is not None and "a failed call changed the session" in msg
