"""Kernels of the pool family: avg_pool{1,2,3}d max_pool{1,2,3}d
adaptive_{avg,max}_pool{1,2,3}d.

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
for _name in (
    "avg_pool1d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool3d",
    *(f"adaptive_{k}_pool{n}d" for n in (1, 2, 3) for k in ("avg", "max")),
):
    register_composite(family=__name__, name=_name)
