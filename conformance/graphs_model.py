"""Hypothesis builders for the model-scale ops, merged into `conformance.graphs`.

`model_builders(max_elements)` returns one builder per op (gather, reduce_max,
mask_neg_inf, conv2d, conv_transpose2d, avg_pool2d, max_pool2d, layer_norm, batch_norm,
scaled_dot_product_attention, multi_head_attention, embedding, one_hot). A builder takes
the graph under construction (`conformance.graphs._Ctx`), adds the op (and the helper
nodes its arguments need) and returns True, or returns False when nothing fits.

Invariants (those of `conformance.graphs`):
- Arguments are constructed to satisfy each op's shape rule: configurations are drawn
  from small fixed lists (simplest first, so shrinking simplifies them), and arguments are
  existing values of the right shape, reshapes of values of the same size, or consts.
- No graph value exceeds `max_elements` elements (composite bodies may hold larger
  intermediate values; they are not graph values).
- Over rationals only algebraic ops are drawn (the generator filters by the table's
  `algebraic` flag); avg_pool2d divides by a positive const, so it never fails there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from spec.shape import Shape, size

__all__ = ["model_builders"]

Builder = Callable[[Any], bool]


def _args(c: Any, shapes: list[Shape]) -> list[int] | None:
    """Materialise one value per shape (reusing values of an earlier equal shape)."""
    out: list[int] = []
    for k, s in enumerate(shapes):
        i = c.materialize(s, reserve=len(shapes) - k)
        if i is None:
            return None
        out.append(i)
    return out


def _configured(op: str, configs: list[tuple[list[Shape], dict[str, Any]]]) -> Builder:
    def build(c: Any) -> bool:
        if not c.room(1):
            return False
        shapes, attrs = c.draw(st.sampled_from(configs))
        ids = _args(c, list(shapes))
        if ids is None or not c.room(1):
            return False
        c.add(op, *ids, **attrs)
        return True

    return build


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

_POOL: list[tuple[list[Shape], dict[str, Any]]] = [
    ([(1, 2, 2)], {"kernel_size": (2, 2)}),
    ([(1, 3, 3)], {"kernel_size": (2, 2), "stride": (1, 1)}),
    ([(2, 2, 3)], {"kernel_size": (1, 2)}),
    ([(1, 3, 3)], {"kernel_size": (2, 2), "padding": (1, 1)}),
    ([(1, 3, 3)], {"kernel_size": (3, 3), "stride": (2, 2), "padding": (1, 1)}),
    ([(2, 1, 2, 3)], {"kernel_size": (2, 2), "stride": (1, 1)}),
]

_MAXPOOL = [*_POOL, ([(1, 3, 3)], {"kernel_size": (2, 2), "stride": (1, 1), "dilation": (2, 1)})]

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


def _gather(max_elements: int) -> Builder:
    def build(c: Any) -> bool:
        x = c.pick(lambda s: len(s) >= 1)
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        lead, m = size(s[:-1]), s[-1]
        longest = 4 if lead == 0 else min(4, max_elements // lead)
        idx = c.draw(st.lists(st.integers(0, m), max_size=longest))
        shape = c.draw(st.sampled_from([(len(idx),), (1, len(idx))]))
        c.add("gather", x, indices=idx, shape=shape)
        return True

    return build


def _reduce_max(c: Any) -> bool:
    x = c.pick(lambda s: any(d >= 1 for d in s))
    if x is None or not c.room(1):
        return False
    axes = [i for i, d in enumerate(c.shapes[x]) if d >= 1]
    c.add("reduce_max", x, axis=c.draw(st.sampled_from(axes)))
    return True


def _mask(c: Any) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    ms = c.draw(st.sampled_from([s, s[1:], s[-1:] if s else ()]))
    mask = c.draw(st.lists(st.integers(0, 1), min_size=size(ms), max_size=size(ms)))
    c.add("mask_neg_inf", x, mask=mask, mask_shape=ms)
    return True


def _norm(op: str) -> Builder:
    def build(c: Any) -> bool:
        if op == "layer_norm":
            x = c.pick(lambda s: len(s) >= 1 and s[-1] >= 1)
        else:
            x = c.pick(lambda s: len(s) >= 2 and size(s) >= 1)
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        feat = (s[-1],) if op == "layer_norm" else (s[1],)
        ids = _args(c, [feat, feat])
        if ids is None or not c.room(1):
            return False
        c.add(op, x, *ids)
        return True

    return build


def _embedding(c: Any) -> bool:
    t = c.pick(lambda s: len(s) == 2 and s[0] >= 1)
    if t is None or not c.room(1):
        return False
    v, d = c.shapes[t]
    longest = 4 if d == 0 else max(1, min(4, 12 // max(d, 1)))
    idx = c.draw(st.lists(st.integers(0, v - 1), min_size=1, max_size=longest))
    shape = c.draw(st.sampled_from([None, (1, len(idx))]))
    c.add("embedding", t, indices=idx, shape=shape)
    return True


def _one_hot(c: Any) -> bool:
    if not c.room(1):
        return False
    n = c.draw(st.integers(1, 4))
    idx = c.draw(st.lists(st.integers(0, n - 1), max_size=12 // n))
    c.add("one_hot", indices=idx, num_classes=n)
    return True


def model_builders(max_elements: int) -> dict[str, Builder]:
    """One builder per model-scale op (see the module docstring)."""
    return {
        "gather": _gather(max_elements),
        "reduce_max": _reduce_max,
        "one_hot": _one_hot,
        "embedding": _embedding,
        "avg_pool2d": _configured("avg_pool2d", _POOL),
        "max_pool2d": _configured("max_pool2d", _MAXPOOL),
        "conv2d": _configured("conv2d", _CONV),
        "conv_transpose2d": _configured("conv_transpose2d", _CONV_T),
        "mask_neg_inf": _mask,
        "layer_norm": _norm("layer_norm"),
        "batch_norm": _norm("batch_norm"),
        "scaled_dot_product_attention": _configured("scaled_dot_product_attention", _SDPA),
        "multi_head_attention": _configured("multi_head_attention", _MHA),
    }
