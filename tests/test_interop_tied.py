"""Tied (shared) parameters and buffers: one graph input per tensor on both import routes,
gradients under every name, inputs by any name.

The model: one `nn.Linear` (weight W, bias c) held by the model and by two blocks that
both call it, and one buffer s held by the model and by one block:

    h = a(x) = s * (x W^T + c)      g = b(h) = h W^T + c      out = g + lin(2x)

so with O the all-ones matrix of out's shape and L = sum(out), by hand:

    dL/dW = O^T h + (s * (O W))^T x + O^T (2x)
    dL/dc = n + s * colsum(O W) + n                (n rows)
    dL/ds = sum((O W) * (x W^T + c))

The values are small integers and the ops algebraic, so the exact domain gives these
gradients with no rounding.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from runtime.interop import ModelImportError, from_onnx

torch = pytest.importorskip("torch", reason="torch is not installed")
from runtime.interop import from_torch  # noqa: E402

W = np.array([[1.0, 2.0], [3.0, -1.0]])
C = np.array([1.0, -2.0])
S = np.array([3.0])
X = np.array([[1.0, 0.0], [2.0, 1.0], [0.0, -1.0]])
PARAM_NAMES = ("lin.weight", "lin.bias", "a.lin.weight", "a.lin.bias", "b.lin.weight", "b.lin.bias")


class ScaledBlock(torch.nn.Module):
    def __init__(self, lin: torch.nn.Linear, s: torch.Tensor) -> None:
        super().__init__()
        self.lin = lin
        self.register_buffer("s", s)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.s * self.lin(x)


class Block(torch.nn.Module):
    def __init__(self, lin: torch.nn.Linear) -> None:
        super().__init__()
        self.lin = lin

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(2, 2).double()
        with torch.no_grad():
            self.lin.weight.copy_(torch.from_numpy(W))
            self.lin.bias.copy_(torch.from_numpy(C))
        self.register_buffer("s", torch.from_numpy(S.copy()))
        self.a = ScaledBlock(self.lin, self.s)
        self.b = Block(self.lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x)) + self.lin(2 * x)


def hand_gradients() -> dict[str, np.ndarray]:
    n = X.shape[0]
    O = np.ones((n, 2))
    pre = X @ W.T + C
    h = S * pre
    dh = S * (O @ W)
    return {
        "W": O.T @ h + dh.T @ X + O.T @ (2 * X),
        "c": n + dh.sum(axis=0) + n,
        "s": np.array([((O @ W) * pre).sum()]),
    }


def hand_output() -> np.ndarray:
    h = S * (X @ W.T + C)
    return h @ W.T + C + (2 * X) @ W.T + C


def exact(a: np.ndarray) -> np.ndarray:
    return np.vectorize(Fraction, otypes=[object])(np.asarray(a, dtype=object))


def torch_import() -> object:
    return from_torch(Tied().eval(), (torch.from_numpy(X.copy()),))


def test_torch_route_one_input_per_tensor() -> None:
    imp = torch_import()
    assert sorted(imp.values) == ["lin.bias", "lin.weight", "s", "x"]
    assert imp.aliases == {
        "a.lin.weight": "lin.weight",
        "a.lin.bias": "lin.bias",
        "b.lin.weight": "lin.weight",
        "b.lin.bias": "lin.bias",
        "a.s": "s",
    }
    ids = imp.ids
    assert ids["a.lin.weight"] == ids["b.lin.weight"] == ids["lin.weight"]


def test_torch_route_hand_worked_gradients_under_every_name() -> None:
    imp = torch_import()
    outs, grads = imp.run(dtype="exact")
    want = hand_gradients()
    assert (np.asarray(outs[0]) == exact(hand_output())).all()
    for name in ("lin.weight", "a.lin.weight", "b.lin.weight"):
        assert (np.asarray(grads[name]) == exact(want["W"])).all(), name
    for name in ("lin.bias", "a.lin.bias", "b.lin.bias"):
        assert (np.asarray(grads[name]) == exact(want["c"])).all(), name
    for name in ("s", "a.s"):
        assert (np.asarray(grads[name]) == exact(want["s"])).all(), name
    # and PyTorch agrees (its gradient accumulates into the one tensor too)
    m = Tied()
    m(torch.from_numpy(X.copy())).sum().backward()
    assert np.array_equal(m.lin.weight.grad.numpy(), want["W"])


def test_torch_route_inputs_by_any_alias() -> None:
    imp = torch_import()
    zero = np.zeros((2, 2))
    for name in ("lin.weight", "a.lin.weight", "b.lin.weight"):
        outs, _ = imp.run(inputs={name: zero})
        # with W = 0: h = s*c, g = c, lin(2x) = c, out = 2c on every row
        assert np.array_equal(outs[0], np.tile(2 * C, (3, 1))), name
    outs, _ = imp.run(inputs={"a.s": np.array([0.0])})
    assert np.array_equal(outs[0], np.tile(C, (3, 1)) + (2 * X) @ W.T + C)


def test_torch_route_disagreeing_aliases_refused() -> None:
    imp = torch_import()
    with pytest.raises(ModelImportError, match="one tied tensor"):
        imp.run(inputs={"lin.weight": np.zeros((2, 2)), "b.lin.weight": np.ones((2, 2))})
    same = imp.run(inputs={"lin.weight": W, "b.lin.weight": W})[0][0]
    assert np.array_equal(same, hand_output())


def test_user_inputs_never_merged() -> None:
    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x * y

    t = torch.ones(2, dtype=torch.float64)
    imp = from_torch(Two(), (t, t))
    assert imp.aliases == {} and len(imp.input_names) == 2
    _, grads = imp.run(inputs={"x": np.array([2.0, 3.0])})
    assert np.array_equal(grads["y"], [2.0, 3.0])


def onnx_import() -> object:
    io = pytest.importorskip("io")
    onnx = pytest.importorskip("onnx", reason="onnx is not installed")
    f = io.BytesIO()
    torch.onnx.export(
        Tied().eval(),
        (torch.from_numpy(X.copy()),),
        f,
        dynamo=False,
        do_constant_folding=False,
        input_names=["x"],
    )
    model = onnx.load_from_string(f.getvalue())
    return from_onnx(model, inputs={"x": X})


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_onnx_route_one_initializer_hand_worked_gradients() -> None:
    imp = onnx_import()
    float_params = [n for n in imp.parameter_names if imp.values[n].size > 1]
    assert sorted(float_params) == ["lin.bias", "lin.weight"]
    outs, grads = imp.run()
    want = hand_gradients()
    np.testing.assert_allclose(outs[0], hand_output(), rtol=1e-15)
    np.testing.assert_allclose(grads["lin.weight"], want["W"], rtol=1e-15)
    np.testing.assert_allclose(grads["lin.bias"], want["c"], rtol=1e-15)
    named = imp.with_aliases({"a.lin.weight": "lin.weight", "b.lin.weight": "a.lin.weight"})
    _, g2 = named.run()
    assert g2["a.lin.weight"] is g2["b.lin.weight"] is g2["lin.weight"]
    with pytest.raises(ModelImportError, match="not a graph input"):
        imp.with_aliases({"q": "nope"})
