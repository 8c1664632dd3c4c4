"""The loss family: mse_loss cross_entropy (composites).

Invariants:
- mse_loss = (1/N)·Σ(ŷ−t)² with N = size (1 for rank 0), as mul(const 1/N, sum(mul(d, d))).
- cross_entropy = neg(sum(mul(t, log_softmax(x)))) for (C,), divided by const B for (B, C).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..shape import size
from .builders import composite, scalar_const, second_arg, second_point, shape_error
from .table import Attrs, arg, sample

__all__ = ["FAMILY"]

FAMILY = "loss"


def _mse_body(b: Any, x: list[int], a: Attrs) -> int:
    sy, st = b.shape_of(x[0]), b.shape_of(x[1])
    if sy != st:
        raise shape_error("mse_loss", "prediction and target shapes differ", 1, sy, st)
    n = size(sy)
    if n == 0:
        raise shape_error("mse_loss", "mse of an empty tensor is undefined", 0, "size >= 1", 0)
    d = b.node("sub", x[0], x[1])
    return b.node("mul", scalar_const(b, Fraction(1, n)), b.node("sum", b.node("mul", d, d)))


composite(
    name="mse_loss",
    family=FAMILY,
    arity=2,
    body=_mse_body,
    doc="mul(const 1/N, sum(mul(d, d))), d = sub(y, t), N = size (1 for rank 0)",
    tags=frozenset({"loss"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            arg((2, 3), 0, 1, 2, 0, 3, -2),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((2, 3), 1, 2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(3, 2)),
        ),
    ),
)


def _ce_body(b: Any, x: list[int], a: Attrs) -> int:
    sx, st = b.shape_of(x[0]), b.shape_of(x[1])
    if sx != st:
        raise shape_error("cross_entropy", "logits and target shapes differ", 1, sx, st)
    if len(sx) not in (1, 2) or sx[-1] < 1:
        raise shape_error(
            "cross_entropy", "logits must be (C,) or (B, C) with C >= 1", 0, "(C,) or (B, C)", sx
        )
    nll = b.node("neg", b.node("sum", b.node("mul", x[1], b.node("log_softmax", x[0]))))
    if len(sx) == 1:
        return nll
    if sx[0] == 0:
        raise shape_error("cross_entropy", "empty batch", 0, "B >= 1", 0)
    return b.node("div", nll, scalar_const(b, sx[0]))


composite(
    name="cross_entropy",
    family=FAMILY,
    arity=2,
    body=_ce_body,
    doc="neg(sum(mul(t, log_softmax(x)))) for (C,); divided by const B for (B, C); "
    "t is a one-hot (or any) target",
    algebraic=False,
    tags=frozenset({"loss"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            arg((2, 3), 0, 0, 1, 1, 0, 0),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((2, 3), 0, 1, 0, 1, 0, 0),
        ),
    ),
)
