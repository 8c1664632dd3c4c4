"""The network as verification sees it: one `Stage` per evaluation-mode layer, named by
the spec op it executes, and its canonical JSON (the model hash and the certificate's
"network").

Invariants:
- `LAYER_STAGES` maps a `runtime.nn` layer type to the builder of its stage (or to
  a skip for a layer that is the identity in evaluation mode: Dropout). A layer's stage is
  found through its type's MRO, so a subclass is treated as its base (as an isinstance
  test would); a layer type without an entry raises `unavailable`.
- A stage's `op` is the spec op name ("linear", "conv2d", "avg_pool2d", "relu", "tanh",
  "sigmoid", "gelu", "batch_norm", "layer_norm"); the AFFINE ones are y = W x + b over
  the row-major flattened input: "linear" carries W as dense exact rows (`weight`);
  "conv2d" (any stride, padding, dilation and groups) and "avg_pool2d" (zero padding
  counted in the divisor) carry no matrix but a `Windowed` operator built for the
  verified input shape: per output position its taps (kernel index, input offset), per
  output channel its kernel and first input, so memory is O(positions x taps + kernel)
  and row j of W is read window by window (`row`), a row pushed back is the transposed
  convolution (`back`); `bias` holds one entry per output. BatchNorm2d is "batch_norm"
  with each channel's values repeated over its H*W positions ("spatial" in the JSON:
  O(outputs), no matrix); MaxPool2d is "max_pool2d" with each output's window of input
  indices, in increasing order (`windows`; padded taps are left out: they never win a max);
  Flatten and Dropout are the identity here. "leaky_relu" and "hardtanh" carry their
  attributes (`negative_slope`; `min_val`, `max_val`) as exact p/q strings in `bits`
  (`attr` reads them back); verification takes negative_slope in [0, 1] only (leaky_relu is
  then monotone and convex), any other slope raises `unavailable`.
  Parameters are exact (Fractions of the stored values), and `bits` holds the stored
  values as bit patterns in the dtype (p/q for "exact").
- DAG networks: a `Residual(body, shortcut)` layer becomes its body's stages (reading the
  Residual's input value), its shortcut's (reading the same value), and an "add" stage
  whose `inputs` are the two branch ends (an empty branch: the input value itself). Value
  0 is the network input, value t stage t's output; stages are in topological order (a
  stage reads only earlier values) and the output is the last stage's value. A stage
  reading anything but the previous stage's output records `inputs`; in the network JSON
  an "inputs" key appears only on such stages, so the JSON (and model hash) of a chain
  network is unchanged.
- The certificate format (torchlean_output_bounds_v1) names BatchNorm1d "bn" and LayerNorm
  "ln": `CERT_NAMES` maps op names to those labels, and `Stage.label` is what the network
  JSON, the CROWN witness and error messages print. The network JSON (and so the model
  hash) is byte-identical to what the format has always contained for dense networks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from runtime.nn import (
    GELU,
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Dropout,
    Flatten,
    Hardtanh,
    LayerNorm,
    LeakyReLU,
    Linear,
    MaxPool2d,
    ReLU,
    Residual,
    Sigmoid,
    Tanh,
)

from .core import frac_str, sha, unavailable

__all__ = [
    "AFFINE",
    "CERT_NAMES",
    "DTYPES",
    "LAYER_STAGES",
    "Stage",
    "Windowed",
    "attr",
    "is_dag",
    "model_hash",
    "network_json",
    "stages",
]

CERT_NAMES = {"batch_norm": "bn", "layer_norm": "ln"}  # other ops keep their name
# stages that are an affine map y = W x + b (linear: dense W; conv and average pooling: a
# `Windowed` operator over the row-major (C, H, W) input): crossed alike by CROWN
AFFINE = ("linear", "conv2d", "avg_pool2d")
DTYPES = ("float64", "float32", "bfloat16", "float16", "exact")


@dataclass(frozen=True)
class Stage:
    """One evaluation-mode layer: the spec op it executes and exact parameters (Fractions)."""

    op: str  # linear | relu | tanh | sigmoid | gelu | batch_norm | layer_norm
    weight: tuple[tuple[Fraction, ...], ...] = ()
    bias: tuple[Fraction, ...] = ()
    mean: tuple[Fraction, ...] = ()
    var: tuple[Fraction, ...] = ()
    eps: Fraction = Fraction(0)
    bits: dict[str, Any] = field(default_factory=dict, compare=False)
    windows: tuple[tuple[int, ...], ...] = ()  # max_pool2d: each output's input indices
    # conv2d / avg_pool2d: the linear part as windows (no dense matrix; `weight` is empty)
    windowed: Windowed | None = field(default=None, compare=False)
    # DAG networks: the values the stage reads (0: the network input, t: stage t's output);
    # () for a stage of a chain, which reads the previous stage's output
    inputs: tuple[int, ...] = ()

    def srcs(self, t: int) -> tuple[int, ...]:
        """The values stage t (1-based) reads: its `inputs`, or (t - 1,) in a chain."""
        return self.inputs or (t - 1,)

    @property
    def label(self) -> str:
        """The stage's name in certificates and messages."""
        return CERT_NAMES.get(self.op, self.op)


def _bits(a: np.ndarray, dtype: str) -> list[Any]:
    """Bit patterns of an array's values (row-major, nested like the array); p/q for exact."""
    arr = np.asarray(a)
    if dtype == "exact":
        return np.vectorize(lambda v: f"{Fraction(v).numerator}/{Fraction(v).denominator}",
                            otypes=[object])(arr).tolist()  # fmt: skip
    width = {"float64": np.uint64, "float32": np.uint32, "bfloat16": np.uint16,
             "float16": np.uint16}[dtype]  # fmt: skip
    digits = np.dtype(width).itemsize * 2
    return np.vectorize(lambda v: f"0x{int(v):0{digits}x}", otypes=[object])(
        arr.view(width)
    ).tolist()


def _exact(a: np.ndarray) -> list[Any]:
    arr = np.asarray(a)
    if arr.dtype == object:
        return np.vectorize(Fraction, otypes=[object])(arr).tolist()
    return np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(arr).tolist()


Shape = tuple[int, ...] | None
StageBuilder = Callable[[Any, list[Any], str, Shape], "Stage | None"]


def _linear(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    w, b = st
    return Stage(
        "linear",
        weight=tuple(tuple(r) for r in _exact(w)),
        bias=tuple(_exact(b)),
        bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
    )


def _elementwise(op: str) -> StageBuilder:
    def build(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
        return Stage(op)

    return build


def _batch_norm(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    w, b, rm, rv, _ = st
    # BatchNorm2d: per channel, each value repeated over the H*W positions of a channel
    rep = 1 if len(shape or (0,)) == 1 or shape is None else shape[1] * shape[2]

    def ex(a: Any) -> tuple[Fraction, ...]:
        return tuple(v for v in _exact(a) for _ in range(rep))

    bits: dict[str, Any] = {
        "weight": _bits(w, dtype),
        "bias": _bits(b, dtype),
        "running_mean": _bits(rm, dtype),
        "running_var": _bits(rv, dtype),
    }
    if rep > 1:
        bits["spatial"] = rep
    return Stage("batch_norm", weight=(ex(w),), bias=ex(b), mean=ex(rm), var=ex(rv),
                 eps=Fraction(layer.eps), bits=bits)  # fmt: skip


@dataclass(frozen=True, eq=False)
class Windowed:
    """A conv2d / avg_pool2d stage's linear part y = W x over the row-major (C, H, W) input,
    kept as its windows instead of a dense matrix: output j = o * positions + pix reads,
    for each (k, off) in `taps[pix]`, input `base[o] + off` with weight `kernel[o][k]`
    (k: the flattened (c, p, r) kernel index; taps inside the zero padding are left out:
    they add exact zeros). Every (o, pix) reads distinct inputs, so W[j][base[o] + off] is
    `kernel[o][k]` and every other entry of row j is 0."""

    n_in: int
    positions: int  # Ho * Wo
    taps: tuple[tuple[tuple[int, int], ...], ...]  # per output position: (k, offset)
    kernel: tuple[tuple[Fraction, ...], ...]  # per output channel: flattened weights
    base: tuple[int, ...]  # per output channel: the first input of its channel group

    @property
    def n_out(self) -> int:
        return len(self.kernel) * self.positions

    def with_kernel(self, fn: Callable[[Fraction], Any]) -> Windowed:
        """The same windows with fn applied to every kernel weight (e.g. to mpq)."""
        return dataclasses.replace(self, kernel=tuple(tuple(fn(v) for v in r)
                                                      for r in self.kernel))  # fmt: skip

    def row(self, j: int) -> list[tuple[int, Fraction]]:
        """Row j's nonzero entries (input index, weight), in increasing input index."""
        o, pix = divmod(j, self.positions)
        ker, b = self.kernel[o], self.base[o]
        return [(b + off, ker[k]) for k, off in self.taps[pix] if ker[k]]

    def back(self, lam: list[Any], zero: Any) -> list[Any]:
        """lam W (the transposed convolution of the row lam, window by window; exact)."""
        out = [zero] * self.n_in
        P, taps, kernel, base = self.positions, self.taps, self.kernel, self.base
        for j in [j for j, lv in enumerate(lam) if lv]:
            lv = lam[j]
            o, pix = divmod(j, P)
            ker, b = kernel[o], base[o]
            for k, off in taps[pix]:
                w = ker[k]
                if w:
                    out[b + off] += lv * w
        return out

    def padded(self) -> tuple[np.ndarray, np.ndarray]:
        """(idx, w): per output its inputs and binary64 weights, padded to the widest window
        (index 0, weight 0 on padding): W x = (x[idx] * w).sum(-1)."""
        T = max(len(t) for t in self.taps)
        kid = np.zeros((self.positions, T), dtype=np.int64)
        off = np.zeros((self.positions, T), dtype=np.int64)
        mask = np.zeros((self.positions, T), dtype=bool)
        for pix, taps in enumerate(self.taps):
            for t, (k, o) in enumerate(taps):
                kid[pix, t], off[pix, t], mask[pix, t] = k, o, True
        ker = np.array([[float(v) for v in r] for r in self.kernel], dtype=np.float64)
        base = np.array(self.base, dtype=np.int64)
        idx = np.where(mask, base[:, None, None] + off[None], 0).reshape(self.n_out, T)
        w = np.where(mask, ker[:, kid], 0.0).reshape(self.n_out, T)
        return idx, w

    def float_dense(self) -> np.ndarray:
        """The dense binary64 matrix (for the untrusted float search only)."""
        idx, w = self.padded()
        W = np.zeros((self.n_out, self.n_in))
        np.add.at(W, (np.arange(self.n_out)[:, None], idx), w)
        return W


def _out_hw(H: int, W: int, k: tuple[int, int], attrs: dict[str, Any]) -> tuple[int, int]:
    (s0, s1), (p0, p1) = attrs["stride"], attrs["padding"]
    d0, d1 = attrs.get("dilation", (1, 1))
    return (H + 2 * p0 - d0 * (k[0] - 1) - 1) // s0 + 1, (
        W + 2 * p1 - d1 * (k[1] - 1) - 1
    ) // s1 + 1


def _taps(
    in_shape: tuple[int, ...], k: tuple[int, int], attrs: dict[str, Any], cin_g: int
) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per output position (row-major): the (kernel index, input offset) of each tap inside
    the (zero-padded) input, offsets relative to the first channel of the group."""
    _, H, W = in_shape
    (s0, s1), (p0, p1) = attrs["stride"], attrs["padding"]
    d0, d1 = attrs.get("dilation", (1, 1))
    Ho, Wo = _out_hw(H, W, k, attrs)
    out = []
    for i in range(Ho):
        for j in range(Wo):
            taps = []
            for c in range(cin_g):
                for p in range(k[0]):
                    for r in range(k[1]):
                        y, x = i * s0 - p0 + p * d0, j * s1 - p1 + r * d1
                        if 0 <= y < H and 0 <= x < W:
                            taps.append(((c * k[0] + p) * k[1] + r, (c * H + y) * W + x))
            out.append(tuple(taps))
    return tuple(out)


def _conv2d(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    w = st[0]
    b = st[1] if len(st) > 1 else np.zeros(w.shape[0], dtype=w.dtype)
    bits: dict[str, Any] = {"weight": _bits(w, dtype), "bias": _bits(b, dtype),
                            **{k: list(v) if isinstance(v, tuple) else v
                               for k, v in layer.attrs.items()}}  # fmt: skip
    if shape is None:
        return Stage("conv2d", bits=bits)
    bits["in_shape"] = list(shape)
    O, cg = w.shape[0], w.shape[1]
    og = O // layer.attrs.get("groups", 1)
    taps = _taps(shape, layer.k, layer.attrs, cg)
    ker = tuple(tuple(r) for r in _exact(np.asarray(w).reshape(O, -1)))
    plane = shape[1] * shape[2]
    op = Windowed(int(np.prod(shape)), len(taps), taps, ker,
                  tuple((o // og) * cg * plane for o in range(O)))  # fmt: skip
    be = _exact(b)
    return Stage("conv2d", bias=tuple(be[o] for o in range(O) for _ in taps), bits=bits,
                 windowed=op)  # fmt: skip


def _avg_pool2d(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    a = layer.attrs
    bits: dict[str, Any] = {k: list(v) for k, v in a.items()}
    if shape is None:
        return Stage("avg_pool2d", bits=bits)
    bits["in_shape"] = list(shape)
    C, plane = shape[0], shape[1] * shape[2]
    k = a["kernel_size"]
    taps = _taps((1, shape[1], shape[2]), k, a, 1)
    inv = Fraction(1, k[0] * k[1])
    op = Windowed(C * plane, len(taps), taps, ((inv,) * (k[0] * k[1]),) * C,
                  tuple(c * plane for c in range(C)))  # fmt: skip
    return Stage("avg_pool2d", bias=(Fraction(0),) * op.n_out, bits=bits, windowed=op)


def _max_pool2d(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    """Each output's window: the input indices inside the input (padding never wins)."""
    avg = _avg_pool2d(layer, st, dtype, shape)
    op = avg.windowed
    wins = () if op is None else tuple(tuple(i for i, _ in op.row(j)) for j in range(op.n_out))
    return Stage("max_pool2d", bits=avg.bits, windows=wins)


def _layer_norm(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    w, b = st
    return Stage(
        "layer_norm",
        weight=(tuple(_exact(w)),),
        bias=tuple(_exact(b)),
        eps=Fraction(layer.eps),
        bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
    )


def attr(st: Stage, name: str) -> Fraction:
    """An attribute of a leaky_relu / hardtanh stage (exact, from its p/q in `bits`)."""
    return Fraction(st.bits[name])


def _leaky_relu(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    s = Fraction(layer.negative_slope)
    if not 0 <= s <= 1:
        raise unavailable(f"LeakyReLU layers with negative_slope {s} outside [0, 1]")
    return Stage("leaky_relu", bits={"negative_slope": frac_str(s)})


def _hardtanh(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> Stage:
    return Stage("hardtanh", bits={"min_val": frac_str(Fraction(layer.min_val)),
                                   "max_val": frac_str(Fraction(layer.max_val))})  # fmt: skip


def _skip(layer: Any, st: list[Any], dtype: str, shape: Shape = None) -> None:
    """No stage: the layer is the identity in evaluation mode."""
    return None


LAYER_STAGES: dict[type, StageBuilder] = {
    Linear: _linear,
    ReLU: _elementwise("relu"),
    Tanh: _elementwise("tanh"),
    Sigmoid: _elementwise("sigmoid"),
    GELU: _elementwise("gelu"),
    BatchNorm1d: _batch_norm,
    BatchNorm2d: _batch_norm,
    LayerNorm: _layer_norm,
    Dropout: _skip,
    Flatten: _skip,  # row-major: the flat vectors verification works on are unchanged
    Conv2d: _conv2d,
    AvgPool2d: _avg_pool2d,
    MaxPool2d: _max_pool2d,
    LeakyReLU: _leaky_relu,
    Hardtanh: _hardtanh,
}


def _builder(layer: Any) -> StageBuilder:
    for cls in type(layer).__mro__:
        if cls in LAYER_STAGES:
            return LAYER_STAGES[cls]
    raise unavailable(f"{type(layer).__name__} layers ({layer!r})")


def _append(
    out: list[Stage],
    layers: Any,
    slots: list[list[int]],
    state: dict[int, Any],
    dtype: str,
    shape: Shape,
    src: int,
) -> tuple[int, Shape]:
    """Append the stages of `layers` (reading value `src`, with the state slots of each)
    to `out`; the value index and shape of their result. A `Residual` becomes its body's
    stages, its shortcut's (from the same value) and an "add" stage of the two ends."""
    for layer, occ in zip(layers, slots, strict=True):
        if isinstance(layer, Residual):
            ends = []
            k = 0
            for branch in layer.branches():
                sub = []
                for u in branch:
                    n = len(u.state_specs())
                    sub.append(occ[k : k + n])
                    k += n
                ends.append(_append(out, branch, sub, state, dtype, shape, src))
            (a, sa), (b, _) = ends
            out.append(Stage("add", inputs=(a, b)))
            src, shape = len(out), sa
            continue
        stage = _builder(layer)(layer, [state[k] for k in occ], dtype, shape)
        if stage is not None:
            if src != len(out):  # not the previous stage's output: record the input
                stage = dataclasses.replace(stage, inputs=(src,))
            out.append(stage)
            src = len(out)
        if shape is not None:
            shape = tuple(layer.out_shape(shape))
    return src, shape


def stages(result: Any, in_shape: Shape = None) -> list[Stage]:
    """The stages of `result`'s network in evaluation mode for inputs of `in_shape` (None:
    only check that every layer is supported; convolution and pooling stages then carry no
    operator), in topological order (a stage reads only earlier values). Raises
    `unavailable` for a typed result, another dtype or an unsupported layer."""
    if getattr(result, "typed", False):
        raise unavailable("results of open_typed sessions (typed boundary values)")
    dtype = result.dtype
    if dtype not in DTYPES:
        raise unavailable(f"dtype {dtype!r}")
    state = result.state()  # copies of the stored arrays (same values, dtypes)
    out: list[Stage] = []
    end, _ = _append(out, result.model.layers, result.model.occurrences(), state, dtype,
                     in_shape, 0)  # fmt: skip
    if end != len(out):  # the output is an earlier value (a trailing identity branch)
        raise unavailable("networks whose output is not the last stage's value")
    return out


def is_dag(sts: list[Stage]) -> bool:
    """Whether some stage reads another value than the previous stage's output."""
    return any(st.inputs for st in sts)


def network_json(result: Any, in_shape: Shape = None) -> dict[str, Any]:
    """The network as evaluated, canonical JSON: dtype and one entry per stage (with the
    input shape of convolution and pooling stages, given `in_shape`)."""
    out = []
    for st in stages(result, in_shape):
        e: dict[str, Any] = {"op": st.label}
        if st.inputs:  # DAG networks only: chain networks' JSON is unchanged
            e["inputs"] = list(st.inputs)
        e.update(st.bits)
        if st.op in ("batch_norm", "layer_norm"):
            e["eps"] = frac_str(st.eps)
        out.append(e)
    return {"dtype": result.dtype, "stages": out}


def model_hash(result: Any, in_shape: Shape = None) -> str:
    """sha256 over the canonical network JSON (architecture and state bits)."""
    return sha(network_json(result, in_shape))
