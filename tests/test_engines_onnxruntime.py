"""ONNX Runtime as a forward-only engine: judged on the forward alone (and said so), one-node
models from the project's own `to_onnx`, whole graphs as one model, a swapped node caught and
named, coverage from the export rules, the execution provider by name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("onnxruntime", reason="pip install onnxruntime")
pytest.importorskip("onnx", reason="pip install onnx")

from conformance.__main__ import main
from conformance.engines import EngineUnavailable, load_engine
from conformance.engines.onnxruntime_engine import OnnxRuntimeEngine, exportable_ops
from conformance.engines.run import run_engine

SMALL = dict(max_examples=3, per_op=1)


class SwappedSinEngine(OnnxRuntimeEngine):
    """The exported model with every Sin node turned into a Cos node."""

    name = "onnxruntime-swapped-sin"

    def model(self, graph: Any, dtype: str) -> Any:
        m = super().model(graph, dtype)
        for node in m.graph.node:
            if node.op_type == "Sin":
                node.op_type = "Cos"
        return m


def test_honest_forward_only_run_says_so(tmp_path: Path) -> None:
    run = run_engine(OnnxRuntimeEngine(), ["float32"], ["tanh", "add"], **SMALL)
    assert run.forward_only and not run.failed()
    rows = [r for r in run.ops if r.op in ("tanh", "add")]
    assert rows and all(r.cases > 0 for r in rows)
    assert all(r.backward_max_ulp is None and r.jvp_max_ulp is None for r in rows)
    assert sum(g.graphs for g in run.graphs) > 0  # whole graphs, each one ONNX model
    rep = str(tmp_path / "ort")
    assert main(["--engine", "onnxruntime", "--ops", "tanh", "--dtype", "float64",
                 "--max-examples", "2", "--per-op", "0", "--report", rep]) == 0  # fmt: skip
    assert "forward only" in Path(rep + ".md").read_text()
    meta = json.loads(Path(rep + ".json").read_text())["meta"]
    assert meta["directions"] == "forward only" and meta["provider"] == "CPUExecutionProvider"


def test_a_swapped_node_is_caught_and_named() -> None:
    run = run_engine(SwappedSinEngine(), ["float32"], ["sin"], **SMALL)
    (row,) = [r for r in run.ops if r.op == "sin"]
    assert row.failures >= 1 and row.failure is not None
    assert row.failure["message"].startswith("sin forward")
    assert run.failed()


def test_coverage_follows_the_export_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.interop as interop

    assert "sin" in exportable_ops() and "mish" in exportable_ops()
    assert "gelu" not in exportable_ops()  # its default (erf) body uses erf: no export rule
    monkeypatch.delitem(interop.EXPORT, "tanh")
    ops = exportable_ops()
    assert "tanh" not in ops and "mish" not in ops  # mish's body uses tanh
    assert "sin" in ops


def test_provider_by_name() -> None:
    assert load_engine("onnxruntime@CPUExecutionProvider").provider == "CPUExecutionProvider"
    with pytest.raises(EngineUnavailable, match="not available here"):
        load_engine("onnxruntime@NoSuchExecutionProvider")
    with pytest.raises(EngineUnavailable, match="takes no @option"):
        load_engine("autograd@x")
