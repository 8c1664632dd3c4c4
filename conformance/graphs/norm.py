"""Graph builders of the norm family.

Invariant: `layer_norm` normalises a non-empty last axis, `batch_norm` a non-empty value of
rank >= 2 over axis 1; weight and bias have the feature shape.
"""

from __future__ import annotations

from spec.shape import size

from .core import Builder, Ctx, materialize_args, register

__all__: list[str] = []


def _norm(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        if op == "layer_norm":
            x = c.pick(lambda s: len(s) >= 1 and s[-1] >= 1)
        else:
            x = c.pick(lambda s: len(s) >= 2 and size(s) >= 1)
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        feat = (s[-1],) if op == "layer_norm" else (s[1],)
        ids = materialize_args(c, [feat, feat])
        if ids is None or not c.room(1):
            return False
        c.add(op, x, *ids)
        return True

    return build


register(name="layer_norm", build=_norm("layer_norm"))
register(name="batch_norm", build=_norm("batch_norm"))
