"""Building small float32 ONNX models in tests: one graph X -> Y from nodes and named
initialisers, opset 13, serialised. Import only after `pytest.importorskip("onnx")`."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

__all__ = ["onnx_model"]


def onnx_model(nodes: list, inits: dict[str, np.ndarray], x: list[int], y: list[int]) -> bytes:
    """The serialised model of `nodes` with input X of shape x, output Y of shape y."""
    g = helper.make_graph(
        nodes, "m",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
