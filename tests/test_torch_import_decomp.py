"""torch.export programs are functionalized and decomposed by torch before import (issue
29): in-place ops, eval-mode dropout and batch norm's statistics outputs need no rule of
their own; training-mode programs are refused, or read in eval semantics on request.
Reference: PyTorch's own float64 forward and autograd on the same module in eval mode."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime.interop import ModelImportError, from_torch

torch = pytest.importorskip("torch", reason="the torch package is not installed")
F = torch.nn.functional


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.drop = torch.nn.Dropout(0.3)
        self.lin = torch.nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: Any) -> Any:
        y = torch.relu_(self.bn(self.c(x)))  # in-place
        y = self.drop(F.relu6(y))
        y = F.adaptive_avg_pool2d(y, 3)  # 6 -> 3: divisible
        y = F.pad(y, (1, 0, 0, 1), value=0.5)[..., 1:, :-1]
        y = torch.roll(y, 1, 2)
        return self.lin(y.flatten(1))


def _net() -> Any:
    torch.manual_seed(0)
    m = Net().double()
    m.bn.running_mean.uniform_(-1, 1)
    m.bn.running_var.uniform_(1, 2)
    return m, torch.randn(2, 3, 8, 8, dtype=torch.float64)


def _check(imp: Any, m: Any, x: Any) -> None:
    m.eval()
    for p in m.parameters():
        p.grad = None
    want = m(x)
    want.sum().backward()
    out, grads = imp.run()
    np.testing.assert_allclose(out[0], want.detach().numpy(), rtol=1e-9, atol=1e-12)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert imp.check_link("float32").ok


def test_eval_model_in_place_ops_match_torch() -> None:
    m, x = _net()
    imp = from_torch(m.eval(), (x,))
    _check(imp, m, x)


def test_training_model_refused_with_the_reason() -> None:
    m, x = _net()
    with pytest.raises(ModelImportError) as e:
        from_torch(m.train(), (x,))
    msg = str(e.value)
    assert "training mode" in msg and "eval=True" in msg and "bn.running_mean" in msg
    assert m.training


def test_training_model_in_eval_semantics_on_request() -> None:
    m, x = _net()
    imp = from_torch(m.train(), (x,), eval=True)
    assert m.training and m.bn.training  # modes restored
    _check(imp, m, x)


def test_training_program_in_eval_semantics() -> None:
    """A program exported in training mode (as a .pt2 holds it), read with eval=True."""
    from runtime.interop import from_exported

    m, x = _net()
    ep = torch.export.export(m.train(), (x,))
    with pytest.raises(ModelImportError, match="training mode"):
        from_exported(ep, (x,))
    _check(from_exported(ep, (x,), eval=True), m, x)


def test_adaptive_pool_not_divisible_and_index() -> None:
    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.table = torch.nn.Parameter(torch.randn(7, 2, dtype=torch.float64))
            self.register_buffer("idx", torch.tensor([[0, 6], [3, 3]]))

        def forward(self, x: Any) -> Any:
            y = F.adaptive_avg_pool2d(x, (3, 5))  # 5x7 -> 3x5: overlapping windows
            return y.sum() + self.table[self.idx].sum() * y.mean()

    torch.manual_seed(1)
    m = M()
    x = torch.randn(1, 2, 5, 7, dtype=torch.float64)
    _check(from_torch(m, (x,)), m, x)
