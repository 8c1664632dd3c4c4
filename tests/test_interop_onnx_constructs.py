"""ONNX constructs of real models, built with `onnx.helper` (no torch): `ReduceL2`
(`F.normalize`) and `AveragePool` with `ceil_mode=1` (ResNet-D downsampling), against the
ONNX reference evaluator and hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx is not installed")
from onnx import TensorProto, helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from runtime.interop import UnsupportedOpsError, from_onnx  # noqa: E402


def model(node: object, x_shape: tuple[int, ...], opset: int = 18) -> object:
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def against_reference(m: object, x: np.ndarray) -> tuple[object, object]:
    imp = from_onnx(m, inputs={"x": x})
    outs, grads = imp.run()
    (want,) = ReferenceEvaluator(m).run(None, {"x": x})
    np.testing.assert_allclose(outs[0], want, rtol=1e-14)
    return outs, grads


def test_reduce_l2_hand_worked() -> None:
    x = np.array([[3.0, 4.0], [0.0, 2.0]])
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
    g = helper.make_graph(
        [helper.make_node("ReduceL2", ["x", "axes"], ["y"], keepdims=0)],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)],
        initializer=[axes],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    outs, grads = against_reference(m, x)
    np.testing.assert_array_equal(outs[0], [5.0, 2.0])
    np.testing.assert_allclose(grads["x"], [[0.6, 0.8], [0.0, 1.0]], rtol=1e-15)


def test_average_pool_ceil_mode_excluding_padding() -> None:
    """Kernel 2, stride 2, ceil_mode over 5 positions: windows [0,1] [2,3] [4]; the last
    is averaged over its one real position (ONNX and torch with count_include_pad=0)."""
    x = np.arange(5.0).reshape(1, 1, 5)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1)
    outs, grads = against_reference(model(node, (1, 1, 5)), x)
    np.testing.assert_array_equal(outs[0], [[[0.5, 2.5, 4.0]]])
    np.testing.assert_array_equal(grads["x"], [[[0.5, 0.5, 0.5, 0.5, 1.0]]])
    x2 = np.random.default_rng(0).standard_normal((1, 2, 5, 7))
    node2 = helper.make_node(
        "AveragePool", ["x"], ["y"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 1, 0],
        ceil_mode=1,
    )  # fmt: skip
    against_reference(model(node2, (1, 2, 5, 7)), x2)


def test_average_pool_ceil_mode_counting_padding_refused() -> None:
    node = helper.make_node(
        "AveragePool", ["x"], ["y"], kernel_shape=[2], strides=[2], ceil_mode=1,
        count_include_pad=1,
    )  # fmt: skip
    with pytest.raises(UnsupportedOpsError, match="ceil_mode"):
        from_onnx(model(node, (1, 1, 5)))


def test_batch_normalization_training_mode_uses_batch_statistics() -> None:
    """training_mode=1 (what torch's exporter writes for weight standardisation):
    Y normalises by the input's own per-channel mean and biased variance."""
    x = np.array([[[1.0, 3.0]], [[5.0, 7.0]]]).reshape(2, 1, 2)  # channel values 1 3 5 7
    inits = [
        helper.make_tensor(n, TensorProto.DOUBLE, [1], [v])
        for n, v in (("s", 2.0), ("b", 0.5), ("m", 0.0), ("v", 1.0))
    ]
    node = helper.make_node(
        "BatchNormalization",
        ["x", "s", "b", "m", "v"],
        ["y", "rm", "rv"],
        training_mode=1,
        epsilon=0.0,
    )
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [2, 1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [2, 1, 2])],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)])
    outs, _ = against_reference(m, x)
    # mean 4, biased variance 5: 2 * (x - 4) / sqrt(5) + 0.5
    want = 2 * (np.array([1.0, 3.0, 5.0, 7.0]) - 4) / np.sqrt(5.0) + 0.5
    np.testing.assert_allclose(np.asarray(outs[0]).reshape(-1), want, rtol=1e-15)
