"""The conv, pool and pad families through torch.export (`aten_windows`): 1-D, 2-D and 3-D
convolutions (padding 'same'), pools with `ceil_mode`, `count_include_pad=False` and
`divisor_override`, adaptive avg / max pools to sizes that do not divide, and `pad` in its
four modes. Reference: PyTorch's own float64 forward and autograd on the same module;
the float32 link check (runtime vs spec, bitwise) on the imported graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime.interop import UnsupportedOpsError, from_torch

torch = pytest.importorskip("torch", reason="the torch package is not installed")
F = torch.nn.functional


def _check(m: Any, x: Any, link: bool = True) -> Any:
    imp = from_torch(m.eval(), (x,))
    want = m(x)
    want.sum().backward()
    out, grads = imp.run()
    np.testing.assert_allclose(out[0], want.detach().numpy(), rtol=1e-12, atol=1e-14)
    for n, p in m.named_parameters():
        np.testing.assert_allclose(grads[n], p.grad.numpy(), rtol=1e-12, atol=1e-14, err_msg=n)
    if link:
        assert imp.check_link("float32").ok
    return imp


class OneD(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv1d(2, 3, 3, padding="same", dilation=2)
        self.t = torch.nn.ConvTranspose1d(3, 2, 2, stride=2, padding=1, output_padding=1)

    def forward(self, x: Any) -> Any:
        y = self.c(F.pad(x, (2, 1), mode="reflect"))
        a = F.max_pool1d(y, 3, 2, ceil_mode=True)  # 10 -> 5 (the last window overhangs)
        b = F.avg_pool1d(y, 3, 2, padding=1, ceil_mode=True, count_include_pad=False)
        z = self.t(torch.cat([a, b[..., : a.shape[-1]]], 1)[:, :3])
        return F.adaptive_max_pool1d(z, 3) * F.adaptive_avg_pool1d(z, 3)


class TwoD(torch.nn.Module):
    """squeezenet's and googlenet's pools, and the pad modes."""

    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv2d(2, 3, 3, padding=1)

    def forward(self, x: Any) -> Any:
        y = F.max_pool2d(self.c(x), 3, 2, ceil_mode=True)  # 7x7 -> 3x3
        r = F.pad(y, (1, 1, 2, 0), mode="replicate") + F.pad(y, (2, 0, 1, 1), mode="circular")
        c = F.pad(r, (1, -1, 0, 1), value=0.25)  # a fill and a crop
        a = F.avg_pool2d(c, 2, 2, padding=1, ceil_mode=True, divisor_override=3)
        return F.adaptive_max_pool2d(c, (2, 3)).sum() + F.adaptive_avg_pool2d(a, 2).sum()


class ThreeD(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv3d(1, 2, 2, padding=(1, 0, 0))

    def forward(self, x: Any) -> Any:
        y = F.max_pool3d(self.c(x), 2, 2, ceil_mode=True)
        return F.avg_pool3d(y, (1, 2, 1), ceil_mode=True) + F.adaptive_avg_pool3d(y, 1)


def test_one_d_family_matches_torch() -> None:
    torch.manual_seed(0)
    _check(OneD().double(), torch.randn(1, 2, 7, dtype=torch.float64))


def test_two_d_ceil_mode_pools_and_pad_modes_match_torch() -> None:
    torch.manual_seed(1)
    imp = _check(TwoD().double(), torch.randn(1, 2, 7, 7, dtype=torch.float64))
    ceil = [n for n in imp.graph.nodes if n.op == "max_pool2d"]
    assert ceil and all(dict(n.attrs).get("ceil_mode") for n in ceil)


def test_three_d_family_matches_torch() -> None:
    torch.manual_seed(2)
    _check(ThreeD().double(), torch.randn(1, 1, 3, 4, 5, dtype=torch.float64), link=False)


def test_non_finite_pad_value_refused_with_the_op() -> None:
    class M(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return F.pad(x, (1, 1), value=float("-inf")).amax(-1)

    with pytest.raises(UnsupportedOpsError) as e:
        from_torch(M(), (torch.randn(2, 3, dtype=torch.float64),))
    assert "aten.pad" in str(e.value) and "-inf" in str(e.value) and "rational" in str(e.value)
