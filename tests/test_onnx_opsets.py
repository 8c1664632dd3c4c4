"""Per-opset forms of ONNX ops not covered by test_onnx_robust's VERSIONED list: each
one-node model is built with onnx.helper at the given opset and compared
with onnxruntime (the ONNX reference evaluator where onnxruntime is missing), plus a few
hand-worked values and the clear refusals of forms the importer does not compute (negative
Squeeze / Unsqueeze axes before opset 11 are refused by ONNX's own shape inference)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from runtime.interop import ModelImportError, UnsupportedOpsError, from_onnx  # noqa: E402

F = TensorProto.FLOAT


def i64(*v):
    return np.asarray(v, dtype=np.int64)


def f32(*v):
    return np.asarray(v, dtype=np.float32)


def model(op, shape, opset, consts=(), out=None, n_out=1, **attrs):
    """One `op` node on input "a" of `shape`, with constant inputs `consts` (name, array;
    name "" for an omitted optional input)."""
    nodes = [
        helper.make_node("Constant", [], [n], value=numpy_helper.from_array(v))
        for n, v in consts
        if n
    ]
    outs = [f"y{k}" for k in range(n_out)]
    nodes.append(helper.make_node(op, ["a", *[n for n, _ in consts]], outs, **attrs))
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("a", F, shape)],
        [helper.make_tensor_value_info(o, F, out) for o in outs],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    if out is None:
        inf = onnx.shape_inference.infer_shapes(m)
        known = {v.name: v for v in [*inf.graph.value_info, *inf.graph.output]}
        for o in m.graph.output:
            o.type.CopyFrom(known[o.name].type)
    return m


def reference(m, feeds):
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sess.run(None, feeds)
    except ImportError:
        return ReferenceEvaluator(m).run(None, feeds)


def ours(m, a):
    got, _ = from_onnx(m, inputs={"a": a}).run("float64")
    return [np.asarray(g) for g in got]


def data(*shape):
    return np.random.default_rng(3).standard_normal(shape).astype(np.float32)


CASES = [
    ("pad wrap v19", lambda: model("Pad", [2, 3], 19, [("p", i64(1, 2, 0, 1))], mode="wrap")),
    ("pad edge v13", lambda: model("Pad", [2, 3], 13, [("p", i64(0, 1, 1, 0))], mode="edge")),
    (
        "pad value+axes v18",
        lambda: model("Pad", [2, 3], 18, [("p", i64(2, 1)), ("v", f32(0.5)), ("ax", i64(0))]),
    ),
    ("clip v11 min+max", lambda: model("Clip", [3, 4], 11, [("lo", f32(-0.3)), ("hi", f32(0.4))])),
    ("clip v13 max only", lambda: model("Clip", [3, 4], 13, [("", None), ("hi", f32(0.2))])),
    ("clip v13 min>max", lambda: model("Clip", [3, 4], 13, [("lo", f32(0.5)), ("hi", f32(-0.5))])),
    ("clip v12 none", lambda: model("Clip", [3, 4], 12)),
    (
        "reducesum v11 attr",
        lambda: model("ReduceSum", [2, 3, 4], 11, axes=[0, -1], keepdims=1),
    ),
    ("reducesum v13 input", lambda: model("ReduceSum", [2, 3, 4], 13, [("ax", i64(1))])),
    ("reducesum v13 all", lambda: model("ReduceSum", [2, 3, 4], 13, keepdims=0)),
    (
        "reducesum v13 noop",
        lambda: model(
            "ReduceSum", [2, 3], 13, [("ax", np.zeros(0, np.int64))], noop_with_empty_axes=1
        ),
    ),
    ("reducemax v13 attr", lambda: model("ReduceMax", [2, 3, 4], 13, axes=[1], keepdims=0)),
    ("reducemax v18 all", lambda: model("ReduceMax", [2, 3, 4], 18)),
    ("reducesumsquare v13", lambda: model("ReduceSumSquare", [2, 3], 13, axes=[1])),
    ("reducesumsquare v18", lambda: model("ReduceSumSquare", [2, 3], 18, [("ax", i64(0))])),
    ("squeeze v13 input", lambda: model("Squeeze", [2, 1, 3, 1], 13, [("ax", i64(-1, 1))])),
    ("squeeze v13 all ones", lambda: model("Squeeze", [1, 2, 1], 13)),
    ("squeeze v1 attr", lambda: model("Squeeze", [2, 1, 3], 1, axes=[1])),
    ("unsqueeze v11 attr", lambda: model("Unsqueeze", [2, 3], 11, axes=[-1, 0])),
    ("unsqueeze v1 attr", lambda: model("Unsqueeze", [2, 3], 1, axes=[1])),
    ("softmax v1 default", lambda: model("Softmax", [2, 3, 4], 1)),
    ("logsoftmax v11 axis 2", lambda: model("LogSoftmax", [2, 3, 4], 11, axis=2)),
    ("logsoftmax v13 default", lambda: model("LogSoftmax", [2, 3, 4], 13)),
    ("upsample v7 attr", lambda: model("Upsample", [1, 1, 2, 3], 7, scales=[1.0, 1.0, 2.0, 1.5])),
    ("resize v10 scales", lambda: model("Resize", [1, 1, 2, 3], 10, [("sc", f32(1, 1, 3, 2))])),
    (
        "resize v11 sizes",
        lambda: model(
            "Resize",
            [1, 1, 3, 4],
            11,
            [("roi", f32()), ("sc", f32()), ("sz", i64(1, 1, 5, 2))],
            mode="nearest",
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        ),
    ),
    (
        "maxpool ceil 2d",
        lambda: model(
            "MaxPool", [1, 2, 8, 8], 12, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1
        ),
    ),
    (
        "maxpool ceil last window in padding",
        lambda: model(
            "MaxPool",
            [1, 1, 5, 5],
            12,
            kernel_shape=[2, 2],
            strides=[2, 2],
            pads=[1, 1, 1, 1],
            ceil_mode=1,
        ),
    ),
    (
        "maxpool ceil 1d dilated",
        lambda: model(
            "MaxPool", [1, 2, 10], 12, kernel_shape=[3], strides=[3], dilations=[2], ceil_mode=1
        ),
    ),
    (
        "resize v13 align_corners ceil",
        lambda: model(
            "Resize",
            [1, 1, 3, 3],
            13,
            [("", None), ("sc", f32(1, 1, 2, 1.5))],
            coordinate_transformation_mode="align_corners",
            nearest_mode="ceil",
        ),
    ),
]


@pytest.mark.parametrize("make", [m for _, m in CASES], ids=[n for n, _ in CASES])
def test_versioned_form_matches_onnxruntime(make):
    m = make()
    shape = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim]
    a = data(*shape)
    want = reference(m, {"a": a})
    got = ours(m, a)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == np.asarray(w).shape
        np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)


def test_hand_worked_values():
    """Opset-1 Pad (`paddings`, `value`), opset-11 Softmax coerced to 2-D, Clip with
    min > max (every element is max), written out by hand."""
    a = f32([1, 2], [3, 4])
    (p,) = ours(model("Pad", [2, 2], 1, out=[2, 3], paddings=[0, 1, 0, 0], value=9.0), a)
    assert p.tolist() == [[9, 1, 2], [9, 3, 4]]
    (c,) = ours(model("Clip", [2, 2], 13, [("lo", f32(3)), ("hi", f32(2))]), a)
    assert c.tolist() == [[2, 2], [2, 2]]
    x = np.log(np.asarray([[[1, 2], [3, 4]]], np.float32))  # 1x2x2, axis 1: one row of 4
    (s,) = ours(model("Softmax", [1, 2, 2], 11, axis=1), x)
    np.testing.assert_allclose(s.reshape(-1), np.asarray([1, 2, 3, 4]) / 10, rtol=1e-6)


REFUSED = [
    (
        "averagepool ceil",
        lambda: model(
            "AveragePool",
            [1, 1, 5, 5],
            12,
            kernel_shape=[2, 2],
            strides=[2, 2],
            ceil_mode=1,
            count_include_pad=1,
        ),
        UnsupportedOpsError,
        "count_include_pad=0 average pools",
    ),
    (
        "resize linear",
        lambda: model(
            "Resize", [1, 1, 2, 2], 13, [("", None), ("sc", f32(1, 1, 2, 2))], mode="linear"
        ),
        UnsupportedOpsError,
        "only nearest",
    ),
    (
        "upsample v9 bilinear",
        lambda: model("Upsample", [1, 1, 2, 2], 9, [("sc", f32(1, 1, 2, 2))], mode="linear"),
        UnsupportedOpsError,
        "only nearest",
    ),
    (
        "resize v18 antialias",
        lambda: model(
            "Resize", [1, 1, 2, 2], 18, [("", None), ("sc", f32(1, 1, 2, 2))], antialias=1
        ),
        UnsupportedOpsError,
        "antialias",
    ),
    (
        "squeeze v1 negative axis",
        lambda: model("Squeeze", [2, 1], 1, out=[2], axes=[-1]),
        ModelImportError,
        "shape inference",
    ),
    (
        "unsqueeze v1 negative axis",
        lambda: model("Unsqueeze", [2], 1, out=[2, 1], axes=[-1]),
        ModelImportError,
        "shape inference",
    ),
]


@pytest.mark.parametrize("make,err,match", [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_unsupported_forms_are_refused_clearly(make, err, match):
    with pytest.raises(err, match=match):
        from_onnx(make())
