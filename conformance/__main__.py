"""`python -m conformance`: run the conformance suite and write its report.

Invariant: `main` only sequences the parts in `conformance.cli` (parse, replay or select,
run, report),
or hands `--engine` to `engine_mode`; flags, output and exit codes are described there.
"""

from __future__ import annotations

import sys

from spec.errors import TorchLeanError

from .cli import engine_mode, parse_args, replay_file, report, run, select

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.engine:
        return engine_mode(a)
    if a.replay:
        return replay_file(a.replay)
    try:
        backend, props = select(a)
    except TorchLeanError as e:
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    rows = run(a, backend, props)
    return report(a, backend, rows)


if __name__ == "__main__":
    sys.exit(main())
