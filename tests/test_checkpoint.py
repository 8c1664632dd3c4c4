"""State files and checkpoints: formats, validation before mutation, atomic writes.

Expected bit patterns are written by hand (IEEE encodings of small values).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime.nn import BatchNorm1d, Linear, Sequential
from runtime.optim import Adam
from runtime.trainer import Trainer
from runtime.training import checkpoint as ck
from spec.errors import CheckpointError


def bits(a: Any) -> list[bytes]:
    return [np.ascontiguousarray(x).tobytes() for x in a]


def session(dtype: str = "float32") -> Any:
    return Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1), dtype=dtype).open()


def test_json_format_float32_and_float64_golden(tmp_path: Path) -> None:
    """The exact bytes: TorchLean's layout, then the digest field (sha256 of the text
    before it), hashed here with hashlib from the hand-written text."""
    import hashlib

    ck.save_state(tmp_path / "a.json", [np.array([1.0, -2.0], np.float32)], "float32")
    body = (
        '{"format":"torchlean_state_float32_bits_v1",'
        f'"state":[{{"shape":[2],"values":[{0x3F800000},{0xC0000000}]}}]}}'
    )
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert (tmp_path / "a.json").read_text() == body[:-1] + f',"digest":"sha256:{digest}"}}'
    ck.save_state(tmp_path / "b.json", [np.array([[0.5]], np.float64)], "float64")
    obj = json.loads((tmp_path / "b.json").read_text())
    assert obj.pop("digest").startswith("sha256:")
    assert obj == {
        "format": "torchlean_state_bits_v1",
        "state": [{"shape": [1, 1], "values": [0x3FE0000000000000]}],
    }


def test_nan_written_canonical(tmp_path: Path) -> None:
    neg_payload_nan = np.array([0xFFC00001], np.uint32).view(np.float32)
    ck.save_state(tmp_path / "n.json", [neg_payload_nan], "float32")
    assert json.loads((tmp_path / "n.json").read_text())["state"][0]["values"] == [0x7FC00000]
    (back,) = ck.load_state(tmp_path / "n.json", [(1,)], "float32")
    assert np.isnan(back[0])


@settings(max_examples=50, deadline=None)
@given(words=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=8))
def test_roundtrip_bits_float32(words: list[int], tmp_path_factory: Any) -> None:
    a = np.array(words, np.uint32).view(np.float32)
    p = tmp_path_factory.mktemp("rt") / "s.json"
    ck.save_state(p, [a], "float32")
    (b,) = ck.load_state(p, [a.shape], "float32")
    for x, y in zip(a, b, strict=True):
        if np.isnan(x):
            assert int(np.array(y).view(np.uint32)) == 0x7FC00000
        else:
            assert np.array(x).tobytes() == np.array(y).tobytes()


def _write(p: Path, obj: Any) -> Path:
    p.write_text(json.dumps(obj))
    return p


@pytest.mark.parametrize(
    "mutate, text",
    [
        (lambda o: {**o, "format": "torchlean_state_bits_v1"}, "format tag"),
        (lambda o: {**o, "state": o["state"][:1]}, "expected 2 tensors, got 1"),
        (lambda o: {**o, "state": [*o["state"], o["state"][1]]}, "expected 2 tensors, got 3"),
        (
            lambda o: {**o, "state": [{"shape": [2, 1], "values": [0, 0]}, o["state"][1]]},
            "shape \\(2, 1\\) is not the expected \\(1, 2\\)",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0]}, o["state"][1]]},
            "expected 2 values",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0, 2**32]}, o["state"][1]]},
            "32-bit pattern",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0, -1]}, o["state"][1]]},
            "32-bit pattern",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0, 1.5]}, o["state"][1]]},
            "32-bit pattern",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0, True]}, o["state"][1]]},
            "32-bit pattern",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0, 0x7FC00001]}, o["state"][1]]},
            "non-canonical NaN",
        ),
        (
            lambda o: {**o, "state": [{"shape": [1, 2], "values": [0xFFC00000, 0]}, o["state"][1]]},
            "non-canonical NaN",
        ),
        (lambda o: {**o, "extra": 1}, "unexpected keys"),
        (lambda o: [o], "expected a JSON object"),
    ],
)
def test_failed_load_leaves_session_unchanged(mutate: Any, text: str, tmp_path: Path) -> None:
    run = session()
    run.step(([1.0, 2.0], [0.5]))
    run.save(tmp_path / "ok.json")
    obj = json.loads((tmp_path / "ok.json").read_text())
    del obj["digest"]  # a file without digest: the structure checks below apply
    bad = _write(tmp_path / "bad.json", mutate(obj))
    other = session()
    snap, steps, opt = bits(other.state()), other.steps(), other._opt.copy()
    with pytest.raises(CheckpointError, match=text) as e:
        other.load(bad)
    assert str(bad) in str(e.value)
    assert bits(other.state()) == snap and other.steps() == steps
    assert all(
        bits(a.values()) == bits(b.values())
        for a, b in zip(opt.slots, other._opt.slots, strict=True)
    )
    other.load(tmp_path / "ok.json")  # the good file still loads
    assert bits(other.state()) == bits(run.state())


def test_truncated_files_rejected(tmp_path: Path) -> None:
    run = session()
    for name in ("s.json", "s.safetensors"):
        run.save(tmp_path / name)
        data = (tmp_path / name).read_bytes()
        for cut in (0, 5, len(data) // 2, len(data) - 1):
            p = tmp_path / f"cut{cut}{name}"
            p.write_bytes(data[:cut])
            snap = bits(run.state())
            with pytest.raises(CheckpointError, match=str(p.name)):
                run.load(p)
            assert bits(run.state()) == snap


def test_safetensors_roundtrip_and_metadata(tmp_path: Path) -> None:
    from safetensors import safe_open

    layer = Linear(2, 2)
    model = Sequential(layer, BatchNorm1d(2), layer)
    run = Trainer(model, optimizer=Adam(0.1), dtype="float64").open()
    run.step(([1.0, 2.0], [0.5, 0.25]))
    run.save(tmp_path / "m.safetensors")
    with safe_open(str(tmp_path / "m.safetensors"), framework="np") as f:
        meta = f.metadata()
        assert sorted(f.keys()) == [f"state.{i}" for i in range(7)]
    assert meta["format"] == "torchlean_safetensors_state_v1" and meta["dtype"] == "float64"
    assert json.loads(meta["tying"]) == [0, 1, 2, 3, 4, 5, 6, 0, 1]
    fresh = Trainer(model, optimizer=Adam(0.1), dtype="float64", seed=9).open()
    fresh.load(tmp_path / "m.safetensors")
    assert bits(fresh.state()) == bits(run.state())
    # a model with other tying is refused
    untied = Sequential(Linear(2, 2), BatchNorm1d(2), Linear(2, 2))
    other = Trainer(untied, optimizer=Adam(0.1), dtype="float64").open()
    with pytest.raises(CheckpointError, match="tying"):
        other.load(tmp_path / "m.safetensors")


def test_safetensors_missing_extra_wrong_dtype(tmp_path: Path) -> None:
    from safetensors.numpy import save

    run = session()
    good = {"state.0": np.zeros((1, 2), np.float32), "state.1": np.zeros((1,), np.float32)}
    meta = {"format": ck.SAFETENSORS_TAG, "dtype": "float32", "count": "2", "tying": "[0, 1]"}
    cases = [
        ({"state.0": good["state.0"]}, meta, "missing \\['state.1'\\]"),
        ({**good, "state.2": good["state.1"]}, meta, "extra \\['state.2'\\]"),
        ({**good, "state.1": np.zeros((1,), np.float64)}, meta, "dtype float64"),
        ({**good, "state.1": np.zeros((2,), np.float32)}, meta, "shape"),
        (good, {**meta, "format": "x"}, "format tag"),
        (good, {**meta, "dtype": "float64"}, "dtype"),
    ]
    snap = bits(run.state())
    for i, (tensors, md, text) in enumerate(cases):
        p = tmp_path / f"c{i}.safetensors"
        p.write_bytes(save(tensors, metadata=md))
        with pytest.raises(CheckpointError, match=text):
            run.load(p)
        assert bits(run.state()) == snap
    p = tmp_path / "good.safetensors"
    p.write_bytes(save(good, metadata=meta))
    run.load(p)
    assert all(not v.any() for v in run.state())


def test_atomic_write_keeps_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    p = tmp_path / "s.json"
    ck.save_state(p, [np.array([1.0], np.float32)], "float32")
    old = p.read_bytes()

    def boom(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(CheckpointError, match="disk full"):  # OS errors name the path
        ck.save_state(p, [np.array([2.0], np.float32)], "float32")
    assert p.read_bytes() == old
    assert sorted(x.name for x in tmp_path.iterdir()) == ["s.json"]  # no temp file left


def test_exact_state_files(tmp_path: Path) -> None:
    from fractions import Fraction

    run = Trainer(Sequential(Linear(1, 1))).open_typed(
        "exact", initial_state=[[[Fraction(1, 3)]], [Fraction(-2, 7)]]
    )
    run.save(tmp_path / "e.json")
    obj = json.loads((tmp_path / "e.json").read_text())
    del obj["digest"]  # a file without digest: the structure checks below apply
    assert obj["format"] == "torchlean_state_exact_v1"
    assert obj["state"][0]["values"] == ["1/3"] and obj["state"][1]["values"] == ["-2/7"]
    other = Trainer(Sequential(Linear(1, 1))).open_typed("exact")
    other.load(tmp_path / "e.json")
    assert other.state()[0].reshape(()).item() == Fraction(1, 3)
    obj["state"][0]["values"] = ["1/0"]
    (tmp_path / "bad.json").write_text(json.dumps(obj))
    with pytest.raises(CheckpointError, match="exact rational"):
        other.load(tmp_path / "bad.json")
    with pytest.raises(CheckpointError, match="IEEE"):
        run.save(tmp_path / "e.safetensors")


@settings(max_examples=40, deadline=None)
@given(
    kind=st.sampled_from(["s.json", "s.safetensors", "full.json"]),
    cut=st.floats(0, 1),
    flip=st.none() | st.tuples(st.floats(0, 1), st.integers(1, 255)),
)
def test_corrupted_files_raise_checkpoint_error_or_load(
    kind: str, cut: float, flip: Any, tmp_path_factory: Any
) -> None:
    """Any truncation or byte flip either loads (the file is still valid) or raises a
    CheckpointError that names the file and leaves the session exactly as it was."""
    d = tmp_path_factory.mktemp("corrupt")
    src = Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1)).open()
    src.step(([1.0, 2.0], [0.5]))
    src.save(d / kind, full=kind == "full.json")
    data = bytearray((d / kind).read_bytes())
    if flip is not None:
        pos = min(len(data) - 1, int(flip[0] * len(data)))
        data[pos] ^= flip[1]
    else:
        data = data[: int(cut * len(data))]
    bad = d / ("bad_" + kind)
    bad.write_bytes(bytes(data))
    run = session()
    snap, opt = bits(run.state()), run._opt.copy()
    try:
        run.load(bad)
    except CheckpointError as e:
        assert bad.name in str(e)
        assert bits(run.state()) == snap and run.steps() == 0
        assert all(
            bits(a.values()) == bits(b.values())
            for a, b in zip(opt.slots, run._opt.slots, strict=True)
        )


def test_exact_values_are_canonical_p_over_q(tmp_path: Path) -> None:
    """Written as "p/q" in lowest terms, also for integers; read strictly: anything but
    that canonical form is a CheckpointError naming the path, tensor and element."""
    from fractions import Fraction

    vals = [Fraction(3), Fraction(0), Fraction(-1, 2), Fraction(7, 3)]
    ck.save_state(tmp_path / "e.json", [np.array(vals, dtype=object)], "exact")
    obj = json.loads((tmp_path / "e.json").read_text())
    del obj["digest"]  # a file without digest: the structure checks below apply
    assert obj["state"][0]["values"] == ["3/1", "0/1", "-1/2", "7/3"]
    got = ck.load_state(tmp_path / "e.json", [(4,)], "exact")
    assert got[0].tolist() == vals
    bad_values: list[Any] = [
        "3", "0.5", " 1/2", "1/2 ", "1e-3", "+1/2", "-0/1", "0/2", "01/2", "1/02",
        "2/4", "1/0", "1/-2", "-1/-2", "\u0661/2", "1/2\n", 3, None,
    ]  # fmt: skip
    for v in bad_values:
        obj["state"][0]["values"] = ["1/3", v, "0/1", "1/1"]
        p = tmp_path / "bad.json"
        p.write_text(json.dumps(obj))
        with pytest.raises(CheckpointError) as e:
            ck.load_state(p, [(4,)], "exact")
        msg = str(e.value)
        assert str(p) in msg and "state[0]: value 1:" in msg and "'p/q'" in msg, (v, msg)
