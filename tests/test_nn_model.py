"""The model-scale layers of `runtime.nn` (Conv2d, MaxPool2d, AvgPool2d, Flatten,
BatchNorm2d, Embedding, MultiHeadAttention): they call the table's ops, hold the stated
state, validate their inputs, and train through the Trainer."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.nn import (
    AvgPool2d,
    BatchNorm1d,
    BatchNorm2d,
    Conv2d,
    Embedding,
    Flatten,
    Forward,
    Linear,
    MaxPool2d,
    MultiHeadAttention,
    ReLU,
    SeedStream,
    Sequential,
    Tanh,
)
from runtime.optim import SGD, Adam
from runtime.session import Session
from runtime.trainer import Trainer
from spec.errors import ShapeError


def _run(layer: Any, x: np.ndarray, dtype: str = "float64", train: bool = True) -> Any:
    """The layer's output and reported buffers on a fresh session, with its seeded state."""
    s = Session(dtype=dtype, kernels="ordered")
    state = [s.input(v.astype(dtype)) for v in layer.init_state(SeedStream(3))]
    f = Forward(s, train)
    y = layer.forward(f, state, list(range(len(state))), s.input(x.astype(dtype)))
    return s, state, y, f.updates


def test_conv2d_state_and_forward_is_the_op() -> None:
    layer = Conv2d(2, 4, 3, stride=1, padding=1)
    specs = layer.state_specs()
    assert [(sp.name, sp.shape, sp.trainable) for sp in specs] == [
        ("weight", (4, 2, 3, 3), True),
        ("bias", (4,), True),
    ]
    w, b = layer.init_state(SeedStream(3))
    # kaiming_uniform with fan_in = 2 * 9: |w| <= sqrt(6 / 18) (and not all zero)
    assert np.all(np.abs(w) <= np.sqrt(6 / 18)) and np.any(w != 0) and not np.any(b)
    x = np.arange(2 * 5 * 5, dtype=np.float64).reshape(2, 5, 5) / 7
    s, state, y, _ = _run(layer, x)
    want = s.conv2d(s.input(x), *state, stride=(1, 1), padding=(1, 1))
    assert y.shape == (4, 5, 5) == layer.out_shape((2, 5, 5))
    assert s.get_value(y).tobytes() == s.get_value(want).tobytes()
    assert Conv2d(2, 4, 3, bias=False).state_specs()[0].shape == (4, 2, 3, 3)
    assert len(Conv2d(2, 4, 3, bias=False).state_specs()) == 1


def test_conv2d_hand_value() -> None:
    # one 2x2 all-ones kernel, bias 0, on a 1x3x3 input 1..9: window sums 12, 16, 24, 28
    s = Session(dtype="exact")
    x = s.input(np.array([[[Fraction(v) for v in range(1 + 3 * r, 4 + 3 * r)] for r in range(3)]]))
    w = s.input(np.full((1, 1, 2, 2), Fraction(1), dtype=object))
    b = s.input(np.array([Fraction(0)], dtype=object))
    f = Forward(s, True)
    y = Conv2d(1, 1, 2).forward(f, [w, b], [0, 1], x)
    assert s.get_value(y).reshape(-1).tolist() == [12, 16, 24, 28]


def test_pools_flatten_and_errors() -> None:
    x = np.array(
        [[[1.0, 5.0, 2.0, 0.0], [3.0, 4.0, 8.0, 8.0], [0.0, 1.0, 2.0, 3.0], [9.0, 0.0, 1.0, 1.0]]]
    )
    s, _, y, _ = _run(MaxPool2d(2), x)
    assert s.get_value(y).reshape(-1).tolist() == [5.0, 8.0, 9.0, 3.0]
    s, _, y, _ = _run(AvgPool2d(2), x)
    assert s.get_value(y).reshape(-1).tolist() == [13 / 4, 18 / 4, 10 / 4, 7 / 4]
    assert Flatten().out_shape((2, 3, 4)) == (24,)
    assert Flatten().out_shape((5, 2, 3, 4)) == (5, 24)
    with pytest.raises(ShapeError, match="Flatten"):
        Flatten().out_shape((2, 3))
    with pytest.raises(ShapeError, match=r"Conv2d\(3, 4"):
        Conv2d(3, 4, 3).out_shape((2, 5, 5))  # 2 channels given, 3 expected
    # the input is blamed, not the weights
    want = (
        r"Conv2d\(3, 4, kernel_size=\(3, 3\)\): input 0: expected shape \(3, H, W\) or "
        r"\(N, 3, H, W\), got \(2, 5, 5\)"
    )
    for bad in ((2, 5, 5), (1, 2, 5, 5), (5, 5), (1, 1, 3, 5, 5)):
        with pytest.raises(ShapeError, match=r"Conv2d\(3, 4.*: input 0: expected shape"):
            Conv2d(3, 4, 3).out_shape(bad)
    with pytest.raises(ShapeError, match=want):
        Conv2d(3, 4, 3).out_shape((2, 5, 5))
    with pytest.raises(ShapeError, match=r"Conv2d\(3, 4"):  # too small: the op's rule
        Conv2d(3, 4, 3).out_shape((3, 2, 2))
    assert Conv2d(3, 4, 3).out_shape((2, 3, 5, 5)) == (2, 4, 3, 3)
    with pytest.raises(ShapeError, match="groups 2 must divide"):
        Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ShapeError, match="kernel_size must be positive"):
        MaxPool2d(0)


@given(n=st.integers(1, 3), c=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_batchnorm2d_is_batchnorm1d_on_rows(n: int, c: int, seed: int) -> None:
    """With H = W = 1, BatchNorm2d on (N, C, 1, 1) is BatchNorm1d on (N, C): the same
    outputs and the same reported running statistics, bit for bit, in training and in
    evaluation mode."""
    x = np.random.default_rng(seed).standard_normal((n, c))
    for train in (True, False):
        s2, _, y2, u2 = _run(BatchNorm2d(c), x.reshape(n, c, 1, 1), "float32", train)
        s1, _, y1, u1 = _run(BatchNorm1d(c), x, "float32", train)
        assert s2.get_value(y2).reshape(n, c).tobytes() == s1.get_value(y1).tobytes()
        assert [(k, v.tobytes()) for k, v in u2] == [(k, v.tobytes()) for k, v in u1]


def test_batchnorm2d_statistics_per_channel() -> None:
    # channel 0 holds 1, 3 (mean 2, biased var 1); channel 1 holds 5, 5 (var 0)
    x = np.array([[[[1.0]], [[5.0]]], [[[3.0]], [[5.0]]]])  # (N=2, C=2, 1, 1)
    s, _, y, upd = _run(BatchNorm2d(2, eps=1e-5), x)
    out = s.get_value(y).reshape(2, 2)
    assert np.allclose(out[:, 0], [-1 / np.sqrt(1 + 1e-5), 1 / np.sqrt(1 + 1e-5)])
    assert out[:, 1].tolist() == [0.0, 0.0]
    slots = dict(upd)
    # running_mean <- 0.9 * 0 + 0.1 * mean; running_var <- 0.9 * 1 + 0.1 * unbiased var
    assert np.allclose(slots[2], [0.2, 0.5]) and np.allclose(slots[3], [0.9 + 0.1 * 2, 0.9])


def test_embedding_rows_and_summed_gradient() -> None:
    layer = Embedding(4, 3)
    s = Session(dtype="float64")
    table = s.input(np.arange(12, dtype=np.float64).reshape(4, 3), requires_grad=True)
    ids = s.input(np.array([2.0, 0.0, 2.0]))
    y = layer.forward(Forward(s, True), [table], [0], ids)
    assert s.get_value(y).tolist() == [[6, 7, 8], [0, 1, 2], [6, 7, 8]]
    g = s.backward_scalar_dense_all(s.sum(y))[table.id]
    assert g.tolist() == [[1, 1, 1], [0, 0, 0], [2, 2, 2], [0, 0, 0]]  # id 2 used twice
    for bad in ([4.0], [-1.0], [0.5], [float("nan")]):
        with pytest.raises(ShapeError, match=r"Embedding\(4, 3\): input 0 element 0"):
            layer.forward(Forward(s, True), [table], [0], s.input(np.array(bad)))


def test_multi_head_attention_layer_is_the_op() -> None:
    layer = MultiHeadAttention(4, 2, causal=True)
    assert [sp.shape for sp in layer.state_specs()] == [(4, 4)] * 4
    x = np.random.default_rng(0).standard_normal((3, 4))
    s, st_, y, _ = _run(layer, x)
    want = s.multi_head_attention(s.input(x), s.input(x), s.input(x), *st_, heads=2, causal=1)
    assert s.get_value(y).tobytes() == s.get_value(want).tobytes()
    with pytest.raises(ShapeError, match="heads 3 must divide embed 4"):
        MultiHeadAttention(4, 3)
    want = (
        r"MultiHeadAttention\(4, heads=2\): input 0: expected shape \(T, 4\) or "
        r"\(N, T, 4\), got \(3, 5\)"
    )
    with pytest.raises(ShapeError, match=want):
        layer.out_shape((3, 5))
    for bad in ((4,), (1, 1, 3, 4)):
        with pytest.raises(ShapeError, match=r"heads=2\): input 0: expected shape"):
            layer.out_shape(bad)
    assert layer.out_shape((2, 3, 4)) == (2, 3, 4)


def _images(n: int) -> list[tuple[Any, Any]]:
    """Vertical vs horizontal bar images (1, 6, 6), one-hot labels."""
    rng = np.random.default_rng(1)
    out = []
    for i in range(n):
        img = rng.uniform(0, 0.2, (1, 6, 6))
        k = int(rng.integers(1, 5))
        if i % 2:
            img[0, :, k] += 1.0
        else:
            img[0, k, :] += 1.0
        out.append((img.tolist(), [1.0, 0.0] if i % 2 else [0.0, 1.0]))
    return out


def _cnn() -> Sequential:
    return Sequential(
        Conv2d(1, 3, 3, padding=1), BatchNorm2d(3), ReLU(), MaxPool2d(2), Flatten(), Linear(27, 2)
    )


def test_cnn_trains_and_modes_agree() -> None:
    data = _images(8)
    runs = {}
    for mode in ("eager", "typed_graph"):
        tr = Trainer(
            _cnn(), "cross_entropy", SGD(0.2), dtype="float32", mode=mode, kernels="ordered", seed=2
        )
        run = tr.open()
        before = run.eval(data)
        for i in range(6):
            run.step([data[i % 8], data[(i + 3) % 8]], batch=True)
        runs[mode] = (before, run.eval(data), [a.tobytes() for a in run.state()])
    assert runs["eager"] == runs["typed_graph"]  # bit-identical parameters and losses
    before, after, _ = runs["eager"]
    assert after < before


def test_token_model_trains() -> None:
    """Embedding -> causal self-attention -> Linear on a toy next-token task."""
    model = Sequential(Embedding(5, 4), MultiHeadAttention(4, 2, causal=True), Tanh(), Linear(4, 5))
    eye = np.eye(5)
    data = [
        ([float(t) for t in seq], eye[[(t + 1) % 5 for t in seq]].tolist())
        for seq in ([0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 0])
    ]
    run = Trainer(model, "cross_entropy", Adam(0.05), dtype="float64", seed=1).open()
    before = run.eval(data)
    for i in range(30):
        run.step(data[i % 4])
    assert run.eval(data) < before
