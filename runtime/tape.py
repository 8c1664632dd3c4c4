# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.tape moved to runtime.engine.tape."""

from .engine.tape import (
    Backward,
    Tape,
    TapeNode,
    validated,
)

__all__ = [
    "Backward",
    "Tape",
    "TapeNode",
    "validated",
]
