"""benchmarks: `python -m benchmarks --quick` runs every figure end to end on tiny sizes and
reports them in the documented structure; the memory accounting and the report writer are
checked on hand-made cases (the report's text against a golden written for a hand-made
measurement record). No assertion here is about time."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.memory import buffer_bytes, tape_bytes
from benchmarks.report import BEGIN, END, markdown, summary, write_markdown
from benchmarks.workloads import PEERS
from runtime.engine.context import KernelContext
from runtime.engine.tape import Tape

ROOT = Path(__file__).resolve().parent.parent


def test_quick_run_reports_every_figure(tmp_path: Path) -> None:
    out, js, png = tmp_path / "b.md", tmp_path / "b.json", tmp_path / "b.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--out",
            str(out),
            "--json",
            str(js),
            "--png",
            str(png),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    res = json.loads(js.read_text())

    # every peer is either measured or reported as skipped, and a missing one says so
    for p in PEERS:
        installed = importlib.util.find_spec(p.module.split(".")[0]) is not None
        assert (p.key in res["peers"]) == installed, p.key
        if not installed:
            assert p.key in res["peers_skipped"]
            assert f"peer {p.label} skipped" in proc.stderr

    have_torch = "torch" in res["peers"]
    chain = res["chain"]["rows"]
    assert {"ours", "ours_tape"} <= set(chain)
    for row in chain.values():
        assert row["median_s"] > 0 and row["per_op_us"] > 0
        assert (row["ratio_to_torch"] is not None) == have_torch
    for dt in ("float32", "float64"):
        rows = res["mlp"][dt]["rows"]
        assert {"ours", "ours_typed", "numpy"} <= set(rows)
        assert all(r["median_s"] > 0 for r in rows.values())
        o = res["ordered"][dt]
        assert o["fast_s"] > 0 and o["ordered_s"] > 0 and o["ratio"] > 0
        assert 0 < o["ordered_matmul_share"] <= 1
    for d in res["conformance"]["dtypes"].values():
        assert d["cases"] > 0 and all(p["failed"] == 0 for p in d["properties"])
    mem = res["memory"]
    assert mem["needed_bytes"] > 0 and mem["tape_bytes"] >= mem["needed_bytes"]
    assert {t["target"] for t in res["targets"]} >= {
        "per-op eager overhead ≤ PyTorch's" if have_torch else "",
        "tape memory ≤ 1.2× needed forward values",
    } - {""}

    model = res["model"]["workloads"]
    assert set(model) == {"conv", "attention"}
    for w in model.values():
        assert {"ours", "ours_ordered"} <= set(w["rows"])
        assert ("torch" in w["rows"]) == have_torch
    assert ("skipped" in res["model"]) == (not have_torch)

    md = out.read_text()
    assert BEGIN in md and END in md
    for head in (
        "### 1. Per-op overhead",
        "### 2. MLP",
        "### 3. `ordered`",
        "### 4. Conformance throughput",
        "### 5. Memory",
        "### 6. Model-scale ops",
    ):
        assert head in md
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.stat().st_size > 0
    else:
        assert not png.exists() and "matplotlib is not installed" in proc.stderr


def test_write_markdown_replaces_only_between_the_markers(tmp_path: Path) -> None:
    p = tmp_path / "r.md"
    write_markdown(p, "first")
    assert "first" in p.read_text()
    p.write_text(f"intro\n{BEGIN}\nold\n{END}\nafter\n")
    write_markdown(p, "new")
    assert p.read_text() == f"intro\n{BEGIN}\nnew\n{END}\nafter\n"


def test_tape_bytes_counts_each_buffer_once() -> None:
    t = Tape(KernelContext("float64"))
    x = t.leaf(np.ones((3, 4)))  # 96 bytes
    y = t.op("reshape", [x], shape=(12,))  # a view of x: no new buffer
    t.op("mul", [y, y])  # value: 96 new bytes; saves (y, y): views of x
    held, _ = tape_bytes(t)
    assert held == 96 + 96
    a = np.zeros(10)
    assert buffer_bytes([a, a[2:], a.reshape(2, 5), np.broadcast_to(a, (3, 10))]) == 80


# A hand-made measurement record touching every branch of the report: a peer measured and
# one skipped, a ratio of 100× or more, a missing ratio, a skip note, a property with no
# time, PyTorch memory, a model figure without PyTorch, and targets met, not met and unjudged.
RECORD = {
    "command": "python -m benchmarks --repeat 1",
    "quick": False,
    "started": "2026-01-02 03:04:05 UTC",
    "seconds": 12.4,
    "environment": {"machine": "x86_64", "cpus": 2, "python": "3.11.9", "numpy": "2.1.0"},
    "threads": {
        "requested": 1,
        "threadpools": [{"prefix": "libopenblas", "num_threads": 1}],
        "torch_threads": 1,
    },
    "peers": {"torch": {"label": "PyTorch (CPU, eager autograd)", "version": "2.13.0"}},
    "peers_skipped": {"jax": "not installed"},
    "chain": {
        "n_ops": 100,
        "rounds": 6,
        "rows": {
            "ours": {"label": "ours", "median_s": 0.0025, "per_op_us": 25.0, "ratio_to_torch": 0.5},
            "torch": {
                "label": "PyTorch",
                "median_s": 0.005,
                "per_op_us": 50.0,
                "ratio_to_torch": 1.0,
            },
        },
    },
    "mlp": {
        "float32": {
            "sizes": [784, 512, 10],
            "batch": 128,
            "rounds": 3,
            "rows": {
                "ours": {"label": "ours", "median_s": 1.5, "ratio_to_torch": 250.0},
                "numpy": {"label": "NumPy", "median_s": 0.0000123, "ratio_to_torch": None},
            },
            "skipped": {"micrograd": "a scalar engine"},
        }
    },
    "ordered": {
        "float64": {
            "fast_s": 0.002,
            "ordered_s": 0.008,
            "ratio": 4.0,
            "fast_matmul_share": 0.5,
            "ordered_matmul_share": 0.875,
            "first_layer": {
                "shape": [128, 784, 512],
                "fast_ns_per_pair": 0.0625,
                "ordered_ns_per_pair": 1.5,
                "ordered_compiled": True,
                "reference_ns_per_pair": 30.0,
                "mul_pass_ns_per_element": 0.25,
                "add_pass_ns_per_element": 0.375,
            },
        }
    },
    "conformance": {
        "max_examples": 5,
        "dtypes": {
            "exact": {
                "properties": [
                    {
                        "property": "agree",
                        "kernels": "ordered",
                        "cases": 10,
                        "seconds": 2.0,
                        "check_seconds": 0.5,
                        "cases_per_s": 5.0,
                    },
                    {
                        "property": "grad",
                        "kernels": "fast",
                        "cases": 0,
                        "seconds": 0.0,
                        "check_seconds": 0.0,
                        "cases_per_s": 0.0,
                    },
                ],
                "cases": 10,
                "seconds": 2.0,
                "check_seconds": 0.5,
                "cases_per_s": 5.0,
            }
        },
    },
    "memory": {
        "tape_bytes": 3 * 2**20,
        "needed_bytes": 2 * 2**20,
        "ratio": 1.5,
        "torch_saved_bytes": 2**20,
        "torch_ratio": 0.5,
    },
    "model": {
        "rounds": 2,
        "workloads": {
            "conv": {
                "what": "conv",
                "rows": {"ours": {"label": "ours", "median_s": 0.25, "ratio_to_torch": None}},
                "ordered_over_fast": 2.5,
            }
        },
        "skipped": "PyTorch is not installed",
    },
    "targets": [
        {"target": "A", "measured": 0.5, "limit": 1.0, "met": True, "what": "a / b"},
        {"target": "B", "measured": 2.0, "limit": 1.25, "met": False, "what": "c / d"},
        {"target": "C", "measured": None, "limit": 5.0, "met": None, "what": "e / f"},
    ],
}

GOLDEN_REPORT = "\n".join(
    [
        "Measured 2026-01-02 03:04:05 UTC with `python -m benchmarks --repeat 1` (12 s).",
        "",
        "| environment |  |",
        "|---|---|",
        "| machine | x86_64, 2 CPUs, load average at start ? |",
        "| Python / NumPy | 3.11.9 / 2.1.0 (?) |",
        "| peers | PyTorch (CPU, eager autograd) 2.13.0 |",
        "| threads | requested 1; in effect: libopenblas 1; torch 1 |",
        "| skipped peers | jax: not installed |",
        "",
        "### Targets",
        "",
        "| target | measured | limit | status | measured as |",
        "|---|---|---|---|---|",
        "| A | 0.50× | ≤ 1× | **met** | a / b |",
        "| B | 2.00× | ≤ 1.25× | **not met** | c / d |",
        "| C | – | ≤ 5× | – | e / f |",
        "",
        "### 1. Per-op overhead: 100-op chain on shape (4,), forward + backward (median of 6"
        " interleaved rounds)",
        "",
        "| implementation | chain | per op | × PyTorch |",
        "|---|---|---|---|",
        "| ours | 2.50 ms | 25.0 µs | 0.50× |",
        "| PyTorch | 5.00 ms | 50.0 µs | 1.00× |",
        "",
        "### 2. MLP 784-512-10, batch 128, float32: one SGD step (median of 3 interleaved rounds)",
        "",
        "| implementation | step | × PyTorch |",
        "|---|---|---|",
        "| ours | 1.50 s | 250× |",
        "| NumPy | 12.3 µs | – |",
        "",
        "micrograd: a scalar engine.",
        "",
        "### 3. `ordered` / `fast` on the MLP step (eager Session)",
        "",
        "| dtype | fast | ordered | ordered / fast | share in matmul (fast / ordered) |",
        "|---|---|---|---|---|",
        "| float64 | 2.00 ms | 8.00 ms | 4.00× | 50% / 88% |",
        "",
        "| dtype | first layer m×k×n | BLAS per multiply-add | ordered k-loop per"
        " multiply-add (compiled) | ordered k-loop, NumPy reference | one NumPy pass per"
        " element (outer multiply + add) |",
        "|---|---|---|---|---|---|",
        "| float64 | 128×784×512 | 0.062 ns | 1.500 ns | 30.000 ns | 0.250 + 0.375 ns |",
        "",
        "### 4. Conformance throughput (`run_properties`, 5 examples per property, derandomised, "
        "one process)",
        "",
        "| dtype | property | kernels | cases | time | in the check | cases/s |",
        "|---|---|---|---|---|---|---|",
        "| exact | agree | ordered | 10 | 2.00 s | 25% | 5.0 |",
        "| exact | grad | fast | 0 | 0.00 s | 0% | 0.0 |",
        "| **exact** | all |  | 10 | 2.00 s | 25% | **5.0** |",
        "",
        "*in the check*: the share of the time spent in the property's check (runtime, spec"
        " and comparison); the rest is Hypothesis drawing graphs, inputs and seeds. Properties"
        " that draw the same cases share each draw, and each one's time is its share of"
        " their runs.",
        "",
        "### 5. Memory held by the tape in the MLP step (float32)",
        "",
        "|  | bytes | × needed |",
        "|---|---|---|",
        "| tape: node values + saved tensors (distinct buffers) | 3.00 MiB | 1.50× |",
        "| forward values the backward reads (linear x, W; relu x; loss ŷ, t) | 2.00 MiB | 1.00× |",
        "| PyTorch: tensors saved for backward (distinct storages) | 1.00 MiB | 0.50× |",
        "",
        "### 6. Model-scale ops: forward + backward, float32 (median of 2 interleaved rounds)",
        "",
        "| workload | implementation | step | × PyTorch |",
        "|---|---|---|---|",
        "| conv | ours | 250.00 ms | – |",
        "",
        "| workload | ordered / fast (paired) |",
        "|---|---|",
        "| conv | 2.50× |",
        "",
        "PyTorch skipped: PyTorch is not installed.",
        "",
    ]
)


def test_markdown_report_text_is_fixed() -> None:
    assert markdown(RECORD) == GOLDEN_REPORT
    assert summary(RECORD) == (
        "A: 0.50× (limit 1×) met\nB: 2.00× (limit 1.25×) NOT met\nC: – (limit 5×) n/a"
    )
