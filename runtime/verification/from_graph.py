"""An imported model (`runtime.interop.Imported`) as a verifiable network: the spec graph
walked node by node and rebuilt as a `Result` of `runtime.nn` layers (residual additions as
`Residual` layers), so `verify` and `Result.predict` (the runtime's own kernels) apply to it
unchanged.

Invariants:
- One runtime input, one output (a vector computed from the input). Every node takes
  exactly one value computed from the input (its "data" argument, first; add is
  commutative) and only parameters (graph inputs that are not runtime inputs) otherwise,
  except a residual add: an `add` of two values computed from the input. Each computed
  value is a `_Path`: the layers (with their state) computing it from the input; a node's
  rule sees the walk as its data argument's path (rules are unchanged from the chain
  walk), and a residual add of paths a and b becomes their common prefix (the fork point:
  the same layer objects with the same state arrays) followed by
  Residual(a's rest, b's rest) (an empty rest: the identity skip). Nodes whose value the
  output does not use are checked but leave no layer. Every value is a vector, possibly
  with leading unit dimensions (shape (1, n) as ONNX exports a batch of one), or a
  (1, C, H, W) image; verification works on the unbatched value ((n,) or (C, H, W)),
  flattened row-major.
- `NODE_RULES` maps a spec op to its rule; an op without a rule, a node taking no or two
  computed values (other than a residual add of equal shapes), x + x, or a shape that is
  neither raises `VerificationError` naming the node index and op.
- linear(x, W[, b]) is Linear(W, b); matmul(x, W) with a (k, n) parameter W is Linear with
  weight W^T and bias 0, and an add of a parameter of n values right after it becomes that
  Linear's bias (the runtime's linear is the same left fold of products then + b[i], and
  x + 0 = x); conv2d(x, W[, b]) on an image is Conv2d with the node's stride, padding,
  dilation and groups; relu / tanh / sigmoid are the layers of the same name; reshape and
  flatten to a vector are the identity on the flat vector (from an image, a Flatten
  layer). A bias-free matmul or conv2d keeps a zero bias (adding 0 changes no value).
- leaky_relu is LeakyReLU (the node's slope); ONNX Clip (maximum by a scalar parameter
  then minimum by one) is Hardtanh(lo, hi), and a one-sided one Hardtanh with the dtype's
  largest finite value as the other bound (equal on every finite value); max_pool2d /
  avg_pool2d on an image are MaxPool2d / AvgPool2d (kernel, stride, padding; dilation,
  ceil_mode, count_include_pad and divisor_override only at their defaults);
  batch_norm_eval is BatchNorm2d (an image) or BatchNorm1d (a vector) in evaluation mode
  with the node's statistics, weight, bias and eps (the same op order). sub / add / mul /
  div by a parameter (input normalisation): a neutral one leaves no layer, any other is a
  batch norm in evaluation mode whose only inexact step is the op's own rounding (`_affine`;
  a division by one divisor d for every unit that is not a power of two: running variance
  v and eps with v + eps = d^2 exactly and sqrt(RN(v + RN(eps))) rounding to |d|, weight
  sign(d), `_exact_div`); per-unit divisors that are not powers of two are refused.
- Nothing is mutated: the parameters are copied into the Result's state in the model's
  dtype ("float32" or "float64", the dtype of the imported values).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from runtime.nn import (
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Flatten,
    Hardtanh,
    LeakyReLU,
    Linear,
    MaxPool2d,
    ReLU,
    Residual,
    Sequential,
    Sigmoid,
    Tanh,
)
from runtime.training.evaluation import Result

from .core import VerificationError

__all__ = ["NODE_RULES", "Network", "network_from_imported"]

DTYPE_NAMES = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


@dataclass
class Network:
    """The rebuilt network: the `Result` (ordered kernels), its flat input and output sizes,
    the layer descriptions (for messages and docs) and the unbatched input shape ((n,) or
    an image's (C, H, W))."""

    result: Result
    n_in: int
    n_out: int
    layers: list[str] = field(default_factory=list)
    in_shape: tuple[int, ...] = ()


@dataclass
class _Walk:
    params: dict[int, np.ndarray]
    layers: list[Any] = field(default_factory=list)
    state: list[np.ndarray] = field(default_factory=list)
    open_bias: bool = False  # the last layer is a Linear from matmul without its add yet
    shape: tuple[int, ...] = ()  # the current value's unbatched shape
    full: tuple[int, ...] = ()  # the data argument's shape as the graph has it (batched)


def _unbatched(shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    """(C, H, W) for a (1, C, H, W) image; (n,) for a vector: any shape with at most one
    dimension other than 1 ((1, n), (1, n, 1), ...: the same n values in row-major order)."""
    if len(shape) == 4 and shape[0] == 1:
        return tuple(shape[1:])
    if sum(d != 1 for d in shape) > 1:
        raise VerificationError(f"{where}: value of shape {shape} is neither a vector nor an image")
    return (int(np.prod(shape)),)


def _vector_len(shape: tuple[int, ...], where: str) -> int:
    got = _unbatched(shape, where)
    if len(got) != 1:
        raise VerificationError(f"{where}: value of shape {shape} is not a vector")
    return got[0]


Attrs = dict[str, Any]
Rule = Callable[["_Walk", tuple[int, ...], Attrs, str], None]


def _param(w: _Walk, arg: int, where: str) -> np.ndarray:
    if arg not in w.params:
        raise VerificationError(f"{where}: argument {arg} is not a parameter of the model")
    return w.params[arg]


def _linear(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    W = _param(w, args[1], where)
    b = _param(w, args[2], where) if len(args) > 2 else np.zeros(W.shape[0], W.dtype)
    if W.ndim != 2 or b.shape != (W.shape[0],):
        raise VerificationError(f"{where}: weight {W.shape} / bias {b.shape} not a dense layer")
    w.layers.append(Linear(W.shape[1], W.shape[0]))
    w.state += [W.copy(), b.copy()]
    w.open_bias = False


def _matmul(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    W = _param(w, args[1], where)
    if W.ndim != 2:
        raise VerificationError(f"{where}: matmul by a parameter of shape {W.shape}")
    w.layers.append(Linear(W.shape[0], W.shape[1]))
    w.state += [np.ascontiguousarray(W.T), np.zeros(W.shape[1], W.dtype)]
    w.open_bias = True


def _layer(cls: type) -> Rule:
    def rule(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
        w.layers.append(cls())
        w.open_bias = False

    return rule


def _identity(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """reshape / flatten to a vector: the flat (row-major) vector is unchanged; from an
    image, a Flatten layer (the identity for verification, a reshape for `predict`)."""
    if len(w.shape) == 3:
        w.layers.append(Flatten())
        w.open_bias = False


def _conv2d(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    W = _param(w, args[1], where)
    b = _param(w, args[2], where) if len(args) > 2 else np.zeros(W.shape[0], W.dtype)
    if len(w.shape) != 3 or W.ndim != 4:
        raise VerificationError(f"{where}: conv2d needs a (1, C, H, W) input, got {w.shape}")
    g = attrs.get("groups", 1)
    kernel = (W.shape[2], W.shape[3])
    dil = attrs.get("dilation", 1)
    w.layers.append(
        Conv2d(W.shape[1] * g, W.shape[0], kernel, attrs["stride"], attrs["padding"], dil, g)
    )
    w.state += [W.copy(), b.copy()]
    w.open_bias = False


def _scalar_param(w: _Walk, arg: int, where: str) -> Fraction:
    a = _param(w, arg, where)
    if a.size != 1 or not np.isfinite(a).all():
        raise VerificationError(f"{where}: argument {arg}: expected a finite scalar parameter")
    return Fraction(float(a.reshape(-1)[0]))


def _top(w: _Walk) -> Fraction:
    """The largest finite value of the model's dtype (a one-sided Clip's other bound)."""
    return Fraction(float(np.finfo(next(iter(w.params.values())).dtype).max))


def _clip_low(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """maximum(x, lo) (ONNX Clip's lower bound): Hardtanh(lo, the dtype's largest finite
    value), equal to it on every finite value; a `minimum` right after sets the upper
    bound."""
    lo = _scalar_param(w, args[1], where)
    if not lo < _top(w):
        raise VerificationError(f"{where}: Clip lower bound {lo}: expected below the largest value")
    w.layers.append(Hardtanh(lo, _top(w)))
    w.open_bias = False


def _clip_high(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """minimum(x, hi) (ONNX Clip's upper bound): right after a `maximum` by a scalar the
    Hardtanh(lo, hi) of the Clip, else Hardtanh(-largest finite value, hi)."""
    hi = _scalar_param(w, args[1], where)
    last = w.layers[-1] if w.layers else None
    lo = -_top(w)
    if isinstance(last, Hardtanh) and last.max_val == _top(w) and not w.open_bias:
        lo = last.min_val
        w.layers.pop()
    if not lo < hi:
        raise VerificationError(f"{where}: Clip bounds [{lo}, {hi}]: expected min < max")
    w.layers.append(Hardtanh(lo, hi))
    w.open_bias = False


def _leaky_relu(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    w.layers.append(LeakyReLU(Fraction(attrs.get("negative_slope", Fraction(1, 100)))))
    w.open_bias = False


def _pool(cls: type, unsupported: dict[str, tuple[Any, ...]]) -> Rule:
    """max_pool2d / avg_pool2d on an image with the layer's attributes: kernel_size,
    stride, padding; any other attribute must keep its default (`unsupported`: the values
    accepted)."""

    def rule(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
        if len(w.shape) != 3:
            raise VerificationError(f"{where}: pooling needs a (1, C, H, W) input, got {w.shape}")
        for key, ok in unsupported.items():
            if attrs.get(key) not in ok:
                raise VerificationError(f"{where}: {key}={attrs[key]!r} is not supported")
        w.layers.append(cls(attrs["kernel_size"], attrs["stride"], attrs["padding"]))
        w.open_bias = False

    return rule


def _batch_norm_eval(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """batch_norm_eval(x, mean, var, weight, bias): BatchNorm2d (an image) or BatchNorm1d
    (a vector) in evaluation mode with those running statistics; the same op order
    ((x - mean) / sqrt(var + eps)) * weight + bias, eps rounded once into the dtype."""
    mean, var, gamma, beta = (_param(w, a, where) for a in args[1:5])
    c = w.shape[0]
    if any(p.shape != (c,) for p in (mean, var, gamma, beta)):
        raise VerificationError(f"{where}: statistics, weight and bias must be ({c},)")
    eps = float(attrs.get("eps", Fraction(1, 100000)))
    w.layers.append(BatchNorm2d(c, eps) if len(w.shape) == 3 else BatchNorm1d(c, eps))
    w.state += [gamma.copy(), beta.copy(), mean.copy(), var.copy(), np.asarray(0.1, gamma.dtype)]
    w.open_bias = False


def _per_unit(w: _Walk, arg: int, where: str) -> np.ndarray:
    """A parameter operand of an elementwise op, broadcast to the data's shape: one value per
    element of a vector, one per channel of an image (constant over each channel's H x W)."""
    p = _param(w, arg, where)
    try:
        full = np.broadcast_to(p, w.full)
    except ValueError:
        raise VerificationError(f"{where}: parameter of shape {p.shape} does not broadcast "
                                f"to the value's shape {w.full}") from None  # fmt: skip
    if np.broadcast_shapes(p.shape, w.full) != tuple(w.full):
        raise VerificationError(f"{where}: parameter of shape {p.shape} widens {w.full}")
    v = full.reshape(w.shape)
    if len(w.shape) == 3:
        if not (v == v[:, :1, :1]).all():
            raise VerificationError(f"{where}: a per-pixel parameter on an image is not "
                                    "supported (one value per channel is)")  # fmt: skip
        v = v[:, 0, 0]
    if not np.isfinite(v).all():
        raise VerificationError(f"{where}: parameter values must be finite")
    return np.array(v, dtype=p.dtype)


def _affine(w: _Walk, mean: np.ndarray, scale: np.ndarray) -> None:
    """(x - mean) * scale as a batch norm in evaluation mode whose other steps are exact:
    running variance 1 - eps and eps = 2^-p (p the dtype's significand bits), both exact in
    the dtype, so var + eps = 1 at the real level and in the dtype; the division by
    sqrt(1) = 1, the product by a scale of 1 and the bias 0 change no value. Each of
    `x - mean` and `* scale` is so the one rounding of the ONNX op it stands for."""
    dt = mean.dtype
    eps = float(np.finfo(dt).eps) / 2
    c = mean.shape[0]
    w.layers.append(BatchNorm2d(c, eps) if len(w.shape) == 3 else BatchNorm1d(c, eps))
    var = np.full(c, 1 - eps, dtype=dt)
    w.state += [scale, np.zeros(c, dt), mean, var, np.asarray(0.1, dt)]
    w.open_bias = False


def _sub(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """x - m (m a parameter): nothing when m = 0 (x - 0 = x exactly), else `_affine`."""
    m = _per_unit(w, args[1], where)
    if (m != 0).any():
        _affine(w, m, np.ones_like(m))


def _shift(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """x + t (t a parameter, not a bias right after a matmul): x - (-t), the same rounding."""
    t = _per_unit(w, args[1], where)
    if (t != 0).any():
        _affine(w, -t, np.ones_like(t))


def _mul(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """x * s (s a parameter): nothing when s = 1, else `_affine` with that scale."""
    s = _per_unit(w, args[1], where)
    if (s != 1).any():
        _affine(w, np.zeros_like(s), s)


def _div(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """x / d (d a parameter): nothing when d = 1; x * (1/d) when every d is a power of two
    with 1/d finite in the dtype (x / d and x * (1/d) are the same real number, rounded
    once alike); one divisor d for every unit: `_exact_div`; per-unit divisors otherwise
    are refused (no exact stage for them at the real level)."""
    d = _per_unit(w, args[1], where)
    if (d == 1).all():
        return
    m, _ = np.frexp(np.abs(d))
    with np.errstate(divide="ignore", over="ignore"):
        inv = (1 / d).astype(d.dtype)
    if ((m == 0.5) & np.isfinite(inv) & (d != 0)).all() and (inv * d == 1).all():
        _affine(w, np.zeros_like(d), inv)
        return
    split = _exact_div(d) if (d == d[0]).all() and d[0] != 0 else None
    if split is None:
        raise VerificationError(
            f"{where}: division by a parameter other than a power of two (or one value for "
            "every unit) is not supported by the network import (no stage holds x / d "
            "exactly at the real level); fold it into the next layer's weights or the "
            "property's box"
        )
    var, eps = split
    c = d.shape[0]
    w.layers.append(BatchNorm2d(c, eps) if len(w.shape) == 3 else BatchNorm1d(c, eps))
    dt = d.dtype
    w.state += [np.sign(d).astype(dt), np.zeros(c, dt), np.zeros(c, dt), np.full(c, var, dt),
                np.asarray(0.1, dt)]  # fmt: skip
    w.open_bias = False


def _exact_div(d: np.ndarray) -> tuple[Any, float] | None:
    """x / d by one divisor d (not a power of two) as batch norm's division: running_var v
    (in the dtype) and eps (binary64, > 0) with v + eps = d^2 exactly, so at the real level
    (x - 0) / sqrt(v + eps) * sign(d) + 0 = x / d, and with sqrt(RN(v + RN(eps))) rounding
    to |d| in the dtype, so the runtime computes RN(x / |d|) * (+-1) + 0 = RN(x / d), the
    ONNX op's one rounding. None when no candidate v (the largest values of the dtype below
    d^2) gives both."""
    dt = d.dtype.type
    a = abs(Fraction(float(d[0])))
    sq = a * a
    v = dt(float(sq))
    while Fraction(float(v)) >= sq:
        v = np.nextafter(v, dt(0))
    for _ in range(4):
        eps = float(sq - Fraction(float(v)))
        ok = Fraction(float(v)) + Fraction(eps) == sq and eps > 0
        with np.errstate(all="ignore"):
            ok = ok and np.sqrt(dt(v) + dt(eps)) == dt(float(a))
        if ok:
            return v, eps
        v = np.nextafter(v, dt(0))
    return None


def _add(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """The bias of the Linear right before (from a matmul), else an elementwise shift."""
    if not w.open_bias:
        _shift(w, args, attrs, where)
        return
    b = _param(w, args[1], where)
    n = w.state[-1].shape[0]
    if int(b.size) != n or _vector_len(b.shape, where) != n:
        raise VerificationError(f"{where}: the bias after a matmul must hold {n} values")
    w.state[-1] = b.reshape(-1).copy()
    w.open_bias = False


def _swap(w: _Walk, args: tuple[int, ...], attrs: Attrs, where: str) -> None:
    """swap_adjacent (Transpose as imported) of axes k and k + 1: the identity on the
    row-major values when one of the two has size 1; any other transpose is refused."""
    k = int(attrs["axis"])
    if w.full[k] != 1 and w.full[k + 1] != 1:
        raise VerificationError(f"{where}: a transpose that moves values {w.full} is not "
                                "supported")  # fmt: skip
    if len(w.shape) == 3 and len(_unbatched(_swapped(w.full, k), where)) == 1:
        w.layers.append(Flatten())
        w.open_bias = False


def _swapped(shape: tuple[int, ...], k: int) -> tuple[int, ...]:
    s = list(shape)
    s[k], s[k + 1] = s[k + 1], s[k]
    return tuple(s)


NODE_RULES: dict[str, Rule] = {
    "linear": _linear,
    "matmul": _matmul,
    "add": _add,
    "conv2d": _conv2d,
    "relu": _layer(ReLU),
    "tanh": _layer(Tanh),
    "sigmoid": _layer(Sigmoid),
    "reshape": _identity,
    "flatten": _identity,
    "leaky_relu": _leaky_relu,
    "maximum": _clip_low,
    "minimum": _clip_high,
    "max_pool2d": _pool(MaxPool2d, {"dilation": (None, (1, 1)), "ceil_mode": (None, False)}),
    "avg_pool2d": _pool(
        AvgPool2d,
        {
            "ceil_mode": (None, False),
            "count_include_pad": (None, True),
            "divisor_override": (None,),
            "dilation": (None, (1, 1)),
        },
    ),
    "batch_norm_eval": _batch_norm_eval,
    "sub": _sub,
    "div": _div,
    "mul": _mul,
    "swap_adjacent": _swap,
}


@dataclass(frozen=True)
class _Path:
    """A value computed from the runtime input: the layers (and their flat state) that
    compute it from the input, whether its last Linear awaits its bias, and its shape."""

    layers: tuple[Any, ...]
    state: tuple[np.ndarray, ...]
    open_bias: bool
    shape: tuple[int, ...]


def _split(path: _Path) -> list[tuple[Any, tuple[np.ndarray, ...]]]:
    """The path's layers, each with its own state arrays."""
    out, k = [], 0
    for layer in path.layers:
        n = len(layer.state_specs())
        out.append((layer, path.state[k : k + n]))
        k += n
    return out


def _residual(a: _Path, b: _Path, where: str) -> _Path:
    """add(a, b) of two values computed from the input: their common prefix (the fork
    point: the same layers with the same state arrays), then Residual(a's rest, b's rest)."""
    if a.shape != b.shape:
        raise VerificationError(f"{where}: a residual add of shapes {a.shape} and {b.shape}")
    pa, pb = _split(a), _split(b)
    k = 0
    while k < min(len(pa), len(pb)) and pa[k][0] is pb[k][0]:
        if any(x is not y for x, y in zip(pa[k][1], pb[k][1], strict=True)):
            raise VerificationError(f"{where}: the added values share a layer with two biases")
        k += 1
    body, short = pa[k:], pb[k:]
    if not body and not short:
        raise VerificationError(f"{where}: add of a value to itself (x + x) is not supported")
    if not body:
        body, short = short, body  # x + f(x): the body is the branch with layers
    layers = (*a.layers[: len(pa[:k])], Residual([u for u, _ in body], [u for u, _ in short]))
    state = tuple(v for _, st in (*pa[:k], *body, *short) for v in st)
    return _Path(layers, state, False, a.shape)


def _step(w: _Walk, paths: dict[int, _Path], full: Any, node: Any, where: str) -> _Path:
    """The value of one node from its runtime-derived argument's path: the node's rule
    (the rule sees the walk as that path), or a residual add of two such values."""
    data = [i for i, a in enumerate(node.args) if a in paths]
    if node.op == "add" and len(data) == 2:
        return _residual(paths[node.args[0]], paths[node.args[1]], where)
    if len(data) != 1 or (data[0] != 0 and node.op not in ("add", "mul")):
        raise VerificationError(
            f"{where}: the node must take one value computed from the input as its first "
            f"argument (got {len(data)} such arguments)"
        )
    args = tuple(node.args)
    if data[0] == 1:  # add and mul are commutative: the value first
        args = (args[1], args[0], *args[2:])
    p = paths[args[0]]
    w.layers, w.state, w.open_bias, w.shape = list(p.layers), list(p.state), p.open_bias, p.shape
    w.full = full[args[0]]
    NODE_RULES[node.op](w, args, dict(node.attrs), where)
    return _Path(tuple(w.layers), tuple(w.state), w.open_bias, w.shape)


def _const(attrs: Any, dt: Any, where: str) -> np.ndarray:
    """An ONNX Constant (spec `const`): a parameter; its values must be exact in the dtype."""
    a = dict(attrs)
    vals = np.array([float(v) for v in a["values"]], dtype=dt).reshape(a["shape"])
    if any(Fraction(float(x)) != v for x, v in zip(vals.reshape(-1), a["values"], strict=True)):
        raise VerificationError(f"{where}: a constant is not exact in {dt}")
    return vals


def network_from_imported(imp: Any) -> Network:
    """The imported model as a `Result` (see the module docstring), or `VerificationError`
    naming the first node that does not fit."""
    g = imp.graph
    runtime_ids = [i for i, n in imp.names.items() if n in imp.input_names]
    if len(runtime_ids) != 1 or len(imp.outputs) != 1:
        raise VerificationError(
            f"verification needs one input and one output, got inputs {list(imp.input_names)}"
            f" and {len(imp.outputs)} outputs"
        )
    (cur,) = runtime_ids
    dt = np.asarray(imp.values[imp.names[cur]]).dtype
    if dt not in DTYPE_NAMES:
        raise VerificationError(f"verification needs float32 or float64 models, got {dt}")
    params = {i: np.asarray(imp.values[n], dtype=dt) for i, n in imp.names.items() if i != cur}
    w = _Walk(params)
    in_shape = _unbatched(g.shapes[cur], "the model input")
    paths = {cur: _Path((), (), False, in_shape)}
    for k, node in enumerate(g.nodes):
        where = f"node {k} ({node.op})"
        if node.op == "const":
            params[g.num_inputs + k] = _const(node.attrs, dt, where)
            continue
        if node.op not in NODE_RULES:
            raise VerificationError(
                f"{where}: op {node.op!r} is not supported by the network import "
                f"(supported: {', '.join(sorted(NODE_RULES))})"
            )
        p = _step(w, paths, g.shapes, node, where)
        cur = g.num_inputs + k
        paths[cur] = replace(p, shape=_unbatched(g.shapes[cur], where))
    if imp.outputs[0] not in paths:
        raise VerificationError("verification needs the model output computed from the input")
    cur = imp.outputs[0]
    out = paths[cur]
    if not out.layers:
        raise VerificationError("verification needs at least one layer")
    res = Result(Sequential(*out.layers), "mse", DTYPE_NAMES[dt], "eager", "ordered", False,
                 list(out.state))  # fmt: skip
    n_out = _vector_len(g.shapes[cur], "the model output")
    names = [type(x).__name__ for x in out.layers]
    return Network(res, int(np.prod(in_shape)), n_out, names, in_shape)
