"""Kernels of the conv family: conv{1,2,3}d conv_transpose{1,2,3}d.

Invariants:
- Every op of the family is composite: its kernel runs the spec body node by node through
  the primitive kernels (`table.register_composite`), so its ordered results are the
  spec's bit for bit; bodies are built once per (argument shapes, attributes).
"""

from __future__ import annotations

from .table import register_composite

__all__: list[str] = []

register_composite(family=__name__, name="conv2d")
register_composite(family=__name__, name="conv_transpose2d")
register_composite(family=__name__, name="conv1d")
register_composite(family=__name__, name="conv3d")
register_composite(family=__name__, name="conv_transpose1d")
register_composite(family=__name__, name="conv_transpose3d")
