"""ONNX sequence ops inside a graph: a sequence is an import-time list of values.

Invariants:
- A sequence value is a `Seq` (a tuple of `Dyn` / `Static` values); the ops here only
  rearrange, pick or concatenate its elements, so nothing they do becomes a graph node
  except the concatenations and slices of `ConcatFromSequence` / `SplitToSequence`.
- Positions follow ONNX: in [-n, n-1] (SequenceAt, SequenceErase) or [-n, n]
  (SequenceInsert), negative counted from the end; anything else is refused.
- A sequence at a model's input or output is refused by `onnx_load.validate`; a sequence
  reaching a non-sequence op is refused by the walker.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import aten as ar
from .core import Emitter, InvalidModelError, Static, axis_of
from .onnx_nn import opt, static

__all__ = ["SEQ_OPS", "Seq"]


@dataclass(frozen=True)
class Seq:
    """A sequence value known in structure at import time."""

    items: tuple[Any, ...]


def _seq(v: Any, what: str) -> tuple[Any, ...]:
    if not isinstance(v, Seq):
        raise InvalidModelError(f"{what} is not a sequence")
    return v.items


def _pos(v: Any, n: int, hi: int, what: str) -> int:
    p = int(static(v, what).reshape(-1)[0])
    if not -n <= p <= hi:
        raise InvalidModelError(f"{what} {p} is out of range for a sequence of length {n}")
    return p + n if p < 0 else p


def _insert(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    items = list(_seq(xs[0], "SequenceInsert input 0"))
    p = opt(xs, 2)
    k = len(items) if p is None else _pos(p, len(items), len(items), "SequenceInsert position")
    items.insert(k, xs[1])
    return Seq(tuple(items))


def _erase(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    items = list(_seq(xs[0], "SequenceErase input 0"))
    p = opt(xs, 1)
    k = len(items) - 1 if p is None else _pos(p, len(items), len(items) - 1, "erase position")
    if not items:
        raise InvalidModelError("SequenceErase of an empty sequence")
    del items[k]
    return Seq(tuple(items))


def _at(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    items = _seq(xs[0], "SequenceAt input 0")
    return items[_pos(xs[1], len(items), len(items) - 1, "SequenceAt position")]


def _concat(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    items = _seq(xs[0], "ConcatFromSequence input 0")
    if not items:
        raise InvalidModelError("ConcatFromSequence of an empty sequence")
    n = len(E.shape(items[0]))
    if a.get("new_axis", 0):
        ax = axis_of(a["axis"], n + 1, "ConcatFromSequence axis")
        items = tuple(E.reshape(t, (*E.shape(t)[:ax], 1, *E.shape(t)[ax:])) for t in items)
        n += 1
    else:
        ax = axis_of(a["axis"], n, "ConcatFromSequence axis")
    return ar.cat(E, list(items), ax) if len(items) > 1 else items[0]


def _split(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x = xs[0]
    s = E.shape(x)
    ax = axis_of(a.get("axis", 0), len(s), "SplitToSequence axis")
    sp = opt(xs, 1)
    if sp is None:
        parts = [ar.slice_rule(E, x, ax, i, i + 1, 1) for i in range(s[ax])]
        if a.get("keepdims", 1):
            return Seq(tuple(parts))
        return Seq(tuple(E.reshape(p, (*s[:ax], *s[ax + 1 :])) for p in parts))
    sizes = static(sp, "split").astype(np.int64)
    if sizes.ndim == 0:
        step = int(sizes)
        if step < 1:
            raise InvalidModelError(f"SplitToSequence split {step}")
        bounds = [*list(range(0, s[ax], step)), s[ax]]
    else:
        if sizes.sum() != s[ax] or (sizes < 0).any():
            raise InvalidModelError(f"SplitToSequence sizes {sizes.tolist()} of length {s[ax]}")
        bounds = [0, *np.cumsum(sizes).tolist()]
    return Seq(tuple(_piece(E, x, ax, lo, hi) for lo, hi in itertools.pairwise(bounds)))


def _piece(E: Emitter, x: Any, ax: int, lo: int, hi: int) -> Any:
    """x[lo:hi] on axis ax; an empty piece is an import-time empty array (it has a length
    in the sequence, and no value a graph op could use)."""
    if hi > lo:
        return ar.slice_rule(E, x, ax, lo, hi, 1)
    s = list(E.shape(x))
    s[ax] = 0
    return Static(np.zeros(s))


SEQ_OPS = {
    "SequenceEmpty": lambda E, xs, a, v: Seq(()),
    "SequenceConstruct": lambda E, xs, a, v: Seq(tuple(xs)),
    "SequenceInsert": _insert,
    "SequenceErase": _erase,
    "SequenceAt": _at,
    "SequenceLength": lambda E, xs, a, v: Static(
        np.asarray(len(_seq(xs[0], "SequenceLength input")), dtype=np.int64)
    ),
    "ConcatFromSequence": _concat,
    "SplitToSequence": _split,
}
"""Sequence op type -> rule (same signature as `ONNX_OPS`)."""
