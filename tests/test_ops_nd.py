"""The N-d convolutions, the pools (ceil mode, PyTorch's divisors, adaptive windows) and pad:
hand-worked goldens in exact arithmetic, the vectorised window tables against explicit
loops, PyTorch (when installed) on forward values and gradients, and the layers."""

from __future__ import annotations

import itertools
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.nn import AdaptiveAvgPool2d, Conv1d, Conv3d, MaxPool1d
from runtime.session import Session
from spec.errors import GraphError, ShapeError
from spec.ops import OPS
from spec.ops.windows import adaptive_table, pool_out_dim, tap_table, transposed_tap_table


def _exact(op: str, x: list[Any], **attrs: Any) -> tuple[list[Any], list[Any]]:
    """(forward values, gradient under a seed of ones) in the exact dtype."""
    s = Session(dtype="exact")
    a = s.input(
        np.array([Q(v) for v in np.ravel(x)], dtype=object).reshape(np.shape(x)), requires_grad=True
    )
    y = s.op(op, a, **attrs)
    g = s.backward_dense_all(y, np.full(y.shape, Q(1), dtype=object))
    return list(np.ravel(s.get_value(y))), list(np.ravel(s.grad(g, a)))


# --------------------------------------------------------------------------- goldens


def test_adaptive_avg_pool1d_windows_that_do_not_divide() -> None:
    # n = 5, out = 3: windows [0, 2), [1, 4), [3, 5) (floor(o*5/3), ceil((o+1)*5/3))
    y, g = _exact("adaptive_avg_pool1d", [[1, 2, 3, 4, 5]], output_size=(3,))
    assert y == [Q(3, 2), Q(3), Q(9, 2)]
    assert g == [Q(1, 2), Q(1, 2) + Q(1, 3), Q(1, 3), Q(1, 3) + Q(1, 2), Q(1, 2)]


def test_adaptive_max_pool1d_overlap_and_first_max() -> None:
    y, g = _exact("adaptive_max_pool1d", [[2, 7, 7, 1, 0]], output_size=(3,))
    assert y == [7, 7, 1]  # windows [0,2), [1,4), [3,5); tie 7,7 in window 1: the first wins
    assert g == [0, 2, 0, 1, 0]


def test_max_pool1d_ceil_mode_keeps_the_overhanging_window() -> None:
    y, g = _exact("max_pool1d", [[1, 5, 2, 4, 3]], kernel_size=(2,), ceil_mode=True)
    assert y == [5, 4, 3]
    assert g == [0, 1, 0, 1, 1]
    y, _ = _exact("max_pool1d", [[1, 5, 2, 4, 3]], kernel_size=(2,))
    assert y == [5, 4]


def test_avg_pool1d_divisors_follow_pytorch() -> None:
    x = [[1, 2, 3, 4]]
    # ceil mode, k=3, s=2: windows [0,3) and [2,5); the second overhangs the input by one
    y, _ = _exact("avg_pool1d", x, kernel_size=(3,), stride=(2,), ceil_mode=True)
    assert y == [Q(2), Q(7, 2)]  # count_include_pad: clipped to n + pad = 4, so 2 taps
    # padding 1, count_include_pad False: the pad tap is not counted
    y, _ = _exact("avg_pool1d", x, kernel_size=(2,), padding=(1,), count_include_pad=False)
    assert y == [Q(1), Q(5, 2), Q(4)]
    y, _ = _exact("avg_pool1d", x, kernel_size=(2,), padding=(1,))
    assert y == [Q(1, 2), Q(5, 2), Q(2)]
    y, _ = _exact("avg_pool1d", x, kernel_size=(2,), divisor_override=3)
    assert y == [Q(1), Q(7, 3)]


@pytest.mark.parametrize(
    ("mode", "pad", "want", "grad"),
    [
        ("reflect", (2, 1), [3, 2, 1, 2, 3, 2], [1, 3, 2]),
        ("replicate", (2, 0), [1, 1, 1, 2, 3], [3, 1, 1]),
        ("circular", (1, 2), [3, 1, 2, 3, 1, 2], [2, 2, 2]),
        ("constant", (1, -1), [0, 1, 2], [1, 1, 0]),
        ("circular", (2, -1), [1, 2, 1, 2], [2, 2, 0]),  # crop first, then wrap over 2
    ],
)
def test_pad_modes(mode: str, pad: tuple[int, ...], want: list[int], grad: list[int]) -> None:
    y, g = _exact("pad", [1, 2, 3], pad=pad, mode=mode)
    assert y == want
    assert g == grad


def test_pad_constant_value_and_two_axes() -> None:
    y, g = _exact("pad", [[1, 2], [3, 4]], pad=(1, 0, 0, 1), value=Q(-1, 2))
    h = Q(-1, 2)
    assert y == [h, 1, 2, h, 3, 4, h, h, h]
    assert g == [1, 1, 1, 1]


def test_conv1d_asymmetric_padding_golden() -> None:
    s = Session(dtype="exact")
    x = s.input(np.array([[1, 2, 3]], dtype=object))
    w = s.input(np.array([[[1, 10]]], dtype=object))
    y = s.conv1d(x, w, padding=(2, 0))  # begins (2,), ends (0,): reads 0 0 1 2 3
    assert list(np.ravel(s.get_value(y))) == [0, 10, 21, 32]


def test_conv_transpose1d_golden() -> None:
    s = Session(dtype="exact")
    x = s.input(np.array([[1, 2]], dtype=object))
    w = s.input(np.array([[[1, 10, 100]]], dtype=object))
    y = s.conv_transpose1d(x, w, stride=(2,))  # 1*[1,10,100] at 0, 2*[1,10,100] at 2
    assert list(np.ravel(s.get_value(y))) == [1, 10, 102, 20, 200]


def test_errors_name_the_op_and_the_limit() -> None:
    s = Session(dtype="float64")
    x = s.input(np.zeros((1, 3)))
    with pytest.raises(ShapeError, match=r"pad: .*reflect padding needs pads within the axis"):
        s.pad(x, (3, 0), mode="reflect")
    with pytest.raises(GraphError, match="pad: unknown mode"):
        s.pad(x, (1, 0), mode="mirror")
    with pytest.raises(GraphError, match=r"ceil_mode.*must be a bool"):
        s.max_pool1d(x, (2,), ceil_mode=2)
    with pytest.raises(GraphError, match="output_size"):
        s.adaptive_avg_pool1d(x, (0,))
    with pytest.raises(GraphError, match="padding"):
        s.conv1d(x, s.input(np.zeros((1, 1, 2))), padding=(1, 2, 3))


def test_session_positional_attributes_follow_torch() -> None:
    s = Session(dtype="float64")
    x = s.input(np.arange(12.0).reshape(1, 3, 4))
    assert s.adaptive_avg_pool2d(x, (3, 2)).shape == (1, 3, 2)
    assert s.pad(x, (1, 1), "reflect").shape == (1, 3, 6)
    assert s.max_pool2d(x, (2, 2), (2, 2), (0, 0), (1, 1), True).shape == (1, 2, 2)


# --------------------------------------------------------------------------- tables vs loops

_GEOM = st.tuples(
    st.integers(1, 6), st.integers(1, 3), st.integers(1, 3), st.integers(0, 2), st.integers(1, 2)
)


@given(st.lists(_GEOM, min_size=1, max_size=3))
def test_tap_tables_match_explicit_loops(axes: list[tuple[int, ...]]) -> None:
    dims = tuple(n + 3 for n, *_ in axes)
    ks, ss, ps, ds = (tuple(a[i] for a in axes) for i in (1, 2, 3, 4))
    outs = tuple(
        max((n + 2 * p - d * (k - 1) - 1) // s + 1, 1)
        for n, k, s, p, d in zip(dims, ks, ss, ps, ds, strict=True)
    )
    flat, ok = tap_table(dims, ks, ss, ps, ds, outs)
    tflat, tok = transposed_tap_table(dims, ks, ss, ps, ds, outs)
    for t in itertools.product(*map(range, ks)):
        for o in itertools.product(*map(range, outs)):
            taps = zip(o, ss, ps, t, ds, strict=True)
            pos = [oi * si - pi + ti * di for oi, si, pi, ti, di in taps]
            inside = all(0 <= q < n for q, n in zip(pos, dims, strict=True))
            assert ok[(*t, *o)] == inside
            if inside:
                assert flat[(*t, *o)] == int(np.ravel_multi_index(pos, dims))
            nums = [oi + pi - ti * di for oi, pi, ti, di in zip(o, ps, t, ds, strict=True)]
            src = [u // si for u, si in zip(nums, ss, strict=True)]
            hit = all(u % si == 0 for u, si in zip(nums, ss, strict=True)) and all(
                0 <= q < n for q, n in zip(src, dims, strict=True)
            )
            assert tok[(*t, *o)] == hit
            if hit:
                assert tflat[(*t, *o)] == int(np.ravel_multi_index(src, dims))


@given(st.lists(st.tuples(st.integers(1, 7), st.integers(1, 7)), min_size=1, max_size=3))
def test_adaptive_tables_match_pytorchs_rule(axes: list[tuple[int, int]]) -> None:
    dims, outs = tuple(a[0] for a in axes), tuple(a[1] for a in axes)
    flat, ok, count = adaptive_table(dims, outs)
    for w, o in enumerate(itertools.product(*map(range, outs))):
        ranges = [
            range(oi * n // m, -(-(oi + 1) * n // m))
            for oi, n, m in zip(o, dims, outs, strict=True)
        ]
        want = [int(np.ravel_multi_index(p, dims)) for p in itertools.product(*ranges)]
        assert list(flat[w][ok[w]]) == want
        assert count[w] == len(want)
        assert not ok[w][len(want) :].any()


@given(st.integers(1, 9), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2), st.booleans())
def test_pool_out_dim_matches_pytorchs_formula(n: int, k: int, s: int, p: int, ceil: bool) -> None:
    if n + 2 * p < k or 2 * p > k:
        return
    span = n + 2 * p - k
    want = (-(-span // s) if ceil else span // s) + 1
    if ceil and (want - 1) * s >= n + p:
        want -= 1
    assert pool_out_dim("p", n, k, s, p, p, 1, ceil) == want


def test_large_padding_table_is_vectorised() -> None:
    """The body of a 224x224 convolution builds (its index table is NumPy, not a loop)."""
    body = OPS["conv2d"].body
    assert body is not None
    g = body([(3, 224, 224), (8, 3, 3, 3)], {"padding": (1, 1), "stride": (2, 2)})
    gather = next(n for n in g.nodes if n.op == "gather")
    assert gather.attrs["shape"] == (1, 27, 112 * 112)


# --------------------------------------------------------------------------- PyTorch

torch = pytest.importorskip("torch")
F = torch.nn.functional

_TORCH_CASES: list[tuple[str, list[tuple[int, ...]], dict[str, Any], Any]] = [
    ("conv1d", [(2, 2, 7), (4, 1, 3), (4,)], {"stride": (2,), "padding": (1,), "dilation": (2,),
     "groups": 2}, lambda x, w, b: F.conv1d(x, w, b, 2, 1, 2, 2)),
    ("conv3d", [(1, 2, 4, 3, 5), (2, 2, 2, 2, 3)], {"stride": (1, 2, 2), "padding": (1, 0, 1)},
     lambda x, w: F.conv3d(x, w, None, (1, 2, 2), (1, 0, 1))),
    ("conv3d", [(2, 3, 3, 3), (2, 2, 1, 2, 2)], {"padding": (0, 1, 0, 1, 0, 1)},
     lambda x, w: F.conv3d(F.pad(x, (0, 1, 1, 0, 0, 1)), w)),
    ("conv_transpose1d", [(2, 4, 5), (4, 3, 3)], {"stride": (3,), "padding": (1,),
     "output_padding": (2,), "groups": 2}, lambda x, w: F.conv_transpose1d(x, w, None, 3, 1, 2, 2)),
    ("conv_transpose3d", [(1, 2, 2, 3, 2), (2, 1, 2, 2, 3)], {"stride": (2, 1, 2),
     "padding": (1, 0, 1), "output_padding": (1, 0, 1), "groups": 2, "dilation": (1, 2, 1)},
     lambda x, w: F.conv_transpose3d(x, w, None, (2, 1, 2), (1, 0, 1), (1, 0, 1), 2, (1, 2, 1))),
    ("max_pool2d", [(1, 2, 7, 6)], {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1),
     "ceil_mode": True}, lambda x: F.max_pool2d(x, (3, 2), 2, 1, ceil_mode=True)),
    ("max_pool3d", [(1, 2, 5, 4, 6)], {"kernel_size": (2, 3, 2), "stride": (2, 2, 3),
     "padding": (1, 1, 0), "ceil_mode": True},
     lambda x: F.max_pool3d(x, (2, 3, 2), (2, 2, 3), (1, 1, 0), ceil_mode=True)),
    ("avg_pool3d", [(1, 2, 5, 4, 6)], {"kernel_size": (2, 3, 2), "stride": (2, 2, 3),
     "padding": (1, 1, 0), "ceil_mode": True, "count_include_pad": False},
     lambda x: F.avg_pool3d(x, (2, 3, 2), (2, 2, 3), (1, 1, 0), True, False)),
    ("avg_pool2d", [(1, 2, 7, 6)], {"kernel_size": (3, 2), "stride": (2, 2), "padding": (1, 1),
     "ceil_mode": True}, lambda x: F.avg_pool2d(x, (3, 2), 2, 1, ceil_mode=True)),
    ("adaptive_avg_pool2d", [(2, 7, 5)], {"output_size": (4, 3)},
     lambda x: F.adaptive_avg_pool2d(x, (4, 3))),
    ("adaptive_max_pool3d", [(2, 5, 3, 7)], {"output_size": (3, 2, 4)},
     lambda x: F.adaptive_max_pool3d(x, (3, 2, 4))),
    ("pad", [(2, 3, 4)], {"pad": (2, -1, 1, 2), "mode": "reflect"},
     lambda x: F.pad(x, (2, -1, 1, 2), mode="reflect")),
    ("pad", [(2, 3, 4)], {"pad": (-1, 2, 0, 1), "mode": "circular"},
     lambda x: F.pad(x, (-1, 2, 0, 1), mode="circular")),
]  # fmt: skip


@pytest.mark.parametrize(("op", "shapes", "attrs", "fn"), _TORCH_CASES)
def test_against_pytorch(op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any],
                         fn: Any) -> None:  # fmt: skip
    rng = np.random.default_rng(7)
    arrs = [rng.standard_normal(sh) for sh in shapes]
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
        np.testing.assert_allclose(s.grad(grads, x), w.numpy(), rtol=0, atol=1e-12)


def test_layers_match_pytorch_modules() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 2, 5, 4, 3))
    s = Session(dtype="float64")
    conv = Conv3d(2, 3, (2, 2, 1), padding=1, groups=1)
    w = rng.standard_normal(conv.state_specs()[0].shape)
    b = rng.standard_normal(3)
    y = s.conv3d(s.input(x), s.input(w), s.input(b), **conv.attrs)
    want = F.conv3d(torch.tensor(x), torch.tensor(w), torch.tensor(b), padding=1)
    np.testing.assert_allclose(s.get_value(y), want.numpy(), rtol=0, atol=1e-12)
    assert conv.out_shape(x.shape) == tuple(want.shape)
    assert Conv1d(2, 4, 3, stride=2).out_shape((2, 9)) == (4, 4)
    assert MaxPool1d(2, ceil_mode=True).out_shape((1, 5)) == (1, 3)
    assert AdaptiveAvgPool2d((3, 2)).out_shape((1, 7, 5)) == (1, 3, 2)
    with pytest.raises(ShapeError, match="Conv1d"):
        Conv1d(2, 4, 3).out_shape((3, 9))
