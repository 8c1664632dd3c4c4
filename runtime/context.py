# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.context moved to runtime.engine.context."""

from .engine.context import (
    PROFILES,
    KernelContext,
    fp_quiet,
)

__all__ = [
    "PROFILES",
    "KernelContext",
    "fp_quiet",
]
