"""The model mode's link property on arrays (conformance.model_arrays): a small ONNX model
built here passes through `python -m conformance MODEL`, through both evaluator routes
(spec.vector with the pure-Python reference, and spec.vector alone as on model-scale
graphs); a planted runtime kernel mutant fails it; drawn inputs are reproducible values
of the dtype within the model's magnitudes."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("onnx", reason="the model mode test builds an ONNX model (package onnx)")
from onnx import TensorProto, helper, numpy_helper

import conformance.model_arrays as MA
import runtime.kernels as K
from conformance.__main__ import main
from runtime.backends import round_f64
from runtime.interop import load_model


def small_model(path: Path) -> Path:
    """X[1,2,5,5] -> Conv(3x3, 3 channels) -> Relu -> GlobalAveragePool -> Flatten -> Gemm."""
    rng = np.random.default_rng(7)
    W = rng.normal(0, 0.5, (3, 2, 3, 3)).astype(np.float32)
    B = rng.normal(0, 0.1, (3,)).astype(np.float32)
    L = rng.normal(0, 0.5, (4, 3)).astype(np.float32)
    c = rng.normal(0, 0.1, (4,)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["X", "W", "B"], ["h"], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["p"]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "L", "c"], ["Y"], transB=1),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((W, "W"), (B, "B"), (L, "L"), (c, "c"))]
    g = helper.make_graph(
        nodes, "small",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 4])],
        inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    path.write_bytes(m.SerializeToString())
    return path


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return small_model(tmp_path / "small.onnx")


def run(model: Path, tmp_path: Path, *flags: str) -> tuple[int, list[dict[str, Any]]]:
    rc = main([str(model), "--report", str(tmp_path / "r"), *flags])
    rows = json.loads((tmp_path / "r.json").read_text())["rows"]
    return rc, rows


def link_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["dtype"]: r for r in rows if r["property"] == "link"}


def test_small_model_passes_with_the_reference(model: Path, tmp_path: Path, capsys: Any) -> None:
    flags = ("--dtype", "float32,float64", "--kernels", "ordered", "--max-examples", "3")
    rc, rows = run(model, tmp_path, *flags)
    assert rc == 0
    links = link_rows(rows)
    assert set(links) == {"float32", "float64"}
    for r in links.values():
        assert (r["cases"], r["passed"], r["failed"]) == (4, 4, 0)
    assert "spec.vector and the pure-Python reference" in capsys.readouterr().err


def test_model_scale_route(model: Path, tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    """With MODEL_SCALE below the graph's size: spec.vector alone, the drawn count capped
    by ELEMENT_BUDGET (the default --max-examples), the pure-Python properties left out."""
    monkeypatch.setattr(MA, "MODEL_SCALE", 10)
    g = load_model(str(model)).graph
    monkeypatch.setattr(MA, "ELEMENT_BUDGET", 2 * MA.elements(g))
    rc, rows = run(model, tmp_path)
    err = capsys.readouterr().err
    assert rc == 0
    assert [(r["property"], r["dtype"], r["kernels"]) for r in rows] == [
        ("link", "float64", "ordered"),
        ("link", "float32", "ordered"),
    ]
    for r in rows:
        assert (r["cases"], r["passed"], r["failed"]) == (3, 3, 0)  # own + 2 drawn
    assert "2 drawn case(s), spec.vector\n" in err
    assert "node_bounds and derivative_bounds (--kernels fast)" in err
    assert "exact link" in err  # the graph is algebraic: exact was left out, and said so


def test_explicit_max_examples_is_not_capped(model: Path, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(MA, "MODEL_SCALE", 10)
    monkeypatch.setattr(MA, "ELEMENT_BUDGET", 1)
    rc, rows = run(model, tmp_path, "--dtype", "float32", "--max-examples", "3")
    assert rc == 0 and link_rows(rows)["float32"]["cases"] == 4


def _plant_relu_mutant(monkeypatch: Any) -> None:
    """The runtime's relu forward one ulp up on its positive outputs."""
    orig = K.KERNELS["relu"]

    def forward(ctx: Any, xs: list[Any], attrs: Any, env: Any) -> tuple[Any, Any]:
        y, saved = orig.forward(ctx, xs, attrs, env)
        a = np.asarray(y)
        return ctx.arr(np.where(a > 0, np.nextafter(a, np.inf), a).astype(a.dtype)), saved

    monkeypatch.setitem(K.KERNELS, "relu", dataclasses.replace(orig, forward=forward))


@pytest.mark.parametrize("scale", [None, 10])
def test_planted_mismatch_fails(
    model: Path, tmp_path: Path, monkeypatch: Any, capsys: Any, scale: int | None
) -> None:
    if scale is not None:
        monkeypatch.setattr(MA, "MODEL_SCALE", scale)
    _plant_relu_mutant(monkeypatch)
    rc, rows = run(model, tmp_path, "--dtype", "float32", "--kernels", "ordered")
    assert rc == 1
    r = link_rows(rows)["float32"]
    assert (r["cases"], r["failed"]) == (1, 1)  # the model's own values already fail
    assert r["failure"]["message"].startswith("at the model's own values:")
    assert "value of value %6" in r["failure"]["message"]  # the relu's output
    assert "FAILED link/float32/ordered" in capsys.readouterr().out
    repro = r["failure"]["repro"]
    if scale is None:  # the suite's replayable reproducer: it fails under the mutant too
        path = tmp_path / "repro.json"
        path.write_text(json.dumps(repro))
        assert main(["--replay", str(path)]) == 1
    else:
        assert repro["array_case"] == {"inputs": "own", "seed": 0}


def test_drawn_case_failure_names_its_integer(tmp_path: Path, monkeypatch: Any) -> None:
    """A mismatch only on drawn values: the own case passes, a drawn case fails and the
    repro names the drawn integer."""
    imp = load_model(str(small_model(tmp_path / "m.onnx")))
    g = imp.graph
    own = [np.zeros(s) for s in g.inputs]  # relu sees only the bias: make it non-positive
    own[imp.ids["B"]] = -np.ones(g.inputs[imp.ids["B"]])
    _plant_relu_mutant(monkeypatch)
    row = MA.run_array_link(g, own, "float32", 5, None)
    assert row.failed == 1 and row.passed == 1 and row.failure is not None
    m = re.match(r"at drawn case (\d+): ", row.failure["message"])
    assert m is not None
    k = int(m.group(1))
    assert len(row.failure["repro"]["inputs"]) == g.num_inputs  # the replayable repro
    assert not MA.check_array_case(g, MA.draw_inputs(g, [1.0] * 5, "float32", k), "float32", k).ok


@given(k=st.integers(0, 2**32 - 1), dtype=st.sampled_from(["float64", "float32", "bfloat16"]))
def test_drawn_inputs_are_reproducible_dtype_values(k: int, dtype: str) -> None:
    g = load_model_graph()
    scales = [0.25, 3.0, 1.0, 1e-3, 8.0]
    a = MA.draw_inputs(g, scales, dtype, k)
    b = MA.draw_inputs(g, scales, dtype, k)
    for x, y, s, c in zip(a, b, g.inputs, scales, strict=True):
        assert x.shape == tuple(s) and x.dtype == np.float64
        assert np.array_equal(x, y)
        assert np.array_equal(round_f64(x, dtype).astype(np.float64), x)
        assert np.all(np.abs(x) <= c * (1 + 2.0**-7))


_GRAPH: list[Any] = []


def load_model_graph() -> Any:
    if not _GRAPH:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            _GRAPH.append(load_model(str(small_model(Path(d) / "m.onnx"))).graph)
    return _GRAPH[0]


def test_drawn_count_golden() -> None:
    """17,578,576 elements (resnet18 at 224x224, every value): 100M // that = 5."""

    class G:
        shapes = ((17_578_576,),)

    assert MA.drawn_count(G(), 60, False) == 5  # type: ignore[arg-type]
    assert MA.drawn_count(G(), 3, False) == 3  # type: ignore[arg-type]
    assert MA.drawn_count(G(), 60, True) == 60  # type: ignore[arg-type]

    class H:
        shapes = ((10**9,),)

    assert MA.drawn_count(H(), 60, False) == 1  # type: ignore[arg-type]

    class S:
        shapes = ((3, 4),)

    assert MA.drawn_count(S(), 60, False) == 60  # type: ignore[arg-type]
