"""Issue 15, files, training and CLI: a battery of bad inputs, faults and misuse.

Every case asserts the error class, a key phrase of its message and that nothing changed
(parameter bits, optimizer state, step and RNG counters, the file on disk). The fuzz tests
truncate and flip bytes of saved checkpoints at a deterministic sweep of offsets: a file
with a digest either is refused with `CheckpointError` or loads bit-identical to what was
saved; a file without one either is refused or loads with `IntegrityNotCheckedWarning`.
Digests expected here are recomputed with hashlib from the documented rule (sha256 of the
compact JSON text before the digest field), not by the code under test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import warnings
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conformance.cli import parse_args, replay_file, report
from runtime.backends import DTYPE_DOMAIN, NUMPY
from runtime.nn import Linear, Sequential
from runtime.optim import SGD, Adadelta, AdaGrad, Adam, AdamW, OptionError, RMSProp
from runtime.trainer import DataError, Trainer
from runtime.training.checkpoint import IntegrityNotCheckedWarning
from spec.errors import CheckpointError, TorchLeanError
from spec.graph import Graph, Node
from spec.serialize import graph_to_dict, tensor_to_dict
from spec.tensor import Tensor

ROOT = Path(__file__).resolve().parents[1]


def bits(xs: Any) -> list[bytes]:
    return [np.ascontiguousarray(x).tobytes() for x in xs]


def opt_bits(run: Any) -> list[bytes]:
    st = run._opt
    return [b for d in st.slots for b in bits(d.values())] + bits(st.shared.values())


def snapshot(run: Any) -> tuple[Any, ...]:
    return bits(run.state()), opt_bits(run), run.steps(), run._s.rng.counter


def trained(opt: Any = None) -> Any:
    run = Trainer(Sequential(Linear(2, 1)), optimizer=opt or Adam(0.1)).open()
    run.step(([1.0, 2.0], [0.5]))
    run.step(([0.5, -1.0], [1.5]))
    return run


def redigest(obj: dict[str, Any]) -> str:
    """The file text with a digest computed by the documented rule (hashlib here)."""
    body = {k: v for k, v in obj.items() if k != "digest"}
    text = json.dumps(body, separators=(",", ":"))
    d = hashlib.sha256(text.encode()).hexdigest()
    return json.dumps({**body, "digest": f"sha256:{d}"}, separators=(",", ":"))


# --------------------------------------------------------------------------- replay

EVIL = "import pathlib, os\npathlib.Path(os.environ['TL_MARKER']).write_text('ran')\nasarray = 1\n"


def reproducer(dtype: str = "float32", **over: Any) -> dict[str, Any]:
    D = DTYPE_DOMAIN[dtype]
    g = Graph([(2,)], [Node("add", (0, 0), {})])
    x = Tensor.of((2,), [D.from_rational(Fraction(1, 2)), D.from_rational(Fraction(3))])
    seed = [Tensor.of(s, [D.from_rational(Fraction(1))] * 2) for s in g.shapes]
    r = {
        "property": "link",
        "dtype": dtype,
        "kernels": "exact" if dtype == "exact" else "ordered",
        "backend": "numpy",
        "graph": graph_to_dict(g),
        "inputs": [tensor_to_dict(D, x)],
        "seed": [tensor_to_dict(D, t) for t in seed],
        "env": [],
    }
    r.update(over)
    return r


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A module `tl_evil_mod` on sys.path that writes a marker file when imported."""
    (tmp_path / "tl_evil_mod.py").write_text(EVIL)
    marker = tmp_path / "marker"
    monkeypatch.setenv("TL_MARKER", str(marker))
    monkeypatch.syspath_prepend(str(tmp_path))
    return marker


def run_replay(path: Path, capsys: Any, *args: Any) -> tuple[int, str, str]:
    rc = replay_file(str(path), *args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_replay_valid_reproducer_runs(tmp_path: Path, capsys: Any) -> None:
    for dt in ("float32", "exact"):
        p = tmp_path / f"ok_{dt}.json"
        p.write_text(json.dumps(reproducer(dt)))
        assert run_replay(p, capsys) == (0, "ok\n", "")


@pytest.mark.parametrize(
    "over, args, phrase",
    [
        ({"backend": "tl_evil_mod"}, (), "backend 'tl_evil_mod'"),
        ({"backend": "tl_evil_mod:xp"}, (), "only from --backend"),
        ({"property": "differential_tl_evil_mod"}, (), "--against"),
        ({"property": "differential_tl_evil_mod"}, ("numpy", "numpy"), "--against gives"),
        ({"backend": "tl_evil_mod", "dtype": "exact", "kernels": "exact"}, (), "backend"),
    ],
)
def test_replay_never_imports_what_the_file_names(
    over: dict[str, Any], args: Any, phrase: str, evil: Path, tmp_path: Path, capsys: Any
) -> None:
    r = reproducer(over.get("dtype", "float32"))
    r.update(over)
    p = tmp_path / "r.json"
    p.write_text(json.dumps(r))
    rc, out, err = run_replay(p, capsys, *args)
    assert rc == 2 and out == ""
    assert err.startswith("python -m conformance: ") and err.count("\n") == 1
    assert phrase in err
    assert not evil.exists() and "tl_evil_mod" not in sys.modules


def test_replay_cli_end_to_end_refuses_and_imports_nothing(evil: Path, tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps(reproducer(backend="tl_evil_mod")))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}
    proc = subprocess.run(
        [sys.executable, "-m", "conformance", "--replay", str(p)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("python -m conformance: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr and not evil.exists()


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    def f(r: dict[str, Any]) -> Any:
        o: Any = r
        keys = path.split(".")
        for k in keys[:-1]:
            o = o[int(k)] if isinstance(o, list) else o[k]
        last = keys[-1]
        if value is KeyError:
            del o[last]
        elif isinstance(o, list):
            o[int(last)] = value
        else:
            o[last] = value
        return r

    return f


MALFORMED_TEXT = [
    ("not json", "not a valid JSON"),
    ("", "not a valid JSON"),
    ('{"property": NaN}', "constant NaN"),
    ("[" * 100_000 + "]" * 100_000, "nested deeper"),
    ('{"a": ' + "9" * 5000 + "}", "not a valid JSON"),
    ('"\udcff"', "can't decode"),
    ('"a string"', "expected an object"),
]
MALFORMED_OBJ: list[tuple[Callable[[dict[str, Any]], Any], str]] = [
    (lambda r: [r], "expected an object"),
    (_set("property", KeyError), "missing ['property']"),
    (_set("extra", 1), "unexpected ['extra']"),
    (_set("dtype", 3), "dtype: expected one of"),
    (_set("dtype", "float8"), "dtype: expected one of"),
    (_set("dtype", "symbolic"), "dtype: expected one of"),
    (_set("kernels", "turbo"), "kernels: expected one of"),
    (_set("property", "no_such_property"), "unknown property"),
    (_set("property", None), "property: expected a string"),
    (_set("env", [1.5]), "env[0]: expected an integer"),
    (_set("env", [2**70]), "env[0]: expected an integer"),
    (_set("env", "abc"), "env: expected a list"),
    (_set("inputs", {}), "inputs: expected a list"),
    (_set("inputs", []), "the graph has 1 inputs"),
    (_set("inputs.0.shape", [3]), "inputs[0].shape: expected [2]"),
    (_set("inputs.0.shape", [-1]), "non-negative"),
    (_set("inputs.0.values", ["0x3f000000"]), "expected 2 values"),
    (_set("inputs.0.values.0", 7), "values[0]: expected a string"),
    (_set("inputs.0.values.0", "0xZZ"), "not a binary32 value"),
    (_set("inputs.0.values.0", "0x1ffffffff"), "binary32"),
    (_set("inputs.0.domain", "symbolic"), "domain: expected 'binary32'"),
    (_set("seed.0.domain", "binary64"), "domain: expected 'binary32'"),
    (_set("seed", []), "seed tensors"),
    (_set("graph.format", "v0"), "graph"),
    (_set("graph.nodes.0.op", "no_such_op"), "graph"),
    (_set("graph.nodes.0.args", [0, 5]), "graph"),
    (_set("graph.nodes.0.args", "0"), "graph.nodes[0].args: expected a list"),
    (_set("graph.nodes", KeyError), "graph: expected keys"),
    (_set("graph.inputs", [[2, "x"]]), "graph.inputs[0][1]"),
]


@pytest.mark.parametrize("text, phrase", MALFORMED_TEXT)
def test_replay_malformed_text(text: str, phrase: str, tmp_path: Path, capsys: Any) -> None:
    p = tmp_path / "bad.json"
    p.write_bytes(text.encode("utf-8", "surrogateescape"))
    rc, out, err = run_replay(p, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"python -m conformance: {p}: ") and phrase in err, err


@pytest.mark.parametrize("mutate, phrase", MALFORMED_OBJ)
def test_replay_malformed_structure(
    mutate: Any, phrase: str, evil: Path, tmp_path: Path, capsys: Any
) -> None:
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(mutate(reproducer())))
    rc, out, err = run_replay(p, capsys)
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith("python -m conformance: ") and phrase in err, err
    assert not evil.exists()


def test_replay_unreadable_paths(tmp_path: Path, capsys: Any) -> None:
    for p in (tmp_path / "missing.json", tmp_path):
        rc, _, err = run_replay(p, capsys)
        assert rc == 2 and "cannot read" in err and err.count("\n") == 1


# --------------------------------------------------------------------------- CLI flags


@pytest.mark.parametrize(
    "argv, phrase",
    [
        (["--max-examples", "0"], "--max-examples: expected an integer >= 1"),
        (["--max-examples", "-5"], "expected an integer >= 1, got -5"),
        (["--max-examples", "x"], "expected an integer, got 'x'"),
        (["--per-op", "-1"], "--per-op: expected an integer >= 0"),
        (["--session-examples", "-3"], "--session-examples: expected an integer >= 0"),
    ],
)
def test_cli_counts_are_validated(argv: list[str], phrase: str, capsys: Any) -> None:
    with pytest.raises(SystemExit) as e:
        parse_args(argv)
    assert e.value.code == 2 and phrase in capsys.readouterr().err


def test_cli_report_directory_checked_before_the_run(tmp_path: Path, capsys: Any) -> None:
    from conformance.__main__ import main

    (tmp_path / "r.json").mkdir()
    for prefix, phrase in (
        (tmp_path / "missing" / "r", "does not exist"),
        (tmp_path / "r", "is a directory"),
    ):
        rc = main(["--report", str(prefix), "--max-examples", "1", "--session-examples", "0"])
        out = capsys.readouterr()
        assert rc == 2 and phrase in out.err and out.out == ""  # nothing ran


def test_cli_zero_cases_fail(tmp_path: Path, capsys: Any) -> None:
    a = parse_args(["--report", str(tmp_path / "r")])
    assert report(a, NUMPY, []) == 1
    assert "tested 0 cases" in capsys.readouterr().err


# --------------------------------------------------------------------------- save targets


def _file_state(p: Path) -> Any:
    st = os.lstat(p)
    data = p.read_bytes() if p.is_file() else None
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), data


def _targets(tmp: Path) -> list[tuple[str, Any, str]]:
    (tmp / "real.json").write_bytes(b"previous")
    os.symlink(tmp / "real.json", tmp / "link.json")
    os.symlink(tmp / "nowhere.json", tmp / "dangling.json")
    os.mkfifo(tmp / "fifo.json")
    (tmp / "dir.json").mkdir()
    return [
        ("symlink", tmp / "link.json", "symbolic link"),
        ("dangling symlink", tmp / "dangling.json", "symbolic link"),
        ("fifo", tmp / "fifo.json", "not a regular file"),
        ("directory", tmp / "dir.json", "is a directory"),
        ("missing directory", tmp / "nope" / "s.json", "does not exist"),
        ("None", None, "must be a str or os.PathLike"),
        ("int", 3, "must be a str or os.PathLike"),
        ("bytes", b"s.json", "must be a str or os.PathLike"),
        ("empty", "", "non-empty"),
    ]


@pytest.mark.parametrize("full", [False, True])
@pytest.mark.parametrize("index", range(9))
def test_save_refuses_bad_targets(index: int, full: bool, tmp_path: Path) -> None:
    _, target, phrase = _targets(tmp_path)[index]
    run = trained()
    before = {p.name: _file_state(p) for p in tmp_path.iterdir()}
    snap = snapshot(run)
    with pytest.raises(CheckpointError, match=phrase) as e:
        run.save(target, full=full)
    assert repr(target) in str(e.value) or str(target) in str(e.value)
    assert {p.name: _file_state(p) for p in tmp_path.iterdir()} == before  # nothing written
    assert snapshot(run) == snap


def test_save_keeps_permissions_and_new_files_follow_umask(tmp_path: Path) -> None:
    run = trained()
    for mode in (0o644, 0o600, 0o640):
        p = tmp_path / f"m{mode:o}.json"
        p.write_text("old")
        p.chmod(mode)
        run.save(p)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode
    umask = os.umask(0o022)
    os.umask(umask)
    run.save(tmp_path / "new.safetensors")
    assert stat.S_IMODE(os.stat(tmp_path / "new.safetensors").st_mode) == 0o666 & ~umask
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_save_os_error_is_checkpoint_error_and_keeps_old_file(tmp_path: Path) -> None:
    run = trained()
    p = tmp_path / "s.json"
    run.save(p)
    old = p.read_bytes()
    tmp_path.chmod(0o500)  # no new files in the directory
    try:
        if os.access(tmp_path, os.W_OK):
            pytest.skip("running as a user that ignores directory permissions (root)")
        with pytest.raises(CheckpointError, match=str(p)):
            run.save(p)
    finally:
        tmp_path.chmod(0o700)
    assert p.read_bytes() == old


# --------------------------------------------------------------------------- loads


def _full(run: Any, tmp: Path) -> dict[str, Any]:
    run.save(tmp / "full.json", full=True)
    return json.loads((tmp / "full.json").read_text())


def _enc32(v: float) -> int:
    return int(np.array(v, np.float32).view(np.uint32))


LOAD_CASES: list[tuple[str, Callable[[dict[str, Any]], Any], str]] = [
    ("negative second moment", _set("opt_slots.0.1.values.0", _enc32(-1.0)), "v: element 0"),
    ("NaN second moment", _set("opt_slots.0.1.values.0", 0x7FC00000), "finite and >= 0"),
    ("inf first moment", _set("opt_slots.1.0.values.0", 0x7F800000), "m: element 0 is inf"),
    ("beta1_power = 1 after steps", _set("opt_shared.beta1_power.values.0", _enc32(1.0)),
     "beta1_power is 1.0, expected in [0, 1)"),
    ("beta2_power > 1", _set("opt_shared.beta2_power.values.0", _enc32(1.5)), "beta2_power"),
    ("negative power", _set("opt_shared.beta2_power.values.0", _enc32(-0.5)), "beta2_power"),
    ("steps -1", _set("steps", -1), "steps must be an int >= 0"),
    ("steps 1.5", _set("steps", 1.5), "steps must be an int >= 0"),
    ("steps 2**70", _set("steps", 2**70), "integer out of range"),
    ("rng counter bool", _set("rng.counter", True), "rng"),
    ("slot shape", _set("opt_slots.0.0.shape", [2, 1]), "shape"),
    ("missing slot", _set("opt_slots", []), "opt_slots"),
    ("unknown key", _set("extra", 1), "keys"),
    ("optimizer config", _set("optimizer.lr", 0.5), "optimizer"),
]  # fmt: skip


@pytest.mark.parametrize("name, mutate, phrase", LOAD_CASES, ids=[c[0] for c in LOAD_CASES])
def test_full_checkpoint_domain_refused_before_anything_changes(
    name: str, mutate: Any, phrase: str, tmp_path: Path
) -> None:
    src = trained()
    bad = tmp_path / "bad.json"
    bad.write_text(redigest(mutate(_full(src, tmp_path))))  # a valid digest: the domain decides
    text = bad.read_bytes()
    run = trained(Adam(0.1))
    run.step(([3.0, 1.0], [0.0]))
    snap = snapshot(run)
    with pytest.raises(CheckpointError, match=re.escape(phrase)):
        run.load(bad)
    assert snapshot(run) == snap and bad.read_bytes() == text


def test_full_checkpoint_before_first_step_power_is_one(tmp_path: Path) -> None:
    fresh = Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1)).open()
    obj = _full(fresh, tmp_path)
    other = Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1)).open()
    other.load(tmp_path / "full.json")  # powers 1 at step 0: accepted
    obj["opt_shared"]["beta1_power"]["values"] = [_enc32(0.5)]
    (tmp_path / "b.json").write_text(redigest(obj))
    with pytest.raises(CheckpointError, match="exactly 1"):
        other.load(tmp_path / "b.json")


@pytest.mark.parametrize(
    "opt, slot, value, phrase",
    [
        (AdaGrad(0.1), "sum", -1.0, "sum: element 0"),
        (RMSProp(0.1), "square_avg", -2.0, "square_avg"),
        (Adadelta(), "acc_delta", -1.0, "acc_delta"),
        (SGD(0.1, momentum=0.9), "momentum_buffer", float("inf"), "momentum_buffer"),
    ],
)
def test_other_optimizers_state_domains(
    opt: Any, slot: str, value: float, phrase: str, tmp_path: Path
) -> None:
    src = trained(opt)
    obj = _full(src, tmp_path)
    k = list(type(opt).slot_names if slot != "momentum_buffer" else ["momentum_buffer"]).index(slot)
    obj["opt_slots"][0][k]["values"][0] = _enc32(value)
    (tmp_path / "b.json").write_text(redigest(obj))
    run = trained(opt)
    snap = snapshot(run)
    with pytest.raises(CheckpointError, match=phrase):
        run.load(tmp_path / "b.json")
    assert snapshot(run) == snap


STATE_TEXT = [
    ('{"format":"torchlean_state_float32_bits_v1","state":' + "[" * 5000 + "]" * 5000 + "}",
     "nested deeper"),
    ("[" * 200_000, "nested deeper"),
    ('{"format":"torchlean_state_float32_bits_v1","state":[{"shape":[1,2],"values":[NaN,0]}]}',
     "constant NaN"),
    ('{"format":"torchlean_state_float32_bits_v1","state":[{"shape":[1,2],"values":['
     + "1" * 5000 + ",0]}]}", "not a valid checkpoint"),
    ('{"format":"torchlean_state_float32_bits_v1","state":[{"shape":[1,2],"values":['
     + str(2**100) + ",0]}]}", "integer out of range"),
    ('{"format":"torchlean_state_float32_bits_v1","state":[],"digest":"sha256:00"}',
     "is not 'sha256:"),
    ('{"format":"torchlean_state_float32_bits_v1","state":[],"digest":"sha256:' + "0" * 64
     + '"}', "digest mismatch"),
    (b"\xff\xfe".decode("latin-1"), "not"),
]  # fmt: skip


@pytest.mark.parametrize("text, phrase", STATE_TEXT)
@pytest.mark.parametrize("full", [False, True])
def test_hostile_json_files_refused(text: str, phrase: str, full: bool, tmp_path: Path) -> None:
    p = tmp_path / "h.json"
    p.write_bytes(text.encode("utf-8") if text.isascii() else text.encode("latin-1"))
    run = trained()
    snap = snapshot(run)
    with pytest.raises(CheckpointError, match=phrase) as e:
        run.load(p)
    assert str(p) in str(e.value) and snapshot(run) == snap


@pytest.mark.parametrize("kind", ["missing", "dir", "fifo", "None", "int"])
def test_load_bad_paths(kind: str, tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "f.json")
    target = {
        "missing": tmp_path / "m.json", "dir": tmp_path, "fifo": tmp_path / "f.json",
        "None": None, "int": 0,
    }[kind]  # fmt: skip
    run = trained()
    snap = snapshot(run)
    with pytest.raises(CheckpointError, match=r"cannot read|str or os\.PathLike"):
        run.load(target)
    assert snapshot(run) == snap


def test_files_without_digest_load_with_a_note(tmp_path: Path) -> None:
    from safetensors.numpy import load, save

    src = trained()
    for name in ("s.json", "f.json"):
        src.save(tmp_path / name, full=name == "f.json")
        obj = json.loads((tmp_path / name).read_text())
        del obj["digest"]  # as TorchLean writes it
        (tmp_path / name).write_text(json.dumps(obj))
    src.save(tmp_path / "s.safetensors")
    raw = (tmp_path / "s.safetensors").read_bytes()
    n = int.from_bytes(raw[:8], "little")
    meta = json.loads(raw[8 : 8 + n])["__metadata__"]
    del meta["digest"]
    (tmp_path / "s.safetensors").write_bytes(save(load(raw), metadata=meta))
    for name in ("s.json", "f.json", "s.safetensors"):
        run = Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1)).open()
        with pytest.warns(IntegrityNotCheckedWarning, match="integrity not checked"):
            run.load(tmp_path / name)
        assert bits(run.state()) == bits(src.state())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torchlean's own files: no note
        src.save(tmp_path / "own.json")
        trained().load(tmp_path / "own.json")


# --------------------------------------------------------------------------- fuzz


def _offsets(n: int, count: int) -> list[int]:
    return sorted({min(n - 1, (i * n) // count) for i in range(count)} | {0, n - 1})


@pytest.mark.parametrize("kind", ["s.json", "s.safetensors", "full.json", "exact.json"])
def test_fuzz_truncate_and_flip(kind: str, tmp_path: Path) -> None:
    """Single-byte flips (three masks, rotating) and truncations at ~200 offsets per file:
    each load is refused with a CheckpointError naming the file, or loads exactly what was
    saved (state and optimizer bits); a refused load changes nothing."""
    if kind == "exact.json":
        tr = Trainer(Sequential(Linear(2, 1)), optimizer=SGD(Fraction(1, 4)))
        src = tr.open_typed("exact", initial_state=[[[Fraction(1, 3), Fraction(-2)]], [1]])
        src.step(([Fraction(1), Fraction(2)], [Fraction(1, 2)]))
        make = lambda: tr.open_typed("exact")  # noqa: E731
    else:
        src = trained()
        make = lambda: Trainer(Sequential(Linear(2, 1)), optimizer=Adam(0.1)).open()  # noqa: E731
    src.save(tmp_path / kind, full=kind == "full.json")
    data = (tmp_path / kind).read_bytes()
    want_state, want_opt = bits(src.state()), opt_bits(src)
    variants = []
    for j, off in enumerate(_offsets(len(data), 160)):
        b = bytearray(data)
        b[off] ^= (0x01, 0x20, 0xFF)[j % 3]
        variants.append(bytes(b))
    variants += [data[:cut] for cut in _offsets(len(data), 40)]
    run = make()
    refused = loaded = 0
    bad = tmp_path / ("bad_" + kind)
    for v in variants:
        bad.write_bytes(v)
        snap = snapshot(run)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error", IntegrityNotCheckedWarning)
                run.load(bad)
        except CheckpointError as e:
            assert bad.name in str(e)
            assert snapshot(run) == snap
            refused += 1
            continue
        loaded += 1
        assert bits(run.state()) == want_state  # no silent corruption
        if kind == "full.json":
            assert opt_bits(run) == want_opt
    assert refused + loaded == len(variants) >= 150 and refused >= 0.9 * len(variants)


def test_fuzz_without_digest_loads_only_with_a_note(tmp_path: Path) -> None:
    src = trained()
    src.save(tmp_path / "s.json")
    obj = json.loads((tmp_path / "s.json").read_text())
    del obj["digest"]
    data = json.dumps(obj, separators=(",", ":")).encode()
    run = trained()
    for j, off in enumerate(_offsets(len(data), 60)):
        b = bytearray(data)
        b[off] ^= (0x01, 0x20, 0xFF)[j % 3]
        (tmp_path / "b.json").write_bytes(bytes(b))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                run.load(tmp_path / "b.json")
            except CheckpointError:
                continue
        assert any(issubclass(x.category, IntegrityNotCheckedWarning) for x in w)


# --------------------------------------------------------------------------- optimizers


@pytest.mark.parametrize(
    "make, phrase",
    [
        (lambda: Adam(0.1, weight_decy=0.5), "unknown keyword 'weight_decy'"),
        (lambda: Adam(0.1, weight_decy=0.5), "did you mean 'weight_decay'"),
        (lambda: Adam(0.1, bta1=0.5), "did you mean 'beta1'"),
        (lambda: Adam(0.1, weight_decay=0.5), "AdamW"),
        (lambda: Adam(0.1, amsgrad=True), "amsgrad"),
        (lambda: Adam(0.1, betas=(0.5,)), "betas must be a pair"),
        (lambda: Adam(0.1, betas=0.5), "betas must be a pair"),
        (lambda: Adam(0.1, beta1=0.5, betas=(0.5, 0.6)), "together with beta1"),
        (lambda: Adam(0.1, lr=0.2), "lr given twice"),
        (lambda: Adam(0.1, 0.9, 0.99, 1e-8, 0.5), "at most 4 positional"),
        (lambda: AdamW(0.1, foreach=True), "implementation switch"),
        (lambda: SGD(0.1, nesterov=True), "nesterov"),
        (lambda: SGD(0.1, dampening=0.1), "dampening"),
        (lambda: SGD(0.1, weight_decay=1e-4), "weight_decay"),
        (lambda: SGD(0.1, maximize=True), "maximize"),
        (lambda: SGD(0.1, nesterov=0), "nesterov"),
        (lambda: SGD(0.1, momentun=0.9), "did you mean 'momentum'"),
        (lambda: RMSProp(0.1, momentum=0.9), "no momentum"),
        (lambda: RMSProp(0.1, centered=True), "centred"),
        (lambda: AdaGrad(0.1, lr_decay=0.1), "scheduler"),
        (lambda: AdaGrad(0.1, initial_accumulator_value=0.1), "starts at 0"),
        (lambda: Adadelta(weight_decay=0.1), "weight_decay"),
    ],
)
def test_optimizer_keywords_refused(make: Any, phrase: str) -> None:
    with pytest.raises(OptionError, match=phrase.replace("(", r"\(")) as e:
        make()
    assert isinstance(e.value, TypeError) and isinstance(e.value, TorchLeanError)


@pytest.mark.parametrize(
    "make, phrase",
    [
        (lambda: SGD(True), "lr must be a number"),
        (lambda: SGD("0.1"), "lr must be a number"),
        (lambda: SGD(-1.0), "lr = -1.0"),
        (lambda: Adam(betas=(0.9, 1.0)), "beta2 = 1.0"),
        (lambda: Adam(0.1, eps=float("nan")), "eps = nan"),
        (lambda: AdamW(weight_decay=float("inf")), "weight_decay = inf"),
    ],
)
def test_hyperparameters_checked_at_construction(make: Any, phrase: str) -> None:
    with pytest.raises(TorchLeanError, match=phrase):
        make()


def test_pytorch_spellings_mean_the_same_thing() -> None:
    assert Adam(0.1, betas=(0.5, 0.6)).config() == Adam(0.1, 0.5, 0.6).config()
    assert (
        AdamW(0.1, betas=[0.5, 0.6], weight_decay=0.1).config()
        == AdamW(0.1, beta1=0.5, beta2=0.6, weight_decay=0.1).config()
    )
    off = SGD(0.1, momentum=0.5, nesterov=False, dampening=0, weight_decay=0.0, maximize=False)
    assert off.config() == SGD(0.1, 0.5).config()
    assert Adam(0.1, weight_decay=0, amsgrad=False).config() == Adam(0.1).config()
    runs = []
    for opt in (Adam(0.1, betas=(0.5, 0.6)), Adam(0.1, 0.5, 0.6)):
        runs.append(bits(trained(opt).state()))
    assert runs[0] == runs[1]


# --------------------------------------------------------------------------- trainer


@pytest.mark.parametrize(
    "sample, phrase",
    [
        (([1.0, 2.0], [float("nan")]), "sample 0: target: element 0 is nan"),
        (([float("inf"), 2.0], [0.5]), "sample 0: input: element 0 is inf"),
        (([1.0, -float("inf")], [0.5]), "input: element 1 is -inf"),
        (([1.0, 1e39], [0.5]), "element 1 is inf"),  # inf after rounding to binary32
        ([([1.0, 2.0], [0.5]), ([1.0, 2.0], [float("nan")])], "sample 1: target"),
    ],
)
def test_non_finite_training_data_refused(sample: Any, phrase: str) -> None:
    run = trained()
    snap = snapshot(run)
    with pytest.raises(DataError, match=phrase):
        run.step(sample, batch=isinstance(sample, list))
    assert snapshot(run) == snap


def test_empty_eval_and_finished_session() -> None:
    # TorchLean: an empty stream's mean is zero, and a finished session goes on
    # training without changing its Result
    run = trained()
    assert run.eval([]) == 0.0
    res = run.finish()
    assert res.eval([]) == 0.0
    kept = [a.tobytes() for a in res.state()]
    run.step(([1.0, 2.0], [0.5]))
    run.step([([1.0, 2.0], [0.5])], batch=True)
    assert [a.tobytes() for a in res.state()] == kept
    assert [a.tobytes() for a in run.state()] != kept
    assert isinstance(run.eval([([1.0, 2.0], [0.5])]), float)  # reading still works
