# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.linkcheck moved to runtime.session.link."""

from .session.link import (
    GraphExport,
    LinkCheck,
    RecordedGraph,
    compare_sides,
    first_mismatch,
    link_check,
    random_seed_pack,
    runtime_side,
    spec_side,
)

__all__ = [
    "GraphExport",
    "LinkCheck",
    "RecordedGraph",
    "compare_sides",
    "first_mismatch",
    "link_check",
    "random_seed_pack",
    "runtime_side",
    "spec_side",
]
