"""benchmarks: `python -m benchmarks --quick` runs every figure end to end on tiny sizes and
reports them in the documented structure; the memory accounting and the report writer are
checked on hand-made cases. No assertion here is about time."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.cli import BEGIN, END, write_markdown
from benchmarks.memory import buffer_bytes, tape_bytes
from benchmarks.workloads import PEERS
from runtime.context import KernelContext
from runtime.tape import Tape

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
