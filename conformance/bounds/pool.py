"""Fast-profile bounds of the pool family: none of its own.

Invariant: avg_pool2d and max_pool2d are composites; the bound check inlines them and
checks their primitives, so no entry is registered here.
"""

from __future__ import annotations

__all__: list[str] = []
