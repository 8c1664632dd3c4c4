"""instance_norm and group_norm: hand-worked goldens in exact arithmetic (eps chosen so that
var + eps is a rational square), group_norm with one group against layer_norm on the
flattened value, bad attributes, and PyTorch (when installed) on values and gradients."""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.session import Session
from spec.errors import GraphError, ShapeError


def _q(x: Any) -> np.ndarray:
    return np.array([Q(v) for v in np.ravel(x)], dtype=object).reshape(np.shape(x))


def _exact(op: str, args: list[Any], seed: Any, **attrs: Any) -> tuple[list[Any], list[Any]]:
    """(forward values, gradient of the first argument under `seed`) in the exact dtype."""
    s = Session(dtype="exact")
    xs = [s.input(_q(a), requires_grad=True) for a in args]
    y = s.op(op, *xs, **attrs)
    g = s.backward_dense_all(y, _q(seed))
    return list(np.ravel(s.get_value(y))), list(np.ravel(s.grad(g, xs[0])))


# --------------------------------------------------------------------------- goldens


def test_instance_norm_golden() -> None:
    # channel 0 = [1, 3]: mu 2, var 1, var + eps = 121/100, sigma = 11/10, xhat = -+10/11;
    # channel 1 = [2, 4]: the same xhat, times gamma 2 plus beta 1: -9/11, 31/11.
    # d xhat_i / d x_j = (delta_ij - 1/2 - xhat_i xhat_j / 2) / sigma; seed (1, 0) on
    # channel 0: dx_0 = 10/11 (1/2 - 50/121) = 105/1331, dx_1 = -105/1331.
    y, g = _exact(
        "instance_norm",
        [[[[1, 3], [2, 4]]], [1, 2], [0, 1]],
        [[[1, 0], [0, 0]]],
        eps=Q(21, 100),
    )
    assert y == [Q(-10, 11), Q(10, 11), Q(-9, 11), Q(31, 11)]
    assert g == [Q(105, 1331), Q(-105, 1331), 0, 0]


def test_group_norm_golden_groups_span_channels() -> None:
    # x (1, 4), two groups of two channels: [1, 3] and [5, 7], each mu +- 1, var 1,
    # sigma = 11/10, xhat = -+10/11; gamma (1, 2, 1, -1), beta (0, 1, 0, 0).
    y, g = _exact(
        "group_norm",
        [[[1, 3, 5, 7]], [1, 2, 1, -1], [0, 1, 0, 0]],
        [[0, 1, 0, 0]],
        num_groups=2,
        eps=Q(21, 100),
    )
    assert y == [Q(-10, 11), Q(31, 11), Q(-10, 11), Q(-10, 11)]
    # seed 1 on y_1 = 2*xhat_1 + 1: dx_0 = 2 * 10/11 (-1/2 - xhat_1 xhat_0 / 2) = -210/1331
    assert g == [Q(-210, 1331), Q(210, 1331), 0, 0]


def test_constant_group_gives_beta() -> None:
    y, g = _exact("group_norm", [[[3, 3]], [2, 5], [1, -1]], [[1, 1]], num_groups=1, eps=Q(1, 4))
    assert y == [1, -1]  # xc = 0: y = beta (sqrt(0 + 1/4) = 1/2 in the denominator)
    # xhat = 0: dx = (g - mean(g)) / sigma with g = seed * gamma = (2, 5), sigma = 1/2
    assert g == [-3, 3]


@settings(max_examples=20, deadline=None)
@given(
    st.lists(st.integers(-50, 50), min_size=6, max_size=6),
    st.sampled_from([(2, 3, 1), (1, 2, 3), (3, 2, 1)]),
)
def test_one_group_is_layer_norm_of_the_flattened_value(vals: list[int], shape: Any) -> None:
    """group_norm(G=1, γ=1, β=0) performs layer_norm's operations in layer_norm's order."""
    x = np.array(vals, dtype=np.float64).reshape(shape) / 8
    s = Session(dtype="float64")
    a = s.input(x)
    c, d = shape[1], int(np.prod(shape[1:]))
    gn = s.group_norm(a, 1, s.input(np.ones(c)), s.input(np.zeros(c)))
    ln = s.layer_norm(s.reshape(a, (shape[0], d)), s.input(np.ones(d)), s.input(np.zeros(d)))
    assert np.array_equal(s.get_value(gn).reshape(shape[0], d), s.get_value(ln))


def test_bad_attributes_are_refused() -> None:
    s = Session(dtype="float64")
    x = s.input(np.zeros((1, 4, 2)))
    w, b = s.input(np.ones(4)), s.input(np.zeros(4))
    with pytest.raises(GraphError, match="num_groups"):
        s.group_norm(x, 3, w, b)
    with pytest.raises(GraphError, match="eps"):
        s.instance_norm(x, weight=w, bias=b, eps=Q(0))
    with pytest.raises(ShapeError, match="instance_norm"):
        s.instance_norm(s.input(np.zeros((2, 4))), weight=w, bias=b)
    with pytest.raises(ShapeError, match="weight and bias"):
        s.group_norm(x, 2, s.input(np.ones(2)), s.input(np.zeros(2)))


# --------------------------------------------------------------------------- PyTorch

torch = pytest.importorskip("torch")
F = torch.nn.functional

_TORCH_CASES: list[tuple[str, tuple[int, ...], dict[str, Any], Any]] = [
    ("instance_norm", (2, 3, 4, 5), {}, lambda x, w, b: F.instance_norm(x, weight=w, bias=b)),
    ("instance_norm", (2, 2, 7), {"eps": Q(1, 10)},
     lambda x, w, b: F.instance_norm(x, weight=w, bias=b, eps=0.1)),
    ("group_norm", (2, 6, 3), {"num_groups": 3}, lambda x, w, b: F.group_norm(x, 3, w, b)),
    ("group_norm", (3, 4), {"num_groups": 2, "eps": Q(1, 1000)},
     lambda x, w, b: F.group_norm(x, 2, w, b, eps=1e-3)),
    ("group_norm", (1, 4, 2, 2, 2), {"num_groups": 1}, lambda x, w, b: F.group_norm(x, 1, w, b)),
]  # fmt: skip


@pytest.mark.parametrize(("op", "shape", "attrs", "fn"), _TORCH_CASES)
def test_against_pytorch(op: str, shape: tuple[int, ...], attrs: dict[str, Any], fn: Any) -> None:
    rng = np.random.default_rng(11)
    arrs = [
        rng.standard_normal(shape),
        rng.standard_normal(shape[1]),
        rng.standard_normal(shape[1]),
    ]
    s = Session(dtype="float64")
    xs = [s.input(a, requires_grad=True) for a in arrs]
    y = s.op(op, *xs, **attrs)
    ts = [torch.tensor(a, requires_grad=True) for a in arrs]
    ty = fn(*ts)
    np.testing.assert_allclose(s.get_value(y), ty.detach().numpy(), rtol=0, atol=1e-12)
    seed = rng.standard_normal(y.shape)
    grads = s.backward_dense_all(y, seed)
    want = torch.autograd.grad(ty, ts, torch.tensor(seed))
    for x, w in zip(xs, want, strict=True):
        np.testing.assert_allclose(s.grad(grads, x), w.numpy(), rtol=0, atol=1e-11)
