# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.rng moved to runtime.engine.rng."""

from .engine.rng import (
    keep_mask,
    sample_nat,
    uniform01,
)

__all__ = [
    "keep_mask",
    "sample_nat",
    "uniform01",
]
