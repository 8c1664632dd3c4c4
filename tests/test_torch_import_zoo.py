"""torchvision architectures through torch.export (issue 29), in CI at small sizes: values
and every parameter gradient equal PyTorch's float64 autograd to rtol 1e-9. The whole
family list is the opt-in campaign `python -m conformance.zoo` (docs/INTEROP.md)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch package is not installed")


def _models() -> Any:
    from conformance.zoo import vision_models

    try:
        return vision_models()
    except ImportError as e:
        pytest.skip(f"the torchvision package is not installed ({e})")


def _check(m: Any, x: Any) -> None:
    from runtime.interop import from_torch

    imp = from_torch(m, (x,))
    want = m(x)
    want.sum().backward()
    out, grads = imp.run()
    w = want.detach().numpy()
    assert np.max(np.abs(out[0] - w)) <= 1e-9 * np.max(np.abs(w))
    for n, p in m.named_parameters():
        g = p.grad.numpy()
        assert np.max(np.abs(grads[n] - g)) <= 1e-9 * max(np.max(np.abs(g)), 1e-300), n


def test_resnet_basic_blocks() -> None:
    M = _models()
    torch.manual_seed(0)
    m = M.resnet.ResNet(M.resnet.BasicBlock, [1, 1, 1, 1], num_classes=5).double().eval()
    _check(m, torch.randn(1, 3, 16, 16, dtype=torch.float64))
