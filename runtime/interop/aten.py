"""The ATen mapping: every ATen op packet the importer knows, as a rule over the op table.

Invariants:
- `ATEN` is the mapping: ATen op packet name (`aten.linear`, ...) -> rule. A rule takes
  the `Emitter` and the node's arguments (graph values as `Dyn`, values known at import
  time as `Static`, Python scalars and lists as they are) and returns the node's value
  built from table ops only; a variant it cannot express raises `Unsupported`.
- `Poison` (`aten_guard`) marks a node that could not be mapped, or an output no table op
  gives (the statistics outputs of native norms, max-pool indices): reported when used.
- The conv, pool and pad families are `aten_windows.WINDOW_RULES`, merged in, and so are
  `aten_models.MODEL_RULES` (no-op checks, model constructs as compositions).
- Rules never import torch (the walker in `torch_import` does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from spec.ops.shape import split_ranges

from .aten_guard import Poison, elu, has_attrs, leaky_relu, table_unary
from .aten_index import copy, index, select_scatter, slice_scatter
from .aten_models import MODEL_RULES, batch_stats_norm, sdpa_additive
from .aten_windows import WINDOW_RULES
from .core import Dyn, Emitter, Static, Unsupported, axes_of, axis_of, is_float

__all__ = [
    "ATEN",
    "STATS",
    "Poison",
    "Rule",
    "batch_norm",
    "cat",
    "clamp",
    "embedding",
    "expand",
    "gelu",
    "index_select",
    "native_batch_norm",
    "pow_rule",
    "prelu_rule",
    "scalar_mul",
    "select",
    "slice_rule",
    "squeeze",
    "view",
    "where_rule",
]

Rule = Callable[..., Any]
REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _resolve(shape: Sequence[int], total: int) -> tuple[int, ...]:
    s = [int(d) for d in shape]
    if -1 in s:
        k = s.index(-1)
        rest = int(np.prod([d for i, d in enumerate(s) if i != k]))
        s[k] = total // rest if rest else 0
    return tuple(s)


def scalar_mul(E: Emitter, v: Any, c: Any) -> Any:
    return v if c == 1 else E.node("scale", v, c=Fraction(c))


# --------------------------------------------------------------------------- elementwise
def _binary(op: str) -> Rule:
    def rule(E: Emitter, a: Any, b: Any) -> Any:
        return E.node(op, a, b)

    return rule


def _add(E: Emitter, a: Any, b: Any, alpha: Any = 1) -> Any:
    b = scalar_mul(E, b, alpha) if isinstance(b, Dyn) else b * alpha
    if _non_finite(b) and isinstance(a, Dyn):
        return E.add_extended(a, Static(np.asarray(getattr(b, "value", b))))
    if _non_finite(a) and isinstance(b, Dyn):
        return E.add_extended(b, Static(np.asarray(getattr(a, "value", a))))
    return E.node("add", a, b)


def _non_finite(v: Any) -> bool:
    """A float constant holding an infinity or NaN (an additive mask)."""
    if isinstance(v, float):
        return not np.isfinite(v)
    return isinstance(v, Static) and is_float(v.value) and not np.isfinite(v.value).all()


def _sub(E: Emitter, a: Any, b: Any, alpha: Any = 1) -> Any:
    return E.node("sub", a, scalar_mul(E, b, alpha) if isinstance(b, Dyn) else b * alpha)


def _rsub(E: Emitter, a: Any, b: Any, alpha: Any = 1) -> Any:
    return _sub(E, b, a, alpha)


def _div(E: Emitter, a: Any, b: Any, rounding_mode: Any = None) -> Any:
    if rounding_mode is not None:
        raise Unsupported(f"rounding_mode={rounding_mode!r}")
    return E.node("div", a, b)


def _unary(op: str) -> Rule:
    return lambda E, x: E.node(op, x)


def _identity(E: Emitter, x: Any, *args: Any, **kw: Any) -> Any:
    return x


def _to_copy(E: Emitter, x: Any, dtype: Any = None, **kw: Any) -> Any:
    if dtype is not None and not dtype.is_floating_point:
        raise Unsupported(f"cast of a float value to {dtype}")
    return x


def gelu(E: Emitter, x: Any, approximate: str = "none") -> Any:
    if has_attrs("gelu", "approximate"):
        return E.node("gelu", x, approximate=approximate)
    if approximate != "tanh":
        raise Unsupported(
            "erf form (approximate='none'): this op table's gelu has no `approximate` "
            "attribute (tanh form only)"
        )
    return E.node("gelu", x)


def _softplus(E: Emitter, x: Any, beta: Any = 1, threshold: Any = 20) -> Any:
    if beta != 1:
        raise Unsupported(f"beta={beta}")
    return E.node("softplus", x)  # torch returns x above the threshold; the table's is exact


def clamp(E: Emitter, x: Any, min: Any = None, max: Any = None) -> Any:
    if isinstance(min, Dyn | Static) or isinstance(max, Dyn | Static):
        raise Unsupported("tensor bounds")
    if min is not None and max is not None:
        return E.node("clamp", x, lo=Fraction(min), hi=Fraction(max))
    if min is not None:
        x = E.node("maximum", x, float(min))
    if max is not None:
        x = E.node("minimum", x, float(max))
    return x


def _hardtanh(E: Emitter, x: Any, min_val: Any = -1.0, max_val: Any = 1.0) -> Any:
    if has_attrs("hardtanh", "min_val", "max_val"):  # torch's gradient at the bounds
        return E.node("hardtanh", x, min_val=Fraction(min_val), max_val=Fraction(max_val))
    return clamp(E, x, min_val, max_val)


def pow_rule(E: Emitter, x: Any, e: Any) -> Any:
    """aten.pow (Tensor_Scalar, Tensor_Tensor, Scalar) and ONNX Pow: a number exponent is
    the table's pow (exponent exact: the binary64 value given); a tensor exponent, or a
    number base, pow_tensor (broadcasting)."""
    if not isinstance(e, Dyn | Static) and isinstance(x, Dyn | Static):
        f = float(e)
        if not np.isfinite(f):
            raise Unsupported(f"exponent {f} (the table's pow takes a finite exponent)")
        return E.node("pow", x, exponent=Fraction(f))
    return E.node("pow_tensor", x, e)


def prelu_rule(E: Emitter, x: Any, w: Any) -> Any:
    """aten.prelu / aten._prelu_kernel (and ONNX PRelu): the table's prelu when the weight
    holds one element or one per channel laid out along axis 1 ((C,), or (C, 1, ..., 1) /
    (1, C, 1, ...) broadcast against x); any other layout is refused."""
    s, ws = E.shape(x), E.shape(w)
    n = int(np.prod(ws)) if ws else 1
    pad = (1,) * (len(s) - len(ws)) + tuple(ws)
    per_channel = (
        len(ws) <= len(s)
        and len(s) >= 2
        and pad[1] == s[1] == n
        and all(d == 1 for i, d in enumerate(pad) if i != 1)
    )
    if len(ws) == 1 and len(s) >= 2 and ws[0] == s[1]:
        per_channel = True  # torch's (C,) weight
    if n != 1 and not per_channel:
        raise Unsupported(
            f"a prelu weight of shape {ws} against an input {s} (one per channel "
            "along axis 1, or one shared, are mapped)"
        )
    return E.node("prelu", x, E.reshape(w, (n,)))


def where_rule(E: Emitter, cond: Any, a: Any, b: Any) -> Any:
    """aten.where.self and ONNX Where: the table's where, whose mask is constant data (a
    condition computed from graph values is refused)."""
    if not isinstance(cond, Static):
        raise Unsupported(
            "a condition computed from graph values (the table's where takes a constant mask)"
        )
    m = np.asarray(cond.value).astype(bool)
    for fill, keep, other in ((b, m, a), (a, ~m, b)):  # a -inf fill: mask_neg_inf
        if _non_finite(fill) and isinstance(other, Dyn):
            f = np.asarray(fill.value if isinstance(fill, Static) else fill, dtype=np.float64)
            out = np.broadcast_shapes(f.shape, keep.shape, tuple(E.shape(other)))
            flat = np.broadcast_to(keep, out)
            if np.isneginf(np.broadcast_to(f, out)[~flat]).all():
                y = (
                    other
                    if tuple(E.shape(other)) == out
                    else E.node("broadcast_to", other, shape=out)
                )
                return E.node(
                    "mask_neg_inf",
                    y,
                    mask=tuple(int(v) for v in flat.reshape(-1)),
                    mask_shape=tuple(out),
                )
            raise Unsupported("a where whose constant branch mixes -inf with other values")
    return E.node(
        "where", a, b, mask=tuple(int(v) for v in m.reshape(-1)), mask_shape=tuple(m.shape)
    )


def _dropout(E: Emitter, x: Any, p: Any = 0.5, train: Any = False) -> Any:
    if train and p:
        raise Unsupported("training-mode dropout (export the model in eval mode, or eval=True)")
    return x


def _native_dropout(E: Emitter, x: Any, p: Any = 0.5, train: Any = False) -> tuple[Any, Any]:
    mask = Poison("aten.native_dropout (mask output)", "the dropout mask is not a table value")
    return _dropout(E, x, p, train), mask


# --------------------------------------------------------------------------- shape
def view(E: Emitter, x: Any, shape: Sequence[int]) -> Any:
    return E.reshape(x, _resolve(shape, int(np.prod(E.shape(x)))))


def _flatten(E: Emitter, x: Any, start_dim: int = 0, end_dim: int = -1) -> Any:
    s = E.shape(x)
    if not s:
        return E.reshape(x, (1,))
    a, b = start_dim % len(s), end_dim % len(s)
    return E.reshape(x, (*s[:a], int(np.prod(s[a : b + 1])), *s[b + 1 :]))


def _unflatten(E: Emitter, x: Any, dim: int, sizes: Sequence[int]) -> Any:
    s = E.shape(x)
    d = dim % len(s)
    return E.reshape(x, (*s[:d], *_resolve(sizes, s[d]), *s[d + 1 :]))


def squeeze(E: Emitter, x: Any, dim: Any = None) -> Any:
    s = E.shape(x)
    dims = range(len(s)) if dim is None else [dim] if isinstance(dim, int) else dim
    drop = {d % len(s) for d in dims if s[d % len(s)] == 1} if s else set()
    return E.reshape(x, tuple(d for i, d in enumerate(s) if i not in drop))


def _unsqueeze(E: Emitter, x: Any, dim: int) -> Any:
    s = list(E.shape(x))
    s.insert(dim % (len(s) + 1), 1)
    return E.reshape(x, s)


def _transpose(E: Emitter, x: Any, d0: int, d1: int) -> Any:
    n = len(E.shape(x))
    perm = list(range(n))
    perm[d0 % n], perm[d1 % n] = perm[d1 % n], perm[d0 % n]
    return E.permute(x, perm)


def _t(E: Emitter, x: Any) -> Any:
    return x if len(E.shape(x)) < 2 else _transpose(E, x, 0, 1)


def expand(E: Emitter, x: Any, size: Sequence[int], implicit: bool = False) -> Any:
    s = E.shape(x)
    off = len(size) - len(s)
    target = tuple(s[i - off] if d == -1 else int(d) for i, d in enumerate(size))
    return x if target == s else E.node("broadcast_to", x, shape=target)


def select(E: Emitter, x: Any, dim: int, index: int) -> Any:
    s = E.shape(x)
    i = index % s[dim % len(s)]
    return E.node("select", E.move_axis(x, dim, 0), index=i)


def slice_rule(
    E: Emitter, x: Any, dim: int = 0, start: Any = None, end: Any = None, step: int = 1
) -> Any:
    n = E.shape(x)[dim % len(E.shape(x))]
    rows = range(n)[slice(start, end, step)]

    def fn(v: Any) -> Any:
        if step == 1:
            return E.node("slice", v, start=rows.start, stop=max(rows.stop, rows.start))
        return E.node("index_select", v, indices=tuple(rows))

    return x if len(rows) == n and step == 1 else E.on_axis(x, dim, 0, fn)


def cat(E: Emitter, xs: Sequence[Any], dim: int = 0) -> Any:
    xs = [x for x in xs if int(np.prod(E.shape(x))) or len(E.shape(x)) != 1]
    n = len(E.shape(xs[0]))
    moved = [E.move_axis(x, dim, 0) for x in xs]
    return E.move_axis(E.node("concat", *moved), 0, dim % n)


def _stack(E: Emitter, xs: Sequence[Any], dim: int = 0) -> Any:
    return cat(E, [_unsqueeze(E, x, dim) for x in xs], dim)


def _split_sizes(E: Emitter, x: Any, sizes: Sequence[int], dim: int = 0) -> tuple[Any, ...]:
    """torch.split with sizes: one table `narrow` per piece (`spec.ops.shape.split_ranges`)."""
    s = E.shape(x)
    d = axis_of(dim, len(s), "split dim")
    pieces = split_ranges("aten.split", s[d], [int(k) for k in sizes])
    return tuple(E.node("narrow", x, dim=d, start=st, length=k) for st, k in pieces)


def _split(E: Emitter, x: Any, size: Any, dim: int = 0) -> tuple[Any, ...]:
    if not isinstance(size, int):
        return _split_sizes(E, x, size, dim)
    s = E.shape(x)
    d = axis_of(dim, len(s), "split dim")
    return _split_sizes(E, x, [k for _, k in split_ranges("aten.split", s[d], size)], d)


def _chunk(E: Emitter, x: Any, chunks: int, dim: int = 0) -> tuple[Any, ...]:
    n = E.shape(x)[dim % len(E.shape(x))]
    return _split(E, x, -(-n // chunks), dim)


def _unbind(E: Emitter, x: Any, dim: int = 0) -> tuple[Any, ...]:
    return tuple(select(E, x, dim, i) for i in range(E.shape(x)[dim % len(E.shape(x))]))


def index_select(E: Emitter, x: Any, dim: int, index: Any) -> Any:
    idx = tuple(int(i) for i in E.static_ints(index, "the index").reshape(-1))
    return E.on_axis(x, dim, 0, lambda v: E.node("index_select", v, indices=idx))


def embedding(E: Emitter, w: Any, ids: Any, padding_idx: int = -1, *a: Any, **k: Any) -> Any:
    idx = E.static_ints(ids, "embedding ids")
    flat = tuple(int(i) for i in idx.reshape(-1))
    return E.node("embedding", w, indices=flat, shape=tuple(idx.shape))


def _gather(E: Emitter, x: Any, dim: int, index: Any, sparse_grad: bool = False) -> Any:
    """torch.gather: x moved so `dim` is last and flattened; the table's last-axis gather
    with flat indices (row offset + index), then moved back."""
    n = len(E.shape(x))
    idx = np.moveaxis(E.static_ints(index, "the index"), dim % n, -1)
    xm = E.move_axis(x, dim, -1)
    s = E.shape(xm)
    strides = np.cumprod((*s[1:], 1)[::-1])[::-1]
    pos = np.indices(idx.shape)
    flat = idx + sum(pos[d] * strides[d] for d in range(n - 1))
    y = E.node(
        "gather",
        E.reshape(xm, (int(np.prod(s)),)),
        indices=tuple(int(i) for i in flat.reshape(-1)),
        shape=tuple(idx.shape),
    )
    return E.move_axis(y, -1, dim)


# --------------------------------------------------------------------------- linalg, reduce
def _linear(E: Emitter, x: Any, w: Any, b: Any = None) -> Any:
    return E.linear(x, w, b)


def _addmm(E: Emitter, bias: Any, a: Any, b: Any, beta: Any = 1, alpha: Any = 1) -> Any:
    y = scalar_mul(E, E.matmul(a, b), alpha)
    return E.node("add", y, scalar_mul(E, bias, beta) if isinstance(bias, Dyn) else bias)


def _matmul(E: Emitter, a: Any, b: Any) -> Any:
    return E.matmul(a, b)


def _sum(E: Emitter, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return E.reduce("reduce_sum", x, [dim] if isinstance(dim, int) else dim, keepdim)


def _mean(E: Emitter, x: Any, dim: Any = None, keepdim: bool = False, dtype: Any = None) -> Any:
    return E.mean(x, [dim] if isinstance(dim, int) else dim, keepdim)


def _amax(E: Emitter, x: Any, dim: Any = (), keepdim: bool = False) -> Any:
    return E.reduce("reduce_max", x, [dim] if isinstance(dim, int) else dim, keepdim)


def _last_axis(op: str) -> Rule:
    def rule(E: Emitter, x: Any, dim: int, *_: Any, **__: Any) -> Any:
        return E.on_axis(x, dim, -1, lambda v: E.node(op, v))

    return rule


# --------------------------------------------------------------------------- model-scale
STATS = "mean/rstd outputs (the table's norms return only y)"


def _layer_norm(
    E: Emitter,
    x: Any,
    nshape: Sequence[int],
    w: Any = None,
    b: Any = None,
    eps: float = 1e-5,
    cudnn: bool = True,
) -> Any:
    return E.layer_norm(x, w, b, nshape, eps)


def _native_layer_norm(
    E: Emitter, x: Any, nshape: Any, w: Any, b: Any, eps: float
) -> tuple[Any, ...]:
    p = Poison("aten.native_layer_norm (statistics outputs)", STATS)
    return E.layer_norm(x, w, b, nshape, eps), p, p


def batch_norm(
    E: Emitter,
    x: Any,
    w: Any,
    b: Any,
    mean: Any,
    var: Any,
    training: bool,
    momentum: Any,
    eps: float,
    *_: Any,
) -> Any:
    if mean is None and var is None:  # batch statistics in every mode, no state
        return batch_stats_norm(E, x, w, b, eps)
    if training:
        raise Unsupported("training-mode batch norm (export the model in eval mode)")
    if mean is None or var is None:
        raise Unsupported("batch norm with only one of the running statistics")
    return bn_eval(E, x, w, b, mean, var, eps)


def bn_eval(E: Emitter, x: Any, w: Any, b: Any, mean: Any, var: Any, eps: float) -> Any:
    """Evaluation-mode batch norm: the table's `batch_norm_eval` (any rank >= 2) when weight
    and bias are given and eps > 0, else the emitter's inline form (same operations)."""
    if w is not None and b is not None and eps > 0 and len(E.shape(x)) >= 2:
        return E.node("batch_norm_eval", x, mean, var, w, b, eps=Fraction(float(eps)))
    return E.batch_norm_eval(x, w, b, mean, var, eps)


def _bn_no_training(
    E: Emitter, x: Any, w: Any, b: Any, mean: Any, var: Any, momentum: Any, eps: float
) -> tuple[Any, ...]:
    p = Poison("aten._native_batch_norm_legit_no_training (statistics outputs)", STATS)
    return bn_eval(E, x, w, b, mean, var, eps), p, p


def native_batch_norm(
    E: Emitter,
    x: Any,
    w: Any,
    b: Any,
    mean: Any,
    var: Any,
    training: bool,
    momentum: Any,
    eps: float,
) -> tuple[Any, ...]:
    p = Poison("aten.native_batch_norm (statistics outputs)", STATS)
    return batch_norm(E, x, w, b, mean, var, training, momentum, eps), p, p


def _loss_args(weight: Any, reduction: int, ignore_index: int, target: Any) -> str:
    if weight is not None:
        raise Unsupported("class weights")
    if isinstance(target, Static) and is_float(target.value):
        raise Unsupported("probability targets (class ids are mapped)")
    return REDUCTIONS[reduction]


def _cross_entropy(
    E: Emitter,
    x: Any,
    t: Any,
    weight: Any = None,
    reduction: int = 1,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
) -> Any:
    if label_smoothing:
        raise Unsupported("label_smoothing")
    return E.cross_entropy(
        x, t, _loss_args(weight, reduction, ignore_index, t), ignore_index=ignore_index
    )


def _nll_loss(
    E: Emitter, x: Any, t: Any, weight: Any = None, reduction: int = 1, ignore_index: int = -100
) -> Any:
    red = _loss_args(weight, reduction, ignore_index, t)
    return E.cross_entropy(x, t, red, log_probs=True, ignore_index=ignore_index)


def _nll_loss_forward(E: Emitter, *args: Any) -> tuple[Any, Any]:
    return _nll_loss(E, *args), Poison("aten.nll_loss_forward (total_weight output)")


def _mse_loss(E: Emitter, x: Any, t: Any, reduction: int = 1) -> Any:
    rules = {
        "mean": lambda: E.node("mse_loss", x, t),
        "sum": lambda: E.node("sum", E.node("mul", E.node("sub", x, t), E.node("sub", x, t))),
        "none": lambda: E.node("mul", E.node("sub", x, t), E.node("sub", x, t)),
    }
    return rules[REDUCTIONS[reduction]]()


def _sdpa(
    E: Emitter,
    q: Any,
    k: Any,
    v: Any,
    attn_mask: Any = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: Any = None,
    enable_gqa: bool = False,
) -> Any:
    if dropout_p or enable_gqa:
        raise Unsupported("dropout_p > 0 or enable_gqa")
    attrs: dict[str, Any] = {"causal": int(bool(is_causal))}
    if scale is not None:
        attrs["scale"] = Fraction(scale)
    if attn_mask is not None and not (
        isinstance(attn_mask, Static) and attn_mask.value.dtype == np.bool_
    ):
        return sdpa_additive(E, q, k, v, attn_mask, bool(is_causal), scale)
    if attn_mask is not None:
        lq, lk = E.shape(q)[-2], E.shape(k)[-2]
        m = np.broadcast_to(attn_mask.value, (*attn_mask.value.shape[:-2], lq, lk))
        if m.ndim > 2 and not all((m == m.reshape(-1, lq, lk)[0]).reshape(-1)):
            raise Unsupported("an attention mask that varies over batch or heads")
        attrs["mask"] = tuple(int(b) for b in m.reshape(-1, lq, lk)[0].reshape(-1))
    return E.node("scaled_dot_product_attention", q, k, v, **attrs)


def _roll(E: Emitter, x: Any, shifts: Any, dims: Any = ()) -> Any:
    """torch.roll as the table's `roll` (without dims: over the flattened tensor)."""
    sh = [shifts] if isinstance(shifts, int) else list(shifts)
    ds = [dims] if isinstance(dims, int) else list(dims)
    n = len(E.shape(x))
    if not ds:
        return E.node("roll", x, shifts=tuple(int(k) for k in sh))
    return E.node(
        "roll",
        x,
        shifts=tuple(int(k) for k in sh),
        dims=tuple(axis_of(d, n, "roll dim") for d in ds),
    )


def _flip(E: Emitter, x: Any, dims: Any) -> Any:
    n = len(E.shape(x))
    return E.node("flip", x, dims=tuple(axes_of(list(dims), n, "flip dims")))


def _repeat(E: Emitter, x: Any, repeats: Any) -> Any:
    """Tensor.repeat(*sizes) (len(sizes) >= rank) as the table's `tile`."""
    reps = [int(r) for r in repeats]
    if len(reps) < len(E.shape(x)):
        raise Unsupported(f"repeat with {len(reps)} sizes for rank {len(E.shape(x))}")
    return E.node("tile", x, dims=tuple(reps))


def _repeat_interleave(
    E: Emitter, x: Any, repeats: Any, dim: Any = None, output_size: Any = None
) -> Any:
    reps = [repeats] if isinstance(repeats, int) else E.static_ints(repeats, "repeats").tolist()
    attrs: dict[str, Any] = {"repeats": tuple(int(r) for r in reps)}
    if dim is not None:
        attrs["dim"] = axis_of(dim, len(E.shape(x)), "repeat_interleave dim")
    return E.node("repeat_interleave", x, **attrs)


def _cumsum(E: Emitter, x: Any, dim: int, dtype: Any = None) -> Any:
    if dtype is not None:
        raise Unsupported("cumsum with a dtype cast")
    return E.node("cumsum", x, dim=axis_of(dim, len(E.shape(x)), "cumsum dim"))


def _getitem(E: Emitter, xs: Any, i: int) -> Any:
    return xs[i]


ATEN: dict[str, Rule] = {
    # elementwise
    "aten.add": _add,
    "aten.sub": _sub,
    "aten.rsub": _rsub,
    "aten.mul": _binary("mul"),
    "aten.div": _div,
    "aten.maximum": _binary("maximum"),
    "aten.minimum": _binary("minimum"),
    "aten.neg": _unary("neg"),
    "aten.relu": _unary("relu"),
    "aten.abs": _unary("abs"),
    "aten.sqrt": _unary("sqrt"),
    "aten.rsqrt": lambda E, x: E.node("inv", E.node("sqrt", x)),
    "aten.reciprocal": _unary("inv"),
    "aten.exp": _unary("exp"),
    "aten.log": _unary("log"),
    "aten.tanh": _unary("tanh"),
    "aten.sin": _unary("sin"),
    "aten.cos": _unary("cos"),
    "aten.sigmoid": _unary("sigmoid"),
    "aten.silu": _unary("silu"),
    "aten.softplus": _softplus,
    "aten.gelu": gelu,
    "aten.clamp": clamp,
    "aten.clamp_min": lambda E, x, m: clamp(E, x, m, None),
    "aten.clamp_max": lambda E, x, m: clamp(E, x, None, m),
    "aten.hardtanh": _hardtanh,
    "aten.relu6": lambda E, x: _hardtanh(E, x, 0, 6),
    "aten.hardsigmoid": table_unary("hardsigmoid"),
    "aten.hardswish": table_unary("hardswish"),
    "aten.erf": table_unary("erf"),
    "aten.log1p": table_unary("log1p"),
    "aten.expm1": table_unary("expm1"),
    "aten.sign": table_unary("sign"),
    "aten.leaky_relu": leaky_relu,
    "aten.elu": elu,
    "aten.pow": pow_rule,
    "aten.prelu": prelu_rule,
    "aten._prelu_kernel": prelu_rule,
    "aten.where": where_rule,
    "aten.square": lambda E, x: E.node("mul", x, x),
    "aten.detach": _unary("detach"),
    "aten.dropout": _dropout,
    "aten.feature_dropout": _dropout,
    "aten.native_dropout": _native_dropout,
    "aten.alias": _identity,
    "aten.clone": _identity,
    "aten.contiguous": _identity,
    "aten.lift_fresh_copy": _identity,
    "aten._to_copy": _to_copy,
    "aten.to": lambda E, x, *a, **k: _to_copy(
        E, x, next((v for v in (*a, *k.values()) if hasattr(v, "is_floating_point")), None)
    ),
    # shape
    "aten.view": view,
    "aten.reshape": view,
    "aten._unsafe_view": view,
    "aten.flatten": _flatten,
    "aten.unflatten": _unflatten,
    "aten.squeeze": squeeze,
    "aten.unsqueeze": _unsqueeze,
    "aten.permute": lambda E, x, dims: E.permute(x, dims),
    "aten.transpose": _transpose,
    "aten.t": _t,
    "aten.expand": expand,
    "aten.select": select,
    "aten.slice": slice_rule,
    "aten.cat": cat,
    "aten.concat": cat,
    "aten.stack": _stack,
    "aten.split": _split,
    "aten.split_with_sizes": _split_sizes,
    "aten.chunk": _chunk,
    "aten.unbind": _unbind,
    "aten.index_select": index_select,
    "aten.embedding": embedding,
    "aten.gather": _gather,
    "aten.index": index,
    "aten.slice_scatter": slice_scatter,
    "aten.select_scatter": select_scatter,
    "aten.copy": copy,
    "aten.roll": _roll,
    "aten.flip": _flip,
    "aten.repeat": _repeat,
    "aten.repeat_interleave": _repeat_interleave,
    "aten.cumsum": _cumsum,
    # linalg, reduce, softmax
    "aten.linear": _linear,
    "aten.matmul": _matmul,
    "aten.mm": _matmul,
    "aten.bmm": _matmul,
    "aten.addmm": _addmm,
    "aten.sum": _sum,
    "aten.mean": _mean,
    "aten.amax": _amax,
    "aten.softmax": _last_axis("softmax"),
    "aten._softmax": _last_axis("softmax"),
    "aten.log_softmax": _last_axis("log_softmax"),
    "aten._log_softmax": _last_axis("log_softmax"),
    # model-scale
    "aten.layer_norm": _layer_norm,
    "aten.native_layer_norm": _native_layer_norm,
    "aten.batch_norm": batch_norm,
    "aten._native_batch_norm_legit_no_training": _bn_no_training,
    "aten.native_batch_norm": native_batch_norm,
    "aten.cross_entropy_loss": _cross_entropy,
    "aten.nll_loss": _nll_loss,
    "aten.nll_loss_nd": _nll_loss,
    "aten.nll_loss_forward": _nll_loss_forward,
    "aten.mse_loss": _mse_loss,
    "aten.scaled_dot_product_attention": _sdpa,
    "getitem": _getitem,
    **WINDOW_RULES,  # conv, pool and pad families (aten_windows)
    **MODEL_RULES,  # no-op checks and compositions real models use (aten_models)
}
"""ATen op packet -> rule (see the module docstring); docs/INTEROP.md lists it."""
