"""Graph builders of the pool family.

Invariant: configurations come from small fixed lists, simplest first, each valid for the
op's shape rule; `avg_pool2d` divides by a positive const, so it never fails over rationals.
"""

from __future__ import annotations

from typing import Any

from spec.shape import Shape

from .core import configured, register

__all__: list[str] = []

_POOL: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2)], {"kernel_size": (2, 2)}),
    ([(1, 3, 3)], {"kernel_size": (2, 2), "stride": (1, 1)}),
    ([(2, 2, 3)], {"kernel_size": (1, 2)}),
    ([(1, 3, 3)], {"kernel_size": (2, 2), "padding": (1, 1)}),
    ([(1, 3, 3)], {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ([(2, 1, 2, 3)], {"kernel_size": (2, 2), "stride": (1, 1)}),
]


_MAXPOOL = [*_POOL, ([(1, 3, 3)], {"kernel_size": (2, 2), "stride": (1, 1), "dilation": (2, 1)})]


register(name="avg_pool2d", build=configured("avg_pool2d", _POOL))
register(name="max_pool2d", build=configured("max_pool2d", _MAXPOOL))
