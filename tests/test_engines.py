"""conformance.engines: real engines end to end, deliberately broken engines caught and
named, conventions separated from errors, uncovered ops reported, bit-exact conversion."""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import gmpy2
import numpy as np
import pytest
from hypothesis import find, given
from hypothesis import strategies as st

from conformance.__main__ import main
from conformance.engines import EngineUnavailable, load_engine
from conformance.engines.base import from_numpy, to_numpy
from conformance.engines.local import check_node, elem_error, flush_probe
from conformance.engines.run import replay_node, run_engine
from conformance.graphs import scalars
from conformance.graphs.hard import hard_tensors_for
from spec.domains import BINARY32
from spec.tensor import Tensor

anp = pytest.importorskip("autograd.numpy", reason="pip install autograd")
from autograd.extend import defvjp, primitive  # noqa: E402

from conformance.engines.autograd_engine import AutogradEngine  # noqa: E402

SMALL = dict(max_examples=6, per_op=1)


def f32(*v: float) -> Tensor:
    return Tensor((len(v),), tuple(BINARY32.from_float(x) for x in v))


# ---------------------------------------------------------------- broken engines


@primitive
def _tanh_wrong_vjp(x):  # type: ignore[no-untyped-def]
    return np.tanh(x)


defvjp(_tanh_wrong_vjp, lambda ans, x: lambda g: g * (1 - ans * ans) * np.float32(1.25))


class WrongVjpEngine(AutogradEngine):
    name = "autograd-wrong-vjp"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {**AutogradEngine.ops, "tanh": _tanh_wrong_vjp}


class SloppyExpEngine(AutogradEngine):
    """exp's forward 8 float32 ulps high (its derivative follows the engine's own rule)."""

    name = "autograd-sloppy-exp"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        **AutogradEngine.ops,
        "exp": lambda x: anp.exp(x) * np.float32(1 + 8 * 2.0**-23),
    }


class NoSinEngine(AutogradEngine):
    name = "autograd-no-sin"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        k: v for k, v in AutogradEngine.ops.items() if k != "sin"
    }


class MissingEngine(AutogradEngine):  # only check_available matters: it always refuses
    name = "missing"
    package = "no-such-engine-package"

    @classmethod
    def check_available(cls) -> None:
        raise EngineUnavailable(f"engine 'missing' (pip install {cls.package})")


def test_wrong_vjp_is_caught_shrunk_and_named() -> None:
    run = run_engine(WrongVjpEngine(), ["float32"], ["tanh"], **SMALL)
    (row,) = [r for r in run.ops if r.op == "tanh"]
    assert row.failures >= 1 and row.failure is not None
    assert row.failure["op"] == "tanh" and "tanh vjp" in row.failure["message"]
    repro = json.loads(json.dumps(row.failure["repro"]))  # a JSON reproducer
    assert repro["op"] == "tanh" and len(repro["graph"]["nodes"]) == 1
    assert replay_node(WrongVjpEngine(), repro).wrong is not None
    assert replay_node(AutogradEngine(), repro).wrong is None  # the honest engine passes
    assert run.failed()


class WrongJvpEngine(AutogradEngine):
    """A forward mode that returns 1.5 * tangent for every op (right for no tanh input)."""

    name = "autograd-wrong-jvp"
    has_jvp = True

    def jvp(self, fn: Any, arrays: Any, tangents: Any) -> Any:
        return fn(*arrays), tangents[0] * np.float32(1.5)


def test_wrong_jvp_reproducer_carries_its_tangents() -> None:
    run = run_engine(WrongJvpEngine(), ["float32"], ["tanh"], **SMALL)
    (row,) = [r for r in run.ops if r.op == "tanh"]
    assert row.failures >= 1 and row.failure["message"].startswith("tanh jvp")
    repro = json.loads(json.dumps(row.failure["repro"]))
    assert len(repro["tangents"]) == 1
    assert replay_node(WrongJvpEngine(), repro).wrong.startswith("tanh jvp")


def test_forward_several_ulps_off_in_float32_is_caught() -> None:
    run = run_engine(SloppyExpEngine(), ["float32"], ["exp"], **SMALL)
    (row,) = [r for r in run.ops if r.op == "exp"]
    assert row.failures >= 1 and "exp forward" in row.failure["message"]
    honest = run_engine(AutogradEngine(), ["float32"], ["exp"], **SMALL)
    assert not honest.failed() and next(r for r in honest.ops if r.op == "exp").cases > 0


def test_error_over_budget_ratio_is_recorded_per_direction() -> None:
    sloppy = run_engine(SloppyExpEngine(), ["float32"], ["exp"], **SMALL)
    (row,) = [r for r in sloppy.ops if r.op == "exp"]
    # 8 ulps high (about 8 float32 ulps of the result) over a budget of a few ulps: > 1
    assert row.forward_ratio > 1 and row.backward_ratio is not None
    honest = run_engine(AutogradEngine(), ["float32"], ["exp"], **SMALL)
    (ok,) = [r for r in honest.ops if r.op == "exp"]
    assert 0 <= ok.forward_ratio <= 1 and 0 <= ok.backward_ratio <= 1


def test_uncovered_op_is_reported_not_faked() -> None:
    run = run_engine(NoSinEngine(), ["float64"], ["sin", "add"], **SMALL)
    rows = {r.op: r for r in run.ops}
    assert rows["sin"].covered is False and rows["sin"].cases == 0
    assert rows["sin"].note == "not covered"
    assert rows["add"].cases > 0 and not run.failed()


# ---------------------------------------------------------------- conventions


def test_sqrt_grad_at_zero_is_a_convention_golden() -> None:
    # hand-worked: sqrt'(0) is 0 in the spec; autograd's g*0.5*x**-0.5 gives +inf
    res = check_node(AutogradEngine(), "float32", "sqrt", {}, [f32(0.0, 4.0)], f32(1.0, 1.0))
    assert res.wrong is None and "sqrt_grad_at_zero" in res.conventions
    ex = res.conventions["sqrt_grad_at_zero"]
    assert ex["spec"] == 0.0 and ex["engine"] == float("inf") and ex["element"] == 0
    assert res.max_ulp["vjp"] == 0.0  # element 1 (0.25) is exact; element 0 is excluded


def test_clamp_bound_rule_of_an_engine_that_passes_the_cotangent() -> None:
    clamp_pass = {
        **AutogradEngine.ops,
        "clamp": lambda x, lo, hi: anp.where(
            (x >= float(lo)) & (x <= float(hi)), x, anp.clip(x, float(lo), float(hi))
        ),
    }
    E = type("ClampPass", (AutogradEngine,), {"name": "clamp-pass", "ops": clamp_pass})
    x, g = Tensor((1,), (gmpy2.mpfr(1.0, 53),)), Tensor((1,), (gmpy2.mpfr(3.0, 53),))
    res = check_node(E(), "float64", "clamp", {"lo": Fraction(-1), "hi": Fraction(1)}, [x], g)
    assert res.wrong is None and "clamp_grad_at_bounds_pass" in res.conventions


def test_convention_reported_not_failing_unless_strict(tmp_path) -> None:  # type: ignore[no-untyped-def]
    # (not sqrt: HIPS autograd's g*0.5*x**-0.5 underflows at a subnormal g, a real failure)
    args = ["--engine", "autograd", "--dtype", "float32", "--ops", "add,mul,relu,reduce_max",
            "--max-examples", "6", "--per-op", "1", "--report", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    differs = {c["convention"] for c in data["conventions"] if c["differs"]}
    assert {"relu_grad_at_zero_half", "reduce_max_tie_split"} <= differs
    assert any(r["op"] == "mul" and r["cases"] > 0 for r in data["ops"])
    assert "| float32 | relu |" in (tmp_path / "r.md").read_text()
    assert main([*args, "--strict-conventions"]) == 1


def test_unavailable_engine_is_skipped_naming_the_package(capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(EngineUnavailable, match="pip install no-such-engine-package"):
        MissingEngine()
    with pytest.raises(EngineUnavailable, match="cannot import"):
        load_engine("no_such_module_xyz:Engine")
    assert main(["--engine", "no_such_module_xyz:Engine"]) == 2
    assert "skipped" in capsys.readouterr().err


def test_engine_report_gets_its_own_default_name(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from conformance.cli import DEFAULT_REPORT, parse_args
    from conformance.engines.report import report_prefix

    assert parse_args([]).report == DEFAULT_REPORT == "conformance-report"
    assert parse_args(["--engine", "torch-cuda"]).report == "conformance-engine-torch-cuda"
    assert parse_args(["--engine", "tinygrad", "--report", "r"]).report == "r"
    assert report_prefix("my/pkg.mod:Eng x") == "conformance-engine-my_pkg.mod_Eng_x"
    monkeypatch.chdir(tmp_path)
    args = ["--engine", "autograd", "--dtype", "float32", "--ops", "add",
            "--max-examples", "1", "--per-op", "0"]  # fmt: skip
    assert main(args) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "conformance-engine-autograd.json",
        "conformance-engine-autograd.md",
    ]


# ---------------------------------------------------------------- real engines


@pytest.mark.parametrize(
    ("engine", "module", "dtype"),
    [("torch", "torch", "bfloat16"), ("jax", "jax", "float32"), ("jax-jit", "jax", "float64"),
     ("tinygrad", "tinygrad", "float32"), ("autograd", "autograd", "float16")],
)  # fmt: skip
def test_real_engine_end_to_end(engine: str, module: str, dtype: str) -> None:
    pytest.importorskip(module, reason=f"pip install {module}")
    e = load_engine(engine)
    run = run_engine(e, [dtype], ["add", "tanh", "sum"], max_examples=3, per_op=1)
    assert not run.failed(), [r.failure for r in run.ops if r.failure]
    rows = {r.op: r for r in run.ops}
    assert all(rows[op].cases > 0 for op in ("add", "tanh", "sum"))
    assert rows["add"].forward_max_ulp <= 0.5  # IEEE addition is correctly rounded
    assert run.graphs[0].graphs > 0


# ---------------------------------------------------------------- conversion and ulps


@given(st.lists(scalars(BINARY32, specials=True), min_size=1, max_size=6))
def test_conversion_is_bit_exact(vals: list) -> None:  # type: ignore[type-arg]
    t = Tensor((len(vals),), tuple(vals))
    back = from_numpy(to_numpy(t, "float32"), "float32")
    assert [BINARY32.to_bits(v) for v in back.data] == [BINARY32.to_bits(v) for v in t.data]


def test_ulp_error_golden() -> None:
    one = gmpy2.mpfr(1)
    nxt = BINARY32.from_float(float(np.nextafter(np.float32(1), np.float32(2))))
    assert elem_error("float32", nxt, one, Fraction(0)) == 1.0
    assert elem_error("float32", gmpy2.nan(), gmpy2.nan(), Fraction(0)) == 0.0
    assert elem_error("float32", gmpy2.inf(), one, Fraction(0)) == float("inf")


# ---------------------------------------------------------------- hard cases, flushed subnormals


def _ftz(a: Any) -> Any:
    """Subnormals to zeros of their sign (what an FTZ/DAZ float environment does)."""
    a = np.asarray(a)
    return np.where(np.abs(a) < np.finfo(a.dtype).tiny, np.copysign(np.zeros_like(a), a), a)


@primitive
def _flush(x):  # type: ignore[no-untyped-def]
    return _ftz(x)


defvjp(_flush, lambda ans, x: lambda g: _ftz(g))


@primitive
def _double_subnormals(y):  # type: ignore[no-untyped-def]
    return np.where(np.abs(y) < np.finfo(np.asarray(y).dtype).tiny, y * 2, y)


defvjp(_double_subnormals, lambda ans, y: lambda g: g)


def _mul_ftz(a: Any, b: Any) -> Any:
    return _flush(_flush(a) * _flush(b))


def _mul_sub_wrong(a: Any, b: Any) -> Any:
    return _double_subnormals(a * b)


class FlushingEngine(AutogradEngine):
    name = "autograd-ftz"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {**AutogradEngine.ops, "mul": _mul_ftz}


class SubnormalWrongEngine(AutogradEngine):
    """mul doubles its subnormal results: wrong only on a range random [-8, 8] inputs miss."""

    name = "autograd-subnormal-wrong"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {**AutogradEngine.ops, "mul": _mul_sub_wrong}


def test_flushed_subnormals_are_a_convention_not_an_error() -> None:
    one = f32(1.0, 1.0)
    # FTZ: 1e-20 * 1e-20 = 1e-40 (a float32 subnormal) returned as +0
    res = check_node(
        FlushingEngine(), "float32", "mul", {}, [f32(1e-20, 3.0), f32(1e-20, 2.0)], one
    )
    assert res.wrong is None and "flush_subnormals" in res.conventions
    assert res.conventions["flush_subnormals"]["engine"] == 0.0
    # DAZ: 2e-39 (subnormal) * 1e30 = 2e-9 exactly representable as a normal; read as 0 * 1e30
    res = check_node(FlushingEngine(), "float32", "mul", {}, [f32(2e-39, 3.0), f32(1e30, 2.0)], one)
    assert res.wrong is None and "flush_subnormals" in res.conventions
    # the honest engine shows neither; a wrong subnormal (not a zero) is an error
    res = check_node(
        AutogradEngine(), "float32", "mul", {}, [f32(1e-20, 3.0), f32(1e-20, 2.0)], one
    )
    assert res.wrong is None and not res.conventions
    res = check_node(SubnormalWrongEngine(), "float32", "mul", {},
                     [f32(1e-20, 3.0), f32(1e-20, 2.0)], one)  # fmt: skip
    assert res.wrong is not None and res.wrong.startswith("mul forward element 0")


def test_flush_combined_with_a_convention_is_explained() -> None:
    # DAZ reads x = 1e-45 as 0, then sqrt'(0) by g/(2*sqrt(0)) = inf: flush + sqrt_grad_at_zero
    ftz_sqrt = {**FlushingEngine.ops, "sqrt": lambda x: anp.sqrt(_flush(x))}
    E = type("FtzSqrt", (AutogradEngine,), {"name": "ftz-sqrt", "ops": ftz_sqrt})
    res = check_node(E(), "float32", "sqrt", {}, [f32(1e-45, 4.0)], f32(1.0, 1.0))
    assert res.wrong is None and "flush_subnormals" in res.conventions
    # the same sqrt in an engine whose probe (mul) does not flush: not explained
    H = type("HalfFtz", (AutogradEngine,), {
        "name": "half-ftz", "ops": {**AutogradEngine.ops, "sqrt": ftz_sqrt["sqrt"]}
    })  # fmt: skip
    res = check_node(H(), "float32", "sqrt", {}, [f32(1e-45, 4.0)], f32(1.0, 1.0))
    assert res.wrong is not None and "flush_subnormals" not in res.conventions
    assert flush_probe(E(), "float32")[0] and not flush_probe(H(), "float32")[0]


def test_safe_log_floor_tie_golden() -> None:
    # hand-worked: at x = 2**-24 the spec's maximum(x, 2**-24) gives x half the cotangent:
    # d/dx = 1/(2x) = 2**23; log(where(x >= c, x, c)) passes all of it: 1/x = 2**24
    c = 2.0**-24
    E = type("ClampLog", (AutogradEngine,), {
        "name": "clamp-log",
        "ops": {**AutogradEngine.ops, "safe_log": lambda x: anp.log(anp.where(x >= c, x, c))},
    })  # fmt: skip
    res = check_node(E(), "float32", "safe_log", {}, [f32(c, 2.0)], f32(1.0, 1.0))
    assert res.wrong is None and "safe_log_floor_pass" in res.conventions
    ex = res.conventions["safe_log_floor_pass"]
    assert ex["spec"] == 2.0**23 and ex["engine"] == 2.0**24 and ex["element"] == 0
    # log(maximum(x, c)): HIPS autograd's maximum splits the tie, as the spec does
    M = type("MaxLog", (AutogradEngine,), {
        "name": "max-log",
        "ops": {**AutogradEngine.ops, "safe_log": lambda x: anp.log(anp.maximum(x, c))},
    })  # fmt: skip
    res = check_node(M(), "float32", "safe_log", {}, [f32(c, 2.0)], f32(1.0, 1.0))
    assert res.covered and res.wrong is None and not res.conventions
    assert res.max_ulp["vjp"] == 0.0


@primitive
def _div_spec_formula(a, b):  # type: ignore[no-untyped-def]
    return a / b


defvjp(_div_spec_formula, lambda ans, a, b: lambda g: g / b,
       lambda ans, a, b: lambda g: -(g * ((a / b) / b)))  # fmt: skip


def test_overflow_the_spec_formula_shares_is_unconstrained_not_wrong() -> None:
    # a = b = g = the smallest subnormal: the exact denominator cotangent is -g*a/b**2 = -1,
    # but (a/b)/b = 2**149 overflows float32, in the spec's own rule as in this engine's
    E = type("DivFormula", (AutogradEngine,), {
        "name": "div-formula", "ops": {**AutogradEngine.ops, "div": _div_spec_formula}
    })  # fmt: skip
    m = 1.401298464324817e-45
    res = check_node(E(), "float32", "div", {}, [f32(m, 1.0), f32(m, 2.0)], f32(m, 1.0))
    assert res.wrong is None and res.unconstrained == 1
    # a / b as a * (1/b): 1/b overflows where no IEEE division does: wrong
    R = type("DivRecip", (AutogradEngine,), {
        "name": "div-recip", "ops": {**AutogradEngine.ops, "div": lambda a, b: a * (1 / b)}
    })  # fmt: skip
    res = check_node(R(), "float32", "div", {}, [f32(m, 1.0), f32(m, 2.0)], f32(m, 1.0))
    assert res.wrong is not None and res.wrong.startswith("div forward element 0: engine inf")


def test_flush_fails_only_under_strict_conventions() -> None:
    args = dict(max_examples=4, per_op=8)
    run = run_engine(FlushingEngine(), ["float32"], ["mul"], **args)  # type: ignore[arg-type]
    (row,) = [r for r in run.ops if r.op == "mul"]
    assert "flush_subnormals" in row.conventions and not run.failed()
    assert run.failed(strict_conventions=True)


def test_hard_phase_catches_an_engine_wrong_only_on_subnormals() -> None:
    run = run_engine(
        SubnormalWrongEngine(), ["float32"], ["mul"], max_examples=4, per_op=8, shrink_seconds=3
    )
    (row,) = [r for r in run.ops if r.op == "mul"]
    assert row.failures == 1 and "mul forward" in row.failure["message"]
    assert replay_node(AutogradEngine(), row.failure["repro"]).wrong is None


@given(hard_tensors_for([(2, 3), (3,), ()], BINARY32, finite=True))
def test_hard_phase_values_are_finite(ts: list) -> None:  # type: ignore[type-arg]
    assert all(gmpy2.is_finite(v) for t in ts for v in t.data)


def test_hard_phase_reaches_subnormals_and_the_largest_finite() -> None:
    tiny = 2.0**-126
    strat = hard_tensors_for([(3,)], BINARY32, finite=True)
    assert find(strat, lambda ts: any(0 < abs(float(v)) < tiny for v in ts[0].data))
    assert find(strat, lambda ts: any(abs(float(v)) == 3.4028234663852886e38 for v in ts[0].data))


def test_budget_classes_follow_the_op_table() -> None:
    from conformance.engines.budgets import budget_class
    from spec.ops import OPS

    want = {
        "conv2d": "sums", "cross_entropy": "sums", "softmax": "sums", "gather": "shape",
        "embedding": "shape", "mask_neg_inf": "shape", "layer_norm": "norm",
        "exp": "transcendental",
        "gelu": "composite", "sigmoid": "composite", "multi_head_attention": "chain",
        "maximum": "exact", "div": "rounded",
    }  # fmt: skip
    assert {op: budget_class(op) for op in want} == want
    # every op with arguments has a class (none silently falls back to the default budget)
    assert [op for op, d in OPS.items() if d.arity != 0 and budget_class(op) is None] == []
