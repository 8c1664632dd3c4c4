"""ONNX Runtime, a forward-only engine: `OnnxRuntimeEngine`.

Invariants:
- ONNX Runtime has no autograd, so the engine is forward-only (`has_vjp = False`): it is
  judged on the forward direction alone, and the report says "forward only"; no backward
  is ever counted as passed.
- Each op is the spec's one-node graph of that op (its attributes, the integer environment
  read into `select`'s literal index) exported by the project's own
  `runtime.interop.to_onnx` (a composite is exported as its inlined primitives), run by an
  `onnxruntime.InferenceSession` on the chosen execution provider (default
  `CPUExecutionProvider`; `--engine onnxruntime@NAME` or `OnnxRuntimeEngine(provider=NAME)`
  picks another, refused unless ONNX Runtime lists it as available). A whole graph
  (`whole.GraphCall`) is exported and run as one model. Values cross as NumPy arrays bit
  for bit (`to_onnx` writes float64 and float32 only: those are the dtypes).
- An op is covered when `to_onnx` has an export rule for it (a primitive in
  `runtime.interop.EXPORT`, or a composite whose inlined body on the op's first sample
  uses only such primitives); any other op is *not covered*, never substituted.
- Sessions are cached by (the call's key, every input's shape and dtype)
  (`base.CompileCache`): a session is never reused for another op, attribute, shape or
  dtype. `model(graph, dtype)` is the one place the ONNX model is made (a subclass may
  replace it, e.g. to test that a swapped node is caught).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from spec.errors import TorchLeanError
from spec.graph import Graph, Node
from spec.inline import inline
from spec.ops import OPS
from spec.validate import normalize_attrs

from .base import CompileCache, Engine, EngineUnavailable, OpCall, select_index
from .whole import GraphCall

__all__ = ["OnnxRuntimeEngine", "exportable_ops"]

DEFAULT_PROVIDER = "CPUExecutionProvider"


def _export_rules() -> dict[str, Any]:
    try:
        from runtime.interop import EXPORT
    except ImportError:  # pragma: no cover - runtime.interop is part of this project
        return {}
    return EXPORT


def exportable_ops() -> tuple[str, ...]:
    """The ops `to_onnx` can export (see the module docstring), in table order."""
    rules = _export_rules()
    out = []
    for name, d in OPS.items():
        if name in rules:
            out.append(name)
        elif d.kind == "composite" and d.samples:
            s = d.samples[0]
            try:
                one = Graph(
                    [shape for shape, _ in s.args],
                    [Node(name, tuple(range(len(s.args))), normalize_attrs(name, dict(s.attrs)))],
                )
                flat, _ = inline(one)
            except TorchLeanError:
                continue
            if all(n.op in rules for n in flat.nodes):
                out.append(name)
    return tuple(out)


def _not_called(*_: Any, **__: Any) -> Any:
    raise TorchLeanError("onnxruntime: ops run through OnnxRuntimeEngine.forward, not directly")


class OnnxRuntimeEngine(Engine):
    """ONNX Runtime (forward only) on one execution provider."""

    name: ClassVar[str] = "onnxruntime"
    package: ClassVar[str] = "onnxruntime"
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32")
    ops: ClassVar[dict[str, Callable[..., Any]]] = {op: _not_called for op in exportable_ops()}
    has_vjp: ClassVar[bool] = False
    option: ClassVar[str] = "provider"  # --engine onnxruntime@PROVIDER

    def __init__(self, provider: str = DEFAULT_PROVIDER) -> None:
        super().__init__()
        import onnxruntime as ort

        self.ort = ort
        available = ort.get_available_providers()
        if provider not in available:
            raise EngineUnavailable(
                f"engine {self.name!r}: execution provider {provider!r} is not available here "
                f"(available: {', '.join(available)})"
            )
        self.provider = provider
        self.cache = CompileCache()

    @classmethod
    def check_available(cls) -> None:
        for mod, pkg in (("onnxruntime", "onnxruntime"), ("onnx", "onnx")):
            try:
                __import__(mod)
            except ImportError as e:
                raise EngineUnavailable(
                    f"engine {cls.name!r}: {mod} is not installed (pip install {pkg})"
                ) from e

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "onnxruntime": self.ort.__version__,
            "provider": self.provider,
            "directions": "forward only",
            "compile_cache": self.cache.stats(),
        }

    # -- arrays: NumPy, bit for bit
    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    # -- the model of a call, and its session
    def model(self, graph: Graph, dtype: str) -> Any:
        """The ONNX model of `graph` in `dtype` (`runtime.interop.to_onnx`)."""
        from runtime.interop import to_onnx

        return to_onnx(graph, dtype=dtype)

    def _graph(self, fn: Callable[..., Any], arrays: Sequence[Any]) -> tuple[Graph, str]:
        dtype = str(np.asarray(arrays[0]).dtype) if arrays else "float64"
        if isinstance(fn, GraphCall):
            return fn.g, fn.dtype
        if isinstance(fn, OpCall):
            attrs = dict(fn.attrs)
            if attrs.get("env_slot") is not None:  # select reading the environment
                attrs = {**attrs, "index": select_index(None, attrs["env_slot"], fn.env)}
                attrs["env_slot"] = None
            shapes = [tuple(int(d) for d in np.shape(a)) for a in arrays]
            return Graph(shapes, [Node(fn.op, tuple(range(len(arrays))), attrs)]), dtype
        raise TorchLeanError(f"onnxruntime: cannot export {fn!r} (not an op or a graph call)")

    def _session(self, graph: Graph, dtype: str) -> Any:
        opts = self.ort.SessionOptions()
        opts.intra_op_num_threads = 1
        model = self.model(graph, dtype)
        return self.ort.InferenceSession(
            model.SerializeToString(), sess_options=opts, providers=[self.provider]
        )

    def forward(self, fn: Callable[..., Any], arrays: Sequence[Any]) -> Any:
        graph, dtype = self._graph(fn, arrays)
        sess = self.cache.get("onnx", fn, arrays, lambda: self._session(graph, dtype))
        names = [i.name for i in sess.get_inputs()]
        (out,) = sess.run(None, dict(zip(names, arrays, strict=True)))
        return out

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        raise TorchLeanError(f"engine {self.name!r} is forward only (no autograd)")
