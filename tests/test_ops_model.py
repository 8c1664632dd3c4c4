"""Model-scale ops (spec/ops/{index,reduce,attention,conv,pool,norm,embed}.py): golden cases
worked by hand, conventions, errors, independent references and end-to-end link checks of a
small CNN and a Transformer block.

Expected values are written down here (hand computations in exact rationals) or computed
by independent reference code in this file (plain NumPy loops), never by the code under
test.
"""

from __future__ import annotations

from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN
from runtime.session import Session
from runtime.session.link import link_check
from spec.domains import FLOAT64, RATIONAL
from spec.errors import GraphError, ShapeError
from spec.graph import GraphBuilder
from spec.ops import OPS, default_attention_scale
from spec.tensor import Tensor

MODEL_OPS = (
    "gather reduce_max mask_neg_inf conv2d conv_transpose2d avg_pool2d max_pool2d layer_norm "
    "batch_norm scaled_dot_product_attention multi_head_attention embedding one_hot"
).split()


def _t(a: Any) -> Tensor:
    arr = np.asarray(a, dtype=object)
    return Tensor(arr.shape, tuple(Q(v) for v in arr.reshape(-1)))


def _rows(t: Tensor) -> list[Any]:
    return np.array(t.data, dtype=object).reshape(t.shape).tolist()  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- table


def test_model_ops_are_in_the_table_and_composites_where_possible() -> None:
    primitives = {n for n in MODEL_OPS if OPS[n].kind == "primitive"}
    assert primitives == {"gather", "reduce_max", "mask_neg_inf"}
    for name in MODEL_OPS:
        assert name in OPS


@pytest.mark.parametrize("name", MODEL_OPS)
def test_model_ops_are_session_methods(name: str) -> None:
    assert callable(getattr(Session, name))


# --------------------------------------------------------------------------- conv2d golden

X44 = [[4 * i + j + 1 for j in range(4)] for i in range(4)]  # 1..16 row-major
W33 = [[1, 2, 0], [0, 1, 0], [0, 0, 3]]


def test_conv2d_3x3_on_4x4_by_hand() -> None:
    # y[r][c] = x[r][c] + 2·x[r][c+1] + x[r+1][c+1] + 3·x[r+2][c+2] with x[i][j] = 4i+j+1
    #         = 7·(4r + c) + 44, then + 1/2:  [[44, 51], [72, 79]] + 1/2.
    y = OPS["conv2d"].forward(RATIONAL, [_t([X44]), _t([[W33]]), _t([Q(1, 2)])], {}, ())
    assert y.shape == (1, 2, 2)
    assert _rows(y) == [[[Q(89, 2), Q(103, 2)], [Q(145, 2), Q(159, 2)]]]


def test_conv2d_padding_and_stride_by_hand() -> None:
    # padding 1, stride 2: output 2x2; y[0][0] sees x[-1..1][-1..1]: w[1][1]·x[0][0] +
    # w[2][2]·x[1][1] = 1 + 3·6 = 19 (the other in-bounds taps have weight 0 or lie in the
    # padding); y[0][1] (columns 1..3): w[1][0]·x[0][1] + w[1][1]·x[0][2] + w[2][1]·x[1][2]
    # + w[2][2]·x[1][3] + w[2][0]·x[1][1] = 0 + 3 + 0 + 3·8 + 0 = 27;
    # y[1][0] (rows 1..3, cols -1..1): w[0][1]·x[1][0] + w[0][2]·x[1][1] + w[1][1]·x[2][0]
    # + w[2][2]·x[3][1] = 2·5 + 0 + 9 + 3·14 = 61; y[1][1]: w[0][0]·x[1][1] + 2·x[1][2] +
    # x[2][2] + 3·x[3][3] = 6 + 14 + 11 + 48 = 79.
    y = OPS["conv2d"].forward(
        RATIONAL, [_t([X44]), _t([[W33]])], {"stride": (2, 2), "padding": (1, 1)}, ()
    )
    assert _rows(y) == [[[19, 27], [61, 79]]]


def test_conv2d_gradients_by_hand() -> None:
    # y = conv2d(x, w) with x 1x2x2, w 1x1x1x2: y[r] = w0·x[r][0] + w1·x[r][1] (1 column).
    # With seed g = [[1], [2]]: dw0 = x00 + 2·x10, dw1 = x01 + 2·x11; dx = g ⊗ w.
    x, w, g = _t([[[1, 2], [3, 4]]]), _t([[[[5, 7]]]]), _t([[[1], [2]]])
    gx, gw = OPS["conv2d"].vjp(RATIONAL, [x, w], g, {}, ())
    assert _rows(gw) == [[[[1 + 2 * 3, 2 + 2 * 4]]]]
    assert _rows(gx) == [[[5, 7], [10, 14]]]


def test_conv2d_sum_order_is_the_stated_left_fold() -> None:
    # x = [2^24, 1, 1], w = [1, 1, 1], one window: the stated order ((2^24 + 1) + 1) rounds
    # to 2^24 at each step in binary32 (ties to even), while (1 + 1) + 2^24 would be exact.
    s = Session(dtype="float32", kernels="ordered")
    x = s.input(np.array([[[2.0**24, 1.0, 1.0]]], dtype=np.float32))
    w = s.input(np.ones((1, 1, 1, 3), dtype=np.float32))
    y = s.conv2d(x, w)
    assert float(np.asarray(s.get_value(y)).reshape(-1)[0]) == 2.0**24


def _conv_ref(
    x: np.ndarray, w: np.ndarray, stride: tuple[int, int], pad: tuple[int, int], groups: int
) -> np.ndarray:
    """Independent direct convolution (float64 loops)."""
    c, h, wd = x.shape
    co, cg, kh, kw = w.shape
    xp = np.zeros((c, h + 2 * pad[0], wd + 2 * pad[1]))
    xp[:, pad[0] : pad[0] + h, pad[1] : pad[1] + wd] = x
    oh = (h + 2 * pad[0] - kh) // stride[0] + 1
    ow = (wd + 2 * pad[1] - kw) // stride[1] + 1
    y = np.zeros((co, oh, ow))
    for o in range(co):
        g = o // (co // groups)
        for r in range(oh):
            for q in range(ow):
                patch = xp[
                    g * cg : (g + 1) * cg,
                    r * stride[0] : r * stride[0] + kh,
                    q * stride[1] : q * stride[1] + kw,
                ]
                y[o, r, q] = float((patch * w[o]).sum())
    return y


@settings(max_examples=15, deadline=None)
@given(
    st.sampled_from([(1, 1, 1), (2, 1, 2)]),  # (groups, c_in per group, c_out per group)
    st.integers(2, 4),
    st.integers(2, 4),
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(0, 1),
    st.integers(0, 2**31 - 1),
)
def test_conv2d_matches_a_direct_convolution_exactly(
    g: tuple[int, int, int], h: int, w: int, kh: int, kw: int, s: int, p: int, seed: int
) -> None:
    groups, cg, cog = g
    rng = np.random.default_rng(seed)
    x = rng.integers(-4, 5, (groups * cg, h, w)).astype(float)
    wt = rng.integers(-4, 5, (groups * cog, cg, kh, kw)).astype(float)
    sess = Session(dtype="float64", kernels="ordered")
    y = sess.conv2d(sess.input(x), sess.input(wt), stride=(s, s), padding=(p, p), groups=groups)
    # small integers: every sum is exact in binary64, whatever the order
    assert np.array_equal(np.asarray(sess.get_value(y)), _conv_ref(x, wt, (s, s), (p, p), groups))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 2), st.integers(0, 1))
def test_conv_transpose2d_is_the_adjoint_of_conv2d(seed: int, s: int, p: int) -> None:
    # <conv2d(x, w), y> = <x, conv_transpose2d(y, w)> exactly, same stride/padding.
    rng = np.random.default_rng(seed)
    x = _t(rng.integers(-3, 4, (2, 4, 4)))
    w = _t(rng.integers(-3, 4, (3, 2, 2, 2)))
    attrs = {"stride": (s, s), "padding": (p, p)}
    y = OPS["conv2d"].forward(RATIONAL, [x, w], attrs, ())
    yy = _t(rng.integers(-3, 4, y.shape))
    back = OPS["conv_transpose2d"].forward(
        RATIONAL, [yy, w], {**attrs, "output_padding": ((4 + 2 * p - 2) % s,) * 2}, ()
    )
    assert back.shape == x.shape
    lhs = sum((a * b for a, b in zip(y.data, yy.data, strict=True)), Q(0))
    rhs = sum((a * b for a, b in zip(x.data, back.data, strict=True)), Q(0))
    assert lhs == rhs


def test_conv_transpose2d_by_hand() -> None:
    # stride 2, 1x1 input channel, x = [[1, 2]], w = [[a, b], [c, d]] = [[1, 2], [3, 4]]:
    # each input pixel stamps w at (0, 2·iw): y = [[1, 2, 2, 4], [3, 4, 6, 8]].
    y = OPS["conv_transpose2d"].forward(
        RATIONAL, [_t([[[1, 2]]]), _t([[[[1, 2], [3, 4]]]])], {"stride": (2, 2)}, ()
    )
    assert _rows(y) == [[[1, 2, 2, 4], [3, 4, 6, 8]]]


# --------------------------------------------------------------------------- pooling


def test_avg_pool2d_by_hand() -> None:
    x = _t([[[1, 2], [3, 4]]])
    y = OPS["avg_pool2d"].forward(RATIONAL, [x], {"kernel_size": (2, 2)}, ())
    assert _rows(y) == [[[Q(5, 2)]]]
    # padding 1, stride 2 on 2x2: each window holds one element and three zeros: x/4
    y = OPS["avg_pool2d"].forward(RATIONAL, [x], {"kernel_size": (2, 2), "padding": (1, 1)}, ())
    assert _rows(y) == [[[Q(1, 4), Q(1, 2)], [Q(3, 4), Q(1)]]]


def test_max_pool2d_by_hand_with_negative_values_and_padding() -> None:
    # padding acts as -inf: the corner window of an all-negative input is its element
    x = _t([[[-5, -1], [-3, -2]]])
    y = OPS["max_pool2d"].forward(RATIONAL, [x], {"kernel_size": (2, 2), "padding": (1, 1)}, ())
    assert _rows(y) == [[[-5, -1], [-3, -2]]]


def test_max_pool2d_tie_gives_the_whole_cotangent_to_the_first_maximum() -> None:
    # window [[1, 3], [3, 2]]: the max 3 is at (0, 1) and (1, 0); row-major first: (0, 1)
    x = _t([[[1, 3], [3, 2]]])
    (gx,) = OPS["max_pool2d"].vjp(RATIONAL, [x], _t([[[7]]]), {"kernel_size": (2, 2)}, ())
    assert _rows(gx) == [[[0, 7], [0, 0]]]
    s = Session(dtype="float32", kernels="fast")
    xi = s.input(np.array([[[1, 3], [3, 2]]], dtype=np.float32), requires_grad=True)
    y = s.max_pool2d(xi, kernel_size=(2, 2))
    grads = s.backward_dense_all(y, np.full((1, 1, 1), 7, dtype=np.float32))
    assert np.asarray(s.grad(grads, xi)).tolist() == [[[0.0, 7.0], [0.0, 0.0]]]


def test_reduce_max_nan_and_signed_zero_conventions() -> None:
    D = FLOAT64
    nan, m0 = D.from_float(float("nan")), D.from_float(-0.0)
    x = Tensor((2, 3), (D.from_float(1.0), nan, D.from_float(5.0), m0, D.zero(), m0))
    y = OPS["reduce_max"].forward(D, [x], {"axis": 1}, ())
    assert D.is_nan(y.data[0])  # NaN propagates
    assert D.same(y.data[1], m0)  # -0 and +0 tie: the earlier (-0) is kept
    g = Tensor((2,), (D.from_float(2.0), D.from_float(3.0)))
    (gx,) = OPS["reduce_max"].vjp(D, [x], g, {"axis": 1}, ())
    assert [float(v) for v in gx.data] == [0.0, 2.0, 0.0, 3.0, 0.0, 0.0]


def test_gather_padding_index_reads_zero_and_gets_no_cotangent() -> None:
    x = _t([10, 20, 30])
    a = {"indices": (2, 3, 2, 0), "shape": (2, 2)}
    assert _rows(OPS["gather"].forward(RATIONAL, [x], a, ())) == [[30, 0], [30, 10]]
    (gx,) = OPS["gather"].vjp(RATIONAL, [x], _t([[1, 2], [4, 8]]), a, ())
    assert _rows(gx) == [8, 0, 5]


# --------------------------------------------------------------------------- norms

A = Q(99999, 200000)  # a² + 1/100000 = (100001/200000)²: the normalised value is exact


def test_layer_norm_by_hand_exact() -> None:
    # x = [-a, a]: mean 0, biased var a², sqrt(a² + 1e-5) = 100001/200000, so
    # x̂ = ±99999/100001; then ·γ + β with γ = [2, 3], β = [1, -1].
    y = OPS["layer_norm"].forward(RATIONAL, [_t([-A, A]), _t([2, 3]), _t([1, -1])], {}, ())
    r = Q(99999, 100001)
    assert _rows(y) == [1 - 2 * r, 3 * r - 1]


def test_batch_norm_by_hand_exact() -> None:
    # x (N=2, C=2, L=1): channel 0 holds [-a, a] + 5 over the batch, channel 1 [a, -a].
    x = _t([[[5 - A], [A]], [[5 + A], [-A]]])
    y = OPS["batch_norm"].forward(RATIONAL, [x, _t([1, 1]), _t([0, 0])], {}, ())
    r = Q(99999, 100001)
    assert _rows(y) == [[[-r], [r]], [[r], [-r]]]


def test_layer_norm_matches_the_formula_in_float64() -> None:
    x = np.array([[1.0, -2.0, 3.5, 0.25], [4.0, 4.0, -1.0, 2.0]])
    s = Session(dtype="float64")
    y = s.layer_norm(s.input(x), s.input(np.ones(4)), s.input(np.zeros(4)))
    mu = x.mean(axis=1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    assert np.allclose(np.asarray(s.get_value(y)), ref, rtol=1e-14, atol=0)


# --------------------------------------------------------------------------- attention


def test_default_attention_scale_is_the_binary64_reciprocal_sqrt() -> None:
    assert default_attention_scale(4) == Q(1, 2)
    assert float(default_attention_scale(2)) == 0.7071067811865476
    # 1/sqrt(3) = 0.57735026918962576451...; the binary64 neighbours are ...6257310588...
    # (3.3e-17 away) and ...6258420811... (7.8e-17 away). 1 / math.sqrt(3) rounds twice and
    # lands on the far one, 0.5773502691896258.
    assert float(default_attention_scale(3)) == 0.5773502691896257


def test_causal_attention_first_row_is_the_first_value_and_masks_block_gradients() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(3, 2)) for _ in range(3))
    s = Session(dtype="float64", kernels="ordered")
    qi, ki, vi = (s.input(a, requires_grad=True) for a in (q, k, v))
    y = s.scaled_dot_product_attention(qi, ki, vi, causal=1)
    out = np.asarray(s.get_value(y))
    assert out[0].tolist() == v[0].tolist()  # softmax over one kept key is exactly 1
    seed = np.zeros((3, 2))
    seed[0] = 1.0
    grads = s.backward_dense_all(y, seed)
    gv, gk = np.asarray(s.grad(grads, vi)), np.asarray(s.grad(grads, ki))
    assert gv.tolist() == [[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]
    assert gk[1:].tolist() == [[0.0, 0.0], [0.0, 0.0]]


def test_attention_matches_softmax_formula() -> None:
    rng = np.random.default_rng(1)
    q, k, v = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 5, 4)), rng.normal(size=(2, 5, 2))
    mask = rng.integers(0, 2, (3, 5))
    mask[:, 0] = 1
    s = Session(dtype="float64")
    y = s.scaled_dot_product_attention(
        s.input(q), s.input(k), s.input(v), mask=mask.reshape(-1).tolist()
    )
    sc = np.where(mask == 1, q @ np.swapaxes(k, -1, -2) / 2.0, -np.inf)
    p = np.exp(sc - sc.max(axis=-1, keepdims=True))
    ref = (p / p.sum(axis=-1, keepdims=True)) @ v
    assert np.allclose(np.asarray(s.get_value(y)), ref, rtol=1e-13, atol=1e-15)


def test_multi_head_attention_matches_per_head_formula() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(3, 4))
    wq, wk, wv, wo = (rng.normal(size=(4, 4)) for _ in range(4))
    s = Session(dtype="float64")
    xi = s.input(x)
    y = s.multi_head_attention(xi, xi, xi, *(s.input(w) for w in (wq, wk, wv, wo)), heads=2)
    heads = []
    for h in range(2):
        sl = slice(2 * h, 2 * h + 2)
        qh, kh, vh = (x @ wq.T)[:, sl], (x @ wk.T)[:, sl], (x @ wv.T)[:, sl]
        sc = qh @ kh.T * float(default_attention_scale(2))
        p = np.exp(sc - sc.max(axis=1, keepdims=True))
        heads.append((p / p.sum(axis=1, keepdims=True)) @ vh)
    ref = np.concatenate(heads, axis=1) @ wo.T
    assert np.allclose(np.asarray(s.get_value(y)), ref, rtol=1e-12, atol=1e-14)


# --------------------------------------------------------------------------- embeddings


def test_embedding_scatter_adds_repeated_ids_by_hand() -> None:
    table = _t([[1, 2], [3, 4], [5, 6]])
    a = {"indices": (2, 0, 2), "shape": None}
    assert _rows(OPS["embedding"].forward(RATIONAL, [table], a, ())) == [[5, 6], [1, 2], [5, 6]]
    (gt,) = OPS["embedding"].vjp(RATIONAL, [table], _t([[1, 10], [100, 1000], [2, 20]]), a, ())
    assert _rows(gt) == [[100, 1000], [0, 0], [3, 30]]


def test_one_hot_by_hand() -> None:
    y = OPS["one_hot"].forward(RATIONAL, [], {"indices": (2, 0), "num_classes": 3}, ())
    assert _rows(y) == [[0, 0, 1], [1, 0, 0]]
    s = Session(dtype="float32")
    assert np.asarray(s.get_value(s.one_hot(indices=[1], num_classes=2))).tolist() == [[0, 1]]


# --------------------------------------------------------------------------- errors


def test_errors_name_op_input_and_expected_vs_got() -> None:
    b = GraphBuilder()
    x, w = b.input((2, 4, 4)), b.input((1, 3, 3, 3))
    g3, b4 = b.input((3,)), b.input((4,))
    with pytest.raises(ShapeError, match=r"conv2d: input 1: .*expected 2, got 3"):
        b.node("conv2d", x, w)
    with pytest.raises(GraphError, match=r"conv2d: takes \(x, w\) or \(x, w, b\)"):
        b.node("conv2d", x)
    with pytest.raises(ShapeError, match=r"layer_norm: input 1: .*expected \(4,\), got \(3,\)"):
        b.node("layer_norm", x, g3, b4)
    with pytest.raises(GraphError, match="mask_neg_inf: mask entries must be 0 or 1"):
        b.node("mask_neg_inf", x, mask=[2, 1, 1, 1], mask_shape=(4,))
    with pytest.raises(ShapeError, match=r"max_pool2d: input 0: .*expected rank 3 or 4"):
        b.node("max_pool2d", b.node("reshape", x, shape=(8, 4)), kernel_size=(2, 2))
    with pytest.raises(ShapeError, match="one_hot: class id out of range"):
        b.node("one_hot", indices=[3], num_classes=2)


# --------------------------------------------------------------------------- graphs


def _cnn(b: GraphBuilder) -> None:
    x, w1, b1, w2 = b.input((1, 1, 5, 5)), b.input((2, 1, 3, 3)), b.input((2,)), b.input((3, 8))
    bias, t = b.input((3,)), b.input((1, 3))
    h = b.node("relu", b.node("conv2d", x, w1, b1, padding=(1, 1)))
    h = b.node("max_pool2d", h, kernel_size=(2, 2), stride=(2, 2))
    h = b.node("avg_pool2d", h, kernel_size=(1, 1))
    h = b.node("reshape", h, shape=(1, 8))
    b.node("cross_entropy", b.node("linear", h, w2, bias), t)


def _transformer(b: GraphBuilder) -> None:
    x = b.input((3, 4))
    ws = [b.input((4, 4)) for _ in range(4)]
    g1, b1, w_ff, b_ff = b.input((4,)), b.input((4,)), b.input((4, 4)), b.input((4,))
    a = b.node("multi_head_attention", x, x, x, *ws, heads=2, causal=1)
    h = b.node("layer_norm", b.node("add", x, a), g1, b1)
    f = b.node("gelu", b.node("linear", h, w_ff, b_ff))
    b.node("mean", b.node("add", h, f))


@pytest.mark.parametrize("build", [_cnn, _transformer], ids=["cnn", "transformer"])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_model_graphs_link_bitwise(build: Any, dtype: str) -> None:
    b = GraphBuilder()
    build(b)
    g = b.build()
    D = DTYPE_DOMAIN[dtype]
    rng = np.random.default_rng(3)
    xs = [
        Tensor(s, tuple(D.from_float(float(v)) for v in rng.normal(size=int(np.prod(s)))))
        for s in g.inputs
    ]
    ok, text = link_check(g, xs, [], dtype, 0)
    assert ok, text
