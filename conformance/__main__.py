"""`python -m conformance`: run the conformance suite and write its report.

Invariant: `main` only sequences the parts in `conformance.cli` (parse, replay or select,
run, report), or hands `--engine` to `engine_mode` and `--compare` to
`conformance.html.compare`; flags, output and exit codes are described there.
"""

from __future__ import annotations

import sys

from spec.errors import TorchLeanError

from .cli import engine_mode, parse_args, replay_file, report, run_rows, select
from .html.compare import compare_main
from .model_check import run_model_file

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    if a.compare:
        return compare_main(*a.compare, a.html)
    if a.engine:
        return engine_mode(a)
    if a.replay:
        return replay_file(a.replay, a.backend, a.against)
    if a.model:
        return run_model_file(a)
    try:
        backend, props = select(a)
    except TorchLeanError as e:
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    try:
        rows = run_rows(a, backend, props)
    except TorchLeanError as e:  # conformance.distributed.DistributedError: no Dask, no worker
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    return report(a, backend, rows)


if __name__ == "__main__":
    sys.exit(main())
