"""Fast-profile bounds of the attention family.

Invariants:
- mask_neg_inf: 0 (the result is an input element or −∞).
- scaled_dot_product_attention and multi_head_attention are composites: no bound of their
  own; their primitives are checked after inlining.
"""

from __future__ import annotations

from .core import EXACT, register

__all__: list[str] = []

register(name="mask_neg_inf", bound=EXACT)
