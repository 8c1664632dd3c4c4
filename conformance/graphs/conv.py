"""Graph builders of the conv family.

Invariant: configurations (argument shapes and attributes) come from small fixed lists,
simplest first, each valid for the op's shape rule; arguments are existing values of the
right shape, reshapes or consts.
"""

from __future__ import annotations

from typing import Any

from spec.shape import Shape

from .core import configured, register

__all__: list[str] = []

_CONV: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2), (1, 1, 1, 1)], {}),
    ([(1, 3, 3), (1, 1, 2, 2)], {}),
    ([(1, 2, 3), (2, 1, 2, 2), (2,)], {}),
    ([(2, 2, 2), (1, 2, 2, 2)], {"padding": (1, 0)}),
    ([(1, 3, 3), (1, 1, 2, 2)], {"stride": (2, 2), "padding": (1, 1)}),
    ([(1, 3, 3), (1, 1, 2, 2), (1,)], {"dilation": (2, 1)}),
    ([(2, 2, 3), (2, 1, 1, 2), (2,)], {"groups": 2}),
    ([(2, 1, 2, 2), (1, 1, 2, 1), (1,)], {"padding": (0, 1)}),
    ([(1, 1, 3, 3), (1, 1, 2, 2)], {"stride": (1, 2)}),
]


_CONV_T: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2), (1, 1, 1, 1)], {}),
    ([(1, 2, 2), (1, 1, 2, 2)], {}),
    ([(2, 1, 2), (2, 1, 2, 2), (1,)], {}),
    ([(1, 2, 2), (1, 1, 2, 2)], {"stride": (2, 1), "padding": (1, 0)}),
    ([(2, 1, 2), (2, 1, 1, 2), (2,)], {"groups": 2}),
    ([(1, 2, 1), (1, 1, 2, 1)], {"stride": (2, 2), "output_padding": (1, 1)}),
    ([(1, 1, 1, 2), (1, 1, 2, 2), (1,)], {"dilation": (1, 2)}),
]


register(name="conv2d", build=configured("conv2d", _CONV))
register(name="conv_transpose2d", build=configured("conv_transpose2d", _CONV_T))


# 1-D and 3-D forms: groups, dilation, stride, asymmetric padding (2*nd ints), output padding.
_CONV1: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 3), (1, 1, 2)], {}),
    ([(2, 4), (2, 1, 2), (2,)], {"groups": 2, "padding": (1,)}),
    ([(1, 5), (1, 1, 2)], {"stride": (2,), "dilation": (2,), "padding": (2, 0)}),
    ([(2, 1, 3), (1, 1, 3), (1,)], {"padding": (0, 2)}),
]

_CONV3: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2, 2), (1, 1, 1, 1, 1)], {}),
    ([(1, 2, 2, 3), (1, 1, 2, 1, 2), (1,)], {"padding": (0, 1, 0)}),
    ([(2, 1, 2, 3), (2, 1, 1, 2, 2)], {"groups": 2, "stride": (1, 1, 2)}),
    ([(1, 1, 3, 3), (1, 1, 1, 2, 2)], {"dilation": (1, 2, 1), "padding": (0, 0, 1, 0, 1, 0)}),
]

_CONV_T1: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2), (1, 1, 2)], {}),
    ([(2, 2), (2, 1, 2), (2,)], {"groups": 2, "stride": (2,), "output_padding": (1,)}),
    ([(1, 3), (1, 1, 3)], {"padding": (1,), "dilation": (2,)}),
    ([(1, 1, 2), (1, 2, 2)], {"stride": (3,), "padding": (1, 0)}),
]

_CONV_T3: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 1, 1, 2), (1, 1, 1, 1, 2)], {}),
    ([(2, 1, 1, 2), (2, 1, 1, 2, 1), (2,)], {"groups": 2, "stride": (1, 2, 1)}),
    ([(1, 1, 2, 1), (1, 1, 2, 1, 1)], {"stride": (2, 1, 1), "output_padding": (1, 0, 0)}),
]

register(name="conv1d", build=configured("conv1d", _CONV1))
register(name="conv3d", build=configured("conv3d", _CONV3))
register(name="conv_transpose1d", build=configured("conv_transpose1d", _CONV_T1))
register(name="conv_transpose3d", build=configured("conv_transpose3d", _CONV_T3))
