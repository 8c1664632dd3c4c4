"""Optimizers and schedulers: hand-worked golden trajectories, validation, properties.

Expected values are computed independently of the runtime: with the MPFR emulation of the
format (`spec.domains.BINARY32` / `FLOAT64`), one domain call per scalar operation in the
order written in each optimizer's docstring, or with exact Fractions.

The model of the golden cases is Linear(1, 1) with mse on the sample x = [1], t = [0]:
y = w*1 + b = fl(w + b), loss = y*y, and the gradient of both w and b is 0 + (d + d) with
d = y (the mse body's mul(d, d) gives d to each argument, folded d + d; x = 1; the spec's
reverse pass adds every contribution to a zero seed, which turns a -0 cotangent into +0).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.nn import Linear, Sequential
from runtime.optim import (
    SGD,
    Adadelta,
    AdaGrad,
    Adam,
    AdamW,
    RMSProp,
    constant,
    exponential,
    step,
    warmup_cosine,
)
from runtime.trainer import Trainer
from spec.domains import BINARY32, FLOAT64
from spec.errors import TorchLeanError

D32 = BINARY32
SAMPLE = ([1.0], [0.0])


def f32bits(a: Any) -> int:
    return int(np.asarray(a, dtype=np.float32).reshape(()).view(np.uint32))


def run_linear(opt: Any, w: float, b: float, steps: int, dtype: str = "float32", **kw: Any):
    m = Sequential(Linear(1, 1))
    tr = Trainer(m, optimizer=opt, dtype=dtype, kernels="ordered")
    run = tr.open_typed(
        dtype, initial_state=[np.array([[w]]).astype(dtype), np.array([b]).astype(dtype)], **kw
    )
    traj = []
    for _ in range(steps):
        run.step(SAMPLE)
        st_ = run.state()
        traj.append((st_[0].reshape(()), st_[1].reshape(())))
    return run, traj


def adam_reference(
    w0: float, b0: float, lr_: float, steps: int, wd_: float | None = None
) -> list[tuple[int, int]]:
    """Adam / AdamW on the golden model, one BINARY32 (MPFR) call per operation."""
    D = D32
    lr, b1, b2, eps = (D.from_float(v) for v in (lr_, 0.9, 0.999, 1e-8))
    one, zero = D.one(), D.zero()
    w, b = D.from_float(w0), D.from_float(b0)
    mw = vw = mb = vb = zero
    b1p = b2p = one
    expected = []
    for _ in range(steps):
        y = D.add(w, b)
        g = D.add(D.zero(), D.add(y, y))
        b1p, b2p = D.mul(b1p, b1), D.mul(b2p, b2)
        c1 = D.div(one, D.sub(one, b1p))
        c2 = D.div(one, D.sub(one, b2p))

        def upd(p: Any, m: Any, v: Any, g: Any = g, c1: Any = c1, c2: Any = c2) -> tuple:
            if wd_ is not None:
                p = D.sub(p, D.mul(p, D.mul(lr, D.from_float(wd_))))
            m = D.add(D.mul(m, b1), D.mul(g, D.sub(one, b1)))
            v = D.add(D.mul(v, b2), D.mul(D.mul(g, g), D.sub(one, b2)))
            mh, vh = D.mul(m, c1), D.mul(v, c2)
            vh0 = vh if D.gt(vh, zero) else zero
            eta = D.div(lr, D.add(D.sqrt(vh0), eps))
            return D.sub(p, D.mul(eta, mh)), m, v

        w, mw, vw = upd(w, mw, vw)
        b, mb, vb = upd(b, mb, vb)
        expected.append((D.to_bits(w), D.to_bits(b)))
    return expected


# (0.3, -0.7) is a case where eta = lr / den, p - eta * mh differs in the last bit from
# p - (lr * mh) / den, so the golden test pins the written order
# (0.09, 0.97) separates v * c2 from v / (1 - beta2^t)
@pytest.mark.parametrize("w0, b0", [(0.5, 0.25), (0.3, -0.7), (0.09, 0.97)])
def test_adam_three_steps_binary32_bit_for_bit(w0: float, b0: float) -> None:
    expected = adam_reference(w0, b0, 0.1, 3)
    _, traj = run_linear(Adam(0.1), w0, b0, 3)
    got = [(f32bits(a), f32bits(c)) for a, c in traj]
    assert got == expected
    # and the trajectory really moves (not a fixed point)
    assert len(set(expected)) == 3


@settings(max_examples=25, deadline=None)
@given(
    w0=st.floats(-4, 4, width=32),
    b0=st.floats(-4, 4, width=32),
    lr=st.floats(0, 1),
    steps=st.integers(1, 4),
    wd=st.none() | st.floats(0, 0.5),
)
def test_adam_and_adamw_match_the_mpfr_reference(
    w0: float, b0: float, lr: float, steps: int, wd: float | None
) -> None:
    opt = Adam(lr) if wd is None else AdamW(lr, weight_decay=wd)
    _, traj = run_linear(opt, w0, b0, steps)
    assert [(f32bits(a), f32bits(c)) for a, c in traj] == adam_reference(w0, b0, lr, steps, wd)


# w0 = 0.891 separates p * (lr * wd) from (p * lr) * wd
@pytest.mark.parametrize("w0", [0.5, 0.891])
def test_adamw_decays_first(w0: float) -> None:
    D = D32
    lr, b1, b2, eps, wd = (D.from_float(v) for v in (0.1, 0.9, 0.999, 1e-8, 0.01))
    one = D.one()
    w, b = D.from_float(w0), D.from_float(0.25)
    y = D.add(w, b)
    g = D.add(D.zero(), D.add(y, y))
    c1 = D.div(one, D.sub(one, b1))
    c2 = D.div(one, D.sub(one, b2))
    out = []
    for p in (w, b):
        p = D.sub(p, D.mul(p, D.mul(lr, wd)))
        m = D.mul(g, D.sub(one, b1))
        v = D.mul(D.mul(g, g), D.sub(one, b2))
        eta = D.div(lr, D.add(D.sqrt(D.mul(v, c2)), eps))
        out.append(D.to_bits(D.sub(p, D.mul(eta, D.mul(m, c1)))))
    _, traj = run_linear(AdamW(0.1), w0, 0.25, 1)
    assert [f32bits(traj[0][0]), f32bits(traj[0][1])] == out


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_two_steps_golden(momentum: float) -> None:
    D = D32
    lr, mu = D.from_float(0.1), D.from_float(momentum)
    w, b = D.from_float(0.5), D.from_float(0.25)
    bw = bb = D.zero()
    exp = []
    for _ in range(2):
        y = D.add(w, b)
        g = D.add(D.zero(), D.add(y, y))
        if momentum == 0:
            w, b = D.sub(w, D.mul(g, lr)), D.sub(b, D.mul(g, lr))
        else:
            bw = D.add(D.mul(bw, mu), g)
            bb = D.add(D.mul(bb, mu), g)
            w, b = D.sub(w, D.mul(bw, lr)), D.sub(b, D.mul(bb, lr))
        exp.append((D.to_bits(w), D.to_bits(b)))
    _, traj = run_linear(SGD(0.1, momentum), 0.5, 0.25, 2)
    assert [(f32bits(a), f32bits(c)) for a, c in traj] == exp


# b0 = 0.3 separates (g * lr) / den from (g / den) * lr
@pytest.mark.parametrize("b0", [0.25, 0.3])
def test_adagrad_rmsprop_adadelta_one_step_golden(b0: float) -> None:
    D = D32
    one = D.one()
    w = D.from_float(0.5)
    g = D.add(D.add(w, D.from_float(b0)), D.add(w, D.from_float(b0)))
    # AdaGrad
    lr, eps = D.from_float(0.1), D.from_float(1e-10)
    s = D.mul(g, g)
    ada = D.sub(w, D.div(D.mul(g, lr), D.add(D.sqrt(s), eps)))
    # RMSProp
    lr2, al, eps2 = D.from_float(0.01), D.from_float(0.99), D.from_float(1e-8)
    v = D.add(D.mul(D.zero(), al), D.mul(D.mul(g, g), D.sub(one, al)))
    rms = D.sub(w, D.div(D.mul(g, lr2), D.add(D.sqrt(v), eps2)))
    # Adadelta
    lr3, rho, eps3 = D.one(), D.from_float(0.9), D.from_float(1e-6)
    v3 = D.add(D.mul(D.zero(), rho), D.mul(D.mul(g, g), D.sub(one, rho)))
    d = D.mul(D.div(D.sqrt(D.add(D.zero(), eps3)), D.sqrt(D.add(v3, eps3))), g)
    dela = D.sub(w, D.mul(d, lr3))
    for opt, want in ((AdaGrad(0.1), ada), (RMSProp(0.01), rms), (Adadelta(), dela)):
        _, traj = run_linear(opt, 0.5, b0, 1)
        assert f32bits(traj[0][0]) == D.to_bits(want), opt


@settings(max_examples=15, deadline=None)
@given(
    w=st.floats(-4, 4, width=32),
    b=st.floats(-4, 4, width=32),
    lr=st.floats(0, 1),
)
def test_momentum_zero_is_plain_sgd(w: float, b: float, lr: float) -> None:
    _, t1 = run_linear(SGD(lr, 0.0), w, b, 2)
    _, t2 = run_linear(SGD(lr), w, b, 2)
    assert [(f32bits(a), f32bits(c)) for a, c in t1] == [(f32bits(a), f32bits(c)) for a, c in t2]


def test_exact_sgd_is_exact() -> None:
    m = Sequential(Linear(1, 1))
    run = Trainer(m, optimizer=SGD(Fraction(1, 3))).open_typed(
        "exact", initial_state=[[[Fraction(1, 2)]], [Fraction(1, 4)]]
    )
    run.step(([Fraction(1)], [Fraction(0)]))
    w, b = run.state()
    g = 2 * (Fraction(1, 2) + Fraction(1, 4))
    assert w.reshape(()).item() == Fraction(1, 2) - g / 3
    assert b.reshape(()).item() == Fraction(1, 4) - g / 3


# --------------------------------------------------------------------------- validation


class Boom(Linear):
    def init_state(self, seeds: Any) -> list[np.ndarray]:
        raise AssertionError("model instantiated before validation")


@pytest.mark.parametrize(
    "make, text",
    [
        (lambda: SGD(-0.1), "lr = -0.1"),
        (lambda: SGD(float("nan")), "lr = nan"),
        (lambda: SGD(float("inf")), "lr = inf"),
        (lambda: SGD(0.1, momentum=1.0), "momentum = 1.0"),
        (lambda: Adam(beta1=-0.1), "beta1"),
        (lambda: Adam(eps=0.0), "eps = 0.0"),
        (lambda: AdaGrad(eps=-1.0), "eps"),
        (lambda: RMSProp(alpha=1.0), "alpha"),
        (lambda: Adadelta(rho=1.5), "rho"),
        (lambda: AdamW(weight_decay=-1.0), "weight_decay"),
    ],
)
def test_validation_at_construction(make: Any, text: str) -> None:
    """Values outside their domain are refused when the optimizer is made."""
    with pytest.raises(TorchLeanError, match=text.replace("(", r"\(").replace(".", r"\.")):
        make()


@pytest.mark.parametrize(
    "opt, text",
    [
        (SGD(1e39), "after conversion to binary32"),
        (Adam(beta2=0.99999999), "after conversion to binary32"),
        (Adam(eps=1e-50), "after conversion to binary32"),
    ],
)
def test_validation_before_instantiation(opt: Any, text: str) -> None:
    """Values valid in binary64 but not after rounding into the run's dtype: refused by
    open(), before the model is instantiated."""
    tr = Trainer(Sequential(Boom(1, 1)), optimizer=opt, dtype="float32")
    with pytest.raises(TorchLeanError, match=text.replace("(", r"\(").replace(".", r"\.")):
        tr.open()


def test_conversion_check_is_per_dtype() -> None:
    # 0.99999999 is < 1 in binary64 but 1 in binary32
    Trainer(Sequential(Linear(1, 1)), optimizer=Adam(beta2=0.99999999), dtype="float64").open()
    with pytest.raises(TorchLeanError, match="binary16"):
        Trainer(Sequential(Linear(1, 1)), optimizer=SGD(1e6), dtype="float16").open()


def test_scheduler_validation() -> None:
    tr = Trainer(Sequential(Boom(1, 1)), optimizer=SGD(0.1))
    for sch, text in (
        (step(0.1, 0, 0.5), "step_size"),
        (exponential(-1.0, 0.5), "lr"),
        (warmup_cosine(0.1, 5, 3), "total_steps"),
        (warmup_cosine(0.1, 1, 3, min_lr=1.0), "min_lr"),
        (constant(1e39), "after conversion to binary32"),
    ):
        with pytest.raises(TorchLeanError, match=text):
            tr.open(sch)


# --------------------------------------------------------------------------- schedulers


def test_scheduler_golden_values() -> None:
    assert [step(1.0, 2, 0.5)(t) for t in range(5)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    assert [exponential(2.0, 0.5)(t) for t in range(4)] == [2.0, 1.0, 0.5, 0.25]
    assert [constant(0.3)(t) for t in (0, 7)] == [0.3, 0.3]
    wc = warmup_cosine(1.0, 4, 8, min_lr=0.0)
    assert [wc(t) for t in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert wc(4) == 1.0  # cos(0) = 1
    # q = 1/2: cos(binary64 pi/2) correctly rounded is 6.123233995736766e-17
    c = float(FLOAT64.cos(FLOAT64.from_float(math.pi / 2)))
    assert c == 6.123233995736766e-17
    assert wc(6) == 0.5 * (1.0 + c)
    assert wc(8) == 0.0 and wc(100) == 0.0  # cos(pi) = -1 in binary64 rounding


@settings(max_examples=40, deadline=None)
@given(
    lr=st.floats(1e-6, 10),
    frac=st.floats(0, 1),
    warm=st.integers(0, 10),
    extra=st.integers(1, 50),
    t=st.integers(0, 100),
)
def test_warmup_cosine_stays_in_range(lr: float, frac: float, warm: int, extra: int, t: int):
    min_lr = lr * frac
    if warm == 0 or t >= warm:
        v = warmup_cosine(lr, warm, warm + extra, min_lr)(t)
        assert min_lr <= v <= lr or math.isclose(v, min_lr, rel_tol=1e-15)


def test_scheduler_applied_each_step_from_completed_count() -> None:
    """SGD with lr(t) = 0.5 * 0.5^t (binary64, rounded once into binary32)."""
    D = D32
    w, b = D.from_float(0.5), D.from_float(0.25)
    exp = []
    for t in range(3):
        lr = D.from_float(0.5 * 0.5**t)
        y = D.add(w, b)
        g = D.add(D.zero(), D.add(y, y))
        w, b = D.sub(w, D.mul(g, lr)), D.sub(b, D.mul(g, lr))
        exp.append((D.to_bits(w), D.to_bits(b)))
    _, traj = run_linear(SGD(0.1), 0.5, 0.25, 3, scheduler=exponential(0.5, 0.5))
    assert [(f32bits(a), f32bits(c)) for a, c in traj] == exp


def _ref_update(name: str, p: Any, g: Any, s: dict[str, Any], lr: Any) -> Any:
    """One update of the named optimizer in BINARY32 (MPFR), its default hyperparameters."""
    D = D32
    one, f = D.one(), D.from_float
    if name == "momentum":
        s["b"] = D.add(D.mul(s.get("b", D.zero()), f(0.9)), g)
        return D.sub(p, D.mul(s["b"], lr))
    if name == "adagrad":
        s["s"] = D.add(s.get("s", D.zero()), D.mul(g, g))
        return D.sub(p, D.div(D.mul(g, lr), D.add(D.sqrt(s["s"]), f(1e-10))))
    if name == "rmsprop":
        a = f(0.99)
        s["v"] = D.add(D.mul(s.get("v", D.zero()), a), D.mul(D.mul(g, g), D.sub(one, a)))
        return D.sub(p, D.div(D.mul(g, lr), D.add(D.sqrt(s["v"]), f(1e-8))))
    rho, eps = f(0.9), f(1e-6)  # adadelta
    u = s.get("u", D.zero())
    s["v"] = D.add(D.mul(s.get("v", D.zero()), rho), D.mul(D.mul(g, g), D.sub(one, rho)))
    d = D.mul(D.div(D.sqrt(D.add(u, eps)), D.sqrt(D.add(s["v"], eps))), g)
    s["u"] = D.add(D.mul(u, rho), D.mul(D.mul(d, d), D.sub(one, rho)))
    return D.sub(p, D.mul(d, lr))


_OPTS = {
    "momentum": lambda lr: SGD(lr, 0.9),
    "adagrad": lambda lr: AdaGrad(lr),
    "rmsprop": lambda lr: RMSProp(lr),
    "adadelta": lambda lr: Adadelta(lr),
}


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(sorted(_OPTS)),
    w0=st.floats(-4, 4, width=32),
    b0=st.floats(-4, 4, width=32),
    lr=st.floats(0, 1),
    steps=st.integers(1, 4),
)
def test_other_optimizers_match_the_mpfr_reference(
    name: str, w0: float, b0: float, lr: float, steps: int
) -> None:
    D = D32
    w, b = D.from_float(w0), D.from_float(b0)
    sw: dict[str, Any] = {}
    sb: dict[str, Any] = {}
    want = []
    for _ in range(steps):
        y = D.add(w, b)
        g = D.add(D.zero(), D.add(y, y))
        w = _ref_update(name, w, g, sw, D.from_float(lr))
        b = _ref_update(name, b, g, sb, D.from_float(lr))
        want.append((D.to_bits(w), D.to_bits(b)))
    _, traj = run_linear(_OPTS[name](lr), w0, b0, steps)
    assert [(f32bits(a), f32bits(c)) for a, c in traj] == want


def test_hyperparameters_cannot_change_after_open() -> None:
    """`hyper` is read-only, and the session holds its own copy of the optimizer: changing
    the object handed to the Trainer after open() (even its private dict) has no effect."""
    opt = SGD(0.5, momentum=0.5)
    with pytest.raises(TypeError):
        opt.hyper["lr"] = float("nan")  # type: ignore[index]
    with pytest.raises(AttributeError):
        opt.hyper = {"lr": float("nan"), "momentum": 0.0}  # type: ignore[misc]
    assert dict(opt.hyper) == {"lr": 0.5, "momentum": 0.5}

    def run_after(mutate: bool) -> list[bytes]:
        o = SGD(0.5, momentum=0.5)
        run = Trainer(Sequential(Linear(1, 1)), optimizer=o, dtype="float32").open()
        if mutate:  # bypassing the read-only view: still not the session's configuration
            o._hyper["lr"] = float("nan")
            o._hyper["momentum"] = 0.0  # would drop SGD's momentum_buffer slot
        for _ in range(2):
            run.step(([1.0], [0.0]))
        assert run.optimizer.slot_names == ("momentum_buffer",)
        return [np.ascontiguousarray(a).tobytes() for a in run.state()]

    assert run_after(True) == run_after(False)
