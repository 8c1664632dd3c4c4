"""Graph builders of the softmax family.

Invariant: both ops take a value of rank >= 1 whose last axis is non-empty.
"""

from __future__ import annotations

from .core import Builder, Ctx, register

__all__: list[str] = []


def _last_axis(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick(lambda s: len(s) >= 1 and s[-1] >= 1)
        if x is None or not c.room(1):
            return False
        c.add(op, x)
        return True

    return build


register(name="softmax", build=_last_axis("softmax"))
register(name="log_softmax", build=_last_axis("log_softmax"))
