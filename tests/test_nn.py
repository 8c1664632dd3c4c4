"""Layers, losses and initialisers.

Expected values come from the MPFR binary64 domain (`spec.domains.FLOAT64`), exact
Fractions and `spec.rng`, one operation at a time in the documented order.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.nn import (
    GELU,
    BatchNorm1d,
    Dropout,
    LayerNorm,
    Linear,
    ReLU,
    SeedStream,
    Sequential,
    Sigmoid,
    Tanh,
    kaiming_uniform,
    normal,
    uniform,
    xavier_uniform,
)
from runtime.optim import SGD, Adam
from runtime.trainer import Trainer
from spec import rng as srng
from spec.domains import BINARY32, FLOAT64
from spec.errors import DomainError, ShapeError, TorchLeanError

D = FLOAT64


def xavier_mpfr(seed: int, n: int, fan_in: int, fan_out: int) -> list[float]:
    L = D.sqrt(D.div(D.from_rational(6), D.from_rational(fan_in + fan_out)))
    two_l = D.mul(D.from_rational(2), L)
    key = srng.key_of(seed, 0)
    return [
        float(D.add(D.neg(L), D.mul(D.from_rational(srng.sample_unit(key, i)), two_l)))
        for i in range(n)
    ]


def test_xavier_uniform_golden() -> None:
    got = xavier_uniform((3, 2), 12345, 2, 3)
    assert got.reshape(-1).tolist() == xavier_mpfr(12345, 6, 2, 3)
    L = float(D.sqrt(D.from_rational(Fraction(6, 5))))
    assert all(-L <= v <= L for v in got.reshape(-1))


def test_kaiming_uniform_and_normal_golden() -> None:
    key = srng.key_of(7, 0)
    B = D.sqrt(D.div(D.from_rational(6), D.from_rational(4)))
    want = [
        float(D.add(D.neg(B), D.mul(D.from_rational(srng.sample_unit(key, i)), D.mul(2, B))))
        for i in range(4)
    ]
    assert kaiming_uniform((2, 2), 7, 4).reshape(-1).tolist() == want
    z = [srng.normal(D, key, i) for i in range(3)]
    want_n = [float(D.add(D.from_float(1.0), D.mul(D.from_float(0.5), zi))) for zi in z]
    assert normal((3,), 7, mean=1.0, std=0.5).tolist() == want_n


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**64 - 1), lo=st.floats(-10, 10), w=st.floats(0, 10))
def test_uniform_in_range(seed: int, lo: float, w: float) -> None:
    hi = lo + w
    v = uniform((5,), seed, lo, hi)
    assert ((v >= lo) & (v <= hi)).all()


def test_seed_stream_layer_by_layer() -> None:
    model = Sequential(Linear(2, 3), ReLU(), Linear(3, 1, bias_init="uniform"), Linear(1, 1))
    st0 = model.init(99)
    # Linear 1: weight seed key_of(99, 0), bias zeros; Linear 2: weight key_of(99, 1),
    # bias (stochastic here) key_of(99, 2); Linear 3: weight key_of(99, 3)
    assert st0[0].reshape(-1).tolist() == xavier_mpfr(srng.key_of(99, 0), 6, 2, 3)
    assert st0[1].tolist() == [0.0, 0.0, 0.0]
    assert st0[2].reshape(-1).tolist() == xavier_mpfr(srng.key_of(99, 1), 3, 3, 1)
    assert st0[3].tolist() == uniform((1,), srng.key_of(99, 2)).tolist()
    assert st0[4].reshape(-1).tolist() == xavier_mpfr(srng.key_of(99, 3), 1, 1, 1)
    s = SeedStream(99)
    assert [s.next() for _ in range(2)] == [srng.key_of(99, 0), srng.key_of(99, 1)]


def test_trainer_rounds_seeded_binary64_once() -> None:
    model = Sequential(Linear(2, 2))
    w32 = Trainer(model, dtype="float32", seed=5).open().state()[0]
    w64 = model.init(srng.key_of(5, 0))[0]
    for a, b in zip(w32.reshape(-1), w64.reshape(-1), strict=True):
        want = BINARY32.to_bits(BINARY32.from_float(float(b)))
        assert int(np.array(a).view(np.uint32)) == want


def test_layernorm_forward_golden() -> None:
    model = Sequential(LayerNorm(4))
    run = Trainer(model, dtype="float64", kernels="ordered").open()
    x = [1.0, 2.0, 4.0, 8.0]
    got = run.predict(x)
    # mu = fold / 4, d = x - mu, var = fold(d*d) / 4, y = (d / sqrt(var + eps)) * 1 + 0
    xs = [D.from_float(v) for v in x]
    s = xs[0]
    for v in xs[1:]:
        s = D.add(s, v)
    mu = D.div(s, D.from_rational(4))
    d = [D.sub(v, mu) for v in xs]
    q = D.mul(d[0], d[0])
    for v in d[1:]:
        q = D.add(q, D.mul(v, v))
    den = D.sqrt(D.add(D.div(q, D.from_rational(4)), D.from_float(1e-5)))
    want = [float(D.add(D.mul(D.div(v, den), D.one()), D.zero())) for v in d]
    assert got.tolist() == want


def test_batchnorm_running_stats_hand_worked() -> None:
    bn = BatchNorm1d(2)
    assert [s.name for s in bn.state_specs()] == [
        "weight",
        "bias",
        "running_mean",
        "running_var",
        "momentum",
    ]
    assert [s.trainable for s in bn.state_specs()] == [True, True, False, False, False]
    run = Trainer(Sequential(bn), optimizer=SGD(0.0), dtype="float64", kernels="ordered").open()
    # batch of 2 samples given as one (2, 2) input: rows (1, 2) and (3, 6)
    run.step(([[1.0, 2.0], [3.0, 6.0]], [[0.0, 0.0], [0.0, 0.0]]))
    w, _, rm, rv, mom = run.state()
    # mean (2, 4); unbiased var: ((1-2)^2 + (3-2)^2)/1 = 2, ((2-4)^2 + (6-4)^2)/1 = 8
    m = D.from_float(0.1)
    one_m = D.sub(D.one(), m)
    want_rm = [float(D.add(D.mul(one_m, D.zero()), D.mul(m, D.from_float(v)))) for v in (2, 4)]
    want_rv = [float(D.add(D.mul(one_m, D.one()), D.mul(m, D.from_float(v)))) for v in (2, 8)]
    assert rm.tolist() == want_rm and rv.tolist() == want_rv
    assert float(mom) == 0.1 and w.tolist() == [1.0, 1.0]  # lr 0: weights unchanged
    # a single (C,) sample is a batch of one: biased variance 0
    run.step(([5.0, 5.0], [0.0, 0.0]))
    rv2 = run.state()[3]
    assert rv2.tolist() == [float(D.mul(one_m, D.from_float(v))) for v in want_rv]
    # evaluation uses the running statistics
    _, _, rm, rv, _ = run.state()
    y = run.predict([1.0, 1.0])
    want = [
        float(
            D.div(
                D.sub(D.one(), D.from_float(a)), D.sqrt(D.add(D.from_float(v), D.from_float(1e-5)))
            )
        )
        for a, v in zip(rm.tolist(), rv.tolist(), strict=True)
    ]
    assert y.tolist() == want


def test_dropout_train_only() -> None:
    model = Sequential(Linear(4, 4), Dropout(0.5))
    plain = Sequential(model.layers[0])
    a = Trainer(model, seed=1).open()
    b = Trainer(plain, seed=1).open()
    assert np.array_equal(a.predict([1.0, 2.0, 3.0, 4.0]), b.predict([1.0, 2.0, 3.0, 4.0]))
    a.step(([1.0, 2.0, 3.0, 4.0], [0.0] * 4))
    b.step(([1.0, 2.0, 3.0, 4.0], [0.0] * 4))
    assert a._s.rng.counter == 1 and b._s.rng.counter == 0
    with pytest.raises(TorchLeanError, match="Dropout"):
        Dropout(1.5)


@pytest.mark.parametrize("dtype", ["float64", "float32", "bfloat16", "float16"])
@pytest.mark.parametrize("mode", ["eager", "typed_graph"])
def test_every_layer_every_dtype(dtype: str, mode: str) -> None:
    model = Sequential(
        Linear(3, 4), LayerNorm(4), GELU(), Linear(4, 4), Tanh(), BatchNorm1d(4), Sigmoid(),
        Dropout(0.2), ReLU(), Linear(4, 2),
    )  # fmt: skip
    run = Trainer(model, "cross_entropy", SGD(0.1), dtype=dtype, mode=mode).open()
    data = [([0.5, -1.0, 2.0], [1.0, 0.0]), ([1.0, 0.0, -0.5], [0.0, 1.0])]
    before = [np.asarray(s).tobytes() for s in run.state()]
    lv = run.step(data, batch=True, loss=True)
    assert np.isfinite(lv)
    assert [np.asarray(s).tobytes() for s in run.state()] != before
    assert run.state()[0].dtype.name == dtype
    assert np.isfinite(run.eval(data))


def test_exact_dtype_layers() -> None:
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 1))
    run = Trainer(model, optimizer=SGD(Fraction(1, 4))).open_typed("exact")
    lv = run.step(([Fraction(1), Fraction(2)], [Fraction(1, 3)]), loss=True)
    assert isinstance(lv, Fraction)
    bad = Trainer(Sequential(Linear(2, 2), Tanh()), optimizer=SGD(Fraction(1, 4)))
    with pytest.raises(DomainError):
        bad.open_typed("exact").step(([1, 2], [0, 0]))


def test_shapes_and_errors() -> None:
    assert Sequential(Linear(3, 5), ReLU(), Linear(5, 2)).out_shape((3,)) == (2,)
    assert Sequential(Linear(3, 5)).out_shape((7, 3)) == (7, 5)
    with pytest.raises(ShapeError, match=r"Linear\(3, 5\): input 0: expected shape"):
        Sequential(Linear(3, 5)).out_shape((4,))
    with pytest.raises(ShapeError):
        Linear(0, 1)
    with pytest.raises(TorchLeanError, match="layer 1"):
        Sequential(Linear(1, 1), "relu")  # type: ignore[arg-type]
    nested = Sequential(Sequential(Linear(1, 2), ReLU()), Linear(2, 1))
    assert len(nested.layers) == 3


def test_losses() -> None:
    # mse with y = fl(w + b) on x = [1]: hand value 0.75^2 at w = 0.5, b = 0.25, t = 0
    mse_run = Trainer(Sequential(Linear(1, 1)), dtype="float64").open_typed(
        "float64", initial_state=[np.array([[0.5]]), np.array([0.25])]
    )
    assert float(mse_run.loss(([1.0], [0.0]))) == 0.5625
    # cross-entropy of zero logits against a one-hot target is log(3)
    ce = Trainer(Sequential(Linear(2, 3)), "cross_entropy", dtype="float64", kernels="ordered")
    run = ce.open_typed("float64", initial_state=[np.zeros((3, 2)), np.zeros(3)])
    got = float(run.loss(([1.0, 1.0], [0.0, 1.0, 0.0])))
    assert got == float(D.log(D.from_rational(3)))
    with pytest.raises(TorchLeanError, match="objective"):
        Trainer(Sequential(Linear(1, 1)), "hinge").open()


def test_adam_bit_equal_across_modes_with_batchnorm_and_dropout() -> None:
    model = Sequential(Linear(2, 3), Dropout(0.5), BatchNorm1d(3), Linear(3, 1))
    out = []
    for mode in ("eager", "typed_graph"):
        run = Trainer(model, optimizer=Adam(0.05), mode=mode, kernels="ordered", seed=2).open()
        for i in range(3):
            run.step(([float(i), 1.0], [0.5]))
        out.append([np.asarray(s).tobytes() for s in run.state()])
    assert out[0] == out[1]


def test_tying_a_layer_with_running_statistics_is_refused() -> None:
    """Each occurrence of a tied BatchNorm would compute its running-statistics update from
    the buffer read before the forward, and the last report would overwrite the others:
    such tying is refused at construction. Tying stateless or all-trainable layers is
    still allowed."""
    from runtime.nn import BatchNorm2d

    bn = BatchNorm1d(2)
    msg = (
        r"Sequential: layer 1: BatchNorm1d\(2\) appears twice \(first as layer 0\); tying a "
        r"layer with running statistics is not supported \(its buffer updates would be lost\)"
    )
    with pytest.raises(TorchLeanError, match=msg):
        Sequential(bn, bn)
    bn2 = BatchNorm2d(3)
    with pytest.raises(TorchLeanError, match=r"layer 3: BatchNorm2d\(3\) appears twice"):
        Sequential(Sequential(bn2, ReLU()), Linear(3, 3), bn2)  # nested ones are spliced in
    lin, relu = Linear(2, 2), ReLU()
    tied = Sequential(lin, relu, BatchNorm1d(2), lin, relu)
    assert tied.tying() == [0, 1, 2, 3, 4, 5, 6, 0, 1]
