"""Fast-profile bounds of the shape family.

Invariants:
- reshape, swap_adjacent, broadcast_to, concat, slice: 0 (they move elements, never
  compute).
- transpose is a composite (of swap_adjacent): no bound of its own; its primitives are
  checked after inlining.
"""

from __future__ import annotations

from .core import EXACT, register

__all__: list[str] = []

for _name in ("reshape", "swap_adjacent", "broadcast_to", "concat", "slice"):
    register(name=_name, bound=EXACT)
