"""The table of array rules: op name -> forward, JVP and VJP on arrays of one `Format`.

Invariants:
- A rule computes exactly what the spec rule of the same name computes in the format's
  domain (same scalar operations in the same order, each rounded once), on whole arrays:
  folds run in the spec's order along their folded axis and are vectorised over the others.
- `ArrayRule.vjp` returns one cotangent per argument, like the spec rule; fan-in and the
  zero additions are the evaluator's (`spec.vector.evaluate`), never a rule's.
- `unbroadcast` and `fold` are the spec's central helpers on arrays: left folds in row-major
  order of the positions folded, first element as is, an empty fold is +0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .formats import Format

__all__ = ["RULES", "ArrayRule", "fold", "rule", "unbroadcast"]

Arr = np.ndarray
Fwd = Callable[[Format, list[Arr], dict[str, Any], Sequence[int]], Arr]
Jvp = Callable[[Format, list[Arr], list[Arr], dict[str, Any], Sequence[int]], Arr]
Vjp = Callable[[Format, list[Arr], Arr, dict[str, Any], Sequence[int]], list[Arr]]


@dataclass(frozen=True)
class ArrayRule:
    """One op's rule on arrays."""

    name: str
    forward: Fwd
    jvp: Jvp
    vjp: Vjp


RULES: dict[str, ArrayRule] = {}


def rule(name: str, forward: Fwd, jvp: Jvp, vjp: Vjp) -> ArrayRule:
    """Declare the array rule of the spec op `name` (once)."""
    if name in RULES:
        raise ValueError(f"spec.vector: rule {name!r} declared twice")
    r = ArrayRule(name, forward, jvp, vjp)
    RULES[name] = r
    return r


def fold(F: Format, x: Arr, axis: int) -> Arr:
    """The left fold of `F.add` along `axis` (removed), first element as is; empty: +0."""
    n = x.shape[axis]
    if n == 0:
        return F.zeros(x.shape[:axis] + x.shape[axis + 1 :])
    xs = np.moveaxis(x, axis, 0)
    acc = F.cast(xs[0])
    for k in range(1, n):
        acc = F.add(acc, xs[k])
    return np.array(acc, dtype=F.storage)


def unbroadcast(F: Format, g: Arr, shape: tuple[int, ...]) -> Arr:
    """A cotangent of the broadcast shape reduced back to `shape`: each element the left
    fold, in row-major order of g's positions, of the entries that map to it."""
    if g.shape == tuple(shape):
        return g
    off = g.ndim - len(shape)
    reduced = list(range(off)) + [
        off + i for i, d in enumerate(shape) if d == 1 and g.shape[off + i] != 1
    ]
    kept = [i for i in range(g.ndim) if i not in reduced]
    moved = np.transpose(g, reduced + kept)
    r = int(np.prod([g.shape[i] for i in reduced], dtype=np.int64))
    flat = moved.reshape((r, *[g.shape[i] for i in kept]))
    return fold(F, flat, 0).reshape(shape)
