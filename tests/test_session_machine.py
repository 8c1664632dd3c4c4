"""The Session state machine (conformance.session_machine) under the `ci` profile."""

from __future__ import annotations

import pytest
from hypothesis import settings

import runtime.session as rs
from conformance.session_machine import SessionMachine, run_session_machine

# Built after tests/conftest.py loaded the `ci` profile, so it inherits it (derandomised).
TestSession = SessionMachine.TestCase
TestSession.settings = settings(max_examples=20, stateful_step_count=12, deadline=None)


def test_run_session_machine_row() -> None:
    row = run_session_machine(5)
    assert row.property == "session_state_machine"
    assert (row.dtype, row.kernels) == ("exact+float32", "ordered")
    assert row.failed == 0 and row.failure is None, row.failure
    assert row.cases == row.passed >= 5
    assert row.seconds > 0


def test_run_session_machine_reports_a_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    # A session that forgets to drop the consts of a failed call must be caught, with steps.
    monkeypatch.setattr(rs.Session, "_rollback", lambda self, mark: None)
    row = run_session_machine(30, seed=1, shrink=False)
    assert row.failed == 1 and row.failure is not None
    assert "failed call changed the session" in row.failure["message"]
    assert "state = SessionMachine()" in row.failure["steps"]
    assert row.cases == row.passed + 1
