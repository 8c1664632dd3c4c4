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

The full sweep (`--start 0 --stop 2**32`, the default) takes hours; the unit test runs a small
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
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from runtime.backends import from_spec, round_f64, to_spec
from runtime.engine.crmath import ERR_ULPS, FUNCTIONS, cr_apply, unsafe_mask, wide
from spec.domains import BINARY32
from spec.errors import TorchLeanError

__all__ = ["FnSummary", "build_parser", "main", "run_sweep", "sweep_chunk"]

MAX_EXAMPLES = 20


@dataclass
class FnSummary:
    """Counts for one function over the swept range."""

    fn: str
    elements: int = 0
    cr_fallbacks: int = 0  # elements cr_apply itself recomputed with MPFR
    reference_mpfr: int = 0  # elements whose reference came from MPFR (near a boundary)
    reference_wrong: int = 0  # long-double reference wrong, cr_apply right (MPFR decided)
    disagreements: int = 0  # cr_apply differs from the correctly rounded value
    seconds: float = 0.0
    examples: list[dict[str, str]] = field(default_factory=list)


def _mpfr(fn: str, x: np.ndarray) -> np.ndarray:
    """fn(x) correctly rounded to binary32 by MPFR (the spec domain)."""
    if x.size == 0:
        return np.zeros(0, dtype=np.float32)
    return from_spec(to_spec(x, "float32").map(getattr(BINARY32, fn)), "float32")


def _same32(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Bit equality, all NaNs equal."""
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def sweep_chunk(fn: str, lo: int, hi: int, summary: FnSummary) -> None:
    """Check the bit patterns lo..hi-1 (0 <= lo <= hi <= 2**32); update `summary`."""
    pats = np.arange(lo, hi, dtype=np.uint64).astype(np.uint32)
    x = pats.view(np.float32)
    ufunc: Callable[[Any], Any] = wide(fn)  # erf: binary64 (no long-double erf)
    cand = np.asarray(cr_apply(fn, x, "float32"))
    with np.errstate(all="ignore"):
        # cr_apply's own first pass, repeated here only to count its MPFR fallbacks
        y64 = ufunc(x.astype(np.float64))
        summary.cr_fallbacks += int(unsafe_mask(y64, round_f64(y64, "float32"), BINARY32).sum())
        # the independent wide evaluation, rounded once to binary32
        yl = ufunc(x.astype(np.longdouble))
        ref = yl.astype(np.float32)
    near = unsafe_mask(yl, ref, BINARY32)
    if near.any():
        ref[near] = _mpfr(fn, x[near])
    summary.reference_mpfr += int(near.sum())
    diff = ~_same32(cand, ref)
    if diff.any():
        idx = np.flatnonzero(diff)
        exact = _mpfr(fn, x[idx])
        cand_ok = _same32(cand[idx], exact)
        summary.reference_wrong += int(cand_ok.sum())
        bad = idx[~cand_ok]
        summary.disagreements += int(bad.size)
        for i, e in zip(bad, exact[~cand_ok], strict=True):
            if len(summary.examples) >= MAX_EXAMPLES:
                break
            summary.examples.append(
                {
                    "x_bits": f"0x{int(pats[i]):08x}",
                    "x": repr(float(x[i])),
                    "cr_apply": f"0x{int(cand[i : i + 1].view(np.uint32)[0]):08x}",
                    "mpfr": f"0x{int(np.array([e], dtype=np.float32).view(np.uint32)[0]):08x}",
                }
            )
    summary.elements += hi - lo


def run_sweep(
    fns: Sequence[str] = FUNCTIONS,
    start: int = 0,
    stop: int = 2**32,
    chunk: int = 2**20,
    progress: Callable[[int], None] | None = None,
) -> dict[str, FnSummary]:
    """Sweep every function over the bit patterns [start, stop); return one summary each."""
    for fn in fns:
        if fn not in FUNCTIONS:
            raise ValueError(f"unknown function {fn!r}; choose from {list(FUNCTIONS)}")
    if not 0 <= start <= stop <= 2**32:
        raise ValueError(f"need 0 <= start <= stop <= 2**32, got [{start}, {stop})")
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    out: dict[str, FnSummary] = {}
    for fn in fns:
        s = FnSummary(fn)
        t0 = time.perf_counter()
        for lo in range(start, stop, chunk):
            hi = min(lo + chunk, stop)
            sweep_chunk(fn, lo, hi, s)
            if progress is not None:
                progress(hi - lo)
        s.seconds = time.perf_counter() - t0
        out[fn] = s
    return out


def _int(s: str) -> int:
    """An int in any base Python accepts (0x..., 0b...), or a power `B**E`."""
    if "**" in s:
        base, exp = s.split("**", 1)
        return int(base, 0) ** int(exp, 0)
    return int(s, 0)


def build_parser() -> argparse.ArgumentParser:
    from .distributed import add_cluster_arguments

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
    p.add_argument("--start", type=_int, default=0, help="first bit pattern (default 0)")
    p.add_argument(
        "--stop", type=_int, default=2**32, help="one past the last bit pattern (default 2**32)"
    )
    p.add_argument("--chunk", type=_int, default=2**20, help="patterns per chunk (2**20)")
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
        type=_int,
        default=2**24,
        help="bit patterns per shard with --workers/--scheduler/--progress (default 2**24)",
    )
    add_cluster_arguments(p)
    return p


def _sweep(a: argparse.Namespace, fns: list[str]) -> dict[str, FnSummary]:
    """Serial `run_sweep`, or shards (`conformance.distributed`) when the flags ask."""
    from tqdm import tqdm

    from .distributed import uses_cluster

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
        from .distributed.cli import execute
        from .distributed.sweep_shards import header, plan, run_planned

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
    if a.chunk < 1 or a.shard_size < 1 or a.workers < 1:
        p.error("--chunk, --shard-size and --workers must be >= 1")
    try:
        res = _sweep(a, fns)
    except TorchLeanError as e:  # no Dask, no usable worker, a foreign progress file
        print(f"python -m conformance.sweep: {e}", file=sys.stderr)
        return 2
    return _report(a, res)


if __name__ == "__main__":
    sys.exit(main())
