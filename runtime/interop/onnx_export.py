"""The other direction: a spec graph written as an ONNX model (forward only).

Invariants:
- The graph is first inlined (`spec.inline`), so only primitive ops are written, each by
  its rule in `EXPORT` (op -> ONNX nodes); an op without a rule raises one
  `UnsupportedOpsError` listing every such op, never a partial model.
- Inputs keep their order and take `names` (default `x0`, `x1`, ...); an input with a value
  in `values` becomes an initializer. Outputs are `outputs` (default: the last value).
- Values are written in `dtype` (float64 or float32); const and scale rationals are
  rounded once to that dtype. The ONNX model computes the same real function; its
  rounding is the ONNX runtime's (no operation order is promised; compare within a
  tolerance).
onnx is imported inside the functions only.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from spec.graph import Graph, Node
from spec.inline import inline

from .core import UnsupportedOpsError, nearest_table_op

__all__ = ["EXPORT", "to_onnx"]

OPSET = 18


class _Writer:
    def __init__(self, dtype: str) -> None:
        import onnx

        self.onnx = onnx
        self.np = {"float64": np.float64, "float32": np.float32}[dtype]
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._k = 0

    def fresh(self, hint: str) -> str:
        self._k += 1
        return f"{hint}_{self._k}"

    def const(self, arr: Any, dtype: Any = None) -> str:
        name = self.fresh("c")
        a = np.asarray(arr, dtype=dtype or self.np)
        self.inits.append(self.onnx.numpy_helper.from_array(a, name))
        return name

    def ints(self, vals: Sequence[int]) -> str:
        return self.const(np.asarray(vals, dtype=np.int64).reshape(-1), np.int64)

    def emit(self, op: str, ins: Sequence[str], out: str | None = None, **attrs: Any) -> str:
        out = out or self.fresh(op.lower())
        self.nodes.append(self.onnx.helper.make_node(op, list(ins), [out], **attrs))
        return out


ExportRule = Callable[[_Writer, Node, list[str], list[tuple[int, ...]], str], None]


def _same(op: str) -> ExportRule:
    return lambda w, n, ins, shapes, out: (w.emit(op, ins, out), None)[1]


def _scale(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    w.emit("Mul", [w.const(float(n.attrs["c"])), ins[0]], out)


def _clamp(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    lo, hi = w.const(float(n.attrs["lo"])), w.const(float(n.attrs["hi"]))
    w.emit("Clip", [ins[0], lo, hi], out)


def _const(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    vals = np.array([float(q) for q in n.attrs["values"]]).reshape(n.attrs["shape"])
    w.emit("Identity", [w.const(vals)], out)


def _reduce(op: str, axis: bool) -> ExportRule:
    def rule(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
        axes = [n.attrs["axis"]] if axis else list(range(len(shapes[0])))
        if not axes:
            w.emit("Identity", ins, out)
            return
        w.emit(op, [ins[0], w.ints(axes)], out, keepdims=0)

    return rule


def _linear(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    if len(shapes[0]) == 2:
        w.emit("Gemm", ins, out, transB=1)
        return
    w.emit("Add", [w.emit("MatMul", [ins[1], ins[0]]), ins[2]], out)


def _reshape(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    w.emit("Reshape", [ins[0], w.ints(n.attrs["shape"])], out, allowzero=1)  # 0 is a size


def _swap(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    perm = list(range(len(shapes[0])))
    k = n.attrs["axis"]
    perm[k], perm[k + 1] = perm[k + 1], perm[k]
    w.emit("Transpose", ins, out, perm=perm)


def _broadcast(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    w.emit("Expand", [ins[0], w.ints(n.attrs["shape"])], out)


def _slice(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    a = n.attrs
    w.emit("Slice", [ins[0], w.ints([a["start"]]), w.ints([a["stop"]]), w.ints([0])], out)


def _select(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    if n.attrs.get("index") is None:
        raise KeyError("select with env_slot (a runtime integer) has no ONNX constant")
    idx = w.const(np.asarray(n.attrs["index"], dtype=np.int64), np.int64)
    w.emit("Gather", [ins[0], idx], out, axis=0)


def _index_select(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    w.emit("Gather", [ins[0], w.ints(n.attrs["indices"])], out, axis=0)


def _scatter_add(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    s = shapes[0]
    zeros = w.const(np.zeros((n.attrs["size"], *s[1:])))
    idx = w.const(np.asarray(n.attrs["indices"], dtype=np.int64).reshape(-1, 1), np.int64)
    w.emit("ScatterND", [zeros, idx, ins[0]], out, reduction="add")


def _gather(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    r = len(shapes[0])
    pads = w.ints([0] * (2 * r - 1) + [1] if r else [])
    padded = w.emit("Pad", [ins[0], pads])  # index M reads the zero padding
    idx = w.const(
        np.asarray(n.attrs["indices"], dtype=np.int64).reshape(n.attrs["shape"]), np.int64
    )
    w.emit("Gather", [padded, idx], out, axis=r - 1)


def _softmax(op: str) -> ExportRule:
    return lambda w, n, ins, shapes, out: (w.emit(op, ins, out, axis=-1), None)[1]


def _mask(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    keep = np.asarray(n.attrs["mask"], dtype=bool).reshape(n.attrs["mask_shape"])
    w.emit("Where", [w.const(keep, np.bool_), ins[0], w.const(-np.inf)], out)


def _prelu(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    sx, sw = shapes
    c = 1
    for d in sw:
        c *= d
    target = [c, *([1] * (len(sx) - 2))] if c != 1 else [1]
    w.emit("PRelu", [ins[0], w.emit("Reshape", [ins[1], w.ints(target)])], out)


def _pow(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    w.emit("Pow", [ins[0], w.const(float(n.attrs["exponent"]))], out)


def _where(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    keep = np.asarray(n.attrs["mask"], dtype=bool).reshape(n.attrs["mask_shape"])
    w.emit("Where", [w.const(keep, np.bool_), ins[0], ins[1]], out)


def _cumsum(w: _Writer, n: Node, ins: list[str], shapes: list[Any], out: str) -> None:
    a = n.attrs
    axis = w.const(np.asarray(a["dim"], dtype=np.int64), np.int64)
    flags = {k: int(bool(a.get(k))) for k in ("exclusive", "reverse")}
    w.emit("CumSum", [ins[0], axis], out, **flags)


EXPORT: dict[str, ExportRule] = {
    "add": _same("Add"),
    "sub": _same("Sub"),
    "mul": _same("Mul"),
    "div": _same("Div"),
    "maximum": _same("Max"),
    "minimum": _same("Min"),
    "neg": _same("Neg"),
    "scale": _scale,
    "relu": _same("Relu"),
    "abs": _same("Abs"),
    "clamp": _clamp,
    "sqrt": _same("Sqrt"),
    "detach": _same("Identity"),
    "const": _const,
    "exp": _same("Exp"),
    "log": _same("Log"),
    "tanh": _same("Tanh"),
    "sin": _same("Sin"),
    "cos": _same("Cos"),
    "sigmoid": _same("Sigmoid"),
    "sum": _reduce("ReduceSum", False),
    "reduce_sum": _reduce("ReduceSum", True),
    "reduce_max": _reduce("ReduceMax", True),
    "matmul": _same("MatMul"),
    "linear": _linear,
    "reshape": _reshape,
    "swap_adjacent": _swap,
    "broadcast_to": _broadcast,
    "concat": lambda w, n, ins, shapes, out: (w.emit("Concat", ins, out, axis=0), None)[1],
    "slice": _slice,
    "select": _select,
    "index_select": _index_select,
    "scatter_add": _scatter_add,
    "gather": _gather,
    "softmax": _softmax("Softmax"),
    "log_softmax": _softmax("LogSoftmax"),
    "mask_neg_inf": _mask,
    "prelu": _prelu,
    "pow": _pow,
    "pow_tensor": _same("Pow"),
    "where": _where,
    "cumsum": _cumsum,
}
"""Primitive op of the table -> the ONNX nodes that compute it."""


def to_onnx(
    graph: Graph,
    *,
    names: Mapping[int, str] | None = None,
    outputs: Sequence[int] | None = None,
    values: Mapping[str, Any] | None = None,
    dtype: str = "float64",
) -> Any:
    """The spec graph as an ONNX `ModelProto` (opset 18); see the module docstring."""
    try:
        import onnx
    except ImportError as e:
        from .core import ModelImportError

        raise ModelImportError("to_onnx needs the onnx package (pip install onnx)") from e
    flat, vmap = inline(graph)
    missing = Counter(n.op for n in flat.nodes if n.op not in EXPORT)
    if missing:
        raise UnsupportedOpsError(
            "to_onnx", {k: (c, nearest_table_op(k), "no ONNX rule") for k, c in missing.items()}
        )
    w = _Writer(dtype)
    names = dict(names or {})
    vals = dict(values or {})
    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(w.np))
    val_name = {i: names.get(i, f"x{i}") for i in range(flat.num_inputs)}
    inputs = []
    for i, s in enumerate(flat.inputs):
        if val_name[i] in vals:
            arr = np.asarray(vals[val_name[i]], dtype=w.np)
            w.inits.append(onnx.numpy_helper.from_array(arr, val_name[i]))
        else:
            inputs.append(onnx.helper.make_tensor_value_info(val_name[i], elem, list(s)))
    for k, node in enumerate(flat.nodes):
        idx = flat.num_inputs + k
        val_name[idx] = f"v{idx}"
        shapes = [flat.shapes[a] for a in node.args]
        EXPORT[node.op](w, node, [val_name[a] for a in node.args], shapes, val_name[idx])
    outs = list(outputs) if outputs is not None else [graph.num_values - 1]
    out_vi = []
    for j, o in enumerate(outs):
        name = f"out{j}"
        w.emit("Identity", [val_name[vmap[o]]], name)
        out_vi.append(onnx.helper.make_tensor_value_info(name, elem, list(graph.shapes[o])))
    g = onnx.helper.make_graph(w.nodes, "torchlean", inputs, out_vi, w.inits)
    model = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", OPSET)])
    onnx.checker.check_model(model)
    return model
