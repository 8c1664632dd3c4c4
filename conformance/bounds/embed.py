"""Fast-profile bounds of the embed family: none of its own.

Invariant: embedding and one_hot are composites; the bound check inlines them and checks
their primitives, so no entry is registered here.
"""

from __future__ import annotations

__all__: list[str] = []
