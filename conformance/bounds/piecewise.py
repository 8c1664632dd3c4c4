"""Fast-profile bounds of the piecewise family.

Invariants:
- where: 0 (it picks an element of a or b).
- prelu: u·|y| + η/2 (x, or one correctly rounded product w·x of two dtype values).
"""

from __future__ import annotations

from .core import EXACT, elementwise, register

__all__: list[str] = []

register(name="where", bound=EXACT)
register(name="prelu", bound=elementwise(1, 0.5))
