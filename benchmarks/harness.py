"""Timing and environment helpers for `python -m benchmarks`.

Invariants:
- Every figure is a median over repeated runs. Contenders of one figure run *interleaved*:
  each round times every contender once, in an order rotated from round to round, so a
  burst of load on the shared machine hits all of them alike. Ratios are the median of the
  per-round ratios (a paired estimate), next to the plain medians.
- Each contender runs once untimed first (warm-up: imports, caches, JIT compilation).
- BLAS and framework thread counts are fixed before any peer is imported and reported as
  they are in effect, read back from the libraries (threadpoolctl where installed).
- Nothing here asserts on time.
- Progress and skip messages go to stderr (`log`); stdout carries only results.
"""

from __future__ import annotations

import gc
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Timing",
    "environment",
    "fmt_ratio",
    "fmt_time",
    "interleaved",
    "limit_threads",
    "log",
    "median_rows",
    "paired_ratio",
    "set_thread_env",
    "table",
]

THREAD_ENV = (
    "OMP_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)


def set_thread_env(threads: int) -> None:
    """Before NumPy, PyTorch or JAX are imported: ask every BLAS/OpenMP runtime and XLA for
    `threads` threads (values the user already exported win)."""
    for k in THREAD_ENV:
        os.environ.setdefault(k, str(threads))
    if threads == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if "multi_thread_eigen" not in flags:
            extra = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
            os.environ["XLA_FLAGS"] = (flags + " " + extra).strip()


_LIMITER: Any = None


def log(msg: str) -> None:
    """A progress or skip message, on stderr (flushed at once)."""
    print(msg, file=sys.stderr, flush=True)


def limit_threads(threads: int) -> dict[str, Any]:
    """Fix the thread counts of the libraries already loaded (threadpoolctl, PyTorch) and
    return what is in effect."""
    global _LIMITER
    info: dict[str, Any] = {"requested": threads}
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        _LIMITER = threadpool_limits(limits=threads)
        info["threadpools"] = [
            {
                "library": p.get("internal_api"),
                "prefix": p.get("prefix"),
                "num_threads": p.get("num_threads"),
                "version": p.get("version"),
            }
            for p in threadpool_info()
        ]
    except ImportError:
        info["threadpools"] = "threadpoolctl not installed: environment variables only"
    if "torch" in sys.modules:
        torch = sys.modules["torch"]
        torch.set_num_threads(threads)
        info["torch_threads"] = torch.get_num_threads()
    info["env"] = {k: os.environ.get(k) for k in (*THREAD_ENV, "XLA_FLAGS") if k in os.environ}
    return info


def environment() -> dict[str, Any]:
    import numpy as np

    env: dict[str, Any] = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
    }
    try:
        env["load_average"] = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover - not on every platform
        pass
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    env["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:  # pragma: no cover
        pass
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        env["numpy_blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # pragma: no cover - older NumPy
        pass
    return env


@dataclass
class Timing:
    """Seconds per call of each contender, one entry per round."""

    times: dict[str, list[float]] = field(default_factory=dict)

    def median(self, name: str) -> float:
        return statistics.median(self.times[name])

    def medians(self) -> dict[str, float]:
        return {k: statistics.median(v) for k, v in self.times.items()}


def interleaved(contenders: Mapping[str, Callable[[], Any]], rounds: int, inner: int = 1) -> Timing:
    """Time each contender `rounds` times, interleaved (rotated order each round); each
    sample is the mean over `inner` back-to-back calls (for calls near timer resolution)."""
    names = list(contenders)
    for name in names:  # warm-up
        contenders[name]()
    out = Timing({k: [] for k in names})
    gc.collect()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn = contenders[name]
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            out.times[name].append((time.perf_counter() - t0) / inner)
    return out


def paired_ratio(t: Timing, num: str, den: str) -> float:
    """Median over rounds of t[num]/t[den] (both timed in the same round)."""
    a, b = t.times[num], t.times[den]
    return statistics.median(x / y for x, y in zip(a, b, strict=True))


def median_rows(
    t: Timing,
    labels: Mapping[str, str],
    reference: str | None,
    extra: Callable[[float], dict[str, float]] | None = None,
) -> dict[str, dict[str, Any]]:
    """One row per contender of `t`, in its order: `label`, `median_s`, the fields `extra`
    computes from the median (if given), then `ratio_to_torch`: the paired ratio to the
    contender `reference`, or None when there is none."""
    rows: dict[str, dict[str, Any]] = {}
    for k, med in t.medians().items():
        row: dict[str, Any] = {"label": labels[k], "median_s": med}
        if extra is not None:
            row.update(extra(med))
        row["ratio_to_torch"] = paired_ratio(t, k, reference) if reference else None
        rows[k] = row
    return rows


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return "–"
    return f"{r:.2f}×" if r < 100 else f"{r:.0f}×"


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
