"""`run_session_machine`: run the Session state machine under fixed settings and return
a report row.

Invariants: derandomised unless a seed is given; a run counts as a case only when it
completed or failed (runs Hypothesis aborted are not cases); a failure never propagates (it
becomes the row's `failure`, with the steps Hypothesis printed), except KeyboardInterrupt.
A failure has the keys every property's failure has: `message` (a bare assertion is
explained as expected vs got, `explain`), `op` (the rule that failed), `graph_text` (the
failing steps) and `repro`: a JSON reproducer holding Hypothesis' failure blob, which
`replay_session_machine` re-runs (`python -m conformance --replay FILE`).
"""

from __future__ import annotations

import ast
import re
import sys
import time
from typing import Any

import hypothesis
from hypothesis import reproduce_failure
from hypothesis import seed as hyp_seed
from hypothesis.reporting import with_reporter
from hypothesis.stateful import get_state_machine_test

from ..determinism import seed_only_draws
from ..profiles import run_settings
from ..suite import Row
from .explain import explain
from .machine import SessionMachine

__all__ = ["replay_session_machine", "run_session_machine"]

PROPERTY = "session_state_machine"
_BLOB = re.compile(r"@reproduce_failure\('([^']+)', (b'[^']*')\)")
_RULE = re.compile(r"state\.(\w+)\(")


def run_session_machine(
    max_examples: int, seed: int | None = None, *, step_count: int = 20, shrink: bool = True
) -> Row:
    """Run the machine for `max_examples` runs (derandomised unless `seed` is given) and
    return a report row; never raises on a failing run. A failure's dict holds the message
    and the steps Hypothesis printed for the (shrunk) failing run."""
    test, stats = _machine_test(max_examples, seed, step_count, shrink)
    row = Row(PROPERTY, "exact+float32", "ordered")
    t0 = time.perf_counter()
    failure = _run(test)
    if failure is not None:
        row.failed = 1
        failure["repro"] = {
            "property": PROPERTY,
            "dtype": row.dtype,
            "kernels": row.kernels,
            "step_count": step_count,
            "seed": seed,
            **failure.pop("blob", {}),
        }
        row.failure = failure
    row.seconds = time.perf_counter() - t0
    row.passed = stats["completed"]
    row.cases = row.passed + row.failed  # runs Hypothesis aborted (overruns) are not cases
    return row


def _machine_test(
    max_examples: int, seed: int | None, step_count: int, shrink: bool, blob: Any = None
) -> tuple[Any, dict[str, int]]:
    stats = {"completed": 0}

    class Machine(SessionMachine):
        def teardown(self) -> None:
            # Hypothesis calls teardown in a `finally`: a run that raised is still in flight
            if sys.exc_info()[0] is None:
                stats["completed"] += 1

    Machine.__name__ = Machine.__qualname__ = "SessionMachine"
    conf = run_settings(
        max_examples, seed, shrink=shrink, stateful_step_count=step_count, print_blob=True
    )
    test = get_state_machine_test(Machine, settings=conf)
    if seed is not None:
        test = hyp_seed(seed)(test)
    if blob is not None:
        test = reproduce_failure(*blob)(test)
    return test, stats


def _run(test: Any) -> dict[str, Any] | None:
    """Run the machine test; None, or the failure (message, op, steps, blob)."""
    printed: list[str] = []
    try:
        with with_reporter(printed.append), seed_only_draws():
            test()
    except BaseException as exc:  # a failing run (or a crash) becomes the report's failure
        if isinstance(exc, KeyboardInterrupt):
            raise
        first = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        # Hypothesis attaches the failing steps to the exception as notes.
        notes = [n for e in dict.fromkeys((exc, first)) for n in getattr(e, "__notes__", [])]
        text = "\n".join([*printed, *notes])
        m = _BLOB.search(text)
        steps = "\n".join(n for n in text.splitlines() if "reproduce_failure" not in n)
        rules = [r for r in _RULE.findall(steps) if r != "teardown"]
        return {
            "message": explain(first),
            "op": f"rule {rules[-1]}" if rules else "",
            "steps": steps,
            "graph_text": steps,
            "blob": {"hypothesis": m.group(1), "blob": m.group(2)} if m else {},
        }
    return None


def replay_session_machine(repro: dict[str, Any]) -> tuple[bool, str | None]:
    """Re-run a state-machine reproducer (its Hypothesis blob); (ok, message)."""
    if repro.get("property") != PROPERTY or "blob" not in repro:
        raise ValueError(f"replay: not a {PROPERTY} reproducer with a blob: {sorted(repro)}")
    if repro["hypothesis"] != hypothesis.__version__:
        print(
            f"note: reproducer made with Hypothesis {repro['hypothesis']}, running "
            f"{hypothesis.__version__}: the blob may not replay the same steps",
            file=sys.stderr,
        )
    blob = (repro["hypothesis"], ast.literal_eval(repro["blob"]))
    test, _ = _machine_test(1, None, int(repro.get("step_count", 20)), False, blob)
    failure = _run(test)
    return (failure is None, None if failure is None else failure["message"])
