"""A second evaluator of the spec's IEEE semantics, on whole NumPy arrays.

Invariants:
- It computes what `spec.graph` computes in an IEEE domain (`eval_jvp` values and tangents,
  `backprop_all_ctx` cotangents), bit for bit, with signed zeros and NaN as one class; the
  pure-Python evaluator is its reference (a property test checks them equal on random
  graphs of every op in every IEEE dtype).
- It imports nothing from `runtime`: it is independent of the runtime's kernels. Arithmetic
  is `spec.vector.formats` (one rounding per primitive), folds follow the spec's order
  (`spec.vector.table`), transcendentals are correctly rounded (`spec.vector.crmath`).
- Ops without an array rule fall back per node to the spec rule (counted in `Stats`).
- `seed_arrays` is `runtime.session.link.random_seed_pack`'s pack (the spec RNG: SplitMix64,
  value (n mod 33 − 16)/8) computed on arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..domains import Domain
from ..graph import Graph
from ..rng import key_of
from ..rng_arrays import splitmix64_array
from . import crmath, elementwise, folds, transcendental  # noqa: F401  (register the rules)
from .evaluate import Run, Stats, backprop_all, forward
from .formats import EMULATED, FORMATS, Format, format_of, quiet, require_ieee, same_arrays
from .table import RULES

__all__ = [
    "EMULATED",
    "FORMATS",
    "RULES",
    "Format",
    "Run",
    "Stats",
    "backprop_all",
    "first_difference",
    "format_of",
    "forward",
    "link_sides",
    "quiet",
    "same_arrays",
    "seed_arrays",
]

_M = np.uint64(0xFFFFFFFFFFFFFFFF)


def seed_arrays(g: Graph, F: Format, seed: int) -> list[np.ndarray]:
    """The full pseudo-random seed over every value of g: element k (counting across the
    values in order, row-major) is (sample_nat(key_of(seed, 0), k) mod 33 − 16) / 8."""
    key = np.uint64(key_of(seed, 0))
    out, k = [], 0
    with np.errstate(over="ignore"):
        for s in g.shapes:
            n = int(np.prod(s, dtype=np.int64))
            i = np.arange(k, k + n, dtype=np.uint64)
            nat = splitmix64_array(np, (key + i) & _M) & np.uint64(0xFFFFFFFF)
            v = ((nat % np.uint64(33)).astype(np.int64) - 16).astype(np.float64) / 8.0
            out.append(F.cast(v.reshape(s)))
            k += n
    return out


Sides = tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]


def link_sides(
    D: Domain,
    g: Graph,
    xs: Sequence[Any],
    env: Sequence[int],
    seed: Sequence[Any],
    stats: Stats | None = None,
    emulated: bool = False,
) -> Sides:
    """(values, cotangents, tangents) of g in the IEEE domain D: the spec side of the link
    check (`eval_jvp` with the seed's input entries as tangents, `backprop_all_ctx`).
    `emulated`: binary32 by binary64 evaluation and one rounding (`EMULATED`)."""
    require_ieee()
    F = EMULATED[D.name] if emulated else format_of(D)
    stats = stats if stats is not None else Stats()
    xs = [F.cast(x) for x in xs]
    sd = [F.cast(s) for s in seed]
    before = crmath.MPFR_ELEMENTS.n
    try:
        with quiet():
            run = forward(F, g, xs, sd[: g.num_inputs], env, stats=stats)
            vals, tans = list(run.vals), list(run.tans)
            cots = backprop_all(F, run, sd, env, stats)
    finally:
        stats.mpfr += crmath.MPFR_ELEMENTS.n - before
    return vals, cots, tans


def first_difference(got: Sequence[Any], want: Sequence[Any]) -> tuple[int, int] | None:
    """(value index, flat element index) of the first element where two lists of arrays
    differ (shape, or `same_arrays` false), else None."""
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return i, 0
        ok = same_arrays(a, b).reshape(-1)
        if not ok.all():
            return i, int(np.argmin(ok))
    return None
