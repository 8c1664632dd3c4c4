"""NaN and ±inf are conventions, not accuracy: the spec's per-op statement
(`conventions.NONFINITE`) checked against its rules, an engine that propagates NaN where
the spec chooses a value reported under `nan_propagation` (a failure only with
`--strict-conventions`), and the issue's PyTorch sqrt case."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import gmpy2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.__main__ import main
from conformance.bounds.core import HP
from conformance.engines.base import Engine
from conformance.engines.conventions import NONFINITE, NONFINITE_POINTS, nonfinite_rule
from conformance.engines.local import check_node
from conformance.engines.run import run_engine
from spec.domains import FLOAT64
from spec.ops import OPS, get_op
from spec.tensor import Tensor


def _np_vjp_abs(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return g * np.sign(x)  # sign(NaN) = NaN: IEEE propagation


def _np_vjp_sqrt(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    return g / (2 * np.sqrt(x))  # NaN at NaN (and below 0), inf at 0


class PropagatingEngine(Engine):
    """A NumPy engine whose derivatives are the textbook formulas evaluated in IEEE
    arithmetic (no chosen values): NaN in, NaN out."""

    name = "numpy-propagating"
    dtypes = ("float64", "float32")
    ops: ClassVar[dict[str, Callable[..., Any]]] = {"abs": np.abs, "sqrt": np.sqrt}
    derivs: ClassVar[dict[str, Callable[..., Any]]] = {"abs": _np_vjp_abs, "sqrt": _np_vjp_sqrt}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(self, fn: Any, arrays: Sequence[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        (x,) = arrays
        with np.errstate(all="ignore"):
            return fn(x), [self.derivs[fn.op](x, cotangent).astype(x.dtype)]


class ChoosingEngine(PropagatingEngine):
    """The same, but abs' derivative chooses 0 at NaN as the spec does."""

    name = "numpy-choosing"
    derivs: ClassVar[dict[str, Callable[..., Any]]] = {
        **PropagatingEngine.derivs,
        "abs": lambda x, g: np.where(np.isnan(x), 0, g * np.sign(x)),
    }


def f64(*v: float) -> Tensor:
    return Tensor((len(v),), tuple(FLOAT64.from_float(x) for x in v))


def _hp(*v: float) -> Tensor:
    return Tensor((len(v),), tuple(gmpy2.mpfr(x, HP.precision) for x in v))


def test_every_op_has_a_nonfinite_statement_and_listed_ops_exist() -> None:
    assert set(NONFINITE) <= set(OPS)
    for op in OPS:
        assert nonfinite_rule(op)  # the default for unlisted ops, the entry otherwise
    assert set(NONFINITE_POINTS) <= set(NONFINITE)


@pytest.mark.parametrize("op", sorted(NONFINITE_POINTS))
def test_listed_ops_choose_a_value_at_their_nan_point(op: str) -> None:
    # the statement "the rule chooses a value" holds: the spec's VJP at the NaN point is a
    # number in every argument's element 0 (where the NaN sits)
    inputs, attrs = NONFINITE_POINTS[op]
    xs = [_hp(*v) for v in inputs]
    d = get_op(op)
    y = d.forward(HP, xs, attrs, ())
    g = Tensor(y.shape, (gmpy2.mpfr(1),) * len(y.data))
    cts = d.vjp(HP, xs, g, attrs, ())
    assert not gmpy2.is_nan(cts[0].data[0]), (op, cts[0].data[0])


_UNARY = [
    op
    for op, d in OPS.items()
    if d.arity == 1 and d.family in ("elementwise", "transcendental") and not d.attrs
]


@given(st.sampled_from(_UNARY), st.floats(-4, 4, allow_nan=False))
def test_unlisted_unary_ops_propagate_nan_where_they_read_x(op: str, v: float) -> None:
    # the default statement: a NaN argument gives NaN wherever the rule reads it; a rule
    # that does not read x (neg, detach) gives the same value as at a finite x
    if op in NONFINITE or (op == "log" and v <= 0):
        return
    d = get_op(op)
    nan, fin, one = _hp(math.nan), _hp(v), _hp(1.0)
    assert gmpy2.is_nan(d.forward(HP, [nan], {}, ()).data[0])
    at_nan, at_fin = d.vjp(HP, [nan], one, {}, ())[0].data[0], d.vjp(HP, [fin], one, {}, ())
    assert gmpy2.is_nan(at_nan) or at_nan == at_fin[0].data[0]


def test_issue_case_torch_sqrt_float64_nan_with_zero_cotangent() -> None:
    pytest.importorskip("torch", reason="pip install torch")
    from conformance.engines import TorchEngine

    res = check_node(TorchEngine(), "float64", "sqrt", {}, [f64(math.nan)], f64(0.0), [f64(0.0)])
    assert res.wrong is None, res.wrong
    assert "nan_propagation" in res.conventions
    ex = res.conventions["nan_propagation"]
    assert ex["spec"] == 0.0 and math.isnan(ex["engine"])


def test_propagating_engine_is_a_convention_choosing_engine_agrees() -> None:
    res = check_node(PropagatingEngine(), "float64", "abs", {}, [f64(math.nan, -2.0)], f64(1, 1))
    assert res.wrong is None and set(res.conventions) == {"nan_propagation"}
    same = check_node(ChoosingEngine(), "float64", "abs", {}, [f64(math.nan, -2.0)], f64(1, 1))
    assert same.wrong is None and not same.conventions
    # the convention needs a non-finite input: a NaN from finite inputs stays wrong
    bad = type("Bad", (ChoosingEngine,), {"derivs": {"abs": lambda x, g: g * np.nan}})
    wrong = check_node(bad(), "float64", "abs", {}, [f64(3.0)], f64(1.0))
    assert wrong.wrong is not None and "abs vjp" in wrong.wrong


def test_nan_propagation_passes_by_default_and_fails_when_strict(tmp_path: Any) -> None:
    run = run_engine(PropagatingEngine(), ["float64"], ["abs"], max_examples=3, per_op=0)
    rows = [c for c in run.conventions if c.convention == "nan_propagation"]
    assert rows and rows[0].differs and rows[0].op == "abs"
    assert not run.failed() and run.failed(strict_conventions=True)
    honest = run_engine(ChoosingEngine(), ["float64"], ["abs"], max_examples=3, per_op=0)
    assert not honest.failed(strict_conventions=True)
    # the same through the CLI: exit 0, and 1 with --strict-conventions
    engine = f"{__name__}:PropagatingEngine"
    base = ["--engine", engine, "--ops", "abs", "--dtype", "float64", "--max-examples", "3"]
    base += ["--per-op", "0", "--report", str(tmp_path / "r")]
    assert main(base) == 0
    assert main([*base, "--strict-conventions"]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert "nan_propagation" in report["meta"]["conventions"]


def test_replay_names_the_convention_and_strict_fails_it(tmp_path: Any, capsys: Any) -> None:
    repro = {
        "dtype": "float64",
        "op": "abs",
        "graph": {"format": "torchlean_graph_v1", "inputs": [[1]], "nodes": [
            {"op": "abs", "args": [0], "attrs": {}}]},
        "inputs": [{"domain": "float64", "shape": [1], "values": ["0x7ff8000000000000"]}],
        "cotangent": {"domain": "float64", "shape": [1], "values": ["0x3ff0000000000000"]},
    }  # fmt: skip
    path = tmp_path / "r.json"
    path.write_text(json.dumps(repro))
    engine = f"{__name__}:PropagatingEngine"
    assert main(["--engine", engine, "--replay", str(path)]) == 0
    assert "nan_propagation" in capsys.readouterr().out
    assert main(["--engine", engine, "--replay", str(path), "--strict-conventions"]) == 1


def test_clamp_nan_point_attributes_are_rationals() -> None:
    _, attrs = NONFINITE_POINTS["clamp"]
    assert all(isinstance(v, Fraction) for v in attrs.values())


def test_census_counts_elements_beyond_budget() -> None:
    from conformance.engines.census import census

    exact = census(PropagatingEngine(), "sqrt", "float32", 500, 0.0, 10.0, seed=1)
    assert exact.beyond == 0 and exact.max_ulp <= 0.5  # NumPy's sqrt is correctly rounded

    class OneUlpHigh(PropagatingEngine):
        ops: ClassVar[dict[str, Callable[..., Any]]] = {
            "sqrt": lambda x: np.nextafter(np.sqrt(x), np.float32(np.inf)).astype(x.dtype)
        }

    off = census(OneUlpHigh(), "sqrt", "float32", 500, 1.0, 10.0, seed=1)
    assert off.beyond == 500 and off.rate == 1.0 and len(off.examples) == 5


def test_docs_state_the_same_nonfinite_table() -> None:
    from pathlib import Path

    from conformance.engines.conventions import NONFINITE_DEFAULT

    doc = Path(__file__).resolve().parents[1].joinpath("docs", "ENGINES.md").read_text()
    assert NONFINITE_DEFAULT in doc
    for op, text in NONFINITE.items():
        assert f"| {op} | {text} |" in doc, op
