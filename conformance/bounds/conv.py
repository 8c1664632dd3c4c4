"""Fast-profile bounds of the conv family: none of its own.

Invariant: conv2d and conv_transpose2d are composites; the bound check inlines them and
checks their primitives (shape, index, linalg, reduce families), so no entry is registered
here.
"""

from __future__ import annotations

__all__: list[str] = []
