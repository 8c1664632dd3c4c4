"""The shape family: reshape swap_adjacent transpose broadcast_to concat slice pad narrow flip
roll tile repeat_interleave.

Invariants:
- Structural ops move values without arithmetic; their JVP is the same move of the
  tangent, and their VJP the adjoint move (broadcast_to's VJP reduces by `unbroadcast`,
  slice's pads with zeros).
- transpose is a composite: swap_adjacent of the last two axes; pad is a composite: one
  gather over the flattened input, its index table built with vectorised NumPy.
- narrow, flip, roll, tile and repeat_interleave are composites of the same kind (one
  gather over the flattened input, per-axis source tables in vectorised NumPy). The graph
  IR has single-output nodes: torch.split / torch.chunk are not ops but `split_ranges` /
  `chunk_ranges`, whose (start, length) pieces the API and importers emit as one narrow
  node each.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..domains import Domain
from ..errors import GraphError, op_error
from ..shape import Shape, broadcasts_to, ravel_index, size, unravel_index
from ..tensor import Tensor
from .builders import composite, second_arg, second_point, shape_error
from .table import Attrs, AttrSpec, Env, arg, expand, register, sample, unbroadcast
from .windows import flat_gather, outer_flat

__all__ = ["FAMILY", "chunk_ranges", "split_ranges"]

FAMILY = "shape"


# --------------------------------------------------------------------------- structure


def _reshape_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if size(shapes[0]) != size(a["shape"]):
        raise shape_error(
            "reshape",
            "element counts differ",
            0,
            f"size {size(a['shape'])}",
            f"{shapes[0]} (size {size(shapes[0])})",
        )
    return a["shape"]


register(
    name="reshape",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("shape", "shape"),),
    shape=_reshape_shape,
    forward=lambda D, xs, a, env: Tensor(a["shape"], xs[0].data),
    jvp=lambda D, xs, dxs, a, env: Tensor(a["shape"], dxs[0].data),
    vjp=lambda D, xs, g, a, env: [Tensor(xs[0].shape, g.data)],
    saves="input shape",
    doc="same row-major data, new shape",
    tags=frozenset({"structural"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"shape": (3, 2)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            attrs={"shape": (3, 2)},
        ),
    ),
)


def _swap_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, k = shapes[0], a["axis"]
    if not 0 <= k < len(s) - 1:
        raise shape_error("swap_adjacent", "axis out of range", 0, f"0 <= axis < {len(s) - 1}", k)
    return (*s[:k], s[k + 1], s[k], *s[k + 2 :])


def _swap(t: Tensor, k: int) -> Tensor:
    out = _swap_shape([t.shape], {"axis": k})
    data = []
    for flat in range(size(out)):
        i = unravel_index(flat, out)
        src = (*i[:k], i[k + 1], i[k], *i[k + 2 :])
        data.append(t.data[ravel_index(src, t.shape)])
    return Tensor(out, tuple(data))


register(
    name="swap_adjacent",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("axis", "nat"),),
    shape=_swap_shape,
    forward=lambda D, xs, a, env: _swap(xs[0], a["axis"]),
    jvp=lambda D, xs, dxs, a, env: _swap(dxs[0], a["axis"]),
    vjp=lambda D, xs, g, a, env: [_swap(g, a["axis"])],
    saves="nothing",
    doc="swap axes axis and axis+1",
    tags=frozenset({"structural"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"axis": 0}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"axis": 0},
        ),
    ),
)


def _broadcast_to_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if not broadcasts_to(shapes[0], a["shape"]):
        raise shape_error(
            "broadcast_to",
            "input does not broadcast to the target",
            0,
            f"a shape broadcasting to {a['shape']}",
            shapes[0],
        )
    return a["shape"]


register(
    name="broadcast_to",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("shape", "shape"),),
    shape=_broadcast_to_shape,
    forward=lambda D, xs, a, env: expand(xs[0], a["shape"]),
    jvp=lambda D, xs, dxs, a, env: expand(dxs[0], a["shape"]),
    vjp=lambda D, xs, g, a, env: [unbroadcast(D, g, xs[0].shape)],
    saves="input shape",
    doc="expand to a target shape; VJP reduces by unbroadcast",
    tags=frozenset({"structural"}),
    samples=(
        sample(arg((2, 1), 1, -2), attrs={"shape": (2, 2, 3)}, note="generic point"),
        second_point(
            arg((1, 3), Fraction(1, 2), -2, 2),
            attrs={"shape": (2, 3)},
        ),
    ),
)


def _concat_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if not shapes:
        raise shape_error("concat", "needs at least one input", None, ">= 1 input", 0)
    for i, s in enumerate(shapes):
        if len(s) < 1:
            raise shape_error("concat", "inputs must have rank >= 1", i, "rank >= 1", s)
        if s[1:] != shapes[0][1:]:
            raise shape_error("concat", "trailing dims differ", i, shapes[0][1:], s[1:])
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def _concat_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    out, start = [], 0
    for x in xs:
        n = size(x.shape)
        out.append(Tensor(x.shape, g.data[start : start + n]))
        start += n
    return out


register(
    name="concat",
    family=FAMILY,
    arity=None,
    attrs=(),
    shape=_concat_shape,
    forward=lambda D, xs, a, env: Tensor(
        _concat_shape([x.shape for x in xs], a),
        tuple(itertools.chain.from_iterable(x.data for x in xs)),
    ),
    jvp=lambda D, xs, dxs, a, env: Tensor(
        _concat_shape([x.shape for x in xs], a),
        tuple(itertools.chain.from_iterable(d.data for d in dxs)),
    ),
    vjp=_concat_vjp,
    saves="input shapes",
    doc="concatenate on the leading axis (variadic)",
    tags=frozenset({"structural"}),
    samples=(
        sample(arg((1, 2), 1, -2), arg((2, 2), 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(
            second_arg(),
            arg((1, 3), Fraction(1, 2), -2, 2),
        ),
    ),
)


def _slice_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise shape_error("slice", "input must have rank >= 1", 0, "rank >= 1", s)
    if not 0 <= a["start"] <= a["stop"] <= s[0]:
        raise shape_error(
            "slice",
            "bounds out of range",
            0,
            f"0 <= start <= stop <= {s[0]}",
            (a["start"], a["stop"]),
        )
    return (a["stop"] - a["start"], *s[1:])


def _slice_fwd(t: Tensor, a: Attrs) -> Tensor:
    inner = size(t.shape[1:])
    return Tensor(_slice_shape([t.shape], a), t.data[a["start"] * inner : a["stop"] * inner])


def _slice_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    inner = size(x.shape[1:])
    z = D.zero()
    data = (z,) * (a["start"] * inner) + g.data + (z,) * ((x.shape[0] - a["stop"]) * inner)
    return [Tensor(x.shape, data)]


register(
    name="slice",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("start", "nat"), AttrSpec("stop", "nat")),
    shape=_slice_shape,
    forward=lambda D, xs, a, env: _slice_fwd(xs[0], a),
    jvp=lambda D, xs, dxs, a, env: _slice_fwd(dxs[0], a),
    vjp=_slice_vjp,
    saves="input shape",
    doc="rows start..stop-1 of the leading axis; VJP pads with zeros",
    tags=frozenset({"structural"}),
    samples=(
        sample(
            arg((3, 2), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"start": 1, "stop": 3},
            note="generic point",
        ),
        second_point(
            second_arg(),
            attrs={"start": 1, "stop": 2},
        ),
    ),
)


def _transpose_body(b: Any, x: list[int], a: Attrs) -> int:
    r = len(b.shape_of(x[0]))
    if r < 2:
        raise shape_error("transpose", "needs rank >= 2", 0, "rank >= 2", b.shape_of(x[0]))
    return b.node("swap_adjacent", x[0], axis=r - 2)


composite(
    name="transpose",
    family=FAMILY,
    arity=1,
    body=_transpose_body,
    doc="swap the last two axes (swap_adjacent)",
    tags=frozenset({"structural"}),
    samples=(
        sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(second_arg()),
    ),
)


# --------------------------------------------------------------------------- pad

_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _pad_source(op: str, mode: str, n: int, lo: int, hi: int, axis: int) -> tuple[Any, Any]:
    """(source position, in-bounds mask) of each output position of one axis. Negative pads
    crop first; the mode then pads the cropped axis (PyTorch's order: circular wraps over
    the cropped length)."""
    off = max(-lo, 0)
    m = n + min(lo, 0) + min(hi, 0)
    if m < 0:
        raise shape_error(op, "padding crops more than the axis holds", 0, f">= -{n}", (lo, hi))
    lo, hi = max(lo, 0), max(hi, 0)
    i = np.arange(m + lo + hi, dtype=np.int64) - lo
    if mode == "constant" or lo == hi == 0:
        return off + np.clip(i, 0, max(m - 1, 0)), (i >= 0) & (i < m)
    limit = {"reflect": m - 1, "replicate": None, "circular": m}[mode]
    if m < 1 or (limit is not None and max(lo, hi) > limit):
        raise shape_error(
            op,
            f"{mode} padding needs pads within the axis (axis {axis} has {m} after cropping)",
            0,
            f"<= {limit}" if limit is not None else "a non-empty axis",
            (lo, hi),
        )
    if mode == "reflect":
        j = np.abs(i)
        src = np.where(j > m - 1, 2 * (m - 1) - j, j)
    elif mode == "replicate":
        src = np.clip(i, 0, m - 1)
    else:
        src = np.mod(i, m)
    return off + src, np.ones(len(i), dtype=bool)


def _pad_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "pad"
    s = b.shape_of(args[0])
    pads = tuple(a["pad"])
    mode = a.get("mode") or "constant"
    if mode not in _PAD_MODES:
        raise op_error(GraphError, op, "unknown mode", expected=_PAD_MODES, got=mode)
    if len(pads) % 2 or len(pads) // 2 > len(s):
        raise shape_error(
            op,
            "pad must hold (begin, end) pairs for at most rank axes",
            0,
            f"an even length <= {2 * len(s)}",
            len(pads),
        )
    value = Fraction(a.get("value") or 0)
    if value and mode != "constant":
        raise op_error(GraphError, op, "value applies to mode 'constant' only", got=mode)
    nd, r = len(pads) // 2, len(s)
    srcs = [(np.arange(d, dtype=np.int64), np.ones(d, dtype=bool)) for d in s]
    for k in range(nd):  # pairs run from the last axis backwards (PyTorch's order)
        ax = r - 1 - k
        srcs[ax] = _pad_source(op, mode, s[ax], pads[2 * k], pads[2 * k + 1], ax)
    mult = [size(s[i + 1 :]) for i in range(r)]
    flat: Any = np.zeros((), dtype=np.int64)
    ok: Any = np.ones((), dtype=bool)
    for ax, (src, good) in enumerate(srcs):
        flat = np.add.outer(flat, src * mult[ax])
        ok = np.logical_and.outer(ok, good)
    out = tuple(len(src) for src, _ in srcs)
    n = size(s)
    idx = np.where(ok, flat, n).reshape(-1).tolist()
    x = b.node("reshape", args[0], shape=(n,))
    if value:
        fill = b.node("const", shape=(1,), values=(value,))
        x = b.node("concat", x, fill)
    return b.node("gather", x, indices=idx, shape=out)


composite(
    name="pad",
    family=FAMILY,
    arity=1,
    body=_pad_body,
    attrs=(
        AttrSpec("pad", "sints"),
        AttrSpec("mode", "str", False),
        AttrSpec("value", "rational", False),
    ),
    doc="PyTorch's F.pad(x, pad, mode, value): pad holds (begin, end) pairs from the last "
    "axis backwards; a negative pad crops (first, before the mode pads). mode 'constant' "
    "(default; positions outside read `value`, default 0, a rational cast once into the "
    "domain), 'reflect' (mirror without "
    "repeating the edge: index -1 reads 1; pads <= n-1), 'replicate' (the edge element "
    "repeated), 'circular' (index i reads i mod n; pads <= n). Body: one gather over "
    "reshape(x, (N,)) (with const value concatenated at index N when value != 0; the "
    "gather's zero pad otherwise); the VJP is gather's scatter-add, a left fold per input "
    "element over the output positions reading it in row-major order (reflect/replicate/"
    "circular edges gather several)",
    tags=frozenset({"structural"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"pad": (1, 2, 0, 1), "mode": "constant", "value": Fraction(1, 2)},
            note="generic point: constant padding with a nonzero value",
        ),
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"pad": (2, 1), "mode": "reflect"},
            kind="boundary",
            note="reflect at the edge: the edge is not repeated (index -1 reads 1)",
        ),
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"pad": (1, 2, 1, -1), "mode": "replicate"},
            kind="boundary",
            note="replicate (edge elements gather several cotangents) and a negative pad (crop)",
        ),
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"pad": (3, 1), "mode": "circular"},
            note="circular: wraps around a whole period",
        ),
    ),
)


# --------------------------------------------------------------------------- data movement
#
# narrow, flip, roll, tile and repeat_interleave are composites: one gather over the
# flattened input (`windows.flat_gather`), each output position reading one input position,
# the per-axis source tables built with vectorised NumPy (`windows.outer_flat`). Their VJP
# is gather's scatter-add; only tile and repeat_interleave read an element more than once
# (the copies' cotangents are then a left fold in row-major output order).


def _dim(op: str, s: Shape, d: int, what: str = "dim") -> int:
    if not 0 <= d < len(s):
        raise shape_error(op, f"{what} out of range", 0, f"0 <= {what} < {len(s)}", d)
    return d


def _identity_srcs(s: Shape) -> list[Any]:
    return [np.arange(d, dtype=np.int64) for d in s]


def _narrow_body(b: Any, args: list[int], a: Attrs) -> int:
    s = b.shape_of(args[0])
    d = _dim("narrow", s, a["dim"])
    start, length = a["start"], a["length"]
    if start + length > s[d]:
        raise shape_error(
            "narrow", "start + length exceeds the axis", 0, f"<= {s[d]}", start + length
        )
    srcs = _identity_srcs(s)
    srcs[d] = np.arange(start, start + length, dtype=np.int64)
    return flat_gather(b, args[0], outer_flat(srcs, s))


_GEN6 = arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1)

composite(
    name="narrow",
    family=FAMILY,
    arity=1,
    body=_narrow_body,
    attrs=(AttrSpec("dim", "nat"), AttrSpec("start", "nat"), AttrSpec("length", "nat")),
    doc="torch.narrow(x, dim, start, length): positions start..start+length-1 of axis dim "
    "(start + length <= x.shape[dim]; length 0 gives an empty axis). Body: one gather over "
    "reshape(x, (N,)); the VJP places the cotangent and is +0 elsewhere. split and chunk "
    "are helpers (`split_ranges`, `chunk_ranges`) emitting one narrow per piece",
    tags=frozenset({"structural"}),
    samples=(
        sample(_GEN6, attrs={"dim": 1, "start": 1, "length": 2}, note="generic point"),
        sample(
            _GEN6,
            attrs={"dim": 0, "start": 2, "length": 0},
            kind="boundary",
            note="an empty piece at the end of the axis",
        ),
    ),
)


def _flip_body(b: Any, args: list[int], a: Attrs) -> int:
    s = b.shape_of(args[0])
    dims = tuple(a["dims"])
    if len(set(dims)) != len(dims):
        raise shape_error("flip", "dims repeat an axis", 0, "distinct dims", dims)
    srcs = _identity_srcs(s)
    for d in dims:
        srcs[_dim("flip", s, d)] = srcs[d][::-1].copy()
    return flat_gather(b, args[0], outer_flat(srcs, s))


composite(
    name="flip",
    family=FAMILY,
    arity=1,
    body=_flip_body,
    attrs=(AttrSpec("dims", "ints"),),
    doc="torch.flip(x, dims): index i of each axis in dims reads n-1-i (distinct dims; "
    "an empty dims is the identity). Body: one gather over reshape(x, (N,))",
    tags=frozenset({"structural"}),
    samples=(
        sample(_GEN6, attrs={"dims": (1,)}, note="generic point"),
        sample(
            arg((1, 3), 1, -2, 3),
            attrs={"dims": (0, 1)},
            kind="boundary",
            note="a size-1 axis (unchanged) and two flipped axes",
        ),
        sample(_GEN6, attrs={"dims": ()}, kind="boundary", note="empty dims: the identity"),
    ),
)


def _roll_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "roll"
    x = args[0]
    s = b.shape_of(x)
    shifts, dims = tuple(a["shifts"]), a.get("dims")
    if dims is None or len(dims) == 0:  # torch: roll the flattened tensor, shape restored
        if len(shifts) != 1:
            raise shape_error(op, "without dims, give exactly one shift", 0, 1, len(shifts))
        n = size(s)
        src = np.mod(np.arange(n, dtype=np.int64) - shifts[0], max(n, 1))
        return b.node("reshape", flat_gather(b, x, src), shape=s)
    if len(dims) != len(shifts):
        raise shape_error(op, "one shift per dim", 0, len(dims), len(shifts))
    srcs = _identity_srcs(s)
    for k, d in zip(shifts, dims, strict=True):
        n = s[_dim(op, s, d)]
        srcs[d] = np.mod(srcs[d] - k, max(n, 1))
    return flat_gather(b, x, outer_flat(srcs, s))


composite(
    name="roll",
    family=FAMILY,
    arity=1,
    body=_roll_body,
    attrs=(AttrSpec("shifts", "sints"), AttrSpec("dims", "ints", False)),
    doc="torch.roll(x, shifts, dims): along each dims[k], output index i reads "
    "(i - shifts[k]) mod n (shifts of any sign and size; a dim repeated shifts twice); "
    "without dims, one shift over the flattened tensor, shape restored. Body: one gather "
    "over reshape(x, (N,))",
    tags=frozenset({"structural"}),
    samples=(
        sample(_GEN6, attrs={"shifts": (1,), "dims": (1,)}, note="generic point"),
        sample(
            _GEN6,
            attrs={"shifts": (-4, 3), "dims": (1, 0)},
            kind="boundary",
            note="a negative shift beyond the axis length and a shift of a whole period",
        ),
        sample(_GEN6, attrs={"shifts": (2,)}, kind="boundary", note="no dims: flattened"),
    ),
)


def _tile_body(b: Any, args: list[int], a: Attrs) -> int:
    x = args[0]
    s = b.shape_of(x)
    reps = tuple(a["dims"])
    r = max(len(s), len(reps))
    reps = (1,) * (r - len(reps)) + reps
    s1 = (1,) * (r - len(s)) + tuple(s)
    if s1 != tuple(s):
        x = b.node("reshape", x, shape=s1)
    srcs = [np.tile(np.arange(d, dtype=np.int64), k) for d, k in zip(s1, reps, strict=True)]
    return flat_gather(b, x, outer_flat(srcs, s1))


composite(
    name="tile",
    family=FAMILY,
    arity=1,
    body=_tile_body,
    attrs=(AttrSpec("dims", "ints"),),
    doc="torch.tile(x, dims) (= Tensor.repeat(*dims) when len(dims) >= rank, = ONNX Tile): "
    "the shorter of x.shape and dims is prefixed with 1s; axis a of the output has "
    "x.shape[a]*dims[a] positions, index i reading i mod x.shape[a] (a repeat of 0 gives an "
    "empty axis). Body: one gather over reshape(x, (N,)); the VJP sums each element's "
    "copies as a left fold in row-major output order",
    tags=frozenset({"structural"}),
    samples=(
        sample(arg((2, 2), 1, -2, 3, Fraction(1, 2)), attrs={"dims": (2, 1)}, note="generic point"),
        sample(
            arg((3,), 1, -2, Fraction(1, 2)),
            attrs={"dims": (2, 1, 2)},
            kind="boundary",
            note="more repeats than axes (leading axes added), copies sum in the VJP",
        ),
        sample(arg((3,), 1, -2, 3), attrs={"dims": (0,)}, kind="boundary", note="zero repeats"),
    ),
)


def _repeat_interleave_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "repeat_interleave"
    x = args[0]
    s = b.shape_of(x)
    reps = tuple(a["repeats"])
    if a.get("dim") is None:  # torch: the flattened input
        s = (size(s),)
        x = b.node("reshape", x, shape=s)
        d = 0
    else:
        d = _dim(op, s, a["dim"])
    if len(reps) not in (1, s[d]):
        raise shape_error(op, "one repeat, or one per element of dim", 0, f"1 or {s[d]}", reps)
    srcs = _identity_srcs(s)
    srcs[d] = np.repeat(srcs[d], reps if len(reps) > 1 else reps[0])
    return flat_gather(b, x, outer_flat(srcs, s))


composite(
    name="repeat_interleave",
    family=FAMILY,
    arity=1,
    body=_repeat_interleave_body,
    attrs=(AttrSpec("repeats", "ints"), AttrSpec("dim", "nat", False)),
    doc="torch.repeat_interleave(x, repeats, dim): element i of axis dim repeated "
    "repeats[i] times in place (one repeat for all, or one per element); without dim, over "
    "the flattened input. Body: one gather over reshape(x, (N,)); the VJP sums each "
    "element's copies in order",
    tags=frozenset({"structural"}),
    samples=(
        sample(_GEN6, attrs={"repeats": (2,), "dim": 0}, note="generic point"),
        sample(
            _GEN6,
            attrs={"repeats": (0, 2, 1), "dim": 1},
            kind="boundary",
            note="per-element repeats, one of them 0",
        ),
    ),
)


def split_ranges(op: str, n: int, split: int | Sequence[int]) -> list[tuple[int, int]]:
    """torch.split's pieces of an axis of length n as (start, length) pairs: an int is the
    size of every piece but the last (which holds the rest); a list gives each piece's size
    and must sum to n."""
    if isinstance(split, int):
        if split < 1 and n > 0:
            raise shape_error(op, "split size must be positive", 0, ">= 1", split)
        sizes = [min(split, n - k) for k in range(0, n, split)] if n else [0]
    else:
        sizes = [int(v) for v in split]
        if sum(sizes) != n or min(sizes, default=0) < 0:
            raise shape_error(op, "sizes must be >= 0 and sum to the axis length", 0, n, sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).tolist() if sizes else []
    return [(int(st), sz) for st, sz in zip(starts, sizes, strict=True)]


def chunk_ranges(op: str, n: int, chunks: int) -> list[tuple[int, int]]:
    """torch.chunk's pieces: size ceil(n / chunks) each, the last smaller (possibly fewer
    than `chunks` pieces, as in torch)."""
    if chunks < 1:
        raise shape_error(op, "chunks must be positive", 0, ">= 1", chunks)
    return split_ranges(op, n, max(-(-n // chunks), 1))
