"""torch.export: writes into views (`y[:, :2] *= 2`, `y[1] = v`, `w.copy_(...)`) reach the
importer as torch's functional `slice_scatter` / `select_scatter` / `copy` after
`run_decompositions`, and are mapped; a model whose only training-mode module
is dropout is refused clearly. Reference: PyTorch float64 forward and autograd."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime.interop import ModelImportError, from_torch

torch = pytest.importorskip("torch", reason="the torch package is not installed")


class Writes(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(6, 6)
        self.v = torch.nn.Parameter(torch.randn(6, dtype=torch.float64))

    def forward(self, x: Any) -> Any:
        y = self.lin(x).clone()
        y[:, :2] *= 2  # slice_scatter, step 1
        y[:, 1::2] += 0.5 * y[:, ::2]  # slice_scatter, step 2
        y[1] = self.v  # select_scatter
        y.add_(1)
        z = y.view(3, 2, 3).transpose(1, 2).contiguous().view(3, 6)
        w = torch.zeros(2, 3, 6, dtype=z.dtype)
        w.copy_(z[:2, None, :].expand(2, 1, 6))  # copy with broadcasting
        return torch.cat([(z * z).t().reshape(-1), w.reshape(-1)])


def test_writes_into_views_match_torch() -> None:
    torch.manual_seed(0)
    m = Writes().double().eval()
    x = torch.randn(3, 6, dtype=torch.float64)
    imp = from_torch(m, (x,))
    want = m(x)
    want.sum().backward()
    out, grads = imp.run()
    np.testing.assert_allclose(out[0], want.detach().numpy(), rtol=1e-12, atol=1e-14)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert imp.check_link("float32").ok


def test_slice_scatter_by_hand() -> None:
    """y = x.clone(); y[1:4:2] = 10 * x[:2]: rows 1 and 3 replaced; d(sum y)/dx is 0 at
    rows 1 and 3 and 1 elsewhere, plus 10 at rows 0 and 1 (the source's)."""

    class S(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            y = x.clone()
            y[1:4:2] = 10 * x[:2]
            return y

    x = torch.arange(5, dtype=torch.float64)
    out, grads = from_torch(S(), (x,)).run()
    assert out[0].tolist() == [0, 0, 2, 10, 4]
    name = next(iter(grads))
    assert grads[name].tolist() == [11, 10, 1, 0, 1]


def test_training_dropout_alone_is_refused() -> None:
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Dropout(0.5)).double().train()
    with pytest.raises(ModelImportError, match="training mode"):
        from_torch(m, (torch.randn(2, 3, dtype=torch.float64),))
    assert m.training
