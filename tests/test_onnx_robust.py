"""A held-out-style battery of crafted ONNX models and input files (issues 29 and 35):
each hostile, invalid or versioned case asserts the clear refusal (a `TorchLeanError`
naming the problem) or the right answer (against onnx's own reference evaluator)."""

from __future__ import annotations

import os
import zipfile

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from runtime.interop import ModelImportError, from_onnx, load_model  # noqa: E402
from runtime.interop import limits as L  # noqa: E402
from runtime.interop.core import nearest_table_op  # noqa: E402
from spec.errors import TorchLeanError  # noqa: E402

F = TensorProto.FLOAT


def mk(nodes, ins, outs, opset=13, inits=(), ir=None):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in ins],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outs],
        initializer=list(inits),
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir or min(m.ir_version, 8)
    if any(s is None for _, _, s in outs):  # output shapes from onnx's shape inference
        try:
            inf = onnx.shape_inference.infer_shapes(m)
        except Exception:
            return m
        known = {v.name: v for v in [*inf.graph.value_info, *inf.graph.output]}
        for o in m.graph.output:
            if not o.type.tensor_type.HasField("shape") and o.name in known:
                o.type.CopyFrom(known[o.name].type)
    return m


def refused(m, match, **kw):
    with pytest.raises(TorchLeanError, match=match):
        from_onnx(m, **kw)


def agrees(m, feeds, rtol=1e-6):
    """The import's outputs equal onnxruntime's on the same inputs (onnx.reference's where
    onnxruntime is missing; its opset < 13 Softmax ignores the 2-D coercion, so it is
    not the oracle when onnxruntime is there)."""
    try:
        import onnxruntime as ort
    except ImportError:
        ort = None
    try:
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        want = sess.run(None, feeds)
    except Exception:  # no onnxruntime, or an opset it does not implement (Pad-1)
        want = ReferenceEvaluator(m).run(None, feeds)
    got, _ = from_onnx(m, inputs=feeds).run("float64")
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert np.asarray(g).shape == np.asarray(w).shape
        np.testing.assert_allclose(np.asarray(g), w, rtol=rtol, atol=1e-6)


def x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def i64(*v):
    return np.asarray(v, dtype=np.int64)


def const(name, arr):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(arr))


# ----------------------------------------------------------------------------- files
def test_empty_corrupt_truncated_and_device_files(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(ModelImportError, match="empty"):
        load_model(str(p))
    data = mk([helper.make_node("Relu", ["a"], ["b"])], [("a", F, [2])], [("b", F, [2])])
    blob = data.SerializeToString()
    with pytest.raises(ModelImportError, match=r"not a valid ONNX model|no graph"):
        from_onnx(blob[: len(blob) // 2])
    with pytest.raises(ModelImportError):
        from_onnx(b"\xff\xfe garbage \x00" * 10)
    if os.path.exists("/dev/zero"):
        with pytest.raises(ModelImportError, match="not a regular file"):
            from_onnx("/dev/zero")
    with pytest.raises(ModelImportError, match="cannot read"):
        from_onnx(str(tmp_path / "missing.onnx"))


def test_file_size_cap(tmp_path):
    m = mk([helper.make_node("Relu", ["a"], ["b"])], [("a", F, [2])], [("b", F, [2])])
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    with L.limits(max_file_bytes=10), pytest.raises(L.LimitError, match="max_file_bytes=10"):
        from_onnx(str(p))
    assert from_onnx(str(p)).graph is not None


def _external_model(location: str):
    t = numpy_helper.from_array(np.arange(4, dtype=np.float32), "w")
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    return mk(
        [helper.make_node("Add", ["a", "w"], ["b"])], [("a", F, [4])], [("b", F, [4])], inits=[t]
    )


def test_external_data_confined(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    ok = _external_model("w.bin")
    refused(ok, "pass base_dir=")  # a ModelProto without a base directory
    refused(ok.SerializeToString(), "pass base_dir=")  # bytes likewise
    got, _ = from_onnx(ok, base_dir=str(tmp_path), inputs={"a": np.zeros(4)}).run()
    np.testing.assert_array_equal(got[0], [0, 1, 2, 3])
    p = tmp_path / "m.onnx"
    p.write_bytes(ok.SerializeToString())  # by path: the model's directory
    np.testing.assert_array_equal(load_model(str(p), {"a": np.ones(4)}).run()[0][0], [1, 2, 3, 4])
    sub = tmp_path / "sub"
    sub.mkdir()
    refused(_external_model("../w.bin"), "leaves the base directory", base_dir=str(sub))
    refused(_external_model(str(tmp_path / "w.bin")), "absolute", base_dir=str(sub))
    os.symlink(tmp_path / "w.bin", sub / "link.bin")
    refused(_external_model("link.bin"), "symbolic link", base_dir=str(sub))
    if os.path.exists("/dev/zero"):
        os.symlink("/dev/zero", sub / "zero.bin")
        refused(_external_model("zero.bin"), "symbolic link", base_dir=str(sub))
    refused(_external_model("nope.bin"), "does not exist", base_dir=str(sub))
    (sub / "short.bin").write_bytes(b"\0" * 8)
    refused(_external_model("short.bin"), "does not fit", base_dir=str(sub))


def test_npz_inputs_are_checked_before_inflating(tmp_path):
    m = mk([helper.make_node("Relu", ["a"], ["b"])], [("a", F, [2])], [("b", F, [2])])
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    good = tmp_path / "good.npz"
    np.savez(good, a=np.array([-1.0, 2.0]))
    np.testing.assert_array_equal(load_model(str(p), str(good)).run()[0][0], [0, 2])
    cplx = tmp_path / "c.npz"
    np.savez(cplx, a=np.array([1 + 2j, 3j]))
    with pytest.raises(ModelImportError, match="complex"):
        load_model(str(p), str(cplx))
    # a header declaring 10**10 elements, with no data behind it: refused from the header
    bomb = tmp_path / "bomb.npz"
    hdr = {"descr": "<f8", "fortran_order": False, "shape": (10**10,)}
    with zipfile.ZipFile(bomb, "w") as z, z.open("a.npy", "w") as f:
        np.lib.format.write_array_header_1_0(f, hdr)
    with pytest.raises(L.LimitError, match="max_tensor_elements"):
        load_model(str(p), str(bomb))
    obj = tmp_path / "o.npz"
    np.savez(obj, a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ModelImportError, match="objects"):
        load_model(str(p), str(obj))
    with pytest.raises(ModelImportError, match="unknown input"):
        load_model(str(p), {"zz": np.ones(2)})


# ----------------------------------------------------------------------------- limits
def test_size_caps_refuse_before_allocating():
    huge = mk([helper.make_node("Relu", ["a"], ["b"])], [("a", F, [10**9, 8])], [("b", F, None)])
    refused(huge, "max_tensor_elements")
    ex = mk(
        [const("s", i64(10**6, 10**6)), helper.make_node("Expand", ["a", "s"], ["b"])],
        [("a", F, [1, 1])],
        [("b", F, None)],
    )
    refused(ex, "max_tensor_elements")
    conv = mk(
        [helper.make_node("Conv", ["a", "w"], ["b"], pads=[10**5] * 4)],
        [("a", F, [1, 1, 4, 4]), ("w", F, [1, 1, 3, 3])],
        [("b", F, None)],
    )
    refused(conv, "max_tensor_elements")
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["co"]), helper.make_node("Identity", ["v"], ["vo"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", TensorProto.INT64, [1]),
        ],
        [
            helper.make_tensor_value_info("co", TensorProto.BOOL, []),
            helper.make_tensor_value_info("vo", TensorProto.INT64, [1]),
        ],
    )
    loop = mk(
        [
            const("M", np.asarray(10**12, dtype=np.int64)),
            const("c", np.asarray(True)),
            const("v", i64(1)),
            helper.make_node("Loop", ["M", "c", "v"], ["o"], body=body),
            helper.make_node("Cast", ["o"], ["of"], to=F),
            helper.make_node("Add", ["a", "of"], ["b"]),
        ],
        [("a", F, [1])],
        [("b", F, [1])],
    )
    refused(loop, "max_loop_trips")
    with L.limits(max_tensor_elements=3):
        refused(
            mk([helper.make_node("Relu", ["a"], ["b"])], [("a", F, [4])], [("b", F, [4])]),
            "max_tensor_elements=3",
        )
    with pytest.raises(L.LimitError, match="unknown limit"):
        L.set_limits(max_bananas=1)


# ----------------------------------------------------------------------------- validation
def _one(op, shape, opset=13, out=None, extra_ins=(), **attrs):
    ins = [("a", F, shape), *extra_ins]
    return mk(
        [helper.make_node(op, [n for n, _, _ in ins], ["b"], **attrs)],
        ins,
        [("b", F, out)],
        opset=opset,
    )


def _bad(op, shape, opset=13, out=None, extra_ins=(), **attrs):
    """An invalid one-node model whose output is declared (shape inference cannot give it)."""
    return _one(op, shape, opset, out or shape, extra_ins, **attrs)


INVALID = [
    ("softmax axis", lambda: _bad("Softmax", [2, 3], axis=5), "axis|Softmax"),
    ("transpose perm", lambda: _bad("Transpose", [2, 3], perm=[0, 0]), "perm|permutation"),
    (
        "reduce dup axes",
        lambda: _bad("ReduceSum", [2, 3], opset=11, out=[2, 1], axes=[1, 1]),
        "repeat|axes",
    ),
    ("reduce axis range", lambda: _bad("ReduceMax", [2, 3], opset=11, axes=[4]), "out of range"),
    (
        "concat axis",
        lambda: mk(
            [helper.make_node("Concat", ["a", "a"], ["b"], axis=3)],
            [("a", F, [2])],
            [("b", F, [4])],
        ),
        "axis",
    ),
    ("squeeze non-1", lambda: _bad("Squeeze", [2, 3], opset=11, axes=[0]), "Squeeze|size"),
    (
        "layer norm axis",
        lambda: _bad("LayerNormalization", [2, 3], opset=17, axis=4, extra_ins=[("s", F, [3])]),
        "axis",
    ),
    (
        "conv group 0",
        lambda: mk(
            [helper.make_node("Conv", ["a", "w"], ["b"], group=0)],
            [("a", F, [1, 1, 3, 3]), ("w", F, [1, 1, 1, 1])],
            [("b", F, None)],
        ),
        "group",
    ),
    (
        "gather out of range",
        lambda: mk(
            [const("i", i64(5)), helper.make_node("Gather", ["a", "i"], ["b"])],
            [("a", F, [3, 2])],
            [("b", F, None)],
        ),
        "range",
    ),
    (
        "two writers",
        lambda: mk(
            [helper.make_node("Relu", ["a"], ["b"]), helper.make_node("Neg", ["a"], ["b"])],
            [("a", F, [2])],
            [("b", F, [2])],
        ),
        "written once|already",
    ),
    (
        "dangling",
        lambda: mk(
            [helper.make_node("Add", ["a", "ghost"], ["b"])], [("a", F, [2])], [("b", F, [2])]
        ),
        "dangling",
    ),
    (
        "cycle",
        lambda: mk(
            [helper.make_node("Add", ["a", "c"], ["b"]), helper.make_node("Relu", ["b"], ["c"])],
            [("a", F, [2])],
            [("b", F, [2])],
        ),
        "cycle",
    ),
    ("no shape", lambda: _bad("Relu", None), "no shape"),
    ("negative dim", lambda: _bad("Relu", [2, -3]), "negative"),
    ("opset 0", lambda: _bad("Relu", [2], opset=0), "opset"),
    ("opset 99", lambda: _bad("Relu", [2], opset=99), "opset"),
    (
        "undefined type",
        lambda: mk(
            [helper.make_node("Relu", ["a"], ["b"])],
            [("a", TensorProto.UNDEFINED, [2])],
            [("b", F, [2])],
        ),
        "UNDEFINED",
    ),
    (
        "nan epsilon",
        lambda: _bad(
            "LayerNormalization", [2, 3], opset=17, epsilon=float("nan"), extra_ins=[("s", F, [3])]
        ),
        "NaN",
    ),
    ("dropout training", lambda: _bad("Dropout", [2], opset=6, is_test=0), "training"),
    ("flatten axis", lambda: _bad("Flatten", [2, 3], axis=4), "out of range|axis"),
    ("unsqueeze dup", lambda: _bad("Unsqueeze", [2], opset=11, axes=[0, 0]), "repeat|axes"),
]


@pytest.mark.parametrize(
    "make,match", [(m, r) for _, m, r in INVALID], ids=[n for n, _, _ in INVALID]
)
def test_invalid_models_are_refused(make, match):
    refused(make(), match)


def test_missing_opset_non_utf8_and_sequence_types():
    m = _one("Relu", [2])
    del m.opset_import[:]
    refused(m, "opset")
    m = _one("Relu", [2])
    m.graph.node[0].attribute.append(helper.make_attribute("junk", b"\xff\xfe"))
    refused(m, "UTF-8")
    seq = helper.make_tensor_sequence_value_info("s", F, [2])
    g = helper.make_graph(
        [helper.make_node("SequenceAt", ["s", "i"], ["b"])],
        "g",
        [seq, helper.make_tensor_value_info("i", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("b", F, [2])],
    )
    refused(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "a sequence")


def test_unknown_input_names_and_integer_outputs():
    m = _one("Relu", [2])
    refused(m, "unknown input", inputs={"a": np.ones(2), "typo": np.ones(2)})
    assert from_onnx(m, inputs={"a": np.ones(2)}).graph is not None
    shape = mk(
        [helper.make_node("Shape", ["a"], ["b"])],
        [("a", F, [2, 5])],
        [("b", TensorProto.INT64, [2])],
    )
    np.testing.assert_array_equal(from_onnx(shape).run()[0][0], [2, 5])


# ----------------------------------------------------------------------------- right answers
def test_silent_wrong_answers_fixed():
    a = x(2, 3, 4)
    flat = _one("Flatten", [2, 3, 4], axis=-1)
    assert np.asarray(from_onnx(flat, inputs={"a": a}).run()[0][0]).shape == (6, 4)
    agrees(flat, {"a": a})
    noop = mk(
        [
            const("ax", np.zeros(0, np.int64)),
            helper.make_node("ReduceSum", ["a", "ax"], ["b"], noop_with_empty_axes=1),
        ],
        [("a", F, [2, 3])],
        [("b", F, [2, 3])],
    )
    agrees(noop, {"a": x(2, 3)})
    pad2 = _one("Pad", [1, 2], opset=2, pads=[0, 1, 0, 2], value=2.0)
    agrees(pad2, {"a": x(1, 2)})
    gneg = mk(
        [const("i", i64(-1, 0)), helper.make_node("Gather", ["a", "i"], ["b"], axis=1)],
        [("a", F, [2, 3])],
        [("b", F, None)],
    )
    agrees(gneg, {"a": x(2, 3)})


VERSIONED = [
    (
        "pad attr v1",
        lambda: _one("Pad", [2, 3], opset=1, out=[3, 5], paddings=[1, 0, 0, 2], value=1.5),
    ),
    (
        "pad input v11",
        lambda: mk(
            [
                const("p", i64(1, 0, 0, 2)),
                const("v", np.float32(-2)),
                helper.make_node("Pad", ["a", "p", "v"], ["b"]),
            ],
            [("a", F, [2, 3])],
            [("b", F, None)],
            opset=11,
        ),
    ),
    (
        "pad axes v18",
        lambda: mk(
            [
                const("p", i64(2, 1)),
                const("ax", i64(-1)),
                helper.make_node("Pad", ["a", "p", "", "ax"], ["b"], mode="reflect"),
            ],
            [("a", F, [2, 4])],
            [("b", F, None)],
            opset=18,
        ),
    ),
    (
        "pad edge crop",
        lambda: (
            _one("Pad", [2, 5], opset=11, extra_ins=(), out=None)
            if False
            else mk(
                [
                    const("p", i64(0, 2, 0, -1)),
                    helper.make_node("Pad", ["a", "p"], ["b"], mode="edge"),
                ],
                [("a", F, [2, 5])],
                [("b", F, None)],
                opset=13,
            )
        ),
    ),
    ("clip attr v6", lambda: _one("Clip", [3, 4], opset=6, min=-0.5, max=0.25)),
    (
        "clip input v11",
        lambda: mk(
            [const("lo", np.float32(-0.1)), helper.make_node("Clip", ["a", "lo"], ["b"])],
            [("a", F, [3, 4])],
            [("b", F, None)],
            opset=11,
        ),
    ),
    (
        "split attr v11",
        lambda: mk(
            [helper.make_node("Split", ["a"], ["b", "c"], axis=1, split=[1, 3])],
            [("a", F, [2, 4])],
            [("b", F, None), ("c", F, None)],
            opset=11,
        ),
    ),
    (
        "split input v13",
        lambda: mk(
            [const("s", i64(3, 1)), helper.make_node("Split", ["a", "s"], ["b", "c"], axis=-1)],
            [("a", F, [2, 4])],
            [("b", F, None), ("c", F, None)],
            opset=13,
        ),
    ),
    (
        "split num_outputs v18",
        lambda: mk(
            [helper.make_node("Split", ["a"], ["b", "c"], num_outputs=2)],
            [("a", F, [5, 2])],
            [("b", F, None), ("c", F, None)],
            opset=18,
        ),
    ),
    (
        "reduce_mean attr v13",
        lambda: _one("ReduceMean", [2, 3, 4], opset=13, axes=[0, 2], keepdims=0),
    ),
    (
        "reduce_mean input v18",
        lambda: mk(
            [const("ax", i64(-1)), helper.make_node("ReduceMean", ["a", "ax"], ["b"])],
            [("a", F, [2, 3])],
            [("b", F, None)],
            opset=18,
        ),
    ),
    (
        "reduce_min v18",
        lambda: mk(
            [const("ax", i64(0)), helper.make_node("ReduceMin", ["a", "ax"], ["b"])],
            [("a", F, [2, 3])],
            [("b", F, None)],
            opset=18,
        ),
    ),
    ("squeeze attr v11", lambda: _one("Squeeze", [2, 1, 3], opset=11, axes=[-2])),
    (
        "unsqueeze input v13",
        lambda: mk(
            [const("ax", i64(0, -1)), helper.make_node("Unsqueeze", ["a", "ax"], ["b"])],
            [("a", F, [2, 3])],
            [("b", F, None)],
            opset=13,
        ),
    ),
    ("softmax v11 coerced", lambda: _one("Softmax", [2, 3, 4], opset=11, axis=1)),
    ("logsoftmax v11 default", lambda: _one("LogSoftmax", [2, 3, 4], opset=11)),
    ("softmax v13 axis", lambda: _one("Softmax", [2, 3, 4], opset=13, axis=1)),
    (
        "slice attr v9",
        lambda: _one("Slice", [4, 5], opset=9, starts=[1, -3], ends=[100, -1], axes=[0, 1]),
    ),
    (
        "slice input v10 steps",
        lambda: mk(
            [
                const("s", i64(-1)),
                const("e", i64(-(2**63))),
                const("ax", i64(1)),
                const("st", i64(-2)),
                helper.make_node("Slice", ["a", "s", "e", "ax", "st"], ["b"]),
            ],
            [("a", F, [2, 5])],
            [("b", F, None)],
            opset=13,
        ),
    ),
    (
        "upsample v9",
        lambda: mk(
            [
                const("sc", np.array([1, 1, 2, 3], np.float32)),
                helper.make_node("Upsample", ["a", "sc"], ["b"]),
            ],
            [("a", F, [1, 1, 2, 2])],
            [("b", F, None)],
            opset=9,
        ),
    ),
    (
        "resize nearest v13",
        lambda: mk(
            [
                const("sc", np.array([1, 1, 2, 2], np.float32)),
                helper.make_node("Resize", ["a", "", "sc"], ["b"], mode="nearest"),
            ],
            [("a", F, [1, 1, 2, 3])],
            [("b", F, None)],
            opset=13,
        ),
    ),
    ("leaky relu", lambda: _one("LeakyRelu", [3, 4], alpha=0.3)),
    (
        "prelu",
        lambda: mk(
            [helper.make_node("PRelu", ["a", "s"], ["b"])],
            [("a", F, [2, 3, 2]), ("s", F, [3, 1])],
            [("b", F, None)],
            opset=13,
        ),
    ),
    (
        "elu selu",
        lambda: mk(
            [
                helper.make_node("Elu", ["a"], ["c"], alpha=0.7),
                helper.make_node("Selu", ["c"], ["b"]),
            ],
            [("a", F, [3, 4])],
            [("b", F, None)],
        ),
    ),
    (
        "hardsigmoid softsign",
        lambda: mk(
            [
                helper.make_node("HardSigmoid", ["a"], ["c"]),
                helper.make_node("Softsign", ["c"], ["b"]),
            ],
            [("a", F, [3, 4])],
            [("b", F, None)],
        ),
    ),
    (
        "tile",
        lambda: mk(
            [const("r", i64(2, 3)), helper.make_node("Tile", ["a", "r"], ["b"])],
            [("a", F, [2, 2])],
            [("b", F, None)],
        ),
    ),
    (
        "sum mean variadic",
        lambda: mk(
            [
                helper.make_node("Sum", ["a", "a", "a"], ["c"]),
                helper.make_node("Mean", ["c", "a"], ["b"]),
            ],
            [("a", F, [3])],
            [("b", F, None)],
        ),
    ),
    (
        "conv1d asym pads",
        lambda: mk(
            [helper.make_node("Conv", ["a", "w"], ["b"], pads=[1, 2], strides=[2])],
            [("a", F, [1, 2, 7]), ("w", F, [3, 2, 3])],
            [("b", F, None)],
        ),
    ),
    ("maxpool1d", lambda: _one("MaxPool", [1, 2, 9], kernel_shape=[3], strides=[2], pads=[1, 1])),
    (
        "instance norm",
        lambda: mk(
            [helper.make_node("InstanceNormalization", ["a", "s", "t"], ["b"])],
            [("a", F, [2, 3, 4]), ("s", F, [3]), ("t", F, [3])],
            [("b", F, None)],
        ),
    ),
    (
        "sequences",
        lambda: mk(
            [
                helper.make_node("SplitToSequence", ["a"], ["s"], axis=1, keepdims=0),
                helper.make_node("SequenceLength", ["s"], ["n"]),
                helper.make_node("ConcatFromSequence", ["s"], ["b"], axis=0, new_axis=1),
            ],
            [("a", F, [2, 3])],
            [("b", F, None), ("n", TensorProto.INT64, None)],
        ),
    ),
]


@pytest.mark.parametrize("make", [m for _, m in VERSIONED], ids=[n for n, _ in VERSIONED])
def test_versioned_forms_match_the_reference(make):
    m = make()
    feeds = {}
    for k, vi in enumerate(m.graph.input):
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = x(*shape, seed=k)
    agrees(m, feeds)


def test_sequence_out_of_range_and_gradient_refused():
    m = mk(
        [
            helper.make_node("SequenceConstruct", ["a", "a"], ["s"]),
            const("i", i64(2)),
            helper.make_node("SequenceAt", ["s", "i"], ["b"]),
        ],
        [("a", F, [2])],
        [("b", F, None)],
    )
    refused(m, "out of range")


def test_nearest_table_op_is_relevant_or_absent():
    assert nearest_table_op("Tile") not in ("silu",)
    assert nearest_table_op("Pow") != "transpose"
    assert nearest_table_op("Sign") != "sin"
    assert nearest_table_op("StringNormalizer") == ""
    assert nearest_table_op("Softmax") == "softmax"
    assert nearest_table_op("aten.hardtanh.default") in ("hardtanh", "clamp")
    assert nearest_table_op("ReduceMean") == "reduce_mean"


def test_every_error_is_a_torchlean_error():
    assert issubclass(L.LimitError, ModelImportError)
    assert issubclass(ModelImportError, TorchLeanError)


POOLS = [
    (
        "maxpool asym pads",
        lambda: _one(
            "MaxPool", [1, 2, 6, 6], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 0, 1, 1]
        ),
    ),
    (
        "avgpool count_include_pad=0",
        lambda: _one("AveragePool", [1, 2, 5, 5], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    ),
    (
        "avgpool asym pads",
        lambda: _one(
            "AveragePool",
            [1, 1, 6, 6],
            kernel_shape=[2, 2],
            strides=[2, 2],
            pads=[1, 0, 0, 1],
            count_include_pad=1,
        ),
    ),
    ("lrn", lambda: _one("LRN", [1, 5, 3, 3], size=3, alpha=0.2, beta=0.75, bias=2.0)),
]


@pytest.mark.parametrize("make", [m for _, m in POOLS], ids=[n for n, _ in POOLS])
def test_pools_and_lrn_match_the_reference(make):
    test_versioned_forms_match_the_reference(make)
