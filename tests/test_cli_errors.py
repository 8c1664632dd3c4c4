"""One error path for every command line: a bad file or flag is one line on
stderr and exit 2, never a traceback, checked before the run starts; a run that checked
nothing does not exit 0. A case per class runs the real command in a subprocess; the
others call the same `main` in-process (same parser, same exit code, same stderr)."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _run(module: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", module, *argv],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=240,
    )


def _main(module: str, argv: list[str], capsys: Any) -> subprocess.CompletedProcess[str]:
    """`python -m module argv` in-process, as a CompletedProcess."""
    main = importlib.import_module(f"{module}.__main__").main
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    return subprocess.CompletedProcess([module, *argv], rc, out.out, out.err)


def _one_line_exit_2(r: subprocess.CompletedProcess[str], phrase: str) -> None:
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr + r.stdout
    assert len(lines) == 1, r.stderr
    assert phrase in lines[0], lines[0]


QUICK = ["--max-examples", "1", "--per-op", "0", "--session-examples", "0"]


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["--dtype", "symbolic"], "unknown dtype(s) 'symbolic'"),
        (["--dtype", "float32,"], "unknown dtype"),
        (["--backend", ""], "expected a backend name"),
        (["--against", " "], "expected a backend name"),
        (["--backend", "no_such_module_xyz"], "is not available"),
        (["--report", "/nonexistent-dir/r"], "does not exist"),
        (["--max-examples", "0"], "expected an integer >= 1"),
    ],
)
def test_conformance_bad_flags(argv: list[str], phrase: str, capsys: Any) -> None:
    _one_line_exit_2(_main("conformance", [*QUICK, *argv], capsys), phrase)


def test_conformance_bad_dtype_subprocess(tmp_path: Path) -> None:
    _one_line_exit_2(_run("conformance", [*QUICK, "--dtype", "symbolic"], tmp_path), "symbolic")


def test_conformance_zero_byte_onnx(tmp_path: Path) -> None:
    pytest.importorskip("onnx", reason="the onnx package is not installed")
    m = tmp_path / "empty.onnx"
    m.write_bytes(b"")
    r = _run("conformance", [str(m), "--report", str(tmp_path / "r"), *QUICK], tmp_path)
    assert r.returncode != 0 and "passed" not in r.stdout
    _one_line_exit_2(r, "empty.onnx")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("suffix", [".pt2", ".onnx"])
def test_conformance_model_report_checked_before_import(
    suffix: str, tmp_path: Path, capsys: Any
) -> None:
    m = tmp_path / f"m{suffix}"
    m.write_bytes(b"")
    r = _main("conformance", [str(m), "--report", str(tmp_path / "no" / "r"), *QUICK], capsys)
    _one_line_exit_2(r, "does not exist")


def test_conformance_empty_pt2(tmp_path: Path, capsys: Any) -> None:
    pytest.importorskip("torch", reason="the torch package is not installed")
    m = tmp_path / "m.pt2"
    m.write_bytes(b"")
    r = _main("conformance", [str(m), "--report", str(tmp_path / "r"), *QUICK], capsys)
    _one_line_exit_2(r, "empty")


def test_conformance_unknown_model_suffix(tmp_path: Path, capsys: Any) -> None:
    m = tmp_path / "m.bin"
    m.write_bytes(b"x")
    r = _main("conformance", [str(m), "--report", str(tmp_path / "r"), *QUICK], capsys)
    _one_line_exit_2(r, "unknown model file suffix")


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["--repeat", "0"], "--repeat: expected an integer >= 1, got 0"),
        (["--repeat", "x"], "expected an integer, got 'x'"),
        (["--threads", "0"], "--threads: expected an integer >= 1"),
        (["--conf-examples", "-1"], "--conf-examples: expected an integer >= 1"),
        (["--only", "chain,nope"], "unknown name(s) 'nope'"),
        (["--peers", "torch,pytorch"], "unknown name(s) 'pytorch'"),
        (["--json", "/nonexistent-dir/x.json"], "does not exist"),
        (["--out", "/"], "is a directory"),
    ],
)
def test_benchmarks_bad_flags(argv: list[str], phrase: str, capsys: Any) -> None:
    _one_line_exit_2(_main("benchmarks", ["--quick", *argv], capsys), phrase)


def test_benchmarks_repeat_0_subprocess(tmp_path: Path) -> None:
    _one_line_exit_2(_run("benchmarks", ["--quick", "--repeat", "0"], tmp_path), "--repeat")


def test_benchmark_peer_keys_match_the_peers() -> None:
    from benchmarks.cli import PEER_KEYS
    from benchmarks.workloads import PEERS

    assert PEER_KEYS == tuple(p.key for p in PEERS)
