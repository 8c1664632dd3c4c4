"""The trainer session: step semantics, batch means, tying, isolation, resume, modes.

Expected values are hand-worked (small dyadic numbers, exact in binary64) or computed with
exact Fractions / the MPFR domains, never by the code under test.
"""

from __future__ import annotations

import io
import re
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.backends.registry import get_backend
from runtime.engine.context import KernelContext
from runtime.nn import GELU, BatchNorm1d, Dropout, LayerNorm, Linear, ReLU, Sequential, Tanh
from runtime.optim import SGD, Adam, AdamW, exponential, warmup_cosine
from runtime.trainer import Trainer, pairwise_mean
from spec.domains import BINARY32, FLOAT64
from spec.errors import CheckpointError, TorchLeanError

ROOT = Path(__file__).resolve().parents[1]


def bits(a: Any) -> list[bytes]:
    return [np.ascontiguousarray(x).tobytes() for x in a]


def lin_run(w: float, b: float, opt: Any = None, dtype: str = "float64", model: Any = None):
    m = model or Sequential(Linear(1, 1))
    tr = Trainer(m, optimizer=opt or SGD(0.5), dtype=dtype, kernels="ordered")
    return tr.open_typed(
        dtype, initial_state=[np.array([[w]], dtype=dtype), np.array([b], dtype=dtype)]
    )


# --------------------------------------------------------------------------- step


def test_step_single_sample_hand_worked() -> None:
    # y = 0.5 + 0.25 = 0.75; loss = y^2; g = 2y = 1.5; lr 0.5: w = 0.5 - 0.75, b = 0.25 - 0.75
    run = lin_run(0.5, 0.25)
    assert run.step(([1.0], [0.0])) is None  # the default does not read the loss
    w, b = run.state()
    assert w.tolist() == [[-0.25]] and b.tolist() == [-0.5]
    assert run.steps() == 1


def test_batch_step_averages_gradients_at_one_point() -> None:
    # samples (x=1, t=0) and (x=2, t=0) at w=0.5, b=0.25:
    #   y1 = 0.75, g1 = (w: 1.5, b: 1.5); y2 = 1.25, g2 = (w: 2*1.25*2 = 5, b: 2.5)
    # mean: w 3.25, b 2.0; lr 0.5 -> w = 0.5 - 1.625 = -1.125, b = 0.25 - 1.0 = -0.75
    run = lin_run(0.5, 0.25)
    lv = run.step([([1.0], [0.0]), ([2.0], [0.0])], batch=True, loss=True)
    assert lv == (0.5625 + 1.5625) / 2  # mean of the two forwards' losses (exact here)
    w, b = run.state()
    assert w.tolist() == [[-1.125]] and b.tolist() == [-0.75]
    assert run.steps() == 1
    with pytest.raises(TorchLeanError, match="empty"):
        run.step([], batch=True)
    assert run.steps() == 1


def test_tied_parameters_sum_gradients_and_update_once() -> None:
    # Sequential(l, l): y = w*(w*x + b) + b with w = 0.5, b = 0.25, x = 1, t = 0
    # h = 0.75, y = 0.625, dL/dy = 1.25; outer use: gw = 1.25*0.75 = 0.9375, gb = 1.25;
    # inner use: dL/dh = 1.25*0.5 = 0.625: gw = 0.625, gb = 0.625.
    # summed (leaf order): gw = 1.5625, gb = 1.875; lr 0.5: w = -0.28125, b = -0.6875
    layer = Linear(1, 1)
    model = Sequential(layer, layer)
    assert model.tying() == [0, 1, 0, 1] and len(model.state_specs()) == 2
    run = lin_run(0.5, 0.25, model=model)
    run.step(([1.0], [0.0]))
    w, b = run.state()
    assert w.tolist() == [[-0.28125]] and b.tolist() == [-0.6875]
    assert run.steps() == 1


def test_failed_step_changes_nothing() -> None:
    run = lin_run(0.5, 0.25)
    before = bits(run.state())
    with pytest.raises(TorchLeanError):
        run.step([([1.0], [0.0]), ([1.0, 2.0], [0.0])], batch=True)  # 2nd sample bad shape
    assert bits(run.state()) == before and run.steps() == 0
    # with dropout and batch norm: the first sample's RNG draw and buffer update are undone
    model = Sequential(Linear(2, 2), Dropout(0.5), BatchNorm1d(2))
    run = Trainer(model, optimizer=Adam(0.1)).open()
    before = bits(run.state())
    with pytest.raises(TorchLeanError):
        run.step([([1.0, 2.0], [0.0, 1.0]), ([1.0], [0.0, 1.0])], batch=True)
    assert bits(run.state()) == before and run._s.rng.counter == 0 and run.steps() == 0


# --------------------------------------------------------------------------- losses


def test_pairwise_mean_where_naive_binary32_sum_overflows() -> None:
    big = 3.0e38  # four copies: naive binary32 sum is inf, the mean is finite
    v = np.float32(big)
    with np.errstate(over="ignore"):
        assert np.isinf(np.float32(v) + np.float32(v))
    ctx = KernelContext("float32", "ordered")
    m = pairwise_mean(ctx, [np.asarray(v)] * 4)
    assert m.tobytes() == np.asarray(v).tobytes()
    # through the session: each sample's mse loss is fl32(1.7e19)^2 ~ 2.9e38
    run = lin_run(0.0, 0.0, dtype="float32")
    sample = ([0.0], [1.7e19])
    one = run.loss(sample)
    with np.errstate(over="ignore"):
        assert np.isfinite(one) and np.isinf(np.float32(one) + np.float32(one))
    lazy = (sample for _ in range(5))
    assert run.loss(lazy, batch=True).tobytes() == np.asarray(one).tobytes()


def test_pairwise_mean_of_equal_values_is_that_value() -> None:
    # [7, 7, 7] merges (7, 7) -> 7, then 7 * fl(2/3) + 7 * fl(1/3) = 7.0000005 in binary32,
    # outside the children's range [7, 7]: the merge is clamped back to 7
    ctx = KernelContext("float32", "ordered")
    D = BINARY32
    x = D.from_float(7.0)
    w1, w2 = D.from_rational(Fraction(2, 3)), D.from_rational(Fraction(1, 3))
    assert not D.eq(D.add(D.mul(x, w1), D.mul(x, w2)), x)
    seven = np.asarray(np.float32(7.0))
    assert pairwise_mean(ctx, [seven] * 3).tobytes() == seven.tobytes()


def test_pairwise_mean_weights_from_exact_ratios() -> None:
    # [a, b, c]: binary counter merges (a, b) then ((ab), c) with weights 2/3, 1/3
    ctx = KernelContext("exact", "ordered")
    F = Fraction
    vals = [ctx.arr(F(1)), ctx.arr(F(2)), ctx.arr(F(6))]
    assert pairwise_mean(ctx, vals).item() == F(3)
    assert pairwise_mean(ctx, []).item() == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), max_size=40))
def test_pairwise_mean_within_range_and_exact_for_rationals(xs: list[float]) -> None:
    ctx = KernelContext("float32", "fast")
    m = pairwise_mean(ctx, [np.asarray(np.float32(x)) for x in xs])
    if not xs:
        assert float(m) == 0.0
        return
    assert np.isfinite(m) and min(xs) <= float(m) <= max(xs)
    ex = KernelContext("exact", "fast")
    q = pairwise_mean(ex, [ex.arr(Fraction(x)) for x in xs]).item()
    assert q == sum(Fraction(x) for x in xs) / len(xs)


def test_loss_batch_empty_is_zero_and_eval_mode_mutates_nothing() -> None:
    model = Sequential(Linear(2, 3), Dropout(0.5), BatchNorm1d(3), Linear(3, 1))
    run = Trainer(model, optimizer=Adam(0.01)).open()
    run.step(([1.0, 2.0], [0.5]))
    snap, counter, steps = bits(run.state()), run._s.rng.counter, run.steps()
    # TorchLean: "returns its ordered mean, or zero when empty"
    assert run.loss([], batch=True) == 0.0 and run.eval([]) == 0.0
    a = run.predict([1.0, 2.0])
    b = run.predict([1.0, 2.0])  # no dropout in evaluation mode: deterministic
    assert np.array_equal(a, b)
    run.eval([([1.0, 2.0], [0.5])] * 3)
    run.predict(np.zeros((4, 2)), batch=True)
    assert bits(run.state()) == snap and run._s.rng.counter == counter
    assert run.steps() == steps
    empty = run.predict(np.zeros((0, 2)), batch=True)
    assert empty.shape == (0, 1)


def test_boundary_types() -> None:
    model = Sequential(Linear(1, 1))
    run = Trainer(model, dtype="float32").open()
    assert isinstance(run.loss(([1.0], [0.0])), float)
    assert run.predict([1.0]).dtype == np.float64
    typed = Trainer(model, dtype="float32").open_typed("float32")
    assert typed.predict([1.0]).dtype == np.float32
    ex = Trainer(model, optimizer=SGD(Fraction(1, 8))).open_typed("exact")
    lv = ex.step(([Fraction(1, 3)], [Fraction(1, 7)]), loss=True)
    assert isinstance(lv, Fraction)
    assert isinstance(ex.loss(([Fraction(1, 3)], [0]), batch=False), Fraction)
    assert all(isinstance(v, Fraction) for s in ex.state() for v in s.reshape(-1))
    # the seeded binary64 initial values converted once (exactly, for exact)
    w64 = Trainer(model, dtype="float64").open().state()[0]
    assert ex.state()[0].reshape(()).item() != 0
    fresh = Trainer(model, optimizer=SGD(Fraction(1, 8))).open_typed("exact").state()[0]
    assert fresh.reshape(()).item() == Fraction(float(w64.reshape(())))


# --------------------------------------------------------------------------- trainer API


def test_train_requires_steps_and_data() -> None:
    tr = Trainer(Sequential(Linear(1, 1)))
    with pytest.raises(TypeError):
        tr.train([([1.0], [0.0])])  # type: ignore[call-arg]
    with pytest.raises(TorchLeanError, match="empty"):
        tr.train([], steps=1)
    res = tr.train([], steps=0, report_loss=False)
    assert res.report["updates"] == 0


def test_train_is_open_step_finish_cyclic() -> None:
    data = [([1.0], [0.0]), ([2.0], [1.0]), ([0.5], [0.25])]
    tr = Trainer(Sequential(Linear(1, 1)), optimizer=SGD(0.05), kernels="ordered")
    res = tr.train(data, steps=4, samples_per_step=2)
    run = tr.open()
    for batch in ([data[0], data[1]], [data[2], data[0]], [data[1], data[2]], [data[0], data[1]]):
        run.step(batch, batch=True)
    assert bits(res.state()) == bits(run.state())
    assert res.report["updates"] == 4 and res.report["scalar"] == "binary32"
    assert res.report["losses"]["after"] == run.eval(data) == res.eval(data)
    assert "4 updates" in res.summary()


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    Trainer(Sequential(Linear(1, 1))).train([([1.0], [0.0])], steps=3, log_every=1)
    out = capsys.readouterr()
    assert out.err == "" and out.out == ""
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    Trainer(Sequential(Linear(1, 1))).train([([1.0], [0.0])], steps=3, log_every=1)
    assert len(re.findall(r"step \d/3: loss", tty.getvalue())) == 3
    assert "train" in tty.getvalue()  # the tqdm bar
    assert capsys.readouterr().out == ""


def test_plot_needs_matplotlib(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(TorchLeanError, match="matplotlib is not installed"):
        Trainer(Sequential(Linear(1, 1))).train([([1.0], [0.0])], steps=1, plot=tmp_path / "c.png")


def test_cuda_device_rules() -> None:
    with pytest.raises(TorchLeanError, match="native float"):
        Trainer(Sequential(Linear(1, 1)), dtype="exact", device="cuda").open()
    try:
        get_backend("cuda")
    except TorchLeanError as e:
        with pytest.raises(type(e), match=re.escape(str(e))):
            Trainer(Sequential(Linear(1, 1)), device="cuda").open()
    with pytest.raises(TorchLeanError, match="eager sessions only"):
        Trainer(Sequential(Linear(1, 1)), device="cuda", mode="typed_graph").open()
    with pytest.raises(TorchLeanError, match="CPU only"):
        Trainer(Sequential(Linear(1, 1)), device="cuda").open_typed("float32")


# --------------------------------------------------------------------------- snapshots


def test_finish_snapshot_isolation(tmp_path: Path) -> None:
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 1))
    run = Trainer(model, optimizer=Adam(0.05)).open()
    data = [([1.0, 0.0], [1.0]), ([0.0, 1.0], [0.0])]
    run.step(data[0])
    run.save(tmp_path / "early.json")
    res = run.finish(before=1.0, after=0.5)
    st0, p0 = bits(res.state()), res.predict([1.0, 1.0])
    res.save(tmp_path / "r1.json")
    # TorchLean: "The session can continue training without changing this result."
    snap = bits(run.state())
    run.step(data[1])
    assert bits(run.state()) != snap and run.steps() == 2
    run.load(tmp_path / "early.json")
    assert run.steps() == 2
    res.state()[0][...] = 7.0  # state() hands out copies
    assert bits(res.state()) == st0
    assert np.array_equal(res.predict([1.0, 1.0]), p0)
    res.save(tmp_path / "r2.json")
    assert (tmp_path / "r1.json").read_bytes() == (tmp_path / "r2.json").read_bytes()
    assert res.report["updates"] == 1 and res.report["losses"] == {"before": 1.0, "after": 0.5}
    # mutating a returned copy does not reach the snapshot
    res.state()[0][...] = 7
    assert bits(res.state()) == st0


def test_load_keeps_optimizer_history_and_step_count(tmp_path: Path) -> None:
    model = Sequential(Linear(1, 1))
    a = Trainer(model, optimizer=Adam(0.1)).open()
    a.step(([1.0], [0.0]))
    a.save(tmp_path / "s.json")
    a.step(([1.0], [0.0]))
    a.load(tmp_path / "s.json")
    assert a.steps() == 2
    assert a._opt.shared["beta1_power"] == np.float32(0.9) * np.float32(0.9)


def _resume_model() -> Sequential:
    return Sequential(Linear(3, 4), GELU(), Dropout(0.25), BatchNorm1d(4), Linear(4, 2))


@pytest.mark.parametrize("opt", [Adam(0.02), AdamW(0.02), SGD(0.1, 0.9)])
def test_resume_full_checkpoint_equals_uninterrupted(opt: Any, tmp_path: Path) -> None:
    data = [([0.1 * i, 1.0 - 0.2 * i, 0.5], [float(i % 2), 1.0]) for i in range(5)]
    sch = warmup_cosine(0.05, 2, 6)
    tr = Trainer(_resume_model(), optimizer=opt, seed=7, kernels="ordered")
    a = tr.open(sch)
    for i in range(6):
        a.step([data[i % 5], data[(i + 1) % 5]], batch=True)
    b = tr.open(sch)
    for i in range(3):
        b.step([data[i % 5], data[(i + 1) % 5]], batch=True)
    b.save(tmp_path / "full.json", full=True)
    c = tr.open(sch)
    c.load(tmp_path / "full.json")
    assert c.steps() == 3
    for i in range(3, 6):
        c.step([data[i % 5], data[(i + 1) % 5]], batch=True)
    assert bits(c.state()) == bits(a.state())
    # a parameters-only resume loses the optimizer history and the RNG position
    d = tr.open(sch)
    b.save(tmp_path / "state.json")
    d.load(tmp_path / "state.json")
    for i in range(3, 6):
        d.step([data[i % 5], data[(i + 1) % 5]], batch=True)
    assert bits(d.state()) != bits(a.state())


def test_full_checkpoint_validation(tmp_path: Path) -> None:
    tr = Trainer(Sequential(Linear(1, 1)), optimizer=Adam(0.1))
    a = tr.open()
    a.step(([1.0], [0.0]))
    a.save(tmp_path / "full.json", full=True)
    other = Trainer(Sequential(Linear(1, 1)), optimizer=Adam(0.2)).open()
    snap = bits(other.state())
    with pytest.raises(CheckpointError, match="optimizer"):
        other.load(tmp_path / "full.json")
    assert bits(other.state()) == snap and other.steps() == 0
    text = (tmp_path / "full.json").read_text()
    (tmp_path / "cut.json").write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match=r"cut\.json"):
        a.load(tmp_path / "cut.json")


# --------------------------------------------------------------------------- modes


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32), dtype=st.sampled_from(["float32", "float64", "bfloat16"]))
def test_eager_and_typed_graph_trainers_agree_bitwise(seed: int, dtype: str) -> None:
    model = Sequential(
        Linear(3, 4), LayerNorm(4), Tanh(), Dropout(0.3), BatchNorm1d(4), Linear(4, 2)
    )
    data = [([0.3, -1.0, 2.0], [1.0, 0.0]), ([1.5, 0.25, -0.5], [0.0, 1.0])]
    # Adam's beta2 = 0.999 is 1 in bfloat16 (refused), so bfloat16 uses momentum SGD
    opt = SGD(0.1, 0.9) if dtype == "bfloat16" else Adam(0.01)
    states = []
    for mode in ("eager", "typed_graph"):
        tr = Trainer(
            model, "cross_entropy", opt, dtype=dtype, mode=mode, kernels="ordered", seed=seed
        )
        run = tr.open()
        for i in range(3):
            run.step([data[i % 2], data[(i + 1) % 2]], batch=True)
        states.append(bits(run.state()))
    assert states[0] == states[1]


def test_same_seed_same_weights_everywhere() -> None:
    model = Sequential(Linear(3, 4), ReLU(), Linear(4, 2))
    w64 = Trainer(model, dtype="float64", seed=3).open().state()
    w32 = Trainer(model, dtype="float32", seed=3, mode="typed_graph").open().state()
    for a, b in zip(w64, w32, strict=True):
        assert np.array_equal(a.astype(np.float32), b)  # one rounding of the binary64 value
    other = Trainer(model, dtype="float64", seed=4).open().state()
    assert bits(other) != bits(w64)


def test_readme_training_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    sec = text.split("## Training", 1)[1]
    code = re.search(r"```python\n(.*?)```", sec, re.S)
    assert code is not None
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    exec(compile(code.group(1), "README.md", "exec"), {})
    assert "updates" in out.getvalue()


def test_demo_runs_small() -> None:
    from runtime.examples import mlp

    out = io.StringIO()
    res = mlp.main(["--steps", "5"], out=out)
    text = out.getvalue()
    assert "before" in text and "after" in text
    assert res.report["updates"] == 5


def test_binary32_golden_loss_via_mpfr() -> None:
    # one-sample loss at w=0.1, b=0.2 (binary32), x=3, t=1: y = fl(fl(w*3) + b), loss = d*d
    D = BINARY32
    w, b = D.from_float(0.1), D.from_float(0.2)
    y = D.add(D.mul(w, D.from_float(3.0)), b)
    d = D.sub(y, D.one())
    want = D.mul(D.one(), D.mul(d, d))
    run = lin_run(float(np.float32(0.1)), float(np.float32(0.2)), dtype="float32")
    assert run.loss(([3.0], [1.0])).view(np.uint32) == D.to_bits(want)


def test_plot_writes_png_with_matplotlib(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    p = tmp_path / "curve.png"
    Trainer(Sequential(Linear(1, 1))).train([([1.0], [0.0])], steps=3, plot=p)
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_runtime_exports() -> None:
    import runtime

    assert runtime.Trainer is Trainer and "TrainingSession" in runtime.__all__


@settings(max_examples=20, deadline=None)
@given(
    x=st.lists(st.floats(-8, 8), min_size=2, max_size=2),
    t=st.floats(-8, 8),
    seed=st.integers(0, 1000),
)
def test_batch_of_one_sample_twice_equals_single_step(x: list[float], t: float, seed: int):
    """(g + g) * fl(1/2) == g exactly (no overflow here), so the two updates are equal."""
    model = Sequential(Linear(2, 3), Tanh(), Linear(3, 1))
    a = Trainer(model, optimizer=Adam(0.01), dtype="float64", seed=seed).open()
    b = Trainer(model, optimizer=Adam(0.01), dtype="float64", seed=seed).open()
    a.step((x, [t]))
    b.step([(x, [t]), (x, [t])], batch=True)
    assert bits(a.state()) == bits(b.state())


@settings(max_examples=5, deadline=None)
@given(k=st.integers(0, 4), seed=st.integers(0, 100))
def test_resume_at_any_step(k: int, seed: int, tmp_path_factory: Any) -> None:
    d = tmp_path_factory.mktemp("resume")
    model = Sequential(Linear(2, 3), Dropout(0.5), ReLU(), Linear(3, 1))
    tr = Trainer(model, optimizer=AdamW(0.05), seed=seed)
    data = [([1.0, -1.0], [0.5]), ([0.25, 2.0], [-1.0])]
    a = tr.open()
    for i in range(4):
        a.step(data[i % 2])
    b = tr.open()
    for i in range(k):
        b.step(data[i % 2])
    b.save(d / "c.json", full=True)
    c = tr.open()
    c.load(d / "c.json")
    for i in range(k, 4):
        c.step(data[i % 2])
    assert bits(c.state()) == bits(a.state()) and c.steps() == 4


def test_typed_ieee_rounds_fraction_inputs_once() -> None:
    # q = 1 + 2^-24 + 2^-60 lies just above the binary32 midpoint between 1 and 1 + 2^-23:
    # once-rounded it is 1 + 2^-23; through binary64 it would be the midpoint, then 1.
    q = 1 + Fraction(1, 2**24) + Fraction(1, 2**60)
    run = lin_run(1.0, 0.0, dtype="float32")
    y = run.predict([q])
    assert int(y.view(np.uint32)[0]) == 0x3F800001


def test_batch_mean_multiplies_by_rounded_reciprocal() -> None:
    # w = b = 0, x = 1: gradient of b (and w) per sample is 2*(0 - t) -> 2, 2, 1; sum 5.
    # mean = fl(5 * fl(1/3)) = 1.6666666666666665, not fl(5/3) = 1.6666666666666667
    D = FLOAT64
    want = D.mul(D.from_rational(5), D.div(D.one(), D.from_rational(3)))
    assert float(want) != 5 / 3
    run = lin_run(0.0, 0.0, opt=SGD(1.0))
    run.step([([1.0], [-1.0]), ([1.0], [-1.0]), ([1.0], [-0.5])], batch=True)
    w, b = run.state()
    assert b.tolist() == [-float(want)] and w.tolist() == [[-float(want)]]


def test_demo_module_entry_point() -> None:
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "runtime.examples.mlp", "--steps", "3"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "loss before" in r.stdout and "loss after" in r.stdout and r.stderr == ""


def test_session_does_not_follow_later_trainer_changes() -> None:
    tr = Trainer(Sequential(Linear(1, 1)), "mse")
    run = tr.open()
    tr.objective = "cross_entropy"
    w, b = run.state()
    y = np.float32(w[0, 0]) + np.float32(b[0])  # x = 1: y = fl(w + b); mse = y * y
    assert run.loss(([1.0], [0.0])) == float(y * y) != 0.0  # cross-entropy would be 0
    assert run.objective == "mse"


def test_scheduled_lr_checked_before_the_step() -> None:
    """exponential(1.0, 2.0) reaches 65536 at t = 16: finite in binary64, inf in binary16.
    The step raises before running anything: parameters, optimizer state, step count and
    RNG counter stay as they were."""
    model = Sequential(Linear(1, 1), Dropout(0.5))
    run = Trainer(model, optimizer=SGD(1.0, momentum=0.5), dtype="float16").open(
        scheduler=exponential(1.0, 2.0)
    )
    for _ in range(16):  # x = t = 0, zero bias: every gradient is 0, lr up to 32768
        run.step(([0.0], [0.0]))
    before, rng, opt = bits(run.state()), run._s.rng.counter, run._opt.copy()
    assert rng == 16
    with pytest.raises(
        TorchLeanError,
        match=r"step 16: scheduler .*exponential.*: lr\(16\) = 65536\.0 is inf after "
        r"conversion to binary16, expected a finite value >= 0",
    ):
        run.step(([0.0], [0.0]))
    assert bits(run.state()) == before and run.steps() == 16 and run._s.rng.counter == rng
    assert bits(run._opt.slots[0].values()) == bits(opt.slots[0].values())
    # overflow already in binary64
    run64 = Trainer(Sequential(Linear(1, 1)), dtype="float64").open(exponential(1e300, 1e10))
    run64.step(([0.0], [0.0]))
    with pytest.raises(TorchLeanError, match=r"step 1: .*lr\(1\) = inf: expected a finite"):
        run64.step(([0.0], [0.0]))
    assert run64.steps() == 1


def test_cuda_refuses_bfloat16_and_says_why() -> None:
    with pytest.raises(TorchLeanError) as e:
        Trainer(Sequential(Linear(1, 1)), dtype="bfloat16", device="cuda").open()
    msg = str(e.value)
    assert "['float64', 'float32', 'float16']" in msg and "CuPy has no bfloat16" in msg


def test_public_import_paths_are_the_training_modules() -> None:
    """runtime.nn / optim / trainer / checkpoint re-export runtime.training's objects (the
    README's import paths), and runtime.compile is runtime.engine.lower.compile_graph."""
    import runtime
    import runtime.checkpoint
    import runtime.engine.lower
    import runtime.nn
    import runtime.optim
    import runtime.trainer
    from runtime.training import checkpoint, layers, model_layers, optim, trainer

    pairs = [
        (runtime.nn, (layers, model_layers)),
        (runtime.optim, (optim,)),
        (runtime.trainer, (trainer,)),
        (runtime.checkpoint, (checkpoint,)),
    ]
    for public, sources in pairs:
        want = {n: getattr(m, n) for m in sources for n in m.__all__}
        assert sorted(public.__all__) == sorted(want)
        for n, obj in want.items():
            assert getattr(public, n) is obj, (public.__name__, n)
    assert runtime.compile is runtime.engine.lower.compile_graph
