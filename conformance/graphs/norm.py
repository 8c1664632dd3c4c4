"""Graph builders of the norm family.

Invariant: `layer_norm` normalises a non-empty last axis, `batch_norm` a non-empty value of
rank >= 2 over axis 1; weight and bias have the feature shape. `instance_norm` takes a
value (N, C, spatial...) of rank >= 3 with no zero dim; `group_norm` a value of rank >= 2
with no zero dim and a num_groups dividing C (1, C and the others drawn); eps is drawn
from the default and a few rationals. `batch_norm_eval` takes a value of rank >= 2 with
C >= 1 (empty batches included) and a positive running variance (a fresh positive const);
`local_response_norm` is drawn from configured cases (odd and even sizes, windows wider than
the channel axis, non-default alpha, beta and k).
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from spec.shape import size

from .core import Builder, Ctx, configured, materialize_args, register

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


_EPS = (None, Fraction(1, 10), Fraction(1, 1000))


def _grouped(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        rank = 3 if op == "instance_norm" else 2
        x = c.pick(lambda s: len(s) >= rank and size(s) >= 1)
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        ids = materialize_args(c, [(s[1],), (s[1],)])
        if ids is None or not c.room(1):
            return False
        attrs: dict[str, object] = {}
        if op == "group_norm":
            divisors = [g for g in range(1, s[1] + 1) if s[1] % g == 0]
            attrs["num_groups"] = c.draw(st.sampled_from(divisors))
        eps = c.draw(st.sampled_from(_EPS))
        if eps is not None:
            attrs["eps"] = eps
        c.add(op, x, *ids, **attrs)
        return True

    return build


register(name="instance_norm", build=_grouped("instance_norm"))
register(name="group_norm", build=_grouped("group_norm"))


def _batch_norm_eval(c: Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 2 and s[1] >= 1)
    if x is None or not c.room(3):
        return False
    feat = (c.shapes[x][1],)
    mean = materialize_args(c, [feat])
    if mean is None or not c.room(3):
        return False
    var = c.const(feat, positive=True)  # var + eps > 0 (sqrt's argument)
    ids = materialize_args(c, [feat, feat])
    if ids is None or not c.room(1):
        return False
    eps = c.draw(st.sampled_from(_EPS))
    c.add("batch_norm_eval", x, mean[0], var, *ids, **({} if eps is None else {"eps": eps}))
    return True


# local_response_norm: odd and even sizes, windows wider than the channel axis, zero inputs
# (the base is k), the defaults.
_LRN: list[tuple[list[tuple[int, ...]], dict[str, object]]] = [
    ([(1, 3, 2)], {"size": 3}),
    ([(2, 2, 1)], {"size": 2, "alpha": Fraction(1, 2), "beta": Fraction(3, 4), "k": 2}),
    ([(1, 4, 1, 2)], {"size": 5, "alpha": 1, "beta": Fraction(1, 2), "k": Fraction(1, 4)}),
    ([(1, 1, 3)], {"size": 1, "alpha": 2, "beta": 1, "k": 1}),
    ([(2, 3, 1)], {"size": 4, "alpha": Fraction(1, 10), "beta": 2, "k": Fraction(3, 2)}),
]

register(name="batch_norm_eval", build=_batch_norm_eval)
register(name="local_response_norm", build=configured("local_response_norm", _LRN))
