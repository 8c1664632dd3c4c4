"""Fast-profile bounds of the norm family: none of its own.

Invariant: layer_norm and batch_norm are composites; the bound check inlines them and
checks their primitives, so no entry is registered here.
"""

from __future__ import annotations

__all__: list[str] = []
