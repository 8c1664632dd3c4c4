"""Graph builders of the attention family.

Invariants: attention configurations come from small fixed lists, simplest first, each
valid for the op's shape rule; `mask_neg_inf`'s mask has the value's shape or a trailing
part of it.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from spec.shape import Shape, size

from .core import Ctx, configured, register

__all__: list[str] = []

_SDPA: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2), (2, 2), (2, 1)], {}),
    ([(2, 2), (2, 2), (2, 2)], {"causal": 1}),
    ([(2, 1), (3, 1), (3, 2)], {"mask": (1, 0, 1, 1, 1, 0)}),
    ([(2, 2), (2, 2), (2, 2)], {"scale": 1}),
    ([(2, 1, 2), (2, 1, 2), (2, 1, 2)], {}),
    ([(2, 2), (2, 2), (2, 1)], {"mask": (1, 1, 0, 1), "causal": 1}),
]


_MHA: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(2, 2)] * 7, {"heads": 1}),
    ([(2, 2)] * 7, {"heads": 2, "causal": 1}),
    ([(1, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2)], {"heads": 2}),
    ([(3, 2), (3, 2), (3, 2), (2, 2), (2, 2), (2, 2), (2, 2)], {"heads": 1, "causal": 1}),
]


def _mask(c: Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    ms = c.draw(st.sampled_from([s, s[1:], s[-1:] if s else ()]))
    mask = c.draw(st.lists(st.integers(0, 1), min_size=size(ms), max_size=size(ms)))
    c.add("mask_neg_inf", x, mask=mask, mask_shape=ms)
    return True


register(name="mask_neg_inf", build=_mask)
register(
    name="scaled_dot_product_attention", build=configured("scaled_dot_product_attention", _SDPA)
)
register(name="multi_head_attention", build=configured("multi_head_attention", _MHA))
