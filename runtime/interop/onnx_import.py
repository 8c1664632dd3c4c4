"""ONNX import: an ONNX model mapped, node by node, onto the op table.

Invariants:
- `ONNX_OPS` is the mapping: ONNX op type -> rule(E, inputs, attrs, opset). `inputs` are
  the node's inputs (`Dyn` graph values, `Static` arrays, None for an omitted optional
  input), `attrs` its attributes as Python values; the rule returns the output value (or a
  tuple, one per output) built from table ops only, or raises `Unsupported`.
- A node whose inputs are all known at import time (initializers of integer type,
  Constant nodes, shape computations, integer model inputs) is evaluated at import time by
  the ONNX reference evaluator (`onnx.reference`) and stays `Static`.
- Graph inputs, in this order: the model's float runtime inputs, then its float
  initializers, each named by its ONNX name. Integer inputs are static
  (`Imported.int_inputs`; zeros unless given).
- Runtime input values: `inputs[name]` when given, else seeded standard normal draws
  (NumPy generator with seed 0) of the declared shape; a symbolic dimension needs a given
  input.
onnx is imported inside the functions only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from . import aten as ar
from .aten import Poison
from .core import Dyn, Emitter, ModelImportError, Static, Unsupported, is_float
from .imported import Imported

__all__ = ["ONNX_OPS", "from_onnx"]

OnnxRule = Callable[[Emitter, list[Any], dict[str, Any], int], Any]
INT64_MAX = 2**63 - 1


def _static(v: Any, what: str) -> np.ndarray:
    if not isinstance(v, Static):
        raise Unsupported(f"{what} must be known at import time")
    return np.asarray(v.value)


def _axes(E: Emitter, xs: list[Any], a: dict[str, Any], k: int = 1) -> list[int] | None:
    """Axes from the `axes` attribute (older opsets) or the k-th input (newer)."""
    if "axes" in a:
        return [int(i) for i in a["axes"]]
    if len(xs) > k and xs[k] is not None:
        return [int(i) for i in _static(xs[k], "axes").reshape(-1)]
    return None


def _unary(op: str) -> OnnxRule:
    return lambda E, xs, a, v: E.node(op, xs[0])


def _binary(op: str) -> OnnxRule:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        out = xs[0]
        for x in xs[1:]:
            out = E.node(op, out, x)
        return out

    return rule


def _pow(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    e = _static(xs[1], "the exponent").reshape(-1)
    if e.size != 1:
        raise Unsupported("a tensor exponent")
    return ar.pow_rule(E, xs[0], float(e[0]) if float(e[0]) != int(e[0]) else int(e[0]))


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
    shape = [int(d) for d in _static(xs[1], "the target shape").reshape(-1)]
    if not a.get("allowzero", 0):
        shape = [s[i] if d == 0 else d for i, d in enumerate(shape)]
    return ar.view(E, xs[0], shape)


def _flatten(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = E.shape(xs[0])
    k = a.get("axis", 1) % (len(s) + 1) if s else 0
    return E.reshape(xs[0], (int(np.prod(s[:k])), int(np.prod(s[k:]))))


def _squeeze(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return ar.squeeze(E, xs[0], _axes(E, xs, a))


def _unsqueeze(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    axes = _axes(E, xs, a) or []
    s = list(E.shape(xs[0]))
    n = len(s) + len(axes)
    for ax in sorted(x % n for x in axes):
        s.insert(ax, 1)
    return E.reshape(xs[0], s)


def _transpose(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    n = len(E.shape(xs[0]))
    return E.permute(xs[0], a.get("perm", list(range(n))[::-1]))


def _slice(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x = xs[0]
    starts = _static(xs[1], "starts").reshape(-1)
    ends = _static(xs[2], "ends").reshape(-1)
    n = len(E.shape(x))
    axes = _axes(E, xs, {}, 3) or list(range(len(starts)))
    steps = _static(xs[4], "steps").reshape(-1) if len(xs) > 4 and xs[4] is not None else None
    for i, ax in enumerate(axes):
        st = int(steps[i]) if steps is not None else 1
        if st < 1:
            raise Unsupported("negative slice steps")
        x = ar.slice_rule(E, x, ax % n, int(starts[i]), min(int(ends[i]), INT64_MAX), st)
    return x


def _gather(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, idx = xs
    axis = a.get("axis", 0)
    s = E.shape(x)
    ids = E.static_ints(idx, "gather indices") % s[axis % len(s)]
    if ids.ndim == 0:
        return ar.select(E, x, axis, int(ids))
    if axis % len(s) == 0 and len(s) == 2:
        return ar.embedding(E, x, Static(ids))
    y = ar.index_select(E, x, axis, Static(ids.reshape(-1)))
    return _gather_nd_axis(E, E.move_axis(y, axis, 0), ids, axis % len(s))


def _gather_nd_axis(E: Emitter, moved: Any, ids: np.ndarray, axis: int) -> Any:
    ms = E.shape(moved)
    y = E.reshape(moved, (*ids.shape, *ms[1:]))
    k = ids.ndim
    n = len(E.shape(y))
    perm = list(range(k, k + axis)) + list(range(k)) + list(range(k + axis, n))
    return E.permute(y, perm)


def _softmax(op: str) -> OnnxRule:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        n = len(E.shape(xs[0]))
        axis = a.get("axis", -1 if v >= 13 else 1) % n
        if v < 13 and axis != n - 1:
            raise Unsupported(f"opset {v} {op} over flattened axes {axis}..")
        return E.on_axis(xs[0], axis, -1, lambda t: E.node(op, t))

    return rule


def _reduce(kind: str) -> OnnxRule:
    def rule(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
        axes = _axes(E, xs, a)
        if axes is None and a.get("noop_with_empty_axes", 0):
            return xs[0]
        keep = bool(a.get("keepdims", 1))
        if kind == "mean":
            return E.mean(xs[0], axes, keep)
        return E.reduce(kind, xs[0], axes, keep)

    return rule


def _pads(a: dict[str, Any], k: int = 2) -> tuple[int, ...]:
    if a.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID"):
        raise Unsupported(f"auto_pad={a['auto_pad']!r}")
    p = [int(x) for x in a.get("pads", [0] * (2 * k))]
    if p[:k] != p[k:]:
        raise Unsupported(f"asymmetric pads {p}")
    return tuple(p[:k])


def _conv(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if len(E.shape(xs[1])) != 4:
        raise Unsupported("a convolution that is not 2-D")
    args = [x for x in xs if x is not None]
    return E.node(
        "conv2d",
        *args,
        stride=tuple(a.get("strides", (1, 1))),
        padding=_pads(a),
        dilation=tuple(a.get("dilations", (1, 1))),
        groups=a.get("group", 1),
    )


def _conv_t(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if "output_shape" in a:
        raise Unsupported("output_shape (give pads and output_padding)")
    return E.node(
        "conv_transpose2d",
        *[x for x in xs if x is not None],
        stride=tuple(a.get("strides", (1, 1))),
        padding=_pads(a),
        dilation=tuple(a.get("dilations", (1, 1))),
        output_padding=tuple(a.get("output_padding", (0, 0))),
        groups=a.get("group", 1),
    )


def _max_pool(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if a.get("ceil_mode", 0) or a.get("storage_order", 0):
        raise Unsupported("ceil_mode or storage_order")
    k = tuple(a["kernel_shape"])
    y = E.node(
        "max_pool2d",
        xs[0],
        kernel_size=k,
        stride=tuple(a.get("strides", (1, 1))),
        padding=_pads(a),
        dilation=tuple(a.get("dilations", (1, 1))),
    )
    return y, Poison("MaxPool (indices output)", "integer indices are not a table value")


def _avg_pool(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    pads = _pads(a)
    if a.get("ceil_mode", 0) or (any(pads) and not a.get("count_include_pad", 0)):
        raise Unsupported("ceil_mode, or padding without count_include_pad=1")
    return E.node(
        "avg_pool2d",
        xs[0],
        kernel_size=tuple(a["kernel_shape"]),
        stride=tuple(a.get("strides", (1, 1))),
        padding=pads,
    )


def _global_avg_pool(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return E.node("avg_pool2d", xs[0], kernel_size=tuple(E.shape(xs[0])[-2:]))


def _batch_norm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if a.get("training_mode", 0):
        raise Unsupported("training_mode=1 (export in eval mode)")
    x, w, b, mean, var = xs[:5]
    return E.batch_norm_eval(x, w, b, mean, var, a.get("epsilon", 1e-5))


def _layer_norm(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, w, b = [*xs, None, None][:3]
    s = E.shape(x)
    axis = a.get("axis", -1) % len(s)
    if a.get("stash_type", 1) not in (1, 11):
        raise Unsupported(f"stash_type {a['stash_type']} (statistics are in the run's dtype)")
    p = Poison("LayerNormalization (mean / inv_std_dev outputs)")
    return E.layer_norm(x, w, b, s[axis:], a.get("epsilon", 1e-5)), p, p


def _sce_loss(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    x, t = xs[0], xs[1]
    if len(xs) > 2 and xs[2] is not None:
        raise Unsupported("class weights")
    ignore = a.get("ignore_index")
    if ignore is not None and np.any(E.static_ints(t, "labels") == ignore):
        raise Unsupported(f"labels equal to ignore_index={ignore}")
    loss = E.cross_entropy(x, t, a.get("reduction", "mean"))
    return loss, Poison("SoftmaxCrossEntropyLoss (log_prob output)")


def _nll_loss(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    if len(xs) > 2 and xs[2] is not None:
        raise Unsupported("class weights")
    return E.cross_entropy(xs[0], xs[1], a.get("reduction", "mean"), log_probs=True)


def _dropout(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    train = xs[2] if len(xs) > 2 else None
    if train is not None and bool(_static(train, "training_mode").reshape(-1)[0]):
        raise Unsupported("training-mode dropout")
    return xs[0], Poison("Dropout (mask output)")


def _clip(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    lo = a.get("min", xs[1] if len(xs) > 1 else None)
    hi = a.get("max", xs[2] if len(xs) > 2 else None)
    lo = None if lo is None else float(_static(lo, "min")) if isinstance(lo, Static) else lo
    hi = None if hi is None else float(_static(hi, "max")) if isinstance(hi, Static) else hi
    return ar.clamp(E, xs[0], lo, hi)


def _cast(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    import onnx

    if not np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(a["to"]), np.floating):
        raise Unsupported("cast of a float value to a non-float type")
    return xs[0]


def _shape(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    s = np.asarray(E.shape(xs[0]), dtype=np.int64)
    return Static(s[a.get("start", 0) : a.get("end", len(s))])


def _expand(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    target = np.broadcast_shapes(E.shape(xs[0]), tuple(_static(xs[1], "shape").reshape(-1)))
    return ar.expand(E, xs[0], target)


def _pad(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    """Constant zero padding as concatenations with zero constants, axis by axis."""
    x = xs[0]
    n = len(E.shape(x))
    pads = [int(p) for p in (a["pads"] if "pads" in a else _static(xs[1], "pads").reshape(-1))]
    value = (
        float(_static(xs[2], "value").reshape(-1)[0]) if len(xs) > 2 and xs[2] is not None else 0.0
    )
    if a.get("mode", "constant") != "constant" or value != 0.0 or min(pads, default=0) < 0:
        raise Unsupported("only constant zero padding with pads >= 0")
    axes = _axes(E, xs, {}, 3) or list(range(n))
    k = len(axes)
    for i, ax in enumerate(axes):
        before, after = pads[i], pads[i + k]
        parts = []
        for count in (before, after):
            s = list(E.shape(x))
            s[ax % n] = count
            parts.append(Static(np.zeros(s)) if count else None)
        seq = [p for p in (parts[0], x, parts[1]) if p is not None]
        x = ar.cat(E, seq, ax % n) if len(seq) > 1 else x
    return x


def _gelu(E: Emitter, xs: list[Any], a: dict[str, Any], v: int) -> Any:
    return ar.gelu(E, xs[0], a.get("approximate", "none"))


ONNX_OPS: dict[str, OnnxRule] = {
    "Add": _binary("add"),
    "Sub": _binary("sub"),
    "Mul": _binary("mul"),
    "Div": _binary("div"),
    "Max": _binary("maximum"),
    "Min": _binary("minimum"),
    "Pow": _pow,
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
    "Pad": _pad,
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
    "Concat": lambda E, xs, a, v: ar.cat(E, xs, a["axis"]),
    "Gather": _gather,
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    "ReduceSum": _reduce("reduce_sum"),
    "ReduceMean": _reduce("mean"),
    "ReduceMax": _reduce("reduce_max"),
    "Conv": _conv,
    "ConvTranspose": _conv_t,
    "MaxPool": _max_pool,
    "AveragePool": _avg_pool,
    "GlobalAveragePool": _global_avg_pool,
    "BatchNormalization": _batch_norm,
    "LayerNormalization": _layer_norm,
    "SoftmaxCrossEntropyLoss": _sce_loss,
    "NegativeLogLikelihoodLoss": _nll_loss,
}
"""ONNX op type -> rule (see the module docstring); docs/INTEROP.md lists it."""


# --------------------------------------------------------------------------- the walker
def _load(model: Any) -> Any:
    try:
        import onnx
    except ImportError as e:
        raise ModelImportError("from_onnx needs the onnx package (pip install onnx)") from e
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(str(model))


def _runtime_inputs(m: Any, given: Mapping[str, Any]) -> dict[str, np.ndarray]:
    import onnx

    inits = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    out: dict[str, np.ndarray] = {}
    for vi in m.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dt = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if vi.name in given:
            arr = np.asarray(given[vi.name]).astype(dt)
            want = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
            if len(want) != arr.ndim or any(
                w not in (None, g) for w, g in zip(want, arr.shape, strict=True)
            ):
                raise ModelImportError(
                    f"input {vi.name!r}: expected shape {want}, got {list(arr.shape)}"
                )
            out[vi.name] = arr
            continue
        if not all(d.HasField("dim_value") for d in tt.shape.dim):
            raise ModelImportError(f"input {vi.name!r} has a symbolic dimension; pass inputs=")
        dims = tuple(int(d.dim_value) for d in tt.shape.dim)
        fill = rng.standard_normal(dims) if np.issubdtype(dt, np.floating) else np.zeros(dims)
        out[vi.name] = np.asarray(fill).astype(dt)
    return out


def _static_eval(node: Any, xs: list[Any], opset: int) -> Any:
    from onnx.reference import ReferenceEvaluator

    feeds = {n: x.value for n, x in zip(node.input, xs, strict=True) if n and x is not None}
    res = ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    return tuple(Static(np.asarray(r)) for r in res)


def _attrs(node: Any) -> dict[str, Any]:
    import onnx
    from onnx import numpy_helper

    out = {}
    for at in node.attribute:
        val = onnx.helper.get_attribute_value(at)
        if isinstance(val, onnx.TensorProto):
            val = numpy_helper.to_array(val)
        elif isinstance(val, bytes):
            val = val.decode()
        out[at.name] = val
    return out


def _step(
    E: Emitter, node: Any, xs: list[Any], opset: int, shapes: Mapping[str, tuple[int, ...]]
) -> tuple[Any, ...]:
    poisons = [x for x in xs if isinstance(x, Poison)]
    if poisons:
        for p in poisons:
            if p.name is not None:
                E.fail(p.name, p.why)
        if node.op_type not in ONNX_OPS:
            E.fail(node.op_type)
        return _stand_ins(E, node, shapes)
    if not any(isinstance(x, Dyn) for x in xs) and node.op_type != "Shape":
        try:
            return _static_eval(node, xs, opset)
        except Exception as e:  # reported with the other unsupported ops
            E.fail(node.op_type, f"evaluation at import time failed: {type(e).__name__}: {e}")
            return _stand_ins(E, node, shapes)
    rule = ONNX_OPS.get(node.op_type)
    if rule is None:
        E.fail(node.op_type)
        return _stand_ins(E, node, shapes)
    try:
        out = rule(E, xs, _attrs(node), opset)
    except (Unsupported, TypeError, KeyError, TorchLeanError) as e:
        E.fail(node.op_type, str(e))
        return _stand_ins(E, node, shapes)
    return out if isinstance(out, tuple) else (out,)


def _stand_ins(E: Emitter, node: Any, shapes: Mapping[str, tuple[int, ...]]) -> tuple[Any, ...]:
    """Stand-in values (inferred float shapes) for a node that could not be mapped, so the
    nodes after it are still checked; the graph is never returned."""
    return tuple(E.stand_in(shapes[o]) if o in shapes else Poison() for o in node.output)


def _float_shapes(m: Any) -> dict[str, tuple[int, ...]]:
    """Statically known shapes of the float values (ONNX shape inference)."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(m)
    except Exception:  # shape inference is a best effort for error reporting only
        return {}
    out = {}
    for vi in inferred.graph.value_info:
        tt = vi.type.tensor_type
        if not np.issubdtype(onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type), np.floating):
            continue
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    return out


def _build(m: Any, runtime: dict[str, np.ndarray]) -> Imported:
    from onnx import numpy_helper

    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), 13)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    E = Emitter()
    env: dict[str, Any] = {"": None}
    names: dict[int, str] = {}
    values: dict[str, np.ndarray] = {}
    for name, arr in [*runtime.items(), *inits.items()]:
        if is_float(arr):
            d = E.input(arr.shape)
            env[name], names[d.id], values[name] = d, name, arr
        else:
            env[name] = Static(arr)
    shapes: dict[str, tuple[int, ...]] = {}
    if any(n.op_type not in ONNX_OPS for n in m.graph.node):
        shapes = _float_shapes(m)
    for node in m.graph.node:
        if node.domain not in ("", "ai.onnx"):
            E.fail(f"{node.domain}.{node.op_type}", "custom domain")
            env.update({o: Poison() for o in node.output})
            continue
        outs = _step(E, node, [env[i] for i in node.input], opset, shapes)
        env.update(zip(node.output, outs, strict=False))
    E.raise_if_unsupported("ONNX model")
    outs = E.output_ids([env[o.name] for o in m.graph.output])
    ints = {k: v for k, v in runtime.items() if not is_float(v)}

    def rebuild(new: Mapping[str, np.ndarray]) -> Imported:
        return _build(m, {k: np.asarray(new.get(k, v)).astype(v.dtype) for k, v in runtime.items()})

    return Imported(E.build(), names, values, outs, tuple(runtime), ints, "onnx", rebuild)


def from_onnx(model: Any, inputs: Mapping[str, Any] | None = None) -> Imported:
    """Import an ONNX model (a path, bytes or a `ModelProto`). `inputs` gives runtime
    input values by name (see the module docstring for the defaults)."""
    m = _load(model)
    return _build(m, _runtime_inputs(m, dict(inputs or {})))
