"""Model import (runtime.interop): real models from PyTorch (torch.export) and from ONNX.

References are independent of the code under test: PyTorch's own float64 autograd for the
torch route (and for torch-exported ONNX files), and for ONNX models built with
onnx.helper (no torch needed) the ONNX reference evaluator in float64, with gradients
checked against central finite differences of that evaluator along random directions.
"Within 1e-9 relative" means |got - want| <= 1e-9 * max|want| per array.
"""

from __future__ import annotations

import io
import math
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

from runtime.backends import to_spec
from runtime.interop import ModelImportError, UnsupportedOpsError, from_onnx, load_model

RTOL = 1e-9


def close(got, want, rtol=RTOL):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-300)
    err = float(np.max(np.abs(got - want))) if want.size else 0.0
    assert err <= rtol * scale, f"max abs error {err:.3g} vs scale {scale:.3g}"


# --------------------------------------------------------------------------- torch models
def _torch():
    return pytest.importorskip("torch", reason="the torch package is not installed")


def torch_models():
    """name -> (module in float64 eval mode, example args): the three model kinds."""
    torch = _torch()
    nn, F = torch.nn, torch.nn.functional

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = nn.Linear(3, 5), nn.Linear(5, 2)

        def forward(self, x):
            return self.l2(torch.tanh(self.l1(x)))

    class CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2)
            self.drop, self.fc = nn.Dropout(0.5), nn.Linear(8, 3)

        def forward(self, x, y):
            h = F.max_pool2d(F.relu(self.bn(self.conv(x))), 2)
            return F.cross_entropy(self.fc(self.drop(torch.flatten(h, 1))), y)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln1, self.ln2 = nn.Embedding(5, 4), nn.LayerNorm(4), nn.LayerNorm(4)
            self.att = nn.MultiheadAttention(4, 2, batch_first=True)
            self.ff = nn.Sequential(nn.Linear(4, 8), nn.GELU(approximate="tanh"), nn.Linear(8, 4))

        def forward(self, ids):
            h = self.emb(ids)
            a = self.ln1(h)
            h = h + self.att(a, a, a, need_weights=False)[0]
            return h + self.ff(self.ln2(h))

    gen = torch.Generator().manual_seed(0)
    out = {}
    for name, m, args in [
        ("mlp", MLP(), (torch.randn(2, 3, generator=gen, dtype=torch.float64),)),
        (
            "cnn",
            CNN(),
            (torch.randn(2, 1, 4, 4, generator=gen, dtype=torch.float64), torch.tensor([0, 2])),
        ),
        ("block", Block(), (torch.tensor([[1, 3, 0]]),)),
    ]:
        m = m.double().eval()
        with torch.no_grad():
            for p in m.parameters():  # distinct values (ONNX export dedups equal initializers)
                p.uniform_(-1, 1, generator=gen)
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d):
                    mod.running_mean.uniform_(-0.5, 0.5, generator=gen)
                    mod.running_var.uniform_(0.5, 1.5, generator=gen)
        out[name] = (m, args)
    return out


def torch_reference(m, args):
    """PyTorch float64: outputs and d(sum of outputs)/d(every parameter and float input)."""
    args = tuple(a.clone().requires_grad_(True) if a.is_floating_point() else a for a in args)
    for p in m.parameters():
        p.grad = None
    out = m(*args)
    out.sum().backward()
    grads = {n: p.grad.numpy().copy() for n, p in m.named_parameters()}
    return out.detach().numpy(), grads, [a.grad.numpy() for a in args if a.is_floating_point()]


MODELS = ["mlp", "cnn", "block"]


@pytest.fixture(scope="module")
def torch_imports():
    from runtime.interop import from_torch

    return {k: (m, a, from_torch(m, a)) for k, (m, a) in torch_models().items()}


@pytest.fixture(scope="module")
def torch_onnx_imports():
    torch = _torch()
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    out = {}
    for k, (m, args) in torch_models().items():
        f = io.BytesIO()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(m, args, f, dynamo=False, opset_version=17, do_constant_folding=False)
        imp0 = from_onnx(f.getvalue())
        imp = from_onnx(
            f.getvalue(), inputs=dict(zip(imp0.input_names, [a.numpy() for a in args], strict=True))
        )
        out[k] = (m, args, imp)
    return out


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("route", ["torch", "onnx"])
def test_outputs_and_every_gradient_equal_pytorch(name, route, request):
    imports = request.getfixturevalue("torch_imports" if route == "torch" else "torch_onnx_imports")
    m, args, imp = imports[name]
    out, grads, input_grads = torch_reference(m, args)
    params = set(grads)
    assert params <= set(imp.values), (
        f"parameters missing from the graph: {params - set(imp.values)}"
    )
    for kernels in ("fast", "ordered"):
        outs, g = imp.run(dtype="float64", kernels=kernels)
        close(outs[0], out)
        for n in params:
            close(g[n], grads[n])
        float_inputs = [n for n in imp.input_names if n in imp.values]
        for n, want in zip(float_inputs, input_grads, strict=True):
            close(g[n], want)


@pytest.mark.parametrize("name", MODELS)
def test_torch_import_names_values_and_graph(name, torch_imports):
    m, _, imp = torch_imports[name]
    state = {k: v.numpy() for k, v in m.state_dict().items()}
    for i, n in imp.names.items():
        assert imp.graph.inputs[i] == imp.values[n].shape
        if n in state:
            assert np.array_equal(imp.values[n], state[n])
    assert set(imp.names.values()) >= set(dict(m.named_parameters()))
    assert imp.graph.num_inputs == len(imp.names)
    if name != "mlp":
        assert imp.int_inputs  # class ids / token ids are static attributes, not graph inputs
    ops = {n.op for n in imp.graph.nodes}
    expected = {
        "mlp": {"linear", "tanh"},
        "cnn": {
            "conv2d",
            "max_pool2d",
            "relu",
            "linear",
            "cross_entropy",
            "one_hot",
            "batch_norm_eval",
        },
        "block": {"embedding", "layer_norm", "scaled_dot_product_attention", "gelu"},
    }[name]
    assert expected <= ops


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("route", ["torch", "onnx"])
def test_ordered_float32_is_bit_identical_to_the_spec(name, route, request):
    imports = request.getfixturevalue("torch_imports" if route == "torch" else "torch_onnx_imports")
    imp = imports[name][2]
    outs, grads = imp.run(dtype="float32", kernels="ordered")
    spec_outs, spec_grads = imp.spec_run("float32")
    from spec.domains import BINARY32

    for o, s in zip(outs, spec_outs, strict=True):
        assert to_spec(o, "float32").same(BINARY32, s)
    for n, s in spec_grads.items():
        assert to_spec(grads[n], "float32").same(BINARY32, s), n
    link = imp.check_link("float32", seed=3)
    assert link.ok, link.text


def test_integer_inputs_rebuild_the_graph(torch_imports):
    torch = _torch()
    m, args, imp = torch_imports["cnn"]
    new_y = np.array([1, 1])
    out, grads, _ = torch_reference(m, (args[0], torch.from_numpy(new_y)))
    outs, g = imp.run(inputs={"y": new_y})
    close(outs[0], out)
    close(g["fc.weight"], grads["fc.weight"])
    assert np.array_equal(imp.int_inputs["y"], args[1].numpy())  # the original is unchanged
    mb, _, ib = torch_imports["block"]
    ids = np.array([[4, 4, 2]])
    out, grads, _ = torch_reference(mb, (torch.from_numpy(ids),))
    outs, g = ib.run(inputs={"ids": ids})
    close(outs[0], out)
    close(g["emb.weight"], grads["emb.weight"])
    with pytest.raises(ModelImportError, match="unknown input"):
        imp.run(inputs={"nope": new_y})


def test_exact_dtype_where_the_ops_allow_it():
    torch = _torch()
    from runtime.interop import from_torch

    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1)).double()
    x = torch.tensor([[0.5, -1.25, 2.0]], dtype=torch.float64)
    imp = from_torch(m.eval(), (x,))
    outs, grads = imp.run(dtype="exact")
    assert all(isinstance(v, Fraction) for v in grads["0.weight"].reshape(-1))
    out64, _ = imp.run(dtype="float64")
    assert abs(float(outs[0][0, 0]) - out64[0][0, 0]) <= 1e-15 * max(1.0, abs(out64[0][0, 0]))
    assert imp.check_link("exact").ok


def test_unsupported_ops_are_listed_together():
    torch = _torch()
    from runtime.interop import from_torch

    F = torch.nn.functional

    class Bad(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            h = F.softplus(self.lin(x), beta=2)  # mapped op, unsupported option
            h = torch.atan(torch.cumprod(h, -1) + torch.cumprod(h, 0))
            h = F.gelu(torch.erf(h))  # mapped (both erf and the exact gelu are table ops)
            return F.max_pool2d(h.reshape(1, 1, 2, 3), 2, ceil_mode=True).sum()  # mapped

    with pytest.raises(UnsupportedOpsError) as ei:
        from_torch(Bad().double().eval(), (torch.randn(2, 3, dtype=torch.float64),))
    e = ei.value
    assert set(e.ops) == {"aten.softplus", "aten.cumprod", "aten.atan"}
    assert e.ops["aten.cumprod"][0] == 2
    assert e.ops["aten.softplus"][1] == "softplus"
    msg = str(e)
    assert "aten.cumprod x2" in msg and "beta=2" in msg and "no graph" in msg


def test_training_mode_is_refused():
    torch = _torch()
    from runtime.interop import from_torch

    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).double().train()
    with pytest.raises(ModelImportError, match=r"training mode.*dropout"):
        from_torch(m, (torch.randn(2, 3, dtype=torch.float64),))


def test_exported_program_file(tmp_path, torch_imports):
    torch = _torch()
    m, args, imp = torch_imports["cnn"]
    path = tmp_path / "cnn.pt2"
    torch.export.save(torch.export.export(m, args), str(path))
    loaded = load_model(str(path))
    assert loaded.graph == imp.graph
    a, b = loaded.run(), imp.run()
    close(a[0][0], b[0][0], 0)


# --------------------------------------------------------------------------- onnx.helper models
def _onnx():
    return pytest.importorskip("onnx", reason="the onnx package is not installed")


def _rand(rng, *shape):
    return rng.uniform(-1, 1, shape)


def onnx_models():
    """Three ONNX models built with onnx.helper (float64, no torch): name -> (model,
    runtime inputs)."""
    onnx = _onnx()
    h, nh = onnx.helper, onnx.numpy_helper
    D = onnx.TensorProto.DOUBLE
    rng = np.random.default_rng(1)

    def init(name, arr):
        return nh.from_array(np.asarray(arr), name)

    def model(nodes, inputs, output, inits, opset):
        g = h.make_graph(nodes, "m", inputs, [h.make_tensor_value_info(output, D, None)], inits)
        return h.make_model(g, opset_imports=[h.make_opsetid("", opset)])

    mlp = model(
        [
            h.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
            h.make_node("Relu", ["h"], ["r"]),
            h.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1),
        ],
        [h.make_tensor_value_info("x", D, [2, 3])],
        "y",
        [
            init("w1", _rand(rng, 4, 3)),
            init("b1", _rand(rng, 4)),
            init("w2", _rand(rng, 2, 4)),
            init("b2", _rand(rng, 2)),
        ],
        17,
    )
    cnn = model(
        [
            h.make_node("Conv", ["x", "cw", "cb"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
            h.make_node("BatchNormalization", ["c", "g", "be", "mu", "var"], ["n"], epsilon=1e-5),
            h.make_node("Relu", ["n"], ["r"]),
            h.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            h.make_node("Flatten", ["p"], ["f"], axis=1),
            h.make_node("Gemm", ["f", "fw", "fb"], ["z"], transB=1),
            h.make_node("SoftmaxCrossEntropyLoss", ["z", "t"], ["loss"], reduction="mean"),
        ],
        [
            h.make_tensor_value_info("x", D, [2, 1, 4, 4]),
            h.make_tensor_value_info("t", onnx.TensorProto.INT64, [2]),
        ],
        "loss",
        [
            init("cw", _rand(rng, 2, 1, 3, 3)),
            init("cb", _rand(rng, 2)),
            init("g", _rand(rng, 2)),
            init("be", _rand(rng, 2)),
            init("mu", _rand(rng, 2) / 2),
            init("var", 1 + _rand(rng, 2) / 2),
            init("fw", _rand(rng, 3, 8)),
            init("fb", _rand(rng, 3)),
        ],
        17,
    )
    L, E, H = 3, 4, 2
    shp = lambda n, v: init(n, np.array(v, dtype=np.int64))  # noqa: E731

    def layer_norm(x, w, b, out):
        """Layer norm from primitive ONNX ops (the reference evaluator's
        LayerNormalization computes its statistics in float32, stash_type=1)."""
        return [
            h.make_node("ReduceMean", [x, "last"], [f"{out}_mu"], keepdims=1),
            h.make_node("Sub", [x, f"{out}_mu"], [f"{out}_xc"]),
            h.make_node("Mul", [f"{out}_xc", f"{out}_xc"], [f"{out}_sq"]),
            h.make_node("ReduceMean", [f"{out}_sq", "last"], [f"{out}_var"], keepdims=1),
            h.make_node("Add", [f"{out}_var", "eps"], [f"{out}_ve"]),
            h.make_node("Sqrt", [f"{out}_ve"], [f"{out}_sd"]),
            h.make_node("Div", [f"{out}_xc", f"{out}_sd"], [f"{out}_n"]),
            h.make_node("Mul", [f"{out}_n", w], [f"{out}_s"]),
            h.make_node("Add", [f"{out}_s", b], [out]),
        ]

    block_nodes = [
        h.make_node("Gather", ["emb", "ids"], ["e"]),
        *layer_norm("e", "l1w", "l1b", "a"),
    ]
    for k in "qkv":
        block_nodes += [
            h.make_node("MatMul", ["a", f"w{k}"], [f"{k}0"]),
            h.make_node("Reshape", [f"{k}0", "heads"], [f"{k}1"]),
            h.make_node("Transpose", [f"{k}1"], [f"{k}2"], perm=[0, 2, 1, 3]),
        ]
    block_nodes += [
        h.make_node("Transpose", ["k2"], ["kt"], perm=[0, 1, 3, 2]),
        h.make_node("MatMul", ["q2", "kt"], ["s0"]),
        h.make_node("Mul", ["s0", "scale"], ["s"]),
        h.make_node("Softmax", ["s"], ["p"], axis=-1),
        h.make_node("MatMul", ["p", "v2"], ["o0"]),
        h.make_node("Transpose", ["o0"], ["o1"], perm=[0, 2, 1, 3]),
        h.make_node("Reshape", ["o1", "merged"], ["o2"]),
        h.make_node("MatMul", ["o2", "wo"], ["o"]),
        h.make_node("Add", ["e", "o"], ["r1"]),
        *layer_norm("r1", "l2w", "l2b", "b"),
        h.make_node("MatMul", ["b", "f1"], ["u0"]),
        h.make_node("Add", ["u0", "f1b"], ["u1"]),
        # tanh GELU as torch's exporter writes it (ONNX's own Gelu function body has
        # float32 constants; see test_onnx_gelu_op)
        h.make_node("Mul", ["u1", "u1"], ["g0"]),
        h.make_node("Mul", ["u1", "g0"], ["g1"]),
        h.make_node("Mul", ["gk", "g1"], ["g2"]),
        h.make_node("Add", ["u1", "g2"], ["g3"]),
        h.make_node("Mul", ["gc", "g3"], ["g4"]),
        h.make_node("Tanh", ["g4"], ["g5"]),
        h.make_node("Add", ["one", "g5"], ["g6"]),
        h.make_node("Mul", ["u1", "g6"], ["g7"]),
        h.make_node("Mul", ["half", "g7"], ["u2"]),
        h.make_node("MatMul", ["u2", "f2"], ["u3"]),
        h.make_node("Add", ["u3", "f2b"], ["u4"]),
        h.make_node("Add", ["r1", "u4"], ["out"]),
    ]
    block = model(
        block_nodes,
        [h.make_tensor_value_info("ids", onnx.TensorProto.INT64, [1, L])],
        "out",
        [
            init("emb", _rand(rng, 5, E)),
            init("l1w", _rand(rng, E)),
            init("l1b", _rand(rng, E)),
            init("wq", _rand(rng, E, E)),
            init("wk", _rand(rng, E, E)),
            init("wv", _rand(rng, E, E)),
            init("wo", _rand(rng, E, E)),
            init("l2w", _rand(rng, E)),
            init("l2b", _rand(rng, E)),
            init("f1", _rand(rng, E, 8)),
            init("f1b", _rand(rng, 8)),
            init("f2", _rand(rng, 8, E)),
            init("f2b", _rand(rng, E)),
            shp("heads", [1, L, H, E // H]),
            shp("merged", [1, L, E]),
            init("scale", np.array(1 / np.sqrt(E // H))),
            shp("last", [-1]),
            init("eps", np.array(1e-5)),
            init("gk", np.array(0.044715)),
            init("gc", np.array(np.sqrt(2 / np.pi))),
            init("one", np.array(1.0)),
            init("half", np.array(0.5)),
        ],
        20,
    )
    return {
        "mlp": (mlp, {"x": _rand(rng, 2, 3)}),
        "cnn": (cnn, {"x": _rand(rng, 2, 1, 4, 4), "t": np.array([2, 0])}),
        "block": (block, {"ids": np.array([[1, 4, 1]])}),
    }


def _reference_sum(model, feeds):
    from onnx.reference import ReferenceEvaluator

    return float(np.sum(ReferenceEvaluator(model).run(None, feeds)[0]))


@pytest.mark.parametrize("name", MODELS)
def test_onnx_helper_models_match_the_onnx_reference(name):
    onnx = _onnx()
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    m, feeds = onnx_models()[name]
    imp = from_onnx(m, inputs=feeds)
    outs, grads = imp.run()
    close(outs[0], ReferenceEvaluator(m).run(None, feeds)[0])
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    rng = np.random.default_rng(7)
    eps = 1e-5
    for n in imp.names.values():  # each gradient along a random direction vs central FD
        base = dict(feeds) if n in feeds else dict(inits)
        d = rng.standard_normal(base[n].shape)

        def at(t, base=base, n=n, d=d):
            vals = dict(base)
            vals[n] = base[n] + t * d
            if n in feeds:
                return _reference_sum(m, vals)
            m2 = onnx.ModelProto()
            m2.CopyFrom(m)
            m2.graph.ClearField("initializer")
            m2.graph.initializer.extend(numpy_helper.from_array(v, k) for k, v in vals.items())
            return _reference_sum(m2, feeds)

        fd = (at(eps) - at(-eps)) / (2 * eps)
        got = float(np.sum(grads[n] * d))
        assert abs(got - fd) <= 1e-6 * max(1.0, abs(fd)), (n, got, fd)


def test_onnx_gelu_op():
    onnx = _onnx()
    from onnx.reference import ReferenceEvaluator

    h = onnx.helper
    D = onnx.TensorProto.DOUBLE
    g = h.make_graph(
        [h.make_node("Gelu", ["x"], ["y"], approximate="tanh")],
        "gelu",
        [h.make_tensor_value_info("x", D, [5])],
        [h.make_tensor_value_info("y", D, None)],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)])
    x = np.array([-2.0, -0.5, 0.0, 0.75, 3.0])
    imp = from_onnx(m, inputs={"x": x})
    assert [n.op for n in imp.graph.nodes] == ["gelu"]
    # ONNX's Gelu function body rounds its constants to float32: agreement to ~1e-7 only
    close(imp.run()[0][0], ReferenceEvaluator(m).run(None, {"x": x})[0], 1e-6)
    tanh_form = imp.run()[0][0]
    # the exact (erf) form is mapped too: checked against x/2·(1 + erf(x/√2)) in float64,
    # which the tanh form misses by ~1e-4 (so a silent fallback to it would fail here)
    m.graph.node[0].attribute[0].s = b"none"
    imp = from_onnx(m, inputs={"x": x})
    assert [n.op for n in imp.graph.nodes] == ["gelu"]
    exact = np.array([v / 2 * (1 + math.erf(v / math.sqrt(2))) for v in x])
    close(imp.run()[0][0], exact, 1e-12)
    close(imp.run()[0][0], ReferenceEvaluator(m).run(None, {"x": x})[0], 1e-6)
    assert np.max(np.abs(tanh_form - exact)) > 1e-5


def test_onnx_ordered_float32_bit_identical_and_link():
    _onnx()
    from spec.domains import BINARY32

    for name, (m, feeds) in onnx_models().items():
        imp = from_onnx(m, inputs=feeds)
        outs, grads = imp.run(dtype="float32", kernels="ordered")
        so, sg = imp.spec_run("float32")
        assert to_spec(outs[0], "float32").same(BINARY32, so[0]), name
        assert all(to_spec(grads[n], "float32").same(BINARY32, sg[n]) for n in sg), name
        assert imp.check_link("float64").ok, name


def test_onnx_unsupported_ops_are_listed_together():
    onnx = _onnx()
    h = onnx.helper
    D = onnx.TensorProto.DOUBLE
    g = h.make_graph(
        [
            h.make_node("Atan", ["x"], ["a"]),
            h.make_node("Celu", ["a"], ["b"]),
            h.make_node("Celu", ["b"], ["c"]),
            h.make_node(
                "AveragePool", ["c"], ["d"], kernel_shape=[2, 2], ceil_mode=1, count_include_pad=1
            ),
            h.make_node("Relu", ["d"], ["y"]),
        ],
        "bad",
        [h.make_tensor_value_info("x", D, [1, 1, 3, 3])],
        [h.make_tensor_value_info("y", D, None)],
    )
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(UnsupportedOpsError) as ei:
        from_onnx(m)
    want = {"Atan": 1, "Celu": 2, "AveragePool": 1}
    assert {k: v[0] for k, v in ei.value.ops.items()} == want
    assert ei.value.ops["Celu"][1] in ("celu", "elu", "relu")
    assert "ceil_mode" in ei.value.ops["AveragePool"][2]


def test_cli_runs_the_properties_on_an_onnx_file(tmp_path, capsys):
    onnx = _onnx()
    from conformance.__main__ import main

    m, feeds = onnx_models()["cnn"]
    path = tmp_path / "cnn.onnx"
    onnx.save(m, str(path))
    np.savez(tmp_path / "in.npz", **feeds)
    code = main(
        [
            str(path),
            "--inputs",
            str(tmp_path / "in.npz"),
            "--max-examples",
            "2",
            "--dtype",
            "float32",
            "--report",
            str(tmp_path / "r"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "link" in out and "node_bounds" in out and "0 failing properties" in out
    assert "derivative_bounds" in out  # the fast VJPs of the imported CNN too
    assert main([str(tmp_path / "missing.txt")]) == 2


def test_import_runtime_needs_neither_torch_nor_onnx():
    code = (
        "import sys, runtime, runtime.interop; "
        "assert 'torch' not in sys.modules and 'onnx' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_onnx_input_shape_is_checked():
    _onnx()
    m, feeds = onnx_models()["cnn"]
    with pytest.raises(ModelImportError, match="expected shape"):
        from_onnx(m, inputs={"x": feeds["x"][:1]})


@pytest.mark.parametrize("name", MODELS)
def test_to_onnx_runs_in_other_runtimes(name):
    _onnx()
    from onnx.reference import ReferenceEvaluator

    m, feeds = onnx_models()[name]
    imp = from_onnx(m, inputs=feeds)
    want = imp.run()[0][0]
    exported = imp.to_onnx()
    float_feeds = {k: v for k, v in feeds.items() if k in imp.values}
    close(ReferenceEvaluator(exported).run(None, float_feeds)[0], want, 1e-12)
    back = from_onnx(exported, inputs=float_feeds)  # and back again: the same values
    close(back.run()[0][0], want, 1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_to_onnx_runs_in_onnxruntime(name):
    _onnx()
    ort = pytest.importorskip("onnxruntime", reason="the onnxruntime package is not installed")
    m, feeds = onnx_models()[name]
    imp = from_onnx(m, inputs=feeds)
    want = imp.run()[0][0]
    float_feeds = {k: v for k, v in feeds.items() if k in imp.values}
    model32 = imp.to_onnx(dtype="float32")
    sess = ort.InferenceSession(model32.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {k: v.astype(np.float32) for k, v in float_feeds.items()})[0]
    close(got, want, 1e-5)


def test_ops_without_a_rule_are_decomposed_by_torch_first():
    torch = _torch()
    from runtime.interop import from_torch
    from runtime.interop.aten_modes import boundary
    from spec.ops import OPS

    # the hardswish rule is guarded: kept only once the op table has hardswish
    assert ("aten.hardswish" in boundary()) == ("hardswish" in OPS)
    m = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Hardswish()).double().eval()
    x = torch.linspace(-4, 4, 6, dtype=torch.float64).reshape(2, 3)
    imp = from_torch(m, (x,))
    out, grads, _ = torch_reference(m, (x,))
    outs, g = imp.run()
    close(outs[0], out)
    close(g["0.weight"], grads["0.weight"])


def test_docs_list_every_mapping_key():
    from pathlib import Path

    from runtime.interop import ATEN, EXPORT, ONNX_OPS

    text = (Path(__file__).parent.parent / "docs" / "INTEROP.md").read_text()
    for key in [*ATEN, *ONNX_OPS, *EXPORT]:
        assert f"`{key}`" in text, key


def _layout_model(shape, perm, gather_axis, gather_ids, slice_spec, concat_axis):
    """x -> Transpose(perm) -> Gather(axis, ids) -> Slice -> Concat(with itself) -> Mul w."""
    onnx = _onnx()
    h, nh = onnx.helper, onnx.numpy_helper
    D = onnx.TensorProto.DOUBLE
    start, stop, step, axis = slice_spec
    inits = [
        nh.from_array(np.asarray(gather_ids, dtype=np.int64), "ids"),
        nh.from_array(np.array([start]), "st"),
        nh.from_array(np.array([stop]), "sp"),
        nh.from_array(np.array([axis]), "ax"),
        nh.from_array(np.array([step]), "se"),
        nh.from_array(np.array(1.5), "w"),
    ]
    nodes = [
        h.make_node("Transpose", ["x"], ["t"], perm=list(perm)),
        h.make_node("Gather", ["t", "ids"], ["g"], axis=gather_axis),
        h.make_node("Slice", ["g", "st", "sp", "ax", "se"], ["s"]),
        h.make_node("Concat", ["s", "s"], ["c"], axis=concat_axis),
        h.make_node("Mul", ["c", "w"], ["y"]),
    ]
    g = h.make_graph(
        nodes, "layout", [h.make_tensor_value_info("x", D, list(shape))],
        [h.make_tensor_value_info("y", D, None)], inits,
    )  # fmt: skip
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])


def test_layout_ops_match_the_onnx_reference_property():
    _onnx()
    from hypothesis import given, settings
    from hypothesis import strategies as st
    from onnx.reference import ReferenceEvaluator

    @st.composite
    def cases(draw):
        shape = tuple(draw(st.lists(st.integers(1, 3), min_size=2, max_size=4)))
        perm = draw(st.permutations(range(len(shape))))
        tshape = [shape[p] for p in perm]
        gax = draw(st.integers(0, len(shape) - 1))
        ids_shape = draw(st.sampled_from([(), (2,), (1, 2)]))
        ids = draw(st.lists(st.integers(-tshape[gax], tshape[gax] - 1), min_size=2, max_size=2))
        ids = np.array(ids[: int(np.prod(ids_shape))]).reshape(ids_shape)
        gshape = tshape[:gax] + list(ids_shape) + tshape[gax + 1 :]
        sax = draw(st.integers(0, len(gshape) - 1))
        n = gshape[sax]
        start = draw(st.integers(0, n - 1))
        stop = draw(st.integers(start + 1, n + 2))
        step = draw(st.integers(1, 2))
        cax = draw(st.integers(0, len(gshape) - 1))
        return shape, perm, gax, ids, (start, stop, step, sax), cax

    @settings(max_examples=25)
    @given(cases())
    def check(case):
        m = _layout_model(*case)
        x = np.arange(int(np.prod(case[0])), dtype=np.float64).reshape(case[0]) - 2.5
        imp = from_onnx(m, inputs={"x": x})
        (got,), grads = imp.run()
        ref = ReferenceEvaluator(m)
        want = ref.run(None, {"x": x})[0]
        assert got.shape == want.shape
        assert np.array_equal(got, want)  # data movement and one exact scaling by 1.5
        # y is linear in x: <grad, d> = sum(y(d)), exactly, for small integer directions d
        d = (np.arange(x.size).reshape(x.shape) * 7 % 5 - 2).astype(np.float64)
        assert float(np.sum(grads["x"] * d)) == float(np.sum(ref.run(None, {"x": d})[0]))
        assert imp.check_link("float64").ok

    check()
