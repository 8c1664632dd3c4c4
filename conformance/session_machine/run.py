"""`run_session_machine`: run the Session state machine under fixed settings and return
a report row.

Invariants: derandomised unless a seed is given; a run counts as a case only when it
completed or failed (runs Hypothesis aborted are not cases); a failure never propagates (it
becomes the row's `failure`, with the steps Hypothesis printed), except KeyboardInterrupt.
"""

from __future__ import annotations

import sys
import time

from hypothesis import HealthCheck, Phase, settings
from hypothesis import seed as hyp_seed
from hypothesis.reporting import with_reporter
from hypothesis.stateful import get_state_machine_test

from ..suite import Row
from .machine import SessionMachine

__all__ = ["run_session_machine"]


def run_session_machine(
    max_examples: int, seed: int | None = None, *, step_count: int = 20, shrink: bool = True
) -> Row:
    """Run the machine for `max_examples` runs (derandomised unless `seed` is given) and
    return a report row; never raises on a failing run. A failure's dict holds the message
    and the steps Hypothesis printed for the (shrunk) failing run."""
    stats = {"completed": 0}

    class Machine(SessionMachine):
        def teardown(self) -> None:
            # Hypothesis calls teardown in a `finally`: a run that raised is still in flight
            if sys.exc_info()[0] is None:
                stats["completed"] += 1

    Machine.__name__ = Machine.__qualname__ = "SessionMachine"
    conf = settings(
        max_examples=max_examples,
        database=None,
        deadline=None,
        derandomize=seed is None,
        stateful_step_count=step_count,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, *([Phase.shrink] if shrink else [])),
    )
    test = get_state_machine_test(Machine, settings=conf)
    if seed is not None:
        test = hyp_seed(seed)(test)
    row = Row("session_state_machine", "exact+float32", "ordered")
    printed: list[str] = []
    t0 = time.perf_counter()
    try:
        with with_reporter(printed.append):
            test()
    except BaseException as exc:  # a failing run (or a crash) becomes the report's failure
        if isinstance(exc, KeyboardInterrupt):
            raise
        first = exc
        while isinstance(first, BaseExceptionGroup) and first.exceptions:
            first = first.exceptions[0]
        # Hypothesis attaches the failing steps to the exception as notes.
        notes = [n for e in dict.fromkeys((exc, first)) for n in getattr(e, "__notes__", [])]
        row.failed = 1
        row.failure = {
            "message": f"{type(first).__name__}: {first}",
            "steps": "\n".join([*printed, *notes]),
        }
    row.seconds = time.perf_counter() - t0
    row.passed = stats["completed"]
    row.cases = row.passed + row.failed  # runs Hypothesis aborted (overruns) are not cases
    return row
