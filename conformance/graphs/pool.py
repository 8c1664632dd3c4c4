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


# 1-D and 3-D forms (the 2-D lists above stay as they are, so existing seeds draw the same
# cases; the 2-D ops share the N-d bodies exercised here): ceil mode (a last window
# overhanging the input), count_include_pad off (divisors per window), divisor_override;
# adaptive windows that overlap and differ in size.
_POOL1: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 4)], {"kernel_size": (2,)}),
    ([(2, 5)], {"kernel_size": (2,), "ceil_mode": True}),
    ([(1, 5)], {"kernel_size": (3,), "stride": (2,), "padding": (1,), "ceil_mode": True}),
    ([(2, 1, 4)], {"kernel_size": (2,), "stride": (1,), "padding": (1,)}),
]
_AVG1 = [
    *_POOL1,
    ([(1, 5)], {"kernel_size": (2,), "padding": (1,), "count_include_pad": False}),
    ([(1, 5)], {"kernel_size": (2,), "ceil_mode": True, "divisor_override": 3}),
]
_MAX1 = [*_POOL1, ([(1, 6)], {"kernel_size": (2,), "dilation": (2,), "ceil_mode": True})]

_POOL3: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2, 2)], {"kernel_size": (2, 2, 2)}),
    ([(1, 1, 3, 3)], {"kernel_size": (1, 2, 2), "ceil_mode": True}),
    ([(1, 2, 2, 3)], {"kernel_size": (2, 1, 2), "stride": (1, 1, 2), "padding": (1, 0, 1)}),
]
_AVG3 = [
    *_POOL3,
    ([(1, 1, 3, 3)], {"kernel_size": (1, 2, 2), "padding": (0, 1, 1), "count_include_pad": False}),
]
_MAX3 = [*_POOL3, ([(1, 1, 2, 5)], {"kernel_size": (1, 1, 2), "dilation": (1, 1, 2)})]

_ADAPTIVE: dict[int, list[tuple[list[Shape], dict[str, Any]]]] = {
    1: [
        ([(1, 3)], {"output_size": (1,)}),
        ([(2, 5)], {"output_size": (3,)}),
        ([(1, 2)], {"output_size": (4,)}),
    ],
    2: [
        ([(1, 2, 3)], {"output_size": (1, 2)}),
        ([(1, 3, 3)], {"output_size": (2, 2)}),
        ([(2, 1, 2, 3)], {"output_size": (3, 2)}),
    ],
    3: [([(1, 1, 2, 3)], {"output_size": (1, 1, 2)}), ([(1, 2, 2, 3)], {"output_size": (2, 1, 2)})],
}

register(name="avg_pool1d", build=configured("avg_pool1d", _AVG1))
register(name="avg_pool3d", build=configured("avg_pool3d", _AVG3))
register(name="max_pool1d", build=configured("max_pool1d", _MAX1))
register(name="max_pool3d", build=configured("max_pool3d", _MAX3))
for _nd, _cfgs in _ADAPTIVE.items():
    for _kind in ("avg", "max"):
        _op = f"adaptive_{_kind}_pool{_nd}d"
        register(name=_op, build=configured(_op, _cfgs))
