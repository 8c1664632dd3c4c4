"""The exhaustive binary32 sweep of `runtime.engine.crmath` (the engine behind
`python -m conformance.sweep`, which is its CLI, and behind its shards,
`conformance.distributed.sweep_shards`).

Invariants:
- `sweep_chunk(fn, lo, hi, summary)` checks every bit pattern in [lo, hi): `cr_apply(fn, x,
  "float32")` against NumPy's long-double evaluation rounded once to binary32, with MPFR
  (the spec domain `BINARY32`) where that wide value lies within `crmath.ERR_ULPS`
  long-double ulps of a rounding boundary; every difference is re-checked with MPFR, so a
  disagreement is a counterexample to `cr_apply`'s correctness assumption.
- `run_sweep` walks the range in chunks, function by function; its counts do not depend on
  the chunk size. At most `MAX_EXAMPLES` disagreements per function are kept as examples.
- This module imports neither the CLI nor the shards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from runtime.backends import from_spec, round_f64, to_spec
from runtime.engine.crmath import FUNCTIONS, cr_apply, unsafe_mask, wide
from spec.domains import BINARY32

__all__ = ["MAX_EXAMPLES", "FnSummary", "run_sweep", "sweep_chunk"]

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
