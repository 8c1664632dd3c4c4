"""`python -m proofs check-cert` on hostile files: the reader (regular files only, size
cap, UTF-8, JSON depth), the work cap checked before checking (`proofs.cert_work`,
hand-worked estimates), and a Hypothesis fuzz of mutated certificates: no exception but
the checker's two errors, and never an answer for a file whose content was changed."""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate, parse
from proofs.cert_work import MAX_OPS, CertificateWorkError, Work, check_work, estimate
from proofs.cli import main as proofs_main
from tests.cert_forge import resign


def _certificate(algorithm: str) -> dict[str, Any]:
    from runtime.nn import Linear, ReLU, Sequential
    from runtime.trainer import Result
    from runtime.verification import verify

    rng = np.random.default_rng(0)
    model = Sequential(Linear(3, 4), ReLU(), Linear(4, 2))
    state = [rng.normal(size=sp.shape) / 2 for layer in model.layers
             for sp in layer.state_specs()]  # fmt: skip
    res = Result(model, "mse", "float32", "eager", "ordered", False,
                 [np.asarray(a, np.float32) for a in state])  # fmt: skip
    return verify(res, np.zeros(3), np.full(3, 0.1), algorithm=algorithm).certificate()


@pytest.fixture(scope="module")
def cert() -> dict[str, Any]:
    return _certificate("alpha-crown")


def _check_cert(capsys: Any, path: Any, *flags: str) -> tuple[int, str, str]:
    rc = proofs_main(["check-cert", str(path), *flags])
    out, err = capsys.readouterr()
    return rc, out, err


# --------------------------------------------------------------------------- reading


def test_a_good_certificate_holds(cert: Any, tmp_path: Path, capsys: Any) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    rc, out, err = _check_cert(capsys, p)
    assert (rc, err) == (0, "") and out.startswith("certificate holds: alpha-crown")


@pytest.mark.parametrize("kind", ["fifo", "dev_zero", "directory", "missing"])
def test_non_regular_files_are_refused_without_blocking(kind: str, tmp_path: Path,
                                                        capsys: Any) -> None:  # fmt: skip
    path = {"dev_zero": "/dev/zero", "directory": str(tmp_path)}.get(kind, str(tmp_path / kind))
    if kind == "fifo":
        os.mkfifo(path)
    if kind == "dev_zero" and not os.path.exists(path):
        pytest.skip("no /dev/zero on this system")
    got: list[Any] = []
    t = threading.Thread(target=lambda: got.append(_check_cert(capsys, path)), daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "check-cert blocked"
    rc, out, err = got[0]
    assert (rc, out) == (2, "") and err.count("\n") == 1 and path in err


@pytest.mark.parametrize(
    ("data", "rc", "words"),
    [
        (b'{"format": "\xff"}', 2, "line 1: not UTF-8 text (byte 0xff"),
        (b"[" * 5000 + b"]" * 5000, 1, "nested deeper than 32"),
        (b'{"a": ' + b"9" * 5000 + b"}", 1, "digits"),
        (b'{"a": NaN}', 1, "NaN is not allowed"),
        (b"", 1, "cannot parse"),
    ],
)
def test_malformed_files_are_one_line(data: bytes, rc: int, words: str, tmp_path: Path,
                                      capsys: Any) -> None:  # fmt: skip
    p = tmp_path / "c.json"
    p.write_bytes(data)
    got, out, err = _check_cert(capsys, p)
    assert (got, out) == (rc, "") and err.count("\n") == 1 and words in err, err


def test_the_size_cap_is_checked_before_reading(tmp_path: Path, capsys: Any) -> None:
    from proofs.bounds_certificate_check import MAX_BYTES

    p = tmp_path / "huge.json"
    with open(p, "wb") as f:  # a sparse file: no data is written
        f.truncate(MAX_BYTES + 1)
    rc, out, err = _check_cert(capsys, p)
    assert (rc, out) == (2, "") and f"exceeds the limit of {MAX_BYTES} bytes" in err


# --------------------------------------------------------------------------- the work cap


def _dense(n_in: int, widths: list[int]) -> dict[str, Any]:
    """A certificate skeleton: linear stages of the given widths with ReLU between."""
    stages: list[dict[str, Any]] = []
    n = n_in
    for i, w in enumerate(widths):
        stages.append({"op": "linear", "weight": [["0x0"] * n] * w, "bias": ["0x0"] * w})
        if i < len(widths) - 1:
            stages.append({"op": "relu"})
        n = w
    return {"box": {"lower": ["0"] * n_in}, "network": {"dtype": "float32", "stages": stages},
            "algorithm": "crown"}  # fmt: skip


def test_estimate_golden_dense() -> None:
    # 4 inputs; linear 3x4 (cost 12), relu (3), linear 2x3 (6, the last stage):
    # IBP 21, stage 1's backward pass 2*3*12 = 72, the final one 2*2*21 = 84: 177 per chain,
    # one CROWN chain, two levels
    assert estimate(_dense(4, [3, 2])) == Work(width=4, ops=354, stages=3)
    alpha = {**_dense(4, [3, 2]), "algorithm": "alpha-crown"}
    assert estimate(alpha).ops == 708
    bab = {**_dense(4, [3, 2]), "algorithm": "bab",
           "levels": {"real": {"branches": [{}, {}, {}]}, "runtime": {}}}  # fmt: skip
    assert estimate(bab).ops == 354 * 5


def test_estimate_golden_conv() -> None:
    # in (1, 4, 4); a 2x1x3x3 conv, stride 1, no padding: output (2, 2, 2) = 8 values, 9
    # taps each (cost 72); it is the last stage: IBP 72 + final 2*8*72 = 1224, two levels
    conv = {"op": "conv2d", "weight": [[[["0x0"] * 3] * 3]] * 2, "bias": ["0x0"] * 2,
            "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1], "groups": 1,
            "in_shape": [1, 4, 4]}  # fmt: skip
    c = {"box": {"lower": ["0"] * 16}, "network": {"stages": [conv]}, "algorithm": "crown"}
    # the checker's windows of that conv: 4 output positions x 9 taps
    assert estimate(c) == Work(width=16, ops=2448, stages=1, windows=36)
    wide = copy.deepcopy(c)
    wide["network"]["stages"][0]["padding"] = [100_000, 100_000]
    w = estimate(wide)
    assert w.width == 2 * 200_002**2  # (4 + 2p - 2) per side, two channels
    with pytest.raises(CertificateWorkError, match="--max-width"):
        check_work(wide)


def test_estimate_stops_at_a_malformed_stage() -> None:
    c = _dense(4, [3, 2])
    c["network"]["stages"][2] = {"op": "conv2d", "in_shape": "nonsense"}
    assert estimate(c).stages == 2


def test_a_forged_huge_pool_is_refused_before_any_check(cert: Any, tmp_path: Path,
                                                        capsys: Any) -> None:  # fmt: skip
    forged = copy.deepcopy(cert)
    forged["box"] = {k: (v * 30000 if isinstance(v, list) else v)
                     for k, v in forged["box"].items()}  # fmt: skip
    pool = {"op": "avg_pool2d", "in_shape": [4, 150, 150], "kernel_size": [1, 1],
            "stride": [1, 1], "padding": [0, 0]}  # fmt: skip
    forged["network"]["stages"].insert(0, pool)  # 90,000 values: a dense matrix of 8.1e9
    resign(forged, network=True)
    p = tmp_path / "pool.json"
    p.write_text(json.dumps(forged))
    rc, out, err = _check_cert(capsys, p)
    assert (rc, out) == (2, "") and "rational operations" in err and "--max-work" in err
    assert _check_cert(capsys, p, "--max-work", "1", "--max-width", "1")[0] == 2


def test_the_caps_can_be_raised(cert: Any, tmp_path: Path, capsys: Any, monkeypatch: Any):
    p = tmp_path / "c.json"
    p.write_text(json.dumps(cert))
    assert _check_cert(capsys, p, "--max-work", "10")[0] == 2
    monkeypatch.setenv("TORCHLEAN_MAX_CERT_OPS", "10")
    assert _check_cert(capsys, p)[0] == 2
    assert _check_cert(capsys, p, "--max-work", str(10**9))[0] == 0
    monkeypatch.setenv("TORCHLEAN_MAX_CERT_OPS", "many")
    rc, _, err = _check_cert(capsys, p)
    assert rc == 2 and "TORCHLEAN_MAX_CERT_OPS='many' is not an integer" in err


# --------------------------------------------------------------------------- the fuzz

_VALUES = st.one_of(
    st.sampled_from([None, True, -1, 0, 2**40, 10**29, "0x7ff00000", "0x7f800000", "1/0",
                     "-1/3", "nan", "", [], {}, [[]], 1e308, -0.0, "relu", "conv2d"]),
    st.integers(-(10**6), 10**6),
    st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=4),
)  # fmt: skip


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:6]):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if value is _DELETE and isinstance(obj, dict):
        del obj[path[-1]]
    else:
        obj[path[-1]] = None if value is _DELETE else value


_DELETE = object()


def _outcome(c: Any) -> str:
    """The checker's answer on a parsed certificate: "holds" or the refusal's class."""
    try:
        check_work(c)
        check_certificate(c)
    except (CertificateError, CertificateWorkError) as e:
        return type(e).__name__
    return "holds"


@given(data=st.data(), signed=st.booleans())
def test_fuzz_mutated_certificates(cert: Any, data: Any, signed: bool) -> None:
    paths = _paths(cert)
    forged = copy.deepcopy(cert)
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(paths))
        try:
            _set(forged, path, data.draw(st.one_of(_VALUES, st.just(_DELETE))))
        except (KeyError, IndexError, TypeError):  # an earlier mutation removed the path
            continue
    if signed:
        resign(forged, network="network" in forged and data.draw(st.booleans()))
    got = _outcome(forged)
    if forged == cert:
        assert got == "holds"
    elif not signed:  # any change of content breaks the digest
        assert got == "CertificateError"
    else:
        assert got in ("holds", "CertificateError", "CertificateWorkError")


@given(data=st.data())
def test_fuzz_mutated_certificate_files(cert: Any, data: Any, tmp_path_factory: Any) -> None:
    text = bytearray(json.dumps(cert, indent=1).encode())
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(text) - 1))
        op = data.draw(st.sampled_from(["flip", "delete", "insert"]))
        if op == "flip":
            text[i] ^= data.draw(st.integers(1, 255))
        elif op == "delete":
            del text[i : i + data.draw(st.integers(1, 40))]
        else:
            text[i:i] = data.draw(st.sampled_from([b"[", b"{", b"\xff", b"9" * 40, b'"', b"0"]))
    p = tmp_path_factory.mktemp("fuzz") / "c.json"
    p.write_bytes(bytes(text))
    rc = proofs_main(["check-cert", str(p)])
    if rc == 0:  # it holds only when the bytes still mean the same certificate
        assert parse(bytes(text).decode("utf-8")) == cert
    else:
        assert rc in (1, 2)


def test_check_file_api_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    from proofs.bounds_certificate_check import check_file
    from spec.errors import TorchLeanError

    p = tmp_path / "fifo"
    os.mkfifo(p)
    got: list[BaseException] = []

    def run() -> None:
        try:
            check_file(str(p))
        except BaseException as e:  # handed to the test thread
            got.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "check_file blocked"
    assert isinstance(got[0], CertificateError) and isinstance(got[0], TorchLeanError)
    assert "not a regular file" in str(got[0])


def test_proof_run_certificate_destination_is_checked_before_the_run(
    tmp_path: Path, capsys: Any, monkeypatch: Any
) -> None:
    import proofs.cli as cli

    def never(*a: Any, **k: Any) -> None:
        raise AssertionError("theorems ran before the destination was checked")

    monkeypatch.setattr(cli, "run_theorems", never)
    rc = proofs_main(["check", "--quick", "--certificate", str(tmp_path / "no" / "c.json")])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "does not exist" in err
    os.symlink(tmp_path / "t.json", tmp_path / "l.json")
    assert proofs_main(["check", "--quick", "--certificate", str(tmp_path / "l.json")]) == 2
    assert "symbolic link" in capsys.readouterr().err and not (tmp_path / "t.json").exists()


def test_a_wide_pool_certificate_is_refused_before_its_windows(tmp_path: Path, capsys: Any) -> None:
    # one max_pool2d over (1, 256, 256), 17x17 stride 1 padding 8, then a Linear to one
    # output: 256 * 256 positions x 289 taps, twice (the windows and each output's window):
    # 37,879,808 window entries (about 4 GB) in the checker's method, few operations
    import tracemalloc

    pool = {"op": "max_pool2d", "in_shape": [1, 256, 256], "kernel_size": [17, 17],
            "stride": [1, 1], "padding": [8, 8]}  # fmt: skip
    n = 256 * 256
    lin = {"op": "linear", "weight": [["0x0"] * n], "bias": ["0x0"]}
    c = {"box": {"lower": ["0"] * n, "upper": ["1"] * n},
         "network": {"dtype": "float32", "stages": [pool, lin]}, "algorithm": "crown"}  # fmt: skip
    assert estimate(c).windows == 2 * n * 289
    assert estimate(c).ops <= MAX_OPS
    with pytest.raises(CertificateWorkError, match="TORCHLEAN_MAX_CERT_WINDOWS"):
        check_work(c)
    p = tmp_path / "pool.json"
    p.write_text(json.dumps(c))
    tracemalloc.start()
    try:
        rc, out, err = _check_cert(capsys, p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (rc, out) == (2, "") and "window entries" in err
    assert peak < 100 * 2**20
