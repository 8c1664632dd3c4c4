"""`python -m conformance.sweep`: an opt-in exhaustive binary32 sweep of `runtime.engine.crmath`.

For each unary function of `runtime.engine.crmath.FUNCTIONS` (or the ones named with `--fn`), every
binary32 bit pattern in `[--start, --stop)` is run, in vectorised chunks, through
`cr_apply(fn, x, "float32")`, and each result is checked against an independent, wider
evaluation: NumPy's long-double function (x87 extended, 64-bit significand; a different libm
entry point than the float64 one `cr_apply` uses) rounded once to binary32. Where that wide
value lies within its own error margin (`crmath.ERR_ULPS` long-double ulps) of a binary32
rounding boundary, the reference is computed with MPFR through the spec domain `BINARY32`
instead. Any element where `cr_apply` and the reference differ is re-checked with MPFR:
if `cr_apply` agrees with MPFR the long-double reference was wrong (counted, not a failure);
otherwise it is a disagreement, i.e. a counterexample to `cr_apply`'s correctness assumption.

The engine is `conformance.crmath_sweep`; this module is its CLI. The full sweep
(`--start 0 --stop 2**32`, the default) takes hours; the unit test runs a small
range. With `--workers N` / `--scheduler ADDRESS` the range is cut into shards of
`--shard-size` patterns run on Dask, and `--progress FILE` makes a run resumable
(`conformance.distributed.sweep_shards`); the summary is the serial one, except `seconds`.
Progress goes to stderr (tqdm, only on a TTY); the summary table goes to stdout and a JSON
summary to `--json`. Exit status: 0 when there is no disagreement, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from dataclasses import asdict

import numpy as np

from runtime.engine.crmath import ERR_ULPS, FUNCTIONS
from spec.errors import TorchLeanError

from .crmath_sweep import MAX_EXAMPLES, FnSummary, run_sweep, sweep_chunk
from .distributed.flags import AUTO, add_cluster_arguments, execute, uses_cluster
from .distributed.sweep_shards import header, plan, run_planned

__all__ = [
    "MAX_EXAMPLES",
    "FnSummary",
    "build_parser",
    "main",
    "parse_int",
    "run_sweep",
    "sweep_chunk",
]


def parse_int(s: str) -> int:
    """An int in any base Python accepts (0x..., 0b...), or a power `B**E`."""
    if "**" in s:
        base, exp = s.split("**", 1)
        return int(base, 0) ** int(exp, 0)
    return int(s, 0)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conformance.sweep",
        description="Exhaustive binary32 check of runtime.engine.crmath.",
    )
    p.add_argument(
        "--fn",
        action="append",
        choices=list(FUNCTIONS),
        help="function to sweep (repeatable; default: all)",
    )
    p.add_argument("--start", type=parse_int, default=0, help="first bit pattern (default 0)")
    p.add_argument(
        "--stop",
        type=parse_int,
        default=2**32,
        help="one past the last bit pattern (default 2**32)",
    )
    p.add_argument("--chunk", type=parse_int, default=2**20, help="patterns per chunk (2**20)")
    p.add_argument("--json", default="crmath-sweep.json", help="JSON summary path")
    p.add_argument(
        "--progress",
        default=None,
        metavar="FILE",
        help="record finished shards in FILE (JSON lines) and resume from it: a rerun with "
        "the same flags skips the shards already there",
    )
    p.add_argument(
        "--shard-size",
        type=parse_int,
        default=2**24,
        help="bit patterns per shard with --workers/--scheduler/--progress (default 2**24)",
    )
    add_cluster_arguments(p)
    return p


def _sweep(a: argparse.Namespace, fns: list[str]) -> dict[str, FnSummary]:
    """Serial `run_sweep`, or shards (`conformance.distributed`) when the flags ask."""
    from tqdm import tqdm  # optional progress bar, imported when a sweep runs

    bar = tqdm(
        total=(a.stop - a.start) * len(fns),
        file=sys.stderr,
        unit="x",
        unit_scale=True,
        disable=not sys.stderr.isatty(),
        leave=False,
    )
    try:
        if not (uses_cluster(a) or a.progress):
            return run_sweep(fns, a.start, a.stop, a.chunk, progress=bar.update)
        shards = plan(fns, a.start, a.stop, a.chunk, a.shard_size)
        head = header(fns, a.start, a.stop, a.chunk, a.shard_size)
        return run_planned(
            shards, a.progress, head, lambda *x, **k: execute(*x, a, **k), bar.update
        )
    finally:
        bar.close()


def _report(a: argparse.Namespace, res: dict[str, FnSummary]) -> int:
    print(
        f"{'fn':<6}{'elements':>12}{'cr_fallbacks':>14}{'ref_mpfr':>10}{'ref_wrong':>11}"
        f"{'disagree':>10}{'s':>8}"
    )
    for s in res.values():
        print(
            f"{s.fn:<6}{s.elements:>12}{s.cr_fallbacks:>14}{s.reference_mpfr:>10}"
            f"{s.reference_wrong:>11}{s.disagreements:>10}{s.seconds:>8.1f}"
        )
        for ex in s.examples:
            print(f"  DISAGREE {s.fn}: {ex}")
    summary = {
        "range": {"start": a.start, "stop": a.stop, "chunk": a.chunk},
        "err_ulps": ERR_ULPS,
        "longdouble_mantissa_bits": int(np.finfo(np.longdouble).nmant),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "functions": {fn: asdict(s) for fn, s in res.items()},
        "disagreements": sum(s.disagreements for s in res.values()),
    }
    with open(a.json, "w") as f:
        json.dump(summary, f, indent=1)
    total = summary["disagreements"]
    print(
        f"{sum(s.elements for s in res.values())} elements, {total} disagreements; "
        f"summary: {a.json}"
    )
    return 1 if total else 0


def main(argv: list[str] | None = None) -> int:
    p = build_parser()
    a = p.parse_args(argv)
    fns = a.fn or list(FUNCTIONS)
    if not 0 <= a.start <= a.stop <= 2**32:
        p.error(f"need 0 <= start <= stop <= 2**32, got [{a.start}, {a.stop})")
    if a.chunk < 1 or a.shard_size < 1 or (a.workers != AUTO and a.workers < 1):
        p.error("--chunk, --shard-size and --workers must be >= 1")
    try:
        res = _sweep(a, fns)
    except TorchLeanError as e:  # no Dask, no usable worker, a foreign progress file
        print(f"python -m conformance.sweep: {e}", file=sys.stderr)
        return 2
    return _report(a, res)


if __name__ == "__main__":
    sys.exit(main())
