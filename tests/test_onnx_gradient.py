"""ONNX `ai.onnx.preview.training.Gradient` computed by the project's reverse sweep:
ONNX's two backend cases, hand-worked derivatives (at other values, w.r.t.
intermediates, with repeated input values), and clear refusals of malformed nodes."""

from __future__ import annotations

import os

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from runtime.interop import ModelImportError, UnsupportedOpsError, from_onnx  # noqa: E402
from runtime.interop.core import InvalidModelError  # noqa: E402
from runtime.interop.onnx_backend import data_dir, run_case  # noqa: E402

F = TensorProto.FLOAT
TRAIN = "ai.onnx.preview.training"


def grad(ins, outs, xs, y, zs=(), name="g"):
    kw = {"zs": list(zs)} if zs else {}
    return helper.make_node("Gradient", ins, outs, name=name, domain=TRAIN, xs=list(xs), y=y, **kw)


def model(nodes, ins, outs, inits=(), train_version=1, typed=()):
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in ins],
        [helper.make_tensor_value_info(n, F, s) for n, s in outs],
        initializer=list(inits),
        value_info=[helper.make_tensor_value_info(n, F, s) for n, s in typed],
    )
    ops = [helper.make_opsetid("", 13), helper.make_opsetid(TRAIN, train_version)]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


def run(m, **feeds):
    got, _ = from_onnx(m, inputs={k: np.asarray(v, np.float32) for k, v in feeds.items()}).run(
        "float64"
    )
    return [np.asarray(g) for g in got]


@pytest.mark.parametrize("case", ["test_gradient_of_add", "test_gradient_of_add_and_mul"])
def test_the_backend_cases_pass(case):
    assert run_case(os.path.join(data_dir(), "simple", case)) == ("pass", "")


def test_add_and_mul_by_hand_at_other_values():
    """d = (a + b) * a: dd/da = 2a + b, dd/db = a (the backend case's graph)."""
    m = model(
        [
            helper.make_node("Add", ["a", "b"], ["c"]),
            helper.make_node("Mul", ["c", "a"], ["d"]),
            grad(["a", "b"], ["da", "db"], ["a", "b"], "d"),
        ],
        [("a", []), ("b", [])],
        [("d", []), ("da", []), ("db", [])],
    )
    d, da, db = run(m, a=1.5, b=-2.0)
    assert (d, da, db) == (-0.75, 1.0, 1.5)
    imp = from_onnx(m, inputs={"a": np.float32(1.5), "b": np.float32(-2.0)})
    spec_outs, _ = imp.spec_run("float32")
    assert [float(t.data[0]) for t in spec_outs] == [-0.75, 1.0, 1.5]


def test_matrix_case_with_a_held_input():
    """y = ReduceSum(Tanh(x @ W)): dy/dW = xᵀ (1 - tanh²(x W)), with x in zs (held)."""
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((3, 4)).astype(np.float32)
    wv = rng.standard_normal((4, 2)).astype(np.float32)
    m = model(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"]),
            helper.make_node("Tanh", ["h"], ["t"]),
            helper.make_node("ReduceSum", ["t"], ["y"], keepdims=0),
            grad(["W", "x"], ["dW"], ["W"], "y", zs=["x"]),
        ],
        [("x", [3, 4])],
        [("y", []), ("dW", [4, 2])],
        inits=[numpy_helper.from_array(wv, "W")],
    )
    _, dw = run(m, x=xv)
    x64, w64 = xv.astype(np.float64), wv.astype(np.float64)
    want = x64.T @ (1 - np.tanh(x64 @ w64) ** 2)
    np.testing.assert_allclose(dw, want, rtol=1e-12, atol=1e-14)


def test_at_another_value_and_wrt_an_intermediate():
    """y = Σ h * h with h = Exp(a): the gradient w.r.t. h is 2h; fed h2 = h + 1 instead of
    h (the spec's "H_1" form) it is 2(h + 1)."""
    one = numpy_helper.from_array(np.asarray(1.0, np.float32), "one")
    m = model(
        [
            helper.make_node("Exp", ["a"], ["h"]),
            helper.make_node("Mul", ["h", "h"], ["hh"]),
            helper.make_node("ReduceSum", ["hh"], ["y"], keepdims=0),
            helper.make_node("Add", ["h", "one"], ["h2"]),
            grad(["h"], ["dh"], ["h"], "y", name="at_h"),
            grad(["h2"], ["dh2"], ["h"], "y", name="at_h2"),
        ],
        [("a", [2])],
        [("dh", [2]), ("dh2", [2])],
        inits=[one],
    )
    av = np.asarray([0.5, -1.0], np.float32)
    dh, dh2 = run(m, a=av)
    h = np.exp(av.astype(np.float64))
    np.testing.assert_allclose(dh, 2 * h, rtol=1e-15)
    np.testing.assert_allclose(dh2, 2 * (h + 1), rtol=1e-15)


def test_the_same_value_for_two_xs_gives_partial_derivatives():
    """r = p * q at p = q = a: dr/dp = q = a and dr/dq = p = a (not 2a, the total)."""
    m = model(
        [
            helper.make_node("Mul", ["p", "q"], ["r"]),
            helper.make_node("ReduceSum", ["r"], ["s"], keepdims=0),
            grad(["a", "a"], ["dp", "dq"], ["p", "q"], "s"),
        ],
        [("p", [2]), ("q", [2]), ("a", [2])],
        [("dp", [2]), ("dq", [2])],
    )
    dp, dq = run(m, p=[9.0, 9.0], q=[7.0, 7.0], a=[3.0, -2.0])
    assert dp.tolist() == [3.0, -2.0] and dq.tolist() == [3.0, -2.0]


def test_omitted_outputs_and_run_grads_of_the_value_outputs_only():
    m = model(
        [
            helper.make_node("Mul", ["a", "b"], ["c"]),
            grad(["a", "b"], ["", "db"], ["a", "b"], "c"),
        ],
        [("a", []), ("b", [])],
        [("c", []), ("db", [])],
    )
    imp = from_onnx(m, inputs={"a": np.float32(2.0), "b": np.float32(5.0)})
    outs, grads = imp.run("float64")
    assert [float(o) for o in outs] == [10.0, 2.0]
    assert (float(grads["a"]), float(grads["b"])) == (5.0, 2.0)  # d(c)/d., not d(c + db)
    with pytest.raises(ModelImportError, match="Gradient outputs"):
        imp.to_onnx()


def _simple(**kw):
    """s = Σ a * b and a Gradient node with `kw` replacing its defaults."""
    spec = dict(ins=["a", "b"], outs=["da"], xs=["a", "b"], y="s", version=1, extra=[])
    spec.update(kw)
    attrs = [helper.make_attribute("xs", spec["xs"], attr_type=onnx.AttributeProto.STRINGS)]
    attrs += [helper.make_attribute(k, spec[k]) for k in ("y", "zs", "bogus") if k in spec]
    node = helper.make_node("Gradient", spec["ins"], spec["outs"], name="g", domain=TRAIN)
    node.attribute.extend(attrs)
    outs = [("s", [])] + [(o, [2]) for o in spec["outs"] if o]
    return model(
        [
            helper.make_node("Mul", ["a", "b"], ["c"]),
            helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
            *spec["extra"],
            node,
        ],
        [("a", [2]), ("b", [2]), ("q", [2])],
        outs,
        train_version=spec["version"],
    )


BAD = [
    ("y not scalar", {"y": "c"}, "one element"),
    ("y missing", {"y": ""}, "attribute 'y'"),
    ("xs empty", {"xs": [], "zs": ["a"], "ins": ["a"]}, "non-empty attribute 'xs'"),
    ("xs repeated", {"xs": ["a", "a"]}, "distinct"),
    ("y in xs", {"xs": ["a", "s"]}, "also named"),
    ("input count", {"ins": ["a"]}, "1 inputs; xs"),
    ("too many outputs", {"xs": ["a"], "zs": ["b"], "outs": ["x1", "x2"]}, "2 outputs for 1"),
    ("unnamed dependency", {"xs": ["a"], "ins": ["a"]}, "model input 'b'"),
    ("unknown name", {"xs": ["a", "b", "nope"], "ins": ["a", "b", "q"]}, "nope"),
    ("y unknown", {"y": "nope"}, "'nope' is not a value"),
]


@pytest.mark.parametrize("kw,match", [(k, m) for _, k, m in BAD], ids=[n for n, _, _ in BAD])
def test_malformed_gradients_are_refused(kw, match):
    with pytest.raises(InvalidModelError, match=match):
        from_onnx(_simple(**kw))


def test_an_unknown_attribute_is_refused_by_the_checker():
    with pytest.raises(ModelImportError, match="bogus"):
        from_onnx(_simple(bogus=1))


def test_unsupported_forms_name_only_gradient():
    # a Gradient output read by another node
    m = _simple()
    m.graph.node.append(helper.make_node("Neg", ["da"], ["n"]))
    m.graph.output.append(helper.make_tensor_value_info("n", F, [2]))
    _expect_unsupported(m, "read by Neg")
    # an unknown version of the training domain
    _expect_unsupported(_simple(version=7), "opset 7")


def test_higher_order_is_refused():
    m = model(
        [
            helper.make_node("Mul", ["a", "a"], ["c"]),
            helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
            grad(["a"], ["da"], ["a"], "s", name="g1"),
            helper.make_node("ReduceSum", ["da"], ["t"], keepdims=0),
            grad(["a"], ["dda"], ["a"], "t", name="g2"),
        ],
        [("a", [2])],
        [("dda", [2])],
        typed=[("da", [2])],
    )
    _expect_unsupported(m, "higher order")


def _expect_unsupported(m, match):
    with pytest.raises(UnsupportedOpsError) as e:
        from_onnx(m)
    assert set(e.value.ops) == {f"{TRAIN}.Gradient"}, e.value.ops
    assert match in str(e.value)
