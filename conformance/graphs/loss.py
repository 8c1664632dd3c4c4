"""Graph builders of the loss family.

Invariant: both arguments share one shape (the target is an existing value of that shape,
possibly the prediction itself, a reshape or a const); `mse_loss` takes a non-empty value,
`cross_entropy` a rank-1 or rank-2 value with non-empty classes and rows.
"""

from __future__ import annotations

from collections.abc import Callable

from spec.shape import Shape, size

from .core import Builder, Ctx, register

__all__: list[str] = []


def _paired(op: str, pred: Callable[[Shape], bool]) -> Builder:
    """A two-argument op whose arguments share one shape (mse_loss, cross_entropy)."""

    def build(c: Ctx) -> bool:
        y = c.pick(pred)
        if y is None or not c.room(1):
            return False
        t = c.materialize(c.shapes[y], reserve=1)
        if t is None:
            return False
        c.add(op, y, t)
        return True

    return build


register(name="mse_loss", build=_paired("mse_loss", lambda s: size(s) >= 1))
register(
    name="cross_entropy",
    build=_paired(
        "cross_entropy", lambda s: len(s) in (1, 2) and s[-1] >= 1 and (len(s) == 1 or s[0] >= 1)
    ),
)
