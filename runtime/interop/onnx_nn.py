"""ONNX rules for activations, padding, tiling, splitting, convolution, pooling and
normalisation, per opset version.

Invariants:
- Each rule has the `ONNX_OPS` signature: rule(E, inputs, attrs, opset) -> value(s);
  `attrs["_outputs"]` is the node's output count.
- An ONNX op maps onto the table op of the same meaning where the table has it
  (`table_op`: `leaky_relu`, `elu`, `selu`, `prelu`, `sign`, `erf`, `pow`, `where`,
  `conv1d`/`conv3d`, pools in 1-D/3-D, `instance_norm`, ... named and attributed as in
  `torch.nn.functional`); when the table lacks it the rule either composes the op exactly
  from existing table ops (stated at the rule) or refuses with the missing table op named.
- Index-movement compositions are exact: reflect / edge / wrap padding, Tile, nearest
  Resize and 1-D convolution and pooling (as 2-D with a unit height) only gather, copy or
  add zero taps, so values and gradients are the op's own.
- Before a convolution or pool is emitted, its im2col size (C * kernel * output
  positions) is checked against `limits.max_tensor_elements`: the work is bounded by the
  caps, never by the padding.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import TorchLeanError
from spec.ops import OPS

from . import aten as ar
from . import limits
from .core import Dyn, Emitter, InvalidModelError, Static, Unsupported, axis_of

__all__ = ["NN_OPS", "table_op"]


def table_op(E: Emitter, op: str, *args: Any, **attrs: Any) -> Any:
    """The table op `op` on `args`, or `Unsupported` naming it when the table lacks it (or
    rejects these attributes)."""
    if op not in OPS:
        raise Unsupported(f"needs the table op {op!r}, which this op table does not have yet")
    try:
        return E.node(op, *args, **attrs)
    except TorchLeanError as e:
        raise Unsupported(f"table op {op!r}: {str(e).splitlines()[0]}") from e


def static(v: Any, what: str) -> np.ndarray:
    if not isinstance(v, Static):
        raise Unsupported(f"{what} must be known at import time")
    return np.asarray(v.value)


def opt(xs: list[Any], k: int) -> Any:
    return xs[k] if len(xs) > k else None


def _finite(x: Any, what: str) -> float:
    f = float(x)
    if not math.isfinite(f):
        raise InvalidModelError(f"{what} is {f} (must be finite)")
    return f


# --------------------------------------------------------------------------- activations
def _leaky_relu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    alpha = _finite(a.get("alpha", 0.01), "LeakyRelu alpha")
    if "leaky_relu" in OPS:
        return table_op(E, "leaky_relu", xs[0], negative_slope=Fraction(alpha))
    # exact: relu(x) - alpha * relu(-x) is x for x >= 0 and round(alpha * x) below
    neg = E.node("relu", E.node("neg", xs[0]))
    return E.node("sub", E.node("relu", xs[0]), ar.scalar_mul(E, neg, alpha))


def _prelu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, slope = xs
    s, ss = E.shape(x), E.shape(slope)
    if v < 7 and len(ss) == 1 and len(s) > 2 and ss[0] == s[1]:
        slope = E.reshape(slope, (ss[0], *([1] * (len(s) - 2))))  # per channel (opset < 7)
    try:
        return ar.prelu_rule(E, x, slope)
    except Unsupported:
        # a slope layout the table op does not take: relu(x) - slope * relu(-x), x above 0,
        # round(slope * x) below (the sign of a zero and the derivative at 0 aside)
        neg = E.node("relu", E.node("neg", x))
        return E.node("sub", E.node("relu", x), E.node("mul", slope, neg))


def _elu_body(E: Emitter, x: Any, alpha: float) -> Any:
    """relu(x) + alpha * (exp(-relu(-x)) - 1): ONNX's definition, table ops only."""
    em1 = E.node("sub", E.node("exp", E.node("neg", E.node("relu", E.node("neg", x)))), 1.0)
    return E.node("add", E.node("relu", x), ar.scalar_mul(E, em1, alpha))


def _elu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    alpha = _finite(a.get("alpha", 1.0), "Elu alpha")
    if "elu" in OPS:
        return table_op(E, "elu", xs[0], alpha=Fraction(alpha))
    return _elu_body(E, xs[0], alpha)


def _selu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    alpha = _finite(a.get("alpha", 1.67326319217681884765625), "Selu alpha")
    gamma = _finite(a.get("gamma", 1.05070102214813232421875), "Selu gamma")
    return ar.scalar_mul(E, _elu_body(E, xs[0], alpha), gamma)


def _hard_sigmoid(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    alpha = _finite(a.get("alpha", 0.2), "HardSigmoid alpha")
    beta = _finite(a.get("beta", 0.5), "HardSigmoid beta")
    y = E.node("add", ar.scalar_mul(E, xs[0], alpha), beta)
    return E.node("clamp", y, lo=Fraction(0), hi=Fraction(1))


def _hard_swish(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return E.node("mul", xs[0], _hard_sigmoid(E, xs, {"alpha": 1 / 6, "beta": 0.5}, v))


def _softsign(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return E.node("div", xs[0], E.node("add", E.node("abs", xs[0]), 1.0))


def _shrink(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    lambd = _finite(a.get("lambd", 0.5), "Shrink lambd")
    bias = _finite(a.get("bias", 0.0), "Shrink bias")
    if lambd < 0 or bias != lambd:
        raise Unsupported(f"bias {bias} != lambd {lambd} (only the soft shrink form)")
    # exact: x - clamp(x, -l, l) is x - l above l, x + l below -l, 0 between
    clamp = E.node("clamp", xs[0], lo=Fraction(-lambd), hi=Fraction(lambd))
    return E.node("sub", xs[0], clamp)


def _mish(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return E.node("mul", xs[0], E.node("tanh", E.node("softplus", xs[0])))


def _pow(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, e = xs
    if (
        isinstance(e, Static)
        and np.asarray(e.value).size == 1
        and len(E.shape(e)) <= len(E.shape(x))
    ):
        f = _finite(np.asarray(e.value, dtype=np.float64).reshape(-1)[0], "Pow exponent")
        return ar.pow_rule(E, x, f)  # the table's pow, exponent an attribute
    return ar.pow_rule(E, x, e)  # pow_tensor: a tensor exponent, broadcasting


def _variadic(op: str, mean: bool = False) -> Any:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = E.node(op, out, x)
        if mean and len(xs) > 1:
            out = E.node("div", out, float(len(xs)))
        return out

    return rule


def _named(op: str) -> Any:
    return lambda E, xs, a, v: table_op(E, op, *xs)


# --------------------------------------------------------------------------- index movement
def pad_indices(n: int, before: int, after: int, mode: str) -> list[int]:
    """Source index of each position of an axis of length n padded (before, after) by
    `mode` (reflect: mirror without repeating the edge; edge: repeat it; wrap: cyclic)."""
    if mode == "reflect" and (before > n - 1 or after > n - 1):
        raise InvalidModelError(f"reflect padding ({before}, {after}) of an axis of length {n}")
    if mode == "wrap" and (before > n or after > n):
        raise Unsupported(f"wrap padding ({before}, {after}) longer than the axis ({n})")
    out = []
    for i in range(-before, n + after):
        if mode == "edge":
            j = min(max(i, 0), n - 1)
        elif mode == "wrap":
            j = i % n
        else:
            j = -i if i < 0 else 2 * (n - 1) - i if i >= n else i
        out.append(j)
    return out


def _pad_axis(E: Emitter, x: Any, ax: int, before: int, after: int, mode: str, val: float) -> Any:
    n = E.shape(x)[ax]
    if before < 0 or after < 0:  # negative pads crop
        lo, hi = max(-before, 0), n - max(-after, 0)
        if hi <= lo:
            raise Unsupported("padding that crops an axis to nothing")
        x = ar.slice_rule(E, x, ax, lo, hi, 1)
        before, after, n = max(before, 0), max(after, 0), hi - lo
    if not before and not after:
        return x
    if mode == "constant":
        parts = []
        for count in (before, after):
            s = list(E.shape(x))
            s[ax] = count
            parts.append(Static(np.full(s, val)) if count else None)
        return ar.cat(E, [p for p in (parts[0], x, parts[1]) if p is not None], ax)
    if n == 0:
        raise InvalidModelError(f"{mode} padding of an empty axis")
    idx = pad_indices(n, before, after, mode)
    return E.on_axis(x, ax, 0, lambda t: E.node("index_select", t, indices=tuple(idx)))


def _pad(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Pad per opset: `paddings` + `value` attributes (opset 1), `pads` + `value`
    attributes (2-10), `pads` / `constant_value` / `axes` inputs (11+)."""
    x = xs[0]
    n = len(E.shape(x))
    if v < 11:
        pads = [int(p) for p in a.get("pads" if v >= 2 else "paddings", [])]
        val = float(a.get("value", 0.0))
        axes = list(range(n))
    else:
        pads = [int(p) for p in static(xs[1], "pads").reshape(-1)]
        cv = opt(xs, 2)
        val = float(static(cv, "constant_value").reshape(-1)[0]) if cv is not None else 0.0
        ax_in = opt(xs, 3)
        axes = [int(i) for i in static(ax_in, "axes").reshape(-1)] if ax_in is not None else []
        axes = axes or list(range(n))
    mode = a.get("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise InvalidModelError(f"Pad mode {mode!r}")
    axes = [axis_of(ax, n, "Pad axis") for ax in axes]
    if len(set(axes)) != len(axes) or len(pads) != 2 * len(axes):
        raise InvalidModelError(f"Pad: {len(pads)} pads for axes {axes} of rank {n}")
    if mode == "constant" and not math.isfinite(val):
        raise Unsupported(f"constant padding value {val} (consts hold finite rationals)")
    k = len(axes)
    for i, ax in enumerate(axes):
        x = _pad_axis(E, x, ax, pads[i], pads[i + k], mode, val)
    return x


def _tile(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Tile as the table's `tile` (repeats of 0 give an empty axis)."""
    x = xs[0]
    s = E.shape(x)
    reps = [int(r) for r in static(xs[1], "repeats").reshape(-1)]
    if len(reps) != len(s) or min(reps, default=1) < 0:
        raise InvalidModelError(f"Tile repeats {reps} for rank {len(s)}")
    limits.check_elements([d * r for d, r in zip(s, reps, strict=True)], "Tile output")
    return E.node("tile", x, dims=tuple(reps))


def _split(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Split per opset: `split` attribute (< 13), input (13+), `num_outputs` (18+); one
    table `narrow` per output (graph nodes have one output)."""
    x = xs[0]
    s = E.shape(x)
    ax = axis_of(a.get("axis", 0), len(s), "Split axis")
    k = a["_outputs"]
    if v < 13 and "split" in a:
        sizes = [int(d) for d in a["split"]]
    elif v >= 13 and opt(xs, 1) is not None:
        sizes = [int(d) for d in static(xs[1], "split").reshape(-1)]
    else:
        k = int(a.get("num_outputs", k))
        step = -(-s[ax] // k)
        sizes = [min(step, s[ax] - i * step) for i in range(k)]
    if len(sizes) != a["_outputs"] or sum(sizes) != s[ax] or min(sizes) < 0:
        raise InvalidModelError(f"Split sizes {sizes} of an axis of length {s[ax]}")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist()
    return tuple(
        E.node("narrow", x, dim=ax, start=st, length=d) for st, d in zip(starts, sizes, strict=True)
    )


def _cumsum(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """CumSum (11+): the table's `cumsum` with its exclusive and reverse attributes."""
    x = xs[0]
    axis = static(xs[1], "CumSum axis").reshape(-1)
    if axis.size != 1:
        raise InvalidModelError(f"CumSum axis {axis.tolist()} (one axis)")
    d = axis_of(int(axis[0]), len(E.shape(x)), "CumSum axis")
    flags = {k: True for k in ("exclusive", "reverse") if int(a.get(k, 0))}
    return E.node("cumsum", x, dim=d, **flags)


def _nearest_index(n: int, m: int, scale: float, a: dict[str, Any]) -> list[int]:
    """ONNX nearest Resize: source index of each of the m outputs of an axis of length n."""
    ct = a.get("coordinate_transformation_mode", "half_pixel")
    i = np.arange(m, dtype=np.float64)
    if ct == "asymmetric":
        xo = i / scale
    elif ct == "half_pixel":
        xo = (i + 0.5) / scale - 0.5
    elif ct == "pytorch_half_pixel":
        xo = (i + 0.5) / scale - 0.5 if m > 1 else np.zeros(m)
    elif ct == "align_corners":
        xo = i * (n - 1) / (m - 1) if m > 1 else np.zeros(m)
    elif ct == "tf_half_pixel_for_nn":
        xo = (i + 0.5) / scale
    else:
        raise Unsupported(f"coordinate_transformation_mode {ct!r}")
    nm = a.get("nearest_mode", "round_prefer_floor")
    rules: dict[str, Callable[[np.ndarray], np.ndarray]] = {
        "floor": np.floor,
        "ceil": np.ceil,
        "round_prefer_floor": lambda t: np.where(t % 1 == 0.5, np.floor(t), np.round(t)),
        "round_prefer_ceil": lambda t: np.where(t % 1 == 0.5, np.ceil(t), np.round(t)),
    }
    if nm not in rules:
        raise Unsupported(f"nearest_mode {nm!r}")
    return [int(j) for j in np.clip(rules[nm](xo), 0, n - 1)]


def _resize(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Upsample (opsets 7-9: nearest, asymmetric floor) and Resize (10+) in nearest mode
    as index_select per axis; linear and cubic modes are refused."""
    x = xs[0]
    s = E.shape(x)
    if a.get("mode", "nearest") != "nearest":
        raise Unsupported(f"mode {a['mode']!r} (only nearest)")
    if (
        a.get("antialias", 0)
        or a.get("axes")
        or a.get("keep_aspect_ratio_policy", "stretch") != ("stretch")
    ):
        raise Unsupported("antialias, axes or keep_aspect_ratio_policy")
    sizes = None
    if v < 9:
        scales = [float(f) for f in a["scales"]]
    elif v < 11:
        scales = [float(f) for f in static(xs[1], "scales").reshape(-1)]
    else:
        sc, sz = opt(xs, 2), opt(xs, 3)
        scales = [float(f) for f in static(sc, "scales").reshape(-1)] if sc is not None else []
        if not scales:
            sizes = [int(d) for d in static(sz, "sizes").reshape(-1)]
            scales = [m / d for m, d in zip(sizes, s, strict=True)]
    if len(scales) != len(s) or min(scales) <= 0:
        raise InvalidModelError(f"Resize scales {scales} for rank {len(s)}")
    sizes = sizes or [math.floor(d * f) for d, f in zip(s, scales, strict=True)]
    limits.check_elements(sizes, "Resize output")
    b = {"coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"} if v < 10 else a
    for ax, (d, m, f) in enumerate(zip(s, sizes, scales, strict=True)):
        if m != d or f != 1:
            idx = tuple(_nearest_index(d, m, f, b))
            x = E.on_axis(x, ax, 0, lambda t, idx=idx: E.node("index_select", t, indices=idx))
    return x


# --------------------------------------------------------------------------- conv / pool
def _explicit_pads(a: dict[str, Any], spatial: Sequence[int], kernel: Sequence[int]) -> list[int]:
    """ONNX pads (begin..., end...) with auto_pad resolved (SAME_UPPER puts the odd one at
    the end, SAME_LOWER at the beginning)."""
    k = len(spatial)
    ap = a.get("auto_pad", "NOTSET")
    if ap in ("NOTSET", "VALID"):
        p = [int(x) for x in a.get("pads", [0] * (2 * k))] if ap == "NOTSET" else [0] * (2 * k)
        if len(p) != 2 * k or min(p) < 0:
            raise InvalidModelError(f"pads {p} for {k} spatial axes")
        return p
    if ap not in ("SAME_UPPER", "SAME_LOWER"):
        raise InvalidModelError(f"auto_pad {ap!r}")
    strides = a.get("strides", [1] * k)
    dil = a.get("dilations", [1] * k)
    total = [
        max((-(-n // st) - 1) * st + (kk - 1) * d + 1 - n, 0)
        for n, st, kk, d in zip(spatial, strides, kernel, dil, strict=True)
    ]
    lo = [t // 2 if ap == "SAME_UPPER" else t - t // 2 for t in total]
    return lo + [t - low for t, low in zip(total, lo, strict=True)]


def _geometry(E: Emitter, x: Any, kernel: Sequence[int], a: dict[str, Any], op: str) -> Any:
    """(stride, pads, dilation) of an N-d window op, checked, with the im2col size capped."""
    s = E.shape(x)
    k = len(kernel)
    if len(s) != k + 2:
        raise InvalidModelError(f"{op}: input rank {len(s)} for a {k}-D kernel")
    stride = [int(t) for t in a.get("strides", [1] * k)]
    dil = [int(t) for t in a.get("dilations", [1] * k)]
    if len(stride) != k or len(dil) != k or min(stride + dil + list(kernel), default=1) < 1:
        raise InvalidModelError(f"{op}: strides {stride}, dilations {dil}, kernel {kernel}")
    pads = _explicit_pads(a, s[2:], kernel)
    out = []
    for n, kk, st, d, lo, hi in zip(s[2:], kernel, stride, dil, pads[:k], pads[k:], strict=True):
        span = n + lo + hi - (kk - 1) * d - 1
        if span < 0:
            raise InvalidModelError(f"{op}: the window is larger than the padded input")
        out.append(span // st + 1)
    limits.check_elements([s[1], *kernel, *out], f"{op} im2col (channels x kernel x outputs)")
    limits.check_elements([s[0], s[1], *out], f"{op} output")
    return stride, pads, dil


def _conv(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, w, b = xs[0], xs[1], opt(xs, 2)
    ws = E.shape(w)
    group = int(a.get("group", 1))
    if group < 1:
        raise InvalidModelError(f"Conv group={group} (must be >= 1)")
    kernel = list(ws[2:])
    if "kernel_shape" in a and list(a["kernel_shape"]) != kernel:
        raise InvalidModelError(f"Conv kernel_shape {a['kernel_shape']} but weight {ws}")
    stride, pads, dil = _geometry(E, x, kernel, a, "Conv")
    k = len(kernel)
    args = [w] if b is None else [w, b]
    if k in (1, 2):
        if pads[:k] != pads[k:]:
            x = _zero_pad(E, x, pads)
            pads = [0] * (2 * k)
        if k == 1:
            return _as_1d(
                E,
                x,
                lambda t: E.node(
                    "conv2d",
                    t,
                    E.reshape(w, (*ws[:2], 1, ws[2])),
                    *args[1:],
                    stride=(1, stride[0]),
                    padding=(0, pads[0]),
                    dilation=(1, dil[0]),
                    groups=group,
                ),
            )
        return E.node(
            "conv2d", x, *args, stride=tuple(stride), padding=tuple(pads[:2]),
            dilation=tuple(dil), groups=group,
        )  # fmt: skip
    if pads[:k] != pads[k:]:
        x = _zero_pad(E, x, pads)
        pads = [0] * (2 * k)
    return table_op(
        E, f"conv{k}d", x, *args, stride=tuple(stride), padding=tuple(pads[:k]),
        dilation=tuple(dil), groups=group,
    )  # fmt: skip


def _zero_pad(E: Emitter, x: Any, pads: Sequence[int]) -> Any:
    k = len(pads) // 2
    for i in range(k):
        x = _pad_axis(E, x, 2 + i, pads[i], pads[i + k], "constant", 0.0)
    return x


def _as_1d(E: Emitter, x: Any, fn: Any) -> Any:
    """A 1-D window op as the 2-D one over (N, C, 1, L): unit height, no height padding."""
    n, c, length = E.shape(x)
    y = fn(E.reshape(x, (n, c, 1, length)))
    ys = E.shape(y)
    return E.reshape(y, (ys[0], ys[1], ys[3]))


def _real_counts(
    spatial: Sequence[int],
    kernel: Sequence[int],
    stride: Sequence[int],
    lo: Sequence[int],
    out: Sequence[int],
) -> np.ndarray:
    """The number of input (non-padding) positions in each pooling window."""
    counts = np.ones((), dtype=np.float64)
    for n, k, st, p, m in zip(spatial, kernel, stride, lo, out, strict=True):
        starts = np.arange(m) * st - p
        c = np.minimum(starts + k, n) - np.maximum(starts, 0)
        counts = np.multiply.outer(counts, c.astype(np.float64))
    return counts  # fmt: skip


def _pool_input(
    E: Emitter, x: Any, kind: str, kernel: list[int], pads: list[int], dil: list[int]
) -> tuple[Any, list[int]]:
    """x with asymmetric pads made explicit: zeros for average pools (their window counts
    are fixed after), the edge copied for max pools (exact when every window that touches
    the padding also holds the edge: dilation 1 and pads below the kernel)."""
    k = len(kernel)
    if pads[:k] == pads[k:]:
        return x, pads
    if kind == "Avg":
        return _zero_pad(E, x, pads), [0] * (2 * k)
    if any(d != 1 for d in dil) or any(p >= kk for p, kk in zip(pads, kernel * 2, strict=True)):
        raise Unsupported(f"asymmetric pads {pads} with dilation {dil} (max pool)")
    for i in range(k):
        x = _pad_axis(E, x, 2 + i, pads[i], pads[i + k], "edge", 0.0)
    return x, [0] * (2 * k)  # fmt: skip


def _pool(kind: str) -> Any:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        x0 = xs[0]
        kernel = [int(t) for t in a["kernel_shape"]]
        stride, pads0, dil = _geometry(E, x0, kernel, a, f"{kind}Pool")
        k = len(kernel)
        ceil = bool(a.get("ceil_mode", 0))
        exclude = kind == "Avg" and not a.get("count_include_pad", 0)
        if ceil and (pads0[:k] != pads0[k:] or (kind == "Avg" and not exclude)):
            raise Unsupported(
                "ceil_mode=1 (max pools and count_include_pad=0 average pools with "
                "symmetric pads only)"
            )
        if kind == "Avg" and any(d != 1 for d in dil):
            raise Unsupported("dilated average pooling")
        x, pads = _pool_input(E, x0, kind, kernel, pads0, dil)
        attrs: dict[str, Any] = {"kernel_size": tuple(kernel), "stride": tuple(stride)}
        attrs["padding"] = tuple(pads[:k])
        if kind == "Max":
            attrs["dilation"] = tuple(dil)
        elif ceil:  # torch's divisor: the window's positions inside the input (ONNX's too)
            attrs["count_include_pad"] = False
        op = "max_pool" if kind == "Max" else "avg_pool"
        if k == 1:
            unit = {"kernel_size": 1, "padding": 0}
            one: dict[str, Any] = {
                key: (unit.get(key, 1), t[0]) if isinstance(t, tuple) else t
                for key, t in attrs.items()
            }
            if ceil:  # the last window may not start in the right padding (ONNX, torch)
                one["ceil_mode"] = True
            y = _as_1d(E, x, lambda t: E.node(f"{op}2d", t, **one))
        elif k == 2:
            y = E.node(f"{op}2d", x, **attrs, **({"ceil_mode": True} if ceil else {}))
        else:
            y = table_op(E, f"{op}{k}d", x, **attrs, **({"ceil_mode": True} if ceil else {}))
        if kind == "Max":
            return y, ar.Poison("MaxPool (indices output)", "integer indices are not a table value")
        if any(pads0) and exclude and not ceil:
            # the table's average divides by the kernel size; ONNX by the real positions
            counts = _real_counts(E.shape(x0)[2:], kernel, stride, pads0[:k], E.shape(y)[2:])
            y = E.node("mul", y, Static(float(np.prod(kernel)) / counts))
        return y

    return rule


def _lrn(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """LRN: x / (bias + alpha/size * sum of squares over a channel window)^beta, as
    x * exp(-beta * log(bias + alpha * avg_pool(x^2))) with the channel window an average
    pool over (C, H*W) (ONNX's window: floor((size-1)/2) before, ceil after). Odd sizes are
    the table's `local_response_norm` (PyTorch's window size//2 before, the same there);
    even sizes keep this composition, whose window PyTorch's op does not have."""
    x = xs[0]
    s = E.shape(x)
    size = int(a["size"])
    alpha = _finite(a.get("alpha", 1e-4), "LRN alpha")
    beta = _finite(a.get("beta", 0.75), "LRN beta")
    bias = _finite(a.get("bias", 1.0), "LRN bias")
    if size < 1 or len(s) < 3 or bias <= 0:
        raise Unsupported(f"LRN size {size}, bias {bias} on rank {len(s)}")
    if size % 2:  # the table op's window is PyTorch's: ONNX's for odd sizes only
        return table_op(
            E,
            "local_response_norm",
            x,
            size=size,
            alpha=Fraction(alpha),
            beta=Fraction(beta),
            k=Fraction(bias),
        )
    hw = int(np.prod(s[2:]))
    sq = E.reshape(E.node("mul", x, x), (s[0], 1, s[1], hw))
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = _pad_axis(E, sq, 2, lo, hi, "constant", 0.0)
    avg = E.node("avg_pool2d", sq, kernel_size=(size, 1), stride=(1, 1))
    den = E.node("add", ar.scalar_mul(E, avg, alpha), bias)
    scale = E.node("exp", ar.scalar_mul(E, E.node("log", den), -beta))
    return E.node("mul", x, E.reshape(scale, s))


def _global_pool(kind: str) -> Any:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        s = E.shape(xs[0])
        if len(s) < 3:
            raise InvalidModelError(f"Global{kind}Pool of rank {len(s)}")
        if kind == "Average" and len(s) == 4:
            return E.node("avg_pool2d", xs[0], kernel_size=tuple(s[2:]))
        axes = list(range(2, len(s)))
        if kind == "Average":
            return E.mean(xs[0], axes, True)
        return E.reduce("reduce_max", xs[0], axes, True)

    return rule


def _instance_norm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, scale, bias = xs
    eps = _finite(a.get("epsilon", 1e-5), "InstanceNormalization epsilon")
    s = E.shape(x)
    if "instance_norm" in OPS:
        return table_op(E, "instance_norm", x, scale, bias, eps=Fraction(eps))
    # exact composition: the layer-norm body over the spatial axes of each (n, c)
    d = int(np.prod(s[2:]))
    y = E.layer_norm(E.reshape(x, (s[0], s[1], d)), None, None, (d,), eps)
    y = E.node("mul", y, E.reshape(scale, (s[1], 1)))
    y = E.node("add", y, E.reshape(bias, (s[1], 1)))
    return E.reshape(y, s)


def _where(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if isinstance(xs[0], Dyn):
        raise Unsupported("a condition computed from graph values")
    return ar.where_rule(E, *xs)


NN_OPS = {
    "LeakyRelu": _leaky_relu,
    "PRelu": _prelu,
    "Elu": _elu,
    "Selu": _selu,
    "HardSigmoid": _hard_sigmoid,
    "HardSwish": _hard_swish,
    "Softsign": _softsign,
    "Shrink": _shrink,
    "Mish": _mish,
    "Sign": _named("sign"),
    "Erf": _named("erf"),
    "Where": _where,
    "Pow": _pow,
    "Sum": _variadic("add"),
    "Mean": _variadic("add", mean=True),
    "Max": _variadic("maximum"),
    "Min": _variadic("minimum"),
    "Pad": _pad,
    "Tile": _tile,
    "Split": _split,
    "Upsample": _resize,
    "Resize": _resize,
    "Conv": _conv,
    "MaxPool": _pool("Max"),
    "AveragePool": _pool("Avg"),
    "GlobalAveragePool": _global_pool("Average"),
    "GlobalMaxPool": _global_pool("Max"),
    "InstanceNormalization": _instance_norm,
    "LRN": _lrn,
    "CumSum": _cumsum,
}
"""The rules of this module (merged into `onnx_import.ONNX_OPS`)."""
