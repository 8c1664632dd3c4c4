# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.crmath moved to runtime.engine.crmath."""

from .engine.crmath import (
    ERR_ULPS,
    FUNCTIONS,
    cr_apply,
    unsafe_mask,
)

__all__ = [
    "ERR_ULPS",
    "FUNCTIONS",
    "cr_apply",
    "unsafe_mask",
]
