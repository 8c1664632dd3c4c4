"""The targets of `python -m benchmarks`, checked against a run's measurements.

Invariants:
- The limits are those docs/BENCHMARKS.md states and discusses; a target is met when the
  measured ratio is at most its limit, and its status is None (not judged) when the ratio
  could not be measured (a peer it compares against is absent).
- Only figures present in the run yield targets, in the report's order: per-op overhead,
  MLP step, ordered/fast per dtype and per model-scale workload, tape memory.
"""

from __future__ import annotations

import statistics
from typing import Any

__all__ = ["T_MEMORY", "T_MLP", "T_ORDERED", "T_PER_OP", "targets"]

# Targets (docs/BENCHMARKS.md states and discusses them)
T_PER_OP = 1.0  # per-op eager overhead <= PyTorch's
T_MLP = 1.25  # MLP step <= 1.25x PyTorch CPU at float32 (and faster than HIPS autograd)
T_ORDERED = 3.0  # ordered <= 3x fast on the MLP step, the conv layer and the attention block
T_MEMORY = 1.2  # tape bytes <= 1.2x the forward values the backward needs


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per target the measured figures of `res` can judge."""
    out = []

    def add(name: str, measured: float | None, limit: float, what: str) -> None:
        out.append(
            {
                "target": name,
                "measured": measured,
                "limit": limit,
                "met": None if measured is None else measured <= limit,
                "what": what,
            }
        )

    chain = res.get("chain", {}).get("rows", {})
    if chain:
        add(
            "per-op eager overhead ≤ PyTorch's",
            chain["ours"]["ratio_to_torch"],
            T_PER_OP,
            "Session chain time / PyTorch chain time",
        )
    mlp = res.get("mlp", {}).get("float32", {}).get("rows", {})
    if mlp:
        add(
            "MLP step ≤ 1.25× PyTorch (float32)",
            mlp["ours"]["ratio_to_torch"],
            T_MLP,
            "eager Session step / PyTorch step",
        )
        if "autograd" in mlp:
            ag = statistics.median([mlp["ours"]["median_s"] / mlp["autograd"]["median_s"]])
            add(
                "MLP step faster than HIPS autograd (float32)",
                ag,
                1.0,
                "eager Session step / autograd step",
            )
    for dt, o in res.get("ordered", {}).items():
        add(f"ordered ≤ 3× fast ({dt})", o["ratio"], T_ORDERED, "ordered step / fast step")
    for name, w in res.get("model", {}).get("workloads", {}).items():
        add(
            f"ordered ≤ 3× fast ({name}, float32)",
            w.get("ordered_over_fast"),
            T_ORDERED,
            "ordered step / fast step, paired per round",
        )
    mem = res.get("memory")
    if mem:
        add(
            "tape memory ≤ 1.2× needed forward values",
            mem["ratio"],
            T_MEMORY,
            "tape bytes / bytes the backward reads",
        )
    return out
