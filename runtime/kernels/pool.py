"""Kernels of the pool family: avg_pool2d max_pool2d.

Invariants:
- Every op of the family is composite: its kernel runs the spec body node by node through
  the primitive kernels (`table.register_composite`), so its ordered results are the
  spec's bit for bit; bodies are built once per (argument shapes, attributes).
"""

from __future__ import annotations

from .table import register_composite

__all__: list[str] = []

register_composite(family=__name__, name="avg_pool2d")
register_composite(family=__name__, name="max_pool2d")
