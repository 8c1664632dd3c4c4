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
from hypothesis import given
from hypothesis import strategies as st

from conformance.__main__ import main
from conformance.engines import EngineUnavailable, load_engine
from conformance.engines.base import from_numpy, to_numpy
from conformance.engines.local import check_node, elem_error
from conformance.engines.run import replay_node, run_engine
from conformance.graphs import scalars
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


def test_forward_several_ulps_off_in_float32_is_caught() -> None:
    run = run_engine(SloppyExpEngine(), ["float32"], ["exp"], **SMALL)
    (row,) = [r for r in run.ops if r.op == "exp"]
    assert row.failures >= 1 and "exp forward" in row.failure["message"]
    honest = run_engine(AutogradEngine(), ["float32"], ["exp"], **SMALL)
    assert not honest.failed() and next(r for r in honest.ops if r.op == "exp").cases > 0


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
    args = ["--engine", "autograd", "--dtype", "float32", "--ops", "add,mul,sqrt,relu,reduce_max",
            "--max-examples", "6", "--per-op", "1", "--report", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    data = json.loads((tmp_path / "r.json").read_text())
    differs = {c["convention"] for c in data["conventions"] if c["differs"]}
    assert {"sqrt_grad_at_zero", "relu_grad_at_zero_half", "reduce_max_tie_split"} <= differs
    assert any(r["op"] == "mul" and r["cases"] > 0 for r in data["ops"])
    assert "| float32 | sqrt |" in (tmp_path / "r.md").read_text()
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
