"""Engine reproducers (`--engine NAME --replay FILE`) and empty runs: a battery of malformed
reproducers generated here, each a one-line exit 2; an op the engine does not cover is never
"ok"; a run that judged nothing exits 2."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from conformance.__main__ import main
from conformance.engines.base import Engine
from conformance.engines.replay import MAX_ELEMENTS


class NumpyEngine(Engine):
    """abs and neg in NumPy, derivatives by hand (sign(x)*g, -g)."""

    name = "numpy-small"
    dtypes = ("float64", "float32")
    ops: ClassVar[dict[str, Callable[..., Any]]] = {"abs": np.abs, "neg": np.negative}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(self, fn: Any, arrays: Sequence[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        (x,) = arrays
        d = np.sign(x) * cotangent if fn.op == "abs" else -cotangent
        return fn(x), [d.astype(x.dtype)]


ENGINE = f"{__name__}:NumpyEngine"
ONE = "0x3ff0000000000000"


def _t(shape: list[int], values: list[Any], domain: str = "float64") -> dict[str, Any]:
    return {"domain": domain, "shape": shape, "values": values}


def valid(op: str = "abs") -> dict[str, Any]:
    return {
        "engine": "numpy-small",
        "dtype": "float64",
        "op": op,
        "graph": {"format": "torchlean_graph_v1", "inputs": [[2]], "nodes": [
            {"op": op, "args": [0], "attrs": {}}]},
        "inputs": [_t([2], ["0xc000000000000000", ONE])],
        "cotangent": _t([2], [ONE, ONE]),
        "tangents": [_t([2], [ONE, ONE])],
    }  # fmt: skip


def _edit(fn: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    r = copy.deepcopy(valid())
    fn(r)
    return r


def _set(path: Sequence[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def f(r: dict[str, Any]) -> None:
        o = r
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = value

    return f


def _deep(n: int) -> Any:
    o: Any = []
    for _ in range(n):
        o = [o]
    return o


MALFORMED: dict[str, str | dict[str, Any] | list[Any]] = {
    "not json": "{not json",
    "empty file": "",
    "json array": [1, 2],
    "nan literal": '{"dtype": NaN}',
    "missing op": _edit(lambda r: r.pop("op")),
    "unknown key": _edit(_set(["extra"], 1)),
    "dtype float128": _edit(_set(["dtype"], "float128")),
    "dtype exact": _edit(_set(["dtype"], "exact")),
    "graph not an object": _edit(_set(["graph"], [1])),
    "two nodes": _edit(lambda r: r["graph"]["nodes"].append({"op": "neg", "args": [1]})),
    "no node": _edit(_set(["graph", "nodes"], [])),
    "graph format": _edit(_set(["graph", "format"], "v0")),
    "node op differs": _edit(_set(["graph", "nodes", 0, "op"], "neg")),
    "unknown op": _edit(lambda r: (r.update(op="nope"), r["graph"]["nodes"][0].update(op="nope"))),
    "node arg dangling": _edit(_set(["graph", "nodes", 0, "args"], [3])),
    "two inputs for one": _edit(lambda r: r["inputs"].append(_t([2], [ONE, ONE]))),
    "input shape vs graph": _edit(_set(["inputs", 0, "shape"], [1])),
    "value count": _edit(_set(["inputs", 0, "values"], [ONE])),
    "short hex float": _edit(_set(["inputs", 0, "values", 0], "0x1")),
    "not hex": _edit(_set(["inputs", 0, "values", 0], "0xzzzzzzzzzzzzzzzz")),
    "value a number": _edit(_set(["inputs", 0, "values", 0], 1.0)),
    "domain mismatch": _edit(_set(["inputs", 0, "domain"], "binary32")),
    "cotangent shape": _edit(_set(["cotangent"], _t([3], [ONE, ONE, ONE]))),
    "tangent count": _edit(_set(["tangents"], [])),
    "tangent shape": _edit(_set(["tangents", 0], _t([1], [ONE]))),
    "size cap": _edit(_set(["inputs", 0], _t([MAX_ELEMENTS + 1], []))),
    "negative dim": _edit(_set(["inputs", 0, "shape"], [-2])),
    "bool dim": _edit(_set(["inputs", 0, "shape"], [True])),
    "env not ints": _edit(_set(["env"], ["a"])),
    "deep nesting": _edit(_set(["graph", "nodes", 0, "attrs"], {"x": _deep(100)})),
}


def _write(tmp_path: Path, name: str, body: Any) -> str:
    p = tmp_path / (name.replace(" ", "_") + ".json")
    p.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(p)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_reproducer_is_one_line_exit_2(tmp_path: Path, capsys: Any, case: str) -> None:
    path = _write(tmp_path, case, MALFORMED[case])
    assert main(["--engine", ENGINE, "--replay", path]) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err.count("\n") == 1 and "Traceback" not in out.err
    assert out.err.startswith("python -m conformance: ")


def test_missing_file_is_one_line_exit_2(tmp_path: Path, capsys: Any) -> None:
    assert main(["--engine", ENGINE, "--replay", str(tmp_path / "absent.json")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_valid_reproducer_replays_ok_and_a_wrong_engine_fails(tmp_path: Path, capsys: Any) -> None:
    path = _write(tmp_path, "ok", valid())
    assert main(["--engine", ENGINE, "--replay", path]) == 0
    assert capsys.readouterr().out.strip() == "ok"
    wrong = type("Wrong", (NumpyEngine,), {"ops": {"abs": lambda x: np.abs(x) * 1.5}})
    globals()["WrongNumpyEngine"] = wrong
    assert main(["--engine", f"{__name__}:WrongNumpyEngine", "--replay", path]) == 1
    assert capsys.readouterr().out.startswith("FAILED: abs forward")


def test_uncovered_op_is_never_ok(tmp_path: Path, capsys: Any) -> None:
    r = valid()
    r["op"] = r["graph"]["nodes"][0]["op"] = "tanh"
    assert main(["--engine", ENGINE, "--replay", _write(tmp_path, "tanh", r)]) == 2
    out = capsys.readouterr()
    assert "ok" not in out.out and "does not cover op 'tanh'" in out.err


def test_a_run_that_judges_nothing_exits_2(tmp_path: Path, capsys: Any) -> None:
    rep = str(tmp_path / "r")
    assert main(["--engine", ENGINE, "--ops", "tanh", "--max-examples", "2", "--report", rep]) == 2
    assert "no node check ran" in capsys.readouterr().err
    assert main(["--engine", ENGINE, "--dtype", "bfloat16", "--report", rep]) == 2
    assert "runs none of bfloat16" in capsys.readouterr().err
