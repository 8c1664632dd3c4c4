"""`python -m conformance.html REPORT.json DIR`: render a saved JSON report (of the suite or
of `--engine`) as the page its run's `--html DIR` writes; exit 2 with one line when the file
is not such a report or DIR cannot be written."""

from __future__ import annotations

import sys

from spec.errors import TorchLeanError
from spec.report_page import page_dir_problem

from .compare import load_report, report_kind
from .engine_page import write_engine_html
from .suite_page import write_suite_html

__all__ = ["main"]

_WRITERS = {"suite": write_suite_html, "engine": write_engine_html}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2:
        print("usage: python -m conformance.html REPORT.json DIR", file=sys.stderr)
        return 2
    try:
        rep = load_report(args[0])
        problem = page_dir_problem(args[1])
        if problem:
            raise TorchLeanError(problem)
    except TorchLeanError as e:
        print(f"python -m conformance.html: {e}", file=sys.stderr)
        return 2
    print(_WRITERS[report_kind(rep)](rep, args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
