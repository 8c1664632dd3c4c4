"""Per-op laws of the shape family: reshape, swap_adjacent, transpose, broadcast_to, concat,
slice, pad, narrow, flip, roll, tile, repeat_interleave.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- All are linear and checked on free symbols against the NumPy operation of the same
  meaning (row-major reshape, swapaxes, broadcast_to, concatenate on axis 0, slicing);
  pad (affine: its fill is a constant) against np.pad after cropping its negative pads.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from .core import Case, arr, free, law, rat

__all__: list[str] = []

law(
    op="reshape",
    cases=[
        Case(((2, 3),), free(), {"shape": (3, 2)}),
        Case(((6,),), free(), {"shape": (2, 1, 3)}),
        Case(((),), free(), {"shape": (1, 1)}),
        Case(((2, 2),), free(), {"shape": (4,)}),
    ],
    definition_text="NumPy reshape (row-major)",
    derivative_text="jvp = reshape(dx) (linear)",
    definition=lambda v, a, e: arr(v[0].reshape(a["shape"])),
)

law(
    op="swap_adjacent",
    cases=[
        Case(((2, 3),), free(), {"axis": 0}),
        Case(((2, 3, 2),), free(), {"axis": 1}),
        Case(((2, 3, 2),), free(), {"axis": 0}),
    ],
    definition_text="NumPy swapaxes(axis, axis + 1)",
    derivative_text="jvp = swap(dx) (linear)",
    definition=lambda v, a, e: arr(np.swapaxes(v[0], a["axis"], a["axis"] + 1)),
)

law(
    op="broadcast_to",
    cases=[
        Case(((),), free(), {"shape": (2, 3)}),
        Case(((3,),), free(), {"shape": (2, 3)}),
        Case(((2, 1),), free(), {"shape": (2, 3)}),
        Case(((2, 3),), free(), {"shape": (2, 3)}),
        Case(((1, 3),), free(), {"shape": (2, 2, 3)}),
    ],
    definition_text="NumPy broadcast_to",
    derivative_text="jvp = broadcast_to(dx) (linear)",
    definition=lambda v, a, e: arr(np.broadcast_to(v[0], a["shape"]).copy()),
)

law(
    op="concat",
    cases=[
        Case(((2,),), free()),
        Case(((2,), (3,)), free()),
        Case(((1, 2), (2, 2), (1, 2)), free()),
        Case(((0, 2), (2, 2)), free()),
    ],
    definition_text="NumPy concatenate on axis 0",
    derivative_text="jvp = concat(dx_i) (linear)",
    definition=lambda v, a, e: arr(np.concatenate(v, axis=0)),
)

law(
    op="slice",
    cases=[
        Case(((4,),), free(), {"start": 1, "stop": 3}),
        Case(((3, 2),), free(), {"start": 0, "stop": 3}),
        Case(((3, 2),), free(), {"start": 2, "stop": 2}),
        Case(((4, 2),), free(), {"start": 3, "stop": 4}),
    ],
    definition_text="x[start:stop] on the leading axis",
    derivative_text="jvp = dx[start:stop] (linear)",
    definition=lambda v, a, e: arr(v[0][a["start"] : a["stop"]]),
)

law(
    op="transpose",
    cases=[Case((s,), free()) for s in ((2, 3), (2, 2, 3), (1, 3))],
    definition_text="NumPy swapaxes(-1, -2)",
    derivative_text="jvp = transpose(dx) (linear)",
    definition=lambda v, a, e: arr(np.swapaxes(v[0], -1, -2)),
)


_NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_def(v: list[Any], a: Mapping[str, Any], e: Any) -> Any:
    """NumPy's np.pad (reflect, edge, wrap) after cropping the negative pads."""
    x = v[0]
    pads = list(a["pad"])
    widths = [(0, 0)] * x.ndim
    crop = [slice(None)] * x.ndim
    for k in range(len(pads) // 2):
        ax = x.ndim - 1 - k
        lo, hi = pads[2 * k], pads[2 * k + 1]
        crop[ax] = slice(max(-lo, 0), x.shape[ax] - max(-hi, 0))
        widths[ax] = (max(lo, 0), max(hi, 0))
    mode = a.get("mode") or "constant"
    y = x[tuple(crop)]
    if mode == "constant":
        fill = rat(a.get("value") or 0)
        return arr(np.pad(y, widths, mode="constant", constant_values=fill))
    return arr(np.pad(y, widths, mode=_NP_MODE[mode]))


law(
    op="pad",
    cases=[
        Case(((2, 3),), free(), {"pad": (1, 2, 0, 1), "value": Fraction(1, 2)}),
        Case(((2, 3),), free(), {"pad": (2, 1), "mode": "reflect"}),
        Case(((2, 3),), free(), {"pad": (1, 2, 1, -1), "mode": "replicate"}),
        Case(((2, 3),), free(), {"pad": (2, -1), "mode": "circular"}),
        Case(((1, 2, 2),), free(), {"pad": (-1, 0, 1, 1), "mode": "constant"}),
    ],
    definition_text="np.pad after cropping negative pads: constant (value), reflect, edge "
    "(replicate), wrap (circular); pairs from the last axis backwards",
    derivative_text="jvp = pad(dx) with value 0 (affine in x: the fill does not move)",
    definition=_pad_def,
)


# narrow, flip, roll, tile, repeat_interleave: linear moves, each against NumPy's operation
# of the same meaning (slicing, np.flip, np.roll, np.tile, np.repeat).


def _narrow_def(v: list[Any], a: Mapping[str, Any], e: Any) -> Any:
    cut = [slice(None)] * v[0].ndim
    cut[a["dim"]] = slice(a["start"], a["start"] + a["length"])
    return arr(v[0][tuple(cut)])


law(
    op="narrow",
    cases=[
        Case(((2, 3),), free(), {"dim": 1, "start": 1, "length": 2}),
        Case(((3, 2),), free(), {"dim": 0, "start": 0, "length": 1}),
        Case(((2, 2),), free(), {"dim": 1, "start": 2, "length": 0}),
    ],
    definition_text="x[..., start:start+length, ...] on axis dim",
    derivative_text="jvp = narrow(dx) (linear)",
    definition=_narrow_def,
)

law(
    op="flip",
    cases=[
        Case(((2, 3),), free(), {"dims": (1,)}),
        Case(((2, 1, 3),), free(), {"dims": (2, 0, 1)}),
        Case(((3,),), free(), {"dims": ()}),
    ],
    definition_text="np.flip(x, dims)",
    derivative_text="jvp = flip(dx) (linear)",
    definition=lambda v, a, e: arr(np.flip(v[0], tuple(a["dims"])) if a["dims"] else v[0]),
)


def _roll_def(v: list[Any], a: Mapping[str, Any], e: Any) -> Any:
    dims = a.get("dims")
    if not dims:
        return arr(np.roll(v[0], a["shifts"][0]))
    return arr(np.roll(v[0], tuple(a["shifts"]), tuple(dims)))


law(
    op="roll",
    cases=[
        Case(((2, 3),), free(), {"shifts": (1,), "dims": (1,)}),
        Case(((2, 3),), free(), {"shifts": (-4, 3), "dims": (1, 0)}),
        Case(((2, 3),), free(), {"shifts": (2, -1), "dims": (1, 1)}),
        Case(((2, 2),), free(), {"shifts": (-3,)}),
    ],
    definition_text="np.roll(x, shifts, dims) (without dims: over the flattened x)",
    derivative_text="jvp = roll(dx) (linear)",
    definition=_roll_def,
)

law(
    op="tile",
    cases=[
        Case(((2, 2),), free(), {"dims": (2, 1)}),
        Case(((3,),), free(), {"dims": (2, 1, 2)}),
        Case(((2, 3),), free(), {"dims": (2,)}),
        Case(((2,),), free(), {"dims": (0,)}),
    ],
    definition_text="np.tile(x, dims) (the shorter of shape and dims prefixed with 1s)",
    derivative_text="jvp = tile(dx) (linear; the VJP sums the copies)",
    definition=lambda v, a, e: arr(np.tile(v[0], tuple(a["dims"]))),
)


def _ri_def(v: list[Any], a: Mapping[str, Any], e: Any) -> Any:
    reps = a["repeats"] if len(a["repeats"]) > 1 else a["repeats"][0]
    if a.get("dim") is None:
        return arr(np.repeat(v[0].reshape(-1), reps))
    return arr(np.repeat(v[0], reps, axis=a["dim"]))


law(
    op="repeat_interleave",
    cases=[
        Case(((2, 3),), free(), {"repeats": (2,), "dim": 0}),
        Case(((2, 3),), free(), {"repeats": (0, 2, 1), "dim": 1}),
        Case(((2, 2),), free(), {"repeats": (3,)}),
    ],
    definition_text="np.repeat(x, repeats, axis=dim) (without dim: of the flattened x)",
    derivative_text="jvp = repeat_interleave(dx) (linear; the VJP sums the copies)",
    definition=_ri_def,
)
