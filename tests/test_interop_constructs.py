"""Constructs of real models on the torch route, each a composition of table ops: vector
norms, group norm, nearest upsampling, advanced indexing with slices between index
tensors and boolean masks, batch norm without running statistics, attention with an
additive float mask, -inf constants in masks. Values and every gradient against PyTorch
float64 autograd (1e-12 relative per array), hand-worked cases where small."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed")
F = torch.nn.functional
from runtime.interop import from_torch  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")


class Fn(torch.nn.Module):
    """fn(x, *params) with the parameters registered (so their gradients are compared)."""

    def __init__(self, fn, *params: torch.Tensor) -> None:  # type: ignore[no-untyped-def]
        super().__init__()
        self.fn = fn
        self.ps = torch.nn.ParameterList([torch.nn.Parameter(p) for p in params])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x, *self.ps)


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=torch.float64, generator=g)


def check(module: torch.nn.Module, x: torch.Tensor, link: bool = False) -> object:
    imp = from_torch(module.eval(), (x,))
    outs, grads = imp.run()
    xr = x.clone().requires_grad_(True)
    want = module(xr)
    want.sum().backward()
    np.testing.assert_allclose(outs[0], want.detach().numpy(), rtol=1e-12, atol=1e-300)
    refs = {imp.input_names[0]: xr.grad, **{n: p.grad for n, p in module.named_parameters()}}
    for name, g in refs.items():
        scale = max(float(g.abs().max()), 1e-300)
        assert np.max(np.abs(grads[name] - g.numpy())) <= 1e-12 * scale, name
    if link:
        assert imp.check_link("float32").ok
    return imp


def test_vector_norm_and_normalize() -> None:
    check(Fn(lambda x: F.normalize(x, dim=-1)), rand(3, 4), link=True)
    check(Fn(lambda x: torch.linalg.vector_norm(x, dim=(0, 2), keepdim=True) * x), rand(2, 3, 4))


def test_vector_norm_hand_worked() -> None:
    imp = from_torch(Fn(lambda x: torch.linalg.vector_norm(x)), (torch.tensor([3.0, 4.0]),))
    outs, grads = imp.run()
    assert float(outs[0]) == 5.0
    np.testing.assert_allclose(grads["x"], [0.6, 0.8], rtol=1e-15)


def test_other_norm_orders_refused() -> None:
    from runtime.interop import UnsupportedOpsError

    with pytest.raises(UnsupportedOpsError, match="order 1"):
        from_torch(Fn(lambda x: torch.linalg.vector_norm(x, ord=1)), (rand(3),))


def test_group_norm() -> None:
    gn = torch.nn.GroupNorm(2, 4).double()
    with torch.no_grad():
        gn.weight.copy_(rand(4, seed=1))
        gn.bias.copy_(rand(4, seed=2))
    check(gn, rand(2, 4, 3, 3), link=True)


def test_nearest_upsampling() -> None:
    check(Fn(lambda x: F.interpolate(x, scale_factor=2, mode="nearest")), rand(1, 2, 3, 4))
    check(Fn(lambda x: F.interpolate(x, size=(5, 7), mode="nearest")), rand(1, 2, 3, 4))
    check(Fn(lambda x: F.interpolate(x, size=5, mode="nearest")), rand(1, 2, 3))


def test_upsampling_hand_worked() -> None:
    x = torch.tensor([[[1.0, 2.0, 3.0]]], dtype=torch.float64)
    imp = from_torch(Fn(lambda x: F.interpolate(x, size=5, mode="nearest")), (x,))
    outs, grads = imp.run()
    # torch's nearest source index floor(i * 3/5): 0 0 1 1 2
    np.testing.assert_array_equal(outs[0], [[[1.0, 1.0, 2.0, 2.0, 3.0]]])
    np.testing.assert_array_equal(grads["x"], [[[2.0, 2.0, 1.0]]])


def test_index_with_slices_between_index_tensors() -> None:
    idx = torch.tensor([[0, 2], [1, 1]])
    j = torch.tensor([1, 0])
    bias = rand(3, 4, seed=3)
    check(Fn(lambda x, b: x * b[:, idx].sum(), bias), rand(2))  # a leading slice (LeViT)
    check(Fn(lambda x: x[idx, :, j]), rand(3, 2, 2))  # separated: broadcast dims first
    check(Fn(lambda x: x[:, idx, j]), rand(2, 3, 2))  # adjacent: in place


def test_index_hand_worked() -> None:
    x = torch.arange(12, dtype=torch.float64).reshape(3, 4)
    imp = from_torch(Fn(lambda x: x[:, torch.tensor([3, 0, 3])]), (x,))
    outs, grads = imp.run()
    np.testing.assert_array_equal(outs[0], [[3, 0, 3], [7, 4, 7], [11, 8, 11]])
    np.testing.assert_array_equal(grads["x"], [[1, 0, 0, 2]] * 3)


def test_batch_norm_without_running_statistics() -> None:
    """Weight standardisation (NF-ResNets): batch norm with no running statistics in
    training mode normalises by the statistics of its own input and updates no state;
    the program is not a training program."""

    def ws(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        wn = F.batch_norm(w.reshape(1, 4, -1), None, None, training=True, eps=1e-5)
        return F.conv2d(x, wn.reshape_as(w))

    check(Fn(ws, rand(4, 3, 3, 3, seed=4)), rand(1, 3, 5, 5), link=False)
    bn = torch.nn.BatchNorm2d(3, track_running_stats=False).double()
    r = rand(2, 3, 2, 2, seed=9)  # sum(bn(x)) has gradient 0 in x: weigh the outputs
    check(Fn(lambda x: bn(x) * r), rand(2, 3, 2, 2))


def test_batch_statistics_hand_worked() -> None:
    x = torch.tensor([[[1.0]], [[3.0]]], dtype=torch.float64).reshape(2, 1, 1)
    bn = torch.nn.BatchNorm1d(1, affine=False, track_running_stats=False, eps=0.25).double()
    imp = from_torch(bn.eval(), (x,))
    outs, _ = imp.run()
    # mean 2, biased variance 1: (x - 2) / sqrt(1 + 1/4)
    want = np.array([-1.0, 1.0]) / np.sqrt(1.25)
    np.testing.assert_allclose(np.asarray(outs[0]).reshape(-1), want, rtol=1e-15)


def test_attention_with_additive_float_mask() -> None:
    q, k, v = rand(1, 2, 3, 4, seed=5), rand(1, 2, 3, 4, seed=6), rand(1, 2, 3, 4, seed=7)
    bias = rand(1, 2, 3, 3, seed=8)  # a learned position bias (T5)
    check(Fn(lambda x, b: F.scaled_dot_product_attention(x, k, v, attn_mask=b), bias), q)
    causal = torch.triu(torch.full((3, 3), float("-inf"), dtype=torch.float64), 1)
    check(Fn(lambda x: F.scaled_dot_product_attention(x, k, v, attn_mask=causal)), q, link=True)


def test_neg_inf_constants_in_masks() -> None:
    causal = torch.triu(torch.full((3, 3), float("-inf"), dtype=torch.float64), 1)
    keep = torch.tril(torch.ones(3, 3, dtype=torch.bool))
    check(Fn(lambda x: torch.softmax(x + causal, -1)), rand(2, 3, 3), link=True)
    check(Fn(lambda x: torch.softmax(torch.where(keep, x, float("-inf")), -1)), rand(3, 3))
    neg = torch.tensor(float("-inf"), dtype=torch.float64)
    check(Fn(lambda x: torch.softmax(torch.where(keep, x, neg), -1).sum(0)), rand(3, 3))


def test_neg_inf_hand_worked_and_pos_inf_refused() -> None:
    from runtime.interop import UnsupportedOpsError

    mask = torch.tensor([0.0, float("-inf")], dtype=torch.float64)
    imp = from_torch(Fn(lambda x: torch.softmax(x + mask, -1)), (torch.zeros(2),))
    outs, grads = imp.run()
    np.testing.assert_array_equal(outs[0], [1.0, 0.0])
    np.testing.assert_array_equal(grads["x"], [0.0, 0.0])
    with pytest.raises(UnsupportedOpsError, match=r"\+inf"):
        from_torch(Fn(lambda x: x + float("inf")), (torch.zeros(2),))


def test_eval_batch_norm_gradient_hand_worked_and_reference_mode() -> None:
    """Eval batch norm, batch of one, then flatten(2).transpose(1, 2) (XCiT's patch
    embedding): d/d bias[c] of sum(y * W) is sum_n W[0, n, c] by hand. The import gives
    it; PyTorch 2.13's CPU kernel does not (S*S times too large), so the zoo's reference
    mode writes eval batch norm as elementwise ops, which gives it too."""
    from conformance.zoo_sources import exact_reference_mode

    C, S = 4, 2
    wts = torch.linspace(-1, 1, C * S * S, dtype=torch.float64).reshape(1, S * S, C)
    rm, rv = rand(C, seed=10), torch.rand(C, dtype=torch.float64) + 0.5

    def bn(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = F.batch_norm(x, rm, rv, w, b, training=False)
        return y.flatten(2).transpose(1, 2) * wts

    fn = Fn(bn, rand(C, seed=11), rand(C, seed=12))
    x = rand(1, C, S, S)
    _, grads = from_torch(fn, (x,)).run()
    hand = wts.sum(1)[0].numpy()
    np.testing.assert_allclose(grads["ps.1"], hand, rtol=1e-15)
    with exact_reference_mode():
        fn(x).sum().backward()
    np.testing.assert_allclose(fn.ps[1].grad.numpy(), hand, rtol=1e-15)
