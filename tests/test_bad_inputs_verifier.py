"""Hostile inputs to the verifier's readers and writers, every file built here.

Covers: VNN-LIB names that would alias a declared one (`Y_00`, an Arabic-Indic digit) and
duplicate variables in a sum; oversized literals, exponents, nesting and disjunctive
normal forms (refused before the work they would cause); values out of a float32
model's range (refused naming the line); bytes that are not UTF-8; devices and FIFOs as
inputs (refused without blocking); `--certificate` into a missing directory, through a
symbolic link, onto a full disk; ONNX tensors of unknown element types (inline and
external data); corrupt `.npz` members; a conformance report on a full disk; `--scheduler`
in the conformance model mode; chunked bounded reads. Every refusal is a `TorchLeanError`
(a CLI: exit 2, one line on stderr, nothing on stdout).
"""

from __future__ import annotations

import errno
import os
import threading
import tracemalloc
import zipfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.interop import limits
from runtime.interop.core import ModelImportError
from runtime.verification.__main__ import main as verify_main
from runtime.verification.vnnlib import MAX_DEPTH, VNNLibError, parse_vnnlib, read_vnnlib
from spec import safe_files
from spec.errors import TorchLeanError
from spec.safe_files import FileReadError, FileWriteError, read_bytes, write_atomic

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

HEAD = "(declare-const X_0 Real)\n(declare-const Y_0 Real)\n"
BOX2 = "(assert (<= X_0 2))\n(assert (>= X_0 2))\n"  # the box is the single point X_0 = 2


def identity_model(dtype: Any = np.float32) -> bytes:
    """Y = X (one input, one output): a Gemm with weight 1 and bias 0."""
    code = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    W, b = np.ones((1, 1), dtype), np.zeros(1, dtype)
    g = helper.make_graph(
        [helper.make_node("Gemm", ["X", "W", "b"], ["Y"], transB=1)], "id",
        [helper.make_tensor_value_info("X", code, [1, 1])],
        [helper.make_tensor_value_info("Y", code, [1, 1])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(b, "b")],
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    p = tmp_path / "id.onnx"
    p.write_bytes(identity_model())
    return p


def _cli(capsys: Any, *argv: Any) -> tuple[int, str, str]:
    rc = verify_main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def _refused(capsys: Any, *argv: Any) -> str:
    rc, out, err = _cli(capsys, *argv)
    assert (rc, out) == (2, ""), (rc, out, err)
    assert err.startswith("error:") and err.count("\n") == 1, err
    return err


# --------------------------------------------------------------------------- names and sums


@pytest.mark.parametrize("alias", ["Y_00", "Y_\u0660", "Y_0\u0660", "Y_+0", "Y_ 0"[:3]])
def test_aliasing_names_are_refused(alias: str) -> None:
    text = HEAD + BOX2 + f"(assert (>= (+ Y_0 {alias}) 4))\n"
    with pytest.raises(VNNLibError, match=r"line 5: (undeclared variable|unknown term)"):
        parse_vnnlib(text)


@pytest.mark.parametrize("decl", ["X_00", "X_\u0660", "X_01", "Y_-1", "X_0x0"])
def test_non_canonical_declarations_are_refused(decl: str) -> None:
    with pytest.raises(VNNLibError, match="line 1: expected \\(declare-const"):
        parse_vnnlib(f"(declare-const {decl} Real)\n")


def test_a_name_must_be_declared_before_use() -> None:
    text = "(declare-const X_0 Real)\n" + BOX2 + "(assert (>= Y_0 4))\n(declare-const Y_0 Real)\n"
    with pytest.raises(VNNLibError, match="line 4: undeclared variable 'Y_0'"):
        parse_vnnlib(text)


def test_the_aliasing_files_are_refused_by_the_cli(model: Path, tmp_path: Path, capsys: Any):
    for i, alias in enumerate(["Y_00", "Y_\u0660"]):
        prop = tmp_path / f"alias{i}.vnnlib"
        prop.write_text(HEAD + BOX2 + f"(assert (>= (+ Y_0 {alias}) 4))\n", encoding="utf-8")
        assert "undeclared variable" in _refused(capsys, model, prop)


def test_duplicate_variables_in_a_sum_are_added(model: Path, tmp_path: Path, capsys: Any):
    twice = parse_vnnlib(HEAD + BOX2 + "(assert (>= (+ Y_0 Y_0) 4))\n")
    times = parse_vnnlib(HEAD + BOX2 + "(assert (>= (* 2 Y_0) 4))\n")
    # 2 Y_0 >= 4 as the row -2 Y_0 <= -4, worked by hand
    assert twice.disjuncts == times.disjuncts == ((((Fraction(-2),), Fraction(-4)),),)
    mixed = parse_vnnlib(HEAD + BOX2 + "(assert (>= (- (+ Y_0 (* 3 Y_0)) Y_0 Y_0) 4))\n")
    assert mixed.disjuncts == twice.disjuncts
    for body in ("(+ Y_0 Y_0)", "(* 2 Y_0)"):
        prop = tmp_path / "p.vnnlib"
        prop.write_text(HEAD + BOX2 + f"(assert (>= {body} 4))\n")
        rc, out, _ = _cli(capsys, model, prop)
        assert rc == 0 and out.startswith("sat\n") and "(X_0 2.0)" in out  # Y_0 = 2: 4 >= 4


# --------------------------------------------------------------------------- bounded parsing


@pytest.mark.parametrize(
    ("literal", "words"),
    [
        ("1" * 100_001, "a number of 100001 characters"),
        ("1e100000000", "the exponent of '1e100000000' is beyond"),
        ("1e-100000000", "the exponent"),
        ("0." + "0" * 2000 + "1", "a number of 2003 characters"),
    ],
)
def test_number_literals_are_bounded_before_conversion(literal: str, words: str) -> None:
    with pytest.raises(VNNLibError, match=f"line 5: {words}"):
        parse_vnnlib(HEAD + BOX2 + f"(assert (<= Y_0 {literal}))\n")


@pytest.mark.parametrize("op", ["+", "and", "or", "-"])
def test_deep_nesting_is_refused_without_recursion(op: str) -> None:
    inner = "(<= Y_0 1)" if op in ("and", "or") else "Y_0"
    deep = f"({op} " * 5000 + inner + ")" * 5000
    text = HEAD + BOX2 + (f"(assert {deep})" if op in ("and", "or") else f"(assert (<= {deep} 1))")
    with pytest.raises(VNNLibError, match=f"line 5: nested deeper than {MAX_DEPTH}"):
        parse_vnnlib(text)


@pytest.mark.parametrize("op", ["+", "and", "or"])
def test_a_raised_depth_cap_evaluates_without_recursion(op: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("TORCHLEAN_VNNLIB_MAX_DEPTH", "20000")
    n = 5000
    if op == "+":
        text = HEAD + BOX2 + "(assert (<= " + "(+ " * n + "Y_0" + ")" * n + " 1))\n"
    else:
        text = HEAD + BOX2 + "(assert " + f"({op} " * n + "(<= Y_0 1)" + ")" * n + ")\n"
    p = parse_vnnlib(text)
    assert p.disjuncts == ((((Fraction(1),), Fraction(1)),),)


def test_the_caps_name_how_to_raise_them(monkeypatch: Any) -> None:
    text = _or_of_products(2, 64)  # 8,192 conjunctions
    with pytest.raises(VNNLibError, match="raise with TORCHLEAN_VNNLIB_MAX_DISJUNCTS"):
        parse_vnnlib(text)
    monkeypatch.setenv("TORCHLEAN_VNNLIB_MAX_DISJUNCTS", "10000")
    assert len(parse_vnnlib(text).disjuncts) == 8192
    monkeypatch.setenv("TORCHLEAN_VNNLIB_MAX_DISJUNCTS", "lots")
    with pytest.raises(VNNLibError, match="TORCHLEAN_VNNLIB_MAX_DISJUNCTS='lots'"):
        parse_vnnlib(text)


def test_nesting_at_the_limit_is_accepted() -> None:
    depth = MAX_DEPTH - 3  # (assert (<= (+ ... Y_0 ...) 1)) adds three levels
    term = "(+ " * depth + "Y_0" + ")" * depth
    p = parse_vnnlib(HEAD + BOX2 + f"(assert (<= {term} 1))\n")
    assert p.disjuncts == ((((Fraction(1),), Fraction(1)),),)


def _or_of_products(k: int, width: int) -> str:
    """(or A ... A), k times A = (and (or w atoms) (or w atoms)): k * w * w conjunctions."""
    atoms = " ".join(f"(<= Y_0 {j})" for j in range(width))
    a = f"(and (or {atoms}) (or {atoms}))"
    return HEAD + BOX2 + "(assert (or " + " ".join([a] * k) + "))\n"


def test_the_disjunctive_normal_form_is_sized_before_expansion() -> None:
    text = _or_of_products(45, 64)  # 184,320 conjunctions from under 71 KB of text
    assert len(text) < 71_000
    tracemalloc.start()
    try:
        with pytest.raises(VNNLibError, match="more than 4096 disjuncts"):
            parse_vnnlib(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, peak  # the text's own tokens, never the expansion


def test_rows_over_all_disjuncts_are_capped() -> None:
    atoms = " ".join(f"(<= Y_0 {j})" for j in range(2000))
    ors = "(or " + " ".join(f"(<= Y_0 {j})" for j in range(4000)) + ")"
    with pytest.raises(VNNLibError, match="rows in the disjunctive normal form"):
        parse_vnnlib(HEAD + BOX2 + f"(assert (and {atoms} {ors}))\n")


def test_empty_connectives_are_refused() -> None:
    for body in ("(and)", "(or)"):
        with pytest.raises(VNNLibError, match="needs at least one argument"):
            parse_vnnlib(HEAD + BOX2 + f"(assert {body})\n")


# --------------------------------------------------------------------------- dtype range


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("(assert (<= X_0 1e400))", "line 4: a value of magnitude ~1e400"),
        ("(assert (<= X_0 1e39))", "line 4: a value of magnitude ~1e\\+39 .* float32"),
        ("(assert (<= (* 1e39 Y_0) 1))", "line 4: .*out of the finite range of float32"),
        ("(assert (<= (* 1e20 (* 1e20 Y_0)) 1))", "line 4: .*float32"),
    ],
)
def test_out_of_range_values_are_refused_naming_the_line(
    line: str, words: str, model: Path, tmp_path: Path, capsys: Any
) -> None:
    text = HEAD + "(assert (>= X_0 0))\n" + line + "\n(assert (<= X_0 1))\n(assert (<= Y_0 -1))\n"
    parse_vnnlib(text)  # exact values: in range of nothing in particular
    with pytest.raises(VNNLibError, match=words):
        parse_vnnlib(text, "float32")
    prop = tmp_path / "p.vnnlib"
    prop.write_text(text)
    assert "line 4" in _refused(capsys, model, prop)


def test_float64_range_accepts_what_float32_refuses() -> None:
    text = HEAD + "(assert (>= X_0 0))\n(assert (<= X_0 1e39))\n(assert (<= Y_0 -1))\n"
    assert parse_vnnlib(text, "float64").upper == (Fraction(10**39),)


# --------------------------------------------------------------------------- files


def test_bytes_that_are_not_utf8_are_refused_naming_the_line(tmp_path: Path) -> None:
    p = tmp_path / "p.vnnlib"
    p.write_bytes((HEAD + BOX2).encode() + b"(assert (<= Y_0 \xff))\n")
    with pytest.raises(VNNLibError, match="line 5: not UTF-8 text \\(byte 0xff"):
        read_vnnlib(str(p))


def _returns_quickly(fn: Any) -> BaseException | None:
    """Run fn in a thread; the exception it raised (None if none); fails if it blocks."""
    box: list[BaseException | None] = [None]

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # handed to the caller
            box[0] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "the reader blocked"
    return box[0]


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "missing"])
def test_non_regular_inputs_are_refused_without_blocking(kind: str, tmp_path: Path) -> None:
    path = {"dev_zero": "/dev/zero", "directory": str(tmp_path)}.get(kind, str(tmp_path / kind))
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "dev_zero" and not os.path.exists(path):
        pytest.skip("no /dev/zero on this system")
    for reader in (
        lambda: read_vnnlib(path),
        lambda: limits.read_file(path),
        lambda: limits.load_npz(path),
    ):
        e = _returns_quickly(reader)
        assert isinstance(e, TorchLeanError) and path in str(e), e


def test_reads_follow_the_real_size_not_the_cap(tmp_path: Path) -> None:
    p = tmp_path / "small.bin"
    p.write_bytes(b"0123456789")
    tracemalloc.start()
    try:
        with limits.limits(max_file_bytes=2**31):
            assert limits.read_file(str(p)) == b"0123456789"
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20, peak
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(3 * safe_files.CHUNK + 5))
    assert read_bytes(str(big), 3 * safe_files.CHUNK + 5) == bytes(3 * safe_files.CHUNK + 5)
    with pytest.raises(FileReadError, match="exceeds the limit of 100 bytes"):
        read_bytes(str(big), 100)
    with pytest.raises(limits.LimitError, match="max_file_bytes"), limits.limits(max_file_bytes=9):
        limits.read_file(str(p))


# --------------------------------------------------------------------------- certificates


def _unsat_property(tmp_path: Path) -> Path:
    prop = tmp_path / "unsat.vnnlib"
    prop.write_text(HEAD + BOX2 + "(assert (>= Y_0 3))\n")  # Y_0 = 2 never reaches 3
    return prop


def test_certificate_into_a_missing_directory_is_refused_before_work(
    model: Path, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    import runtime.verification.__main__ as cli

    def never(*a: Any, **k: Any) -> None:
        raise AssertionError("the verifier ran before the destination was checked")

    monkeypatch.setattr(cli, "verify_vnnlib", never)
    err = _refused(capsys, model, _unsat_property(tmp_path), "--certificate",
                   tmp_path / "nope" / "c")  # fmt: skip
    assert "does not exist" in err


def test_certificate_through_a_symlink_is_refused(model: Path, tmp_path: Path, capsys: Any):
    target = tmp_path / "elsewhere.json"
    target.write_text("keep")
    os.symlink(target, tmp_path / "c.0.json")
    assert "symbolic link" in _refused(
        capsys, model, _unsat_property(tmp_path), "--certificate", tmp_path / "c"
    )
    assert target.read_text() == "keep"


def test_certificate_on_a_full_disk_is_one_line_and_no_answer(
    model: Path, tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    prop = _unsat_property(tmp_path)
    rc, out, _ = _cli(capsys, model, prop, "--certificate", tmp_path / "ok")
    assert (rc, out) == (0, "unsat\n") and (tmp_path / "ok.0.json").is_file()

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(safe_files.os, "write", full)
    err = _refused(capsys, model, prop, "--certificate", tmp_path / "c")
    assert "No space left on device" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["id.onnx", "unsat.vnnlib", "ok.0.json"]
    )  # no temporary file left behind


def test_write_atomic_keeps_the_old_file_on_a_real_write_error(tmp_path: Path) -> None:
    import resource
    import subprocess
    import sys

    target = tmp_path / "out.json"
    target.write_text("old")
    code = (
        "import resource, signal, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "from spec.safe_files import write_atomic, FileWriteError\n"
        "try:\n"
        f"    write_atomic({str(target)!r}, 'x' * 100000)\n"
        "except FileWriteError as e:\n"
        "    print(e); sys.exit(3)\n"
    )
    assert resource.RLIMIT_FSIZE is not None
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(root)})  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "cannot write (File too large)" in done.stdout
    assert target.read_text() == "old" and sorted(os.listdir(tmp_path)) == ["out.json"]


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_write_atomic_refuses_non_regular_targets(kind: str, tmp_path: Path) -> None:
    p = tmp_path / "t"
    p.mkdir() if kind == "directory" else os.mkfifo(p)
    with pytest.raises(FileWriteError, match="not a regular file"):
        write_atomic(str(p), "x")


def test_save_certificate_is_atomic_and_refuses_links(tmp_path: Path) -> None:
    from runtime.verification import verify
    from runtime.verification.results import VerificationResult

    assert callable(verify)
    link = tmp_path / "cert.json"
    os.symlink(tmp_path / "target.json", link)
    with pytest.raises(FileWriteError, match="symbolic link"):
        VerificationResult.save_certificate(_FakeResult(), str(link))  # type: ignore[arg-type]
    assert not (tmp_path / "target.json").exists()
    VerificationResult.save_certificate(_FakeResult(), str(tmp_path / "ok.json"))  # type: ignore[arg-type]
    assert (tmp_path / "ok.json").read_text() == '{\n "a": 1\n}\n'


class _FakeResult:
    """Stands in for a VerificationResult: only `certificate()` is read by the writer."""

    def certificate(self) -> dict[str, int]:
        return {"a": 1}


# --------------------------------------------------------------------------- ONNX and .npz


def _external_model(tmp_path: Path, code: int, external: bool) -> Path:
    W = numpy_helper.from_array(np.ones((1, 1), np.float32), "W")
    if external:
        (tmp_path / "w.bin").write_bytes(np.ones(1, np.float32).tobytes())
        W.ClearField("raw_data")
        W.data_location = TensorProto.EXTERNAL
        for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "4")):
            e = W.external_data.add()
            e.key, e.value = k, v
    W.data_type = code
    g = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])], "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 1])], [W],
    )  # fmt: skip
    p = tmp_path / "m.onnx"
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    p.write_bytes(m.SerializeToString())
    return p


@pytest.mark.parametrize("external", [True, False], ids=["external", "inline"])
@pytest.mark.parametrize("code", [0, 999])
def test_unknown_element_types_are_refused(
    code: int, external: bool, tmp_path: Path, capsys: Any
) -> None:
    from runtime.interop import from_onnx

    p = _external_model(tmp_path, code, external)
    with pytest.raises(ModelImportError, match=f"element type {code}"):
        from_onnx(str(p))
    prop = tmp_path / "p.vnnlib"
    prop.write_text(HEAD + BOX2 + "(assert (>= Y_0 3))\n")
    assert f"element type {code}" in _refused(capsys, p, prop)


def _npz(tmp_path: Path) -> Path:
    p = tmp_path / "a.npz"
    np.savez(p, a=np.arange(6.0))
    return p


def _patch(data: bytearray, at: int, value: bytes) -> None:
    data[at : at + len(value)] = value


def _local_header(data: bytes) -> int:
    return data.index(b"PK\x03\x04")


def _central_header(data: bytes) -> int:
    return data.index(b"PK\x01\x02")


@pytest.mark.parametrize("damage", ["crc", "encrypted", "method99", "truncated", "not_zip"])
def test_corrupt_npz_members_are_model_import_errors(damage: str, tmp_path: Path) -> None:
    p = _npz(tmp_path)
    data = bytearray(p.read_bytes())
    lh, ch = _local_header(data), _central_header(data)
    if damage == "crc":  # flip a data byte: the stored CRC-32 no longer matches
        info = zipfile.ZipFile(p).infolist()[0]
        data[lh + 30 + len(info.filename) + info.file_size - 1] ^= 0xFF
    elif damage == "encrypted":  # the general-purpose flag's encryption bit
        for h in (lh + 6, ch + 8):
            data[h] |= 1
    elif damage == "method99":
        for h in (lh + 8, ch + 10):
            _patch(data, h, (99).to_bytes(2, "little"))
    elif damage == "truncated":
        data = data[: len(data) // 2]
    else:
        data = bytearray(b"not a zip file at all")
    p.write_bytes(bytes(data))
    with pytest.raises(ModelImportError, match=str(p)):
        limits.load_npz(str(p))


# --------------------------------------------------------------------------- conformance


def test_conformance_report_on_a_full_disk(tmp_path: Path, monkeypatch: Any) -> None:
    from conformance.reports import Row, write_reports

    rows = [Row("p", "float64", "fast", cases=1, passed=1)]
    prefix = str(tmp_path / "r")
    write_reports(rows, prefix, {"m": 1})
    before = (tmp_path / "r.json").read_text()

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(safe_files.os, "write", full)
    with pytest.raises(FileWriteError, match=r"r\.json: cannot write \(No space left on device\)"):
        write_reports(rows, prefix, {"m": 2})
    assert (tmp_path / "r.json").read_text() == before
    assert sorted(os.listdir(tmp_path)) == ["r.json", "r.md"]


def test_conformance_cli_report_write_failure_is_exit_2(tmp_path: Path, capsys: Any,
                                                        monkeypatch: Any) -> None:  # fmt: skip
    import argparse

    from conformance.cli import report
    from conformance.reports import Row
    from runtime.backends import get_backend

    def full(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(safe_files.os, "write", full)
    a = argparse.Namespace(backend="numpy", against=None, max_examples=1, per_op=0, seed=None,
                           report=str(tmp_path / "r"))  # fmt: skip
    assert report(a, get_backend("numpy"), [Row("p", "float64", "fast", cases=1, passed=1)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err


def test_model_mode_refuses_a_scheduler(model: Path, tmp_path: Path, capsys: Any) -> None:
    from conformance.__main__ import main

    rc = main([str(model), "--scheduler", "tcp://127.0.0.1:9", "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "--scheduler" in err
    assert not (tmp_path / "r.json").exists()


# --------------------------------------------------------------------------- ONNX Gradient

_NAMES = st.sampled_from(["a", "b", "c", "s", "q", "nope", "", "da", "a/b", "\u0660"])
_TRAIN = "ai.onnx.preview.training"


def _gradient_model(ins: list[str], outs: list[str], attrs: list[Any], version: int) -> Any:
    """s = sum(a * b) (and an unused input q) followed by one Gradient node as given."""
    F = TensorProto.FLOAT
    node = helper.make_node("Gradient", ins, outs, name="g", domain=_TRAIN)
    node.attribute.extend(attrs)
    g = helper.make_graph(
        [helper.make_node("Mul", ["a", "b"], ["c"]),
         helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0), node],
        "g", [helper.make_tensor_value_info(n, F, [2]) for n in ("a", "b", "q")],
        [helper.make_tensor_value_info("s", F, [])]
        + [helper.make_tensor_value_info(o, F, [2]) for o in dict.fromkeys(outs) if o],
    )  # fmt: skip
    ops = [helper.make_opsetid("", 13), helper.make_opsetid(_TRAIN, version)]
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m


@given(
    xs=st.lists(_NAMES, max_size=3),
    zs=st.one_of(st.none(), st.lists(_NAMES, max_size=2)),
    y=st.one_of(_NAMES, st.integers(-1, 3), st.lists(_NAMES, max_size=2)),
    ins=st.lists(_NAMES, max_size=4),
    outs=st.lists(st.sampled_from(["da", "db", "dq", ""]), max_size=3),
    version=st.sampled_from([1, 1, 1, 0, 2]),
    xs_as_ints=st.booleans(),
)
def test_fuzz_gradient_node_inputs(
    xs: list[str],
    zs: list[str] | None,
    y: Any,
    ins: list[str],
    outs: list[str],
    version: int,
    xs_as_ints: bool,
) -> None:
    from runtime.interop import from_onnx

    attrs = [helper.make_attribute("xs", [len(x) for x in xs] if xs_as_ints and xs else xs,
                                   attr_type=None if xs_as_ints and xs else
                                   onnx.AttributeProto.STRINGS)]  # fmt: skip
    if zs is not None:
        attrs.append(helper.make_attribute("zs", zs, attr_type=onnx.AttributeProto.STRINGS))
    if isinstance(y, list):
        attrs.append(helper.make_attribute("y", y, attr_type=onnx.AttributeProto.STRINGS))
    else:
        attrs.append(helper.make_attribute("y", y))
    try:
        m = _gradient_model(ins, outs, attrs, version)
    except ValueError:  # onnx.helper itself refuses to build it
        return
    try:
        imp = from_onnx(m)
    except TorchLeanError:
        return
    if any(outs):  # (a node without named outputs computes nothing and is not imported)
        assert imp.outputs and xs and set(xs) <= {"a", "b", "q"} and y == "s"


@pytest.mark.parametrize("through", [False, True], ids=["y_is_its_output", "y_reads_it"])
def test_gradient_y_through_its_own_output_is_refused(through: bool) -> None:
    from runtime.interop import from_onnx

    attrs = [helper.make_attribute("xs", ["a", "b"], attr_type=onnx.AttributeProto.STRINGS),
             helper.make_attribute("y", "t" if through else "da")]  # fmt: skip
    m = _gradient_model(["a", "b"], ["da"], attrs, 1)
    if through:  # t = sum(da): y's sub-graph would contain the Gradient node itself
        m.graph.node.append(helper.make_node("ReduceSum", ["da"], ["t"], keepdims=0))
        m.graph.output.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, []))
    with pytest.raises(TorchLeanError, match="an output of the Gradient node itself"):
        from_onnx(m)


@pytest.mark.parametrize("path", [None, 3, "", "a\x00b", b"x"])
def test_bad_path_values_are_torchlean_errors(path: Any) -> None:
    for fn in (read_vnnlib, limits.read_file, lambda p: write_atomic(p, "x")):
        with pytest.raises(TorchLeanError):
            fn(path)


@pytest.mark.parametrize(
    "argv", [["m"], ["m", "p", "--timeout", "-1"], ["m", "p", "--timeout", "nan"], ["--bogus"]]
)
def test_cli_usage_errors_are_one_line(argv: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as e:
        verify_main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == "" and err.count("\n") == 1 and "error:" in err
