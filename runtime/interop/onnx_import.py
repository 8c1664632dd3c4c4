"""ONNX import: an ONNX model mapped, node by node, onto the op table.

Invariants:
- `ONNX_OPS` is the mapping: ONNX op type -> rule(E, inputs, attrs, opset). `inputs` are
  the node's inputs (`Dyn` graph values, `Static` arrays, None for an omitted optional
  input), `attrs` its attributes as Python values plus `_outputs` (the node's output
  count); the rule reads the form of the model's opset and returns the output value (or
  a tuple, one per output) built from table ops only, raises `Unsupported` (collected and
  reported together) or `InvalidModelError` (the model is outside the op's schema: raised
  at once). Rules live here, in `onnx_nn` and in `onnx_seq`.
- The model is loaded and validated first (`onnx_load`: bounded reading, confined
  external data, checker, strict shape inference, size caps); nothing is imported from a
  model that fails.
- A node whose inputs are all known at import time (initializers of integer type,
  Constant nodes, shape computations, integer model inputs) is evaluated at import time by
  the ONNX reference evaluator (`onnx.reference`), after its output size is checked
  against the caps (`STATIC_SIZE`, Loop trip counts), and stays `Static`.
- Graph inputs, in this order: the model's float runtime inputs, its float initializers,
  then float constants of more than `LARGE_CONST` elements computed at import time, each
  named by its ONNX name. Integer inputs are static (`Imported.int_inputs`; zeros unless
  given).
- Runtime input values: `inputs[name]` when given, else seeded standard normal draws
  (NumPy generator with seed 0) of the declared shape (checked against the caps before it
  is drawn); a symbolic dimension needs a given input; an unknown name is refused.
onnx is imported inside the functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import TorchLeanError
from spec.ops import OPS

from . import aten as ar
from . import limits
from .aten import Poison
from .aten_models import batch_stats_norm
from .core import (
    Dyn,
    Emitter,
    InvalidModelError,
    ModelImportError,
    Static,
    Unsupported,
    axes_of,
    axis_of,
    is_float,
)
from .imported import Imported
from .limits import LimitError
from .onnx_grad import GRADIENT, GradValue, gradient_step
from .onnx_load import load_onnx, validate
from .onnx_nn import NN_OPS, opt, static, table_op
from .onnx_seq import SEQ_OPS, Seq

__all__ = ["ONNX_OPS", "from_onnx"]

OnnxRule = Callable[[Emitter, list[Any], dict[str, Any], int], Any]


def _axes(xs: list[Any], a: dict[str, Any], v: int, since: int, k: int = 1) -> list[int] | None:
    """Axes as the `axes` attribute (opset < `since`) or the k-th input (opset >= since)."""
    if v < since:
        return [int(i) for i in a["axes"]] if "axes" in a else None
    if opt(xs, k) is not None:
        return [int(i) for i in static(xs[k], "axes").reshape(-1)]
    return None


def _unary(op: str) -> OnnxRule:
    return lambda E, xs, a, v: E.node(op, xs[0])


def _binary(op: str) -> OnnxRule:
    return lambda E, xs, a, v: E.node(op, xs[0], xs[1])


def _gemm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, w, c = [*xs, None][:3]
    alpha, beta = a.get("alpha", 1.0), a.get("beta", 1.0)
    if a.get("transA", 0):
        x = E.permute(x, (1, 0))
    if a.get("transB", 0) and alpha == 1 and beta == 1 and c is not None:
        if E.shape(c) == (E.shape(w)[0],):
            return E.node("linear", x, w, c)
    w = E.permute(w, (1, 0)) if a.get("transB", 0) else w
    y = ar.scalar_mul(E, E.matmul(x, w), alpha)
    if c is None:
        return y
    return E.node("add", y, ar.scalar_mul(E, c, beta) if isinstance(c, Dyn) else c)


def _reshape(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = E.shape(xs[0])
    shape = [int(d) for d in (a["shape"] if v < 5 else static(xs[1], "the target shape"))]
    if not a.get("allowzero", 0):
        shape = [s[i] if d == 0 else d for i, d in enumerate(shape)]
    if shape.count(-1) > 1 or min(shape, default=0) < -1:
        raise InvalidModelError(f"Reshape target {shape}")
    total = int(np.prod(s))
    known = int(np.prod([d for d in shape if d != -1]))
    if (-1 in shape and (known == 0 or total % known)) or (-1 not in shape and known != total):
        raise InvalidModelError(f"Reshape of {list(s)} to {shape}")
    return ar.view(E, xs[0], shape)


def _flatten(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = E.shape(xs[0])
    k = int(a.get("axis", 1))
    if not -len(s) <= k <= len(s):
        raise InvalidModelError(f"Flatten axis {k} is out of range for rank {len(s)}")
    k = k + len(s) if k < 0 else k
    return E.reshape(xs[0], (int(np.prod(s[:k])), int(np.prod(s[k:]))))


def _squeeze(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = E.shape(xs[0])
    axes = _axes(xs, a, v, 13)
    if axes is None:
        drop = {i for i, d in enumerate(s) if d == 1}
    else:
        drop = set(axes_of(axes, len(s), "Squeeze axes"))
        bad = [i for i in sorted(drop) if s[i] != 1]
        if bad:
            raise InvalidModelError(f"Squeeze of axis {bad[0]} of size {s[bad[0]]} (must be 1)")
    return E.reshape(xs[0], tuple(d for i, d in enumerate(s) if i not in drop))


def _unsqueeze(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    axes = _axes(xs, a, v, 13)
    if axes is None:
        raise InvalidModelError("Unsqueeze without axes")
    s = list(E.shape(xs[0]))
    for ax in sorted(axes_of(axes, len(s) + len(axes), "Unsqueeze axes")):
        s.insert(ax, 1)
    return E.reshape(xs[0], s)


def _transpose(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    n = len(E.shape(xs[0]))
    perm = [int(p) for p in a.get("perm", list(range(n))[::-1])]
    if sorted(perm) != list(range(n)):
        raise InvalidModelError(f"Transpose perm {perm} is not a permutation of rank {n}")
    return E.permute(xs[0], perm)


def _slice(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Slice per opset: `starts` / `ends` / `axes` attributes (< 10), inputs (10+) with
    steps; starts and ends clamped as ONNX (and Python) slicing does."""
    x = xs[0]
    n = len(E.shape(x))
    if v < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = static(xs[1], "starts").reshape(-1).tolist()
        ends = static(xs[2], "ends").reshape(-1).tolist()
        axes = _axes(xs, {}, v, 10, 3) or list(range(len(starts)))
        st = opt(xs, 4)
        steps = static(st, "steps").reshape(-1).tolist() if st is not None else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidModelError(f"Slice: starts {starts}, ends {ends}, axes {axes}, steps {steps}")
    for ax, b, e, step in zip(axes_of(axes, n, "Slice axes"), starts, ends, steps, strict=True):
        if int(step) == 0:
            raise InvalidModelError("Slice step 0")
        d = E.shape(x)[ax]
        if not len(range(d)[slice(int(b), int(e), int(step))]):
            raise Unsupported("a slice with no elements (empty tensors)")
        x = ar.slice_rule(E, x, ax, int(b), int(e), int(step))
    return x


def _gather(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, idx = xs
    s = E.shape(x)
    axis = axis_of(a.get("axis", 0), len(s), "Gather axis")
    ids = E.static_ints(idx, "gather indices")
    d = s[axis]
    if ids.size and (ids.min() < -d or ids.max() >= d):
        raise InvalidModelError(f"Gather index out of range [-{d}, {d - 1}] on axis {axis}")
    ids = np.where(ids < 0, ids + d, ids)
    if ids.ndim == 0:
        return ar.select(E, x, axis, int(ids))
    if axis == 0 and len(s) == 2:
        return ar.embedding(E, x, Static(ids))
    y = ar.index_select(E, x, axis, Static(ids.reshape(-1)))
    return _gather_nd_axis(E, E.move_axis(y, axis, 0), ids, axis)


def _gather_nd_axis(E: Emitter, moved: Any, ids: np.ndarray, axis: int) -> Any:
    ms = E.shape(moved)
    y = E.reshape(moved, (*ids.shape, *ms[1:]))
    k = ids.ndim
    n = len(E.shape(y))
    perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, n))
    return E.permute(y, perm)


def _softmax(op: str) -> OnnxRule:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        s = E.shape(xs[0])
        n = len(s)
        axis = axis_of(a.get("axis", -1 if v >= 13 else 1), n, f"{op} axis")
        if v >= 13:
            return E.on_axis(xs[0], axis, -1, lambda t: E.node(op, t))
        # opset < 13: the input coerced to 2-D (axes before `axis`, axes from it)
        flat = E.reshape(xs[0], (int(np.prod(s[:axis])), int(np.prod(s[axis:]))))
        return E.reshape(E.node(op, flat), s)

    return rule


def _reduce(kind: str, since: int) -> OnnxRule:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        axes = _axes(xs, a, v, since)
        x = xs[0]
        if not axes:
            if a.get("noop_with_empty_axes", 0):
                return x
            axes = None
        keep = bool(a.get("keepdims", 1))
        if kind == "mean":
            return E.mean(x, axes, keep)
        if kind == "reduce_min":
            return E.node("neg", E.reduce("reduce_max", E.node("neg", x), axes, keep))
        if kind in ("l2", "sum_square"):
            ss = E.reduce("reduce_sum", E.node("mul", x, x), axes, keep)
            return E.node("sqrt", ss) if kind == "l2" else ss
        return E.reduce(kind, x, axes, keep)

    return rule


def _conv_t(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if "output_shape" in a:
        raise Unsupported("output_shape (give pads and output_padding)")
    if len(E.shape(xs[1])) != 4:
        raise Unsupported("a transposed convolution that is not 2-D")
    group = int(a.get("group", 1))
    if group < 1:
        raise InvalidModelError(f"ConvTranspose group={group} (must be >= 1)")
    p = [int(t) for t in a.get("pads", [0] * 4)]
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or p[:2] != p[2:]:
        raise Unsupported(f"auto_pad or asymmetric pads {p}")
    return E.node(
        "conv_transpose2d",
        *[x for x in xs if x is not None],
        stride=tuple(a.get("strides", (1, 1))),
        padding=tuple(p[:2]),
        dilation=tuple(a.get("dilations", (1, 1))),
        output_padding=tuple(a.get("output_padding", (0, 0))),
        groups=group,
    )


def _batch_norm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Eval form: the running statistics normalise. `training_mode=1` (14+) normalises by
    the statistics of the input itself (mean and biased variance per channel), which is
    what Y is in that mode (weight standardisation exports it); its running-statistics
    outputs are not modelled (unusable)."""
    if v < 7 and not a.get("is_test", 0):
        raise InvalidModelError("BatchNormalization with is_test=0 (the opset < 7 training form)")
    if v < 9 and not a.get("spatial", 1):
        raise Unsupported("spatial=0 (per-activation statistics)")
    x, w, b, mean, var = xs[:5]
    eps = a.get("epsilon", 1e-5)
    extra = a["_outputs"] - 1
    stats = [ar.Poison("BatchNormalization (running statistics outputs)")] * extra
    if a.get("training_mode", 0):
        return (batch_stats_norm(E, x, w, b, float(eps)), *stats)
    if eps > 0 and len(E.shape(x)) >= 2:  # any rank: (N, C), (N, C, L), ..., (N, C, D, H, W)
        y = E.node("batch_norm_eval", x, mean, var, w, b, eps=Fraction(float(eps)))
    else:
        y = E.batch_norm_eval(x, w, b, mean, var, eps)
    return (y, *stats)


def _layer_norm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, w, b = [*xs, None, None][:3]
    s = E.shape(x)
    axis = axis_of(a.get("axis", -1), len(s), "LayerNormalization axis")
    if a.get("stash_type", 1) not in (1, 11):
        raise Unsupported(f"stash_type {a['stash_type']} (statistics are in the run's dtype)")
    p = ar.Poison("LayerNormalization (mean / inv_std_dev outputs)")
    return E.layer_norm(x, w, b, s[axis:], a.get("epsilon", 1e-5)), p, p


def _sce_loss(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, t = xs[0], xs[1]
    if opt(xs, 2) is not None:
        raise Unsupported("class weights")
    ignore = a.get("ignore_index")
    labels = E.static_ints(t, "labels")
    if ignore is not None and np.any(labels == ignore):
        raise Unsupported(f"labels equal to ignore_index={ignore}")
    c = E.shape(x)[-1] if len(E.shape(x)) == 1 else E.shape(x)[1]
    if labels.size and (labels.min() < 0 or labels.max() >= c):
        raise InvalidModelError(f"labels out of range [0, {c - 1}]")
    loss = E.cross_entropy(x, t, a.get("reduction", "mean"))
    return loss, ar.Poison("SoftmaxCrossEntropyLoss (log_prob output)")


def _nll_loss(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if opt(xs, 2) is not None:
        raise Unsupported("class weights")
    return E.cross_entropy(xs[0], xs[1], a.get("reduction", "mean"), log_probs=True)


def _dropout(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Dropout per opset: `is_test` attribute (< 7; 0 means training), always inference
    (7-11), `training_mode` input (12+)."""
    if v < 7 and not a.get("is_test", 0):
        raise InvalidModelError("Dropout with is_test=0 (training mode; export in eval mode)")
    train = opt(xs, 2) if v >= 12 else None
    if train is not None and bool(static(train, "training_mode").reshape(-1)[0]):
        raise InvalidModelError("Dropout with training_mode=1 (export in eval mode)")
    extra = a["_outputs"] - 1
    return (xs[0], *[ar.Poison("Dropout (mask output)")] * extra)


def _clip(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Clip per opset: `min` / `max` attributes (< 11), optional inputs (11+); min > max
    gives max everywhere, as ONNX defines."""
    x = xs[0]
    if v < 11:
        lo, hi = a.get("min"), a.get("max")
    else:
        lo, hi = opt(xs, 1), opt(xs, 2)
        lo = float(static(lo, "min").reshape(-1)[0]) if isinstance(lo, Static) else lo
        hi = float(static(hi, "max").reshape(-1)[0]) if isinstance(hi, Static) else hi
    if isinstance(lo, float) and isinstance(hi, float) and lo <= hi:
        return E.node("clamp", x, lo=Fraction(lo), hi=Fraction(hi))
    if lo is not None:
        x = E.node("maximum", x, lo)
    if hi is not None:
        x = E.node("minimum", x, hi)
    return x


def _cast(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    import onnx

    to = a["to"]
    if isinstance(to, str) or not np.issubdtype(
        onnx.helper.tensor_dtype_to_np_dtype(int(to)), np.floating
    ):
        raise Unsupported("cast of a float value to a non-float type")
    return xs[0]


def _shape(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = np.asarray(E.shape(xs[0]), dtype=np.int64)
    return Static(s[a.get("start", 0) : a.get("end", len(s))])


def _expand(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    want = tuple(int(d) for d in static(xs[1], "shape").reshape(-1))
    try:
        target = np.broadcast_shapes(E.shape(xs[0]), want)
    except ValueError as e:
        raise InvalidModelError(f"Expand of {list(E.shape(xs[0]))} to {list(want)}") from e
    limits.check_elements(target, "Expand output")
    return ar.expand(E, xs[0], target)


def _gelu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    approx = a.get("approximate", "none")
    if approx == "tanh":
        return E.node("gelu", xs[0], approximate="tanh")
    if approx != "none":
        raise InvalidModelError(f"Gelu approximate={approx!r}")
    if "erf" in OPS:
        return table_op(E, "gelu", xs[0], approximate="none")
    raise Unsupported("erf form (approximate='none'); the table's gelu is the tanh form")


def _concat(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if "axis" not in a:
        raise InvalidModelError("Concat without axis")
    axis_of(a["axis"], len(E.shape(xs[0])), "Concat axis")
    return ar.cat(E, xs, a["axis"])


ONNX_OPS: dict[str, OnnxRule] = {
    "Add": _binary("add"),
    "Sub": _binary("sub"),
    "Mul": _binary("mul"),
    "Div": _binary("div"),
    "Neg": _unary("neg"),
    "Relu": _unary("relu"),
    "Abs": _unary("abs"),
    "Sqrt": _unary("sqrt"),
    "Reciprocal": _unary("inv"),
    "Exp": _unary("exp"),
    "Log": _unary("log"),
    "Tanh": _unary("tanh"),
    "Sin": _unary("sin"),
    "Cos": _unary("cos"),
    "Sigmoid": _unary("sigmoid"),
    "Softplus": _unary("softplus"),
    "Gelu": _gelu,
    "Clip": _clip,
    "Identity": lambda E, xs, a, v: xs[0],
    "Dropout": _dropout,
    "Cast": _cast,
    "Shape": _shape,
    "Gemm": _gemm,
    "MatMul": lambda E, xs, a, v: E.matmul(xs[0], xs[1]),
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze,
    "Transpose": _transpose,
    "Expand": _expand,
    "Slice": _slice,
    "Concat": _concat,
    "Gather": _gather,
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    "ReduceSum": _reduce("reduce_sum", 13),
    "ReduceMean": _reduce("mean", 18),
    "ReduceMax": _reduce("reduce_max", 18),
    "ReduceMin": _reduce("reduce_min", 18),
    "ReduceSumSquare": _reduce("sum_square", 18),
    "ReduceL2": _reduce("l2", 18),
    "ConvTranspose": _conv_t,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    "SoftmaxCrossEntropyLoss": _sce_loss,
    "NegativeLogLikelihoodLoss": _nll_loss,
    **NN_OPS,
    **SEQ_OPS,
}
"""ONNX op type -> rule (see the module docstring); docs/INTEROP.md lists it."""

STATIC_SIZE: dict[str, Callable[[list[Any], dict[str, Any]], list[int]]] = {
    "Expand": lambda xs, a: list(
        np.broadcast_shapes(np.shape(xs[0]), tuple(np.asarray(xs[1]).reshape(-1).tolist()))
    ),
    "ConstantOfShape": lambda xs, a: np.asarray(xs[0]).reshape(-1).tolist(),
    "Tile": lambda xs, a: (np.array(np.shape(xs[0])) * np.asarray(xs[1]).reshape(-1)).tolist(),
    "Range": lambda xs, a: [
        max(int(np.ceil((float(xs[1]) - float(xs[0])) / float(xs[2]))), 0) if float(xs[2]) else 0
    ],
}
"""Output shapes of import-time ops whose size the data decides, checked against the caps
before `onnx.reference` evaluates them."""


# --------------------------------------------------------------------------- the walker
def _runtime_inputs(m: Any, given: Mapping[str, Any]) -> dict[str, np.ndarray]:
    import onnx

    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    out: dict[str, np.ndarray] = {}
    total = 0
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        want = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
        if vi.name in given:
            arr = np.asarray(given[vi.name])
            total += limits.check_elements(arr.shape, f"input {vi.name!r}")
            if arr.dtype.kind not in "biuf":
                raise ModelImportError(f"input {vi.name!r}: dtype {arr.dtype} (real numbers)")
            if len(want) != arr.ndim or any(
                w not in (None, g) for w, g in zip(want, arr.shape, strict=True)
            ):
                raise ModelImportError(
                    f"input {vi.name!r}: expected shape {want}, got {list(arr.shape)}"
                )
            out[vi.name] = arr.astype(dt)
            continue
        dims = tuple(int(d) for d in want if d is not None)
        if len(dims) != len(want):
            raise ModelImportError(f"input {vi.name!r} has a symbolic dimension; pass inputs=")
        total += limits.check_elements(dims, f"default input {vi.name!r}")
        limits.check_total(total, "the model's inputs")
        fill = rng.standard_normal(dims) if np.issubdtype(dt, np.floating) else np.zeros(dims)
        out[vi.name] = np.asarray(fill).astype(dt)
    limits.check_total(total, "the model's inputs")
    return out


def _static_eval(node: Any, xs: list[Any], opset: int) -> Any:
    from onnx.reference import ReferenceEvaluator

    feeds = {n: x.value for n, x in zip(node.input, xs, strict=True) if n and x is not None}
    vals = [x.value if isinstance(x, Static) else None for x in xs]
    size = STATIC_SIZE.get(node.op_type)
    if size is not None:
        limits.check_elements(size(vals, {}), f"{node.op_type} output")
    if node.op_type == "Loop":
        trips = vals[0] if vals else None
        if trips is None:
            raise Unsupported("a Loop without a trip count (unbounded)")
        limits.check_trips(int(np.asarray(trips).reshape(-1)[0]), "Loop")
    res = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    out = []
    for r in res:
        if not isinstance(r, np.ndarray | np.generic):
            raise Unsupported(f"an import-time value of type {type(r).__name__} (not a tensor)")
        limits.check_elements(np.shape(r), f"{node.op_type} output")
        out.append(Static(np.asarray(r)))
    return tuple(out)


def _attrs(node: Any, n_out: int) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    out: dict[str, Any] = {"_outputs": n_out}
    for at in node.attribute:
        val = onnx.helper.get_attribute_value(at)
        if isinstance(val, onnx.TensorProto):
            val = numpy_helper.to_array(val)
        elif isinstance(val, bytes):
            val = val.decode()
        out[at.name] = val
    return out


def _fail(E: Emitter, node: Any, why: str, shapes: Mapping[str, tuple[int, ...]]) -> Any:
    E.fail(node.op_type, why)
    return _stand_ins(E, node, shapes)


def _step(
    E: Emitter, node: Any, xs: list[Any], opset: int, shapes: Mapping[str, tuple[int, ...]]
) -> tuple[Any, ...]:
    if any(isinstance(x, GradValue) for x in xs):
        E.fail(
            GRADIENT,
            f"an output read by {node.op_type} (gradients are model outputs only: using one "
            "in the graph, higher order included, needs a symbolic VJP graph)",
        )
        return _stand_ins(E, node, shapes)
    poisons = [x for x in xs if isinstance(x, Poison)]
    if poisons:
        for p in poisons:
            if p.name is not None:
                E.fail(p.name, p.why)
        if node.op_type not in ONNX_OPS:
            E.fail(node.op_type)
        return _stand_ins(E, node, shapes)
    seq = node.op_type in SEQ_OPS
    if not seq and any(isinstance(x, Seq) for x in xs):
        return _fail(E, node, "a sequence operand", shapes)
    if not seq and not any(isinstance(x, Dyn) for x in xs) and node.op_type != "Shape":
        try:
            return _static_eval(node, xs, opset)
        except (Unsupported, KeyError, TypeError, ValueError, IndexError, RuntimeError) as e:
            return _fail(
                E, node, f"evaluation at import time failed: {type(e).__name__}: {e}", shapes
            )
    rule = ONNX_OPS.get(node.op_type)
    if rule is None:
        return _fail(E, node, "no mapping", shapes)
    try:
        out = rule(E, xs, _attrs(node, len(node.output)), opset)
    except InvalidModelError as e:
        raise InvalidModelError(f"ONNX node {node.op_type} {node.name!r}: {e}") from e
    except LimitError:
        raise
    except (Unsupported, TypeError, KeyError, IndexError, ValueError, TorchLeanError) as e:
        return _fail(E, node, str(e).splitlines()[0] if str(e) else type(e).__name__, shapes)
    return out if isinstance(out, tuple) else (out,)


def _stand_ins(E: Emitter, node: Any, shapes: Mapping[str, tuple[int, ...]]) -> tuple[Any, ...]:
    """Stand-in values (inferred shapes) for a node that could not be mapped, so the nodes
    after it are still checked; the graph is never returned."""
    return tuple(E.stand_in(shapes[o]) if o in shapes else Poison() for o in node.output)


def _walker(
    E: Emitter, m: Any, opset: int, shapes: Mapping[str, tuple[int, ...]], folded: set[str]
) -> Callable[[Any, Mapping[str, Any]], tuple[Any, ...]]:
    """Emits one node of `m` (any domain), its inputs read from the given mapping; a node
    whose outputs were all computed at import time (`folded`) returns those values."""
    versions = {o.domain: o.version for o in m.opset_import}
    inits = {t.name for t in m.graph.initializer}
    free = {vi.name for vi in m.graph.input if vi.name not in inits}
    producers: dict[str, tuple[int, Any]] = {}

    def walk(node: Any, env: Mapping[str, Any]) -> tuple[Any, ...]:
        if node.output and all(o in folded for o in node.output if o):
            return tuple(env[o] if o else None for o in node.output)
        if node.domain in ("", "ai.onnx"):
            return _step(E, node, [env[i] for i in node.input], opset, shapes)
        if node.domain != "ai.onnx.preview.training" or node.op_type != "Gradient":
            E.fail(f"{node.domain}.{node.op_type}", "custom domain")
            return tuple(Poison() for _ in node.output)
        if not producers:
            producers.update((o, (k, n)) for k, n in enumerate(m.graph.node) for o in n.output)
        for p in (env[i] for i in node.input):
            if isinstance(p, Poison):  # an unmapped value upstream: already reported
                if p.name is not None:
                    E.fail(p.name, p.why)
                return tuple(Poison() for _ in node.output)
        ver = versions.get(node.domain, 0)
        try:
            return gradient_step(E, node, _attrs(node, 0), env, producers, free, ver, walk)
        except InvalidModelError as e:
            raise InvalidModelError(f"ONNX node {GRADIENT} {node.name!r}: {e}") from e
        except Unsupported as e:
            E.fail(GRADIENT, str(e))
            return tuple(Poison() for _ in node.output)

    return walk


LARGE_CONST = 64
"""Float constants computed at import time with more elements than this (weights made by
Constant / ConstantOfShape nodes) become graph inputs named by their ONNX value, like
initializers, rather than `const` nodes of exact rationals (same values, linear cost)."""


def _fold(m: Any, known: dict[str, np.ndarray], opset: int) -> dict[str, np.ndarray]:
    """The values of the nodes computable at import time from `known` (integer inputs and
    initializers) and each other, in graph order; a node that fails is left to the walker,
    which reports it."""
    env = dict(known)
    out: dict[str, np.ndarray] = {}
    for node in m.graph.node:
        if node.domain not in ("", "ai.onnx") or node.op_type in SEQ_OPS:
            continue
        if not all(i in env for i in node.input if i):
            continue
        xs = [Static(env[i]) if i else None for i in node.input]
        try:
            res = _static_eval(node, xs, opset)
        except (Unsupported, KeyError, TypeError, ValueError, IndexError, RuntimeError):
            continue
        for o, r in zip(node.output, res, strict=False):
            if o:
                env[o] = out[o] = r.value
    return out


def _build(m: Any, runtime: dict[str, np.ndarray], shapes: dict[str, tuple[int, ...]]) -> Imported:
    from onnx import numpy_helper

    opset = next(o.version for o in m.opset_import if o.domain in ("", "ai.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    E = Emitter()
    env: dict[str, Any] = {"": None}
    names: dict[int, str] = {}
    values: dict[str, np.ndarray] = {}
    given = {**{k: v for k, v in inits.items() if k not in runtime}, **runtime}
    folded = _fold(m, {k: v for k, v in given.items() if not is_float(v)}, opset)
    big = {k: v for k, v in folded.items() if is_float(v) and v.size > LARGE_CONST}
    for name, arr in [*runtime.items(), *((k, v) for k, v in given.items() if k not in runtime)]:
        if is_float(arr):
            d = E.input(arr.shape)
            env[name], names[d.id], values[name] = d, name, arr
        else:
            env[name] = Static(arr)
    for name, arr in big.items():
        d = E.input(arr.shape)
        names[d.id], values[name] = name, arr
    env.update({k: Static(v) for k, v in folded.items()})
    env.update({names[i]: Dyn(i) for i in names if names[i] in big})
    walk = _walker(E, m, opset, shapes, set(folded))
    for node in m.graph.node:
        if node.output and all(o in folded for o in node.output if o):
            continue
        outs = walk(node, env)
        env.update((o, v) for o, v in zip(node.output, outs, strict=False) if o)
    E.raise_if_unsupported("ONNX model")
    final = [env[o.name] for o in m.graph.output]
    grads = tuple((k, v.y, v.x) for k, v in enumerate(final) if isinstance(v, GradValue))
    outs = E.output_ids([v for v in final if not isinstance(v, GradValue)])
    graph = E.build()
    limits.check_total(sum(int(np.prod(s)) for s in graph.shapes), "the graph's values")
    ints = {k: v for k, v in runtime.items() if not is_float(v)}

    def rebuild(new: Mapping[str, np.ndarray]) -> Imported:
        fresh = {k: np.asarray(new.get(k, v)).astype(v.dtype) for k, v in runtime.items()}
        return _build(m, fresh, shapes)

    return Imported(graph, names, values, outs, tuple(runtime), ints, "onnx", rebuild, grads)


def from_onnx(
    model: Any, inputs: Mapping[str, Any] | None = None, base_dir: str | None = None
) -> Imported:
    """Import an ONNX model (a path, bytes or a `ModelProto`). `inputs` gives values by
    name: runtime inputs and initializers (any other name is refused); `base_dir` is the
    directory external data is read from (default: the model file's directory; bytes and
    `ModelProto`s with external data need it). See the module docstring for the defaults
    and docs/INTEROP.md for the trust model and the size limits."""
    m = load_onnx(model, base_dir)
    shapes = validate(m)
    given = dict(inputs or {})
    inits = {t.name for t in m.graph.initializer}
    runtime_names = {vi.name for vi in m.graph.input if vi.name not in inits}
    unknown = sorted(k for k in given if k not in runtime_names and k not in inits)
    if unknown:
        raise ModelImportError(
            f"unknown input name(s) {unknown}; the model's inputs: {sorted(runtime_names)}, "
            f"initializers: {sorted(inits)}"
        )
    imp = _build(m, _runtime_inputs(m, given), shapes)
    rest = {k: v for k, v in given.items() if k not in runtime_names}
    return imp.with_inputs(rest) if rest else imp
