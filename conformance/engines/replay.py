"""Engine reproducers: the one-node JSON a failure report carries, written and replayed.

Invariants:
- `make_repro` writes: engine, dtype, op, a one-node graph, the inputs, the cotangent, the
  tangents (bit patterns, `spec.serialize`) and, where `select` reads it, `env`.
- `read_engine_repro(path)` reads the file under `conformance.reproducer.read_json`'s
  limits (at most `MAX_BYTES`, strict JSON, bounded nesting) and `validate_engine_repro`
  checks it before anything runs: only the known keys, dtype one of the IEEE dtypes, a
  graph of exactly one node whose op is `op` applied to every input in order, every tensor
  in the dtype's domain with the declared shape (inputs and tangents: the graph's inputs;
  the cotangent: the node's output), every value the canonical full-width hex pattern (a
  short hex float is refused), at most `MAX_ELEMENTS` elements over all tensors (checked on
  the declared shapes and value lists before decoding), `env` a short list of ints. Every
  problem is one `ReproducerError` naming the file and the field.
- `replay(engine, path)` prints one line and returns the exit code: 0 ok (naming any
  convention other than `signed_zero` that explained a difference; with
  `strict_conventions` such a convention fails), 1 a wrong or refused result, 2 a file that
  cannot be replayed or an op the engine does not cover (never "ok" for it).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runtime.backends import DTYPE_DOMAIN
from spec.errors import TorchLeanError
from spec.graph import Graph, Node
from spec.serialize import graph_from_dict, graph_to_dict, tensor_to_dict
from spec.tensor import Tensor

from ..reproducer import ReproducerError, read_json
from .base import Engine, ieee_domain
from .conventions import SIGNED_ZERO
from .local import NodeResult, check_node

__all__ = [
    "MAX_ELEMENTS",
    "EngineRepro",
    "make_repro",
    "read_engine_repro",
    "replay",
    "replay_node",
    "validate_engine_repro",
]

MAX_ELEMENTS = 10**6  # over every tensor of one reproducer
_IEEE = ("float64", "float32", "bfloat16", "float16")
_KEYS = ("engine", "dtype", "op", "graph", "inputs", "cotangent", "tangents", "env")
_REQUIRED = ("dtype", "op", "graph", "inputs", "cotangent")


def make_repro(
    engine: Engine,
    dtype: str,
    node: Node,
    xs: Sequence[Tensor],
    g: Tensor,
    ts: Sequence[Tensor],
    env: Sequence[int] = (),
) -> dict[str, Any]:
    """The one-node reproducer of `node` on these values (see the module docstring)."""
    D = ieee_domain(dtype)
    one = Graph([x.shape for x in xs], [Node(node.op, tuple(range(len(xs))), node.attrs)])
    out: dict[str, Any] = {
        "engine": engine.name,
        "dtype": dtype,
        "op": node.op,
        "graph": graph_to_dict(one),
        "inputs": [tensor_to_dict(D, x) for x in xs],
        "cotangent": tensor_to_dict(D, g),
        "tangents": [tensor_to_dict(D, t) for t in ts],
    }
    if env:
        out["env"] = [int(i) for i in env]
    return out


@dataclass(frozen=True)
class EngineRepro:
    dtype: str
    node: Node
    inputs: tuple[Tensor, ...]
    cotangent: Tensor
    tangents: tuple[Tensor, ...]
    env: tuple[int, ...]


def _fail(where: str, msg: str) -> ReproducerError:
    return ReproducerError(f"{where}: {msg}")


def _declared(d: Any, where: str) -> tuple[tuple[int, ...], list[Any]]:
    """A tensor dict's declared shape and value list, structure checked (no decoding)."""
    if not isinstance(d, dict) or set(d) != {"domain", "shape", "values"}:
        raise _fail(where, "expected an object with keys domain, shape, values")
    shape, values = d["shape"], d["values"]
    if not isinstance(shape, list) or len(shape) > 8:
        raise _fail(f"{where}.shape", "expected a list of at most 8 dimensions")
    if not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n for n in shape):
        raise _fail(f"{where}.shape", f"expected non-negative integers, got {shape!r:.60}")
    if not isinstance(values, list):
        raise _fail(f"{where}.values", "expected a list of hex strings")
    return tuple(shape), values


def _tensor(d: dict[str, Any], dtype: str, shape: tuple[int, ...], where: str) -> Tensor:
    D = DTYPE_DOMAIN[dtype]
    declared, values = _declared(d, where)
    if d["domain"] != D.name:
        raise _fail(
            f"{where}.domain", f"expected {D.name!r} (dtype {dtype}), got {d['domain']!r:.40}"
        )
    if declared != shape:
        raise _fail(f"{where}.shape", f"expected {list(shape)}, got {list(declared)}")
    if len(values) != math.prod(shape):
        raise _fail(f"{where}.values", f"expected {math.prod(shape)} values, got {len(values)}")
    out = []
    for i, s in enumerate(values):
        width = 2 + D.width // 4
        if not isinstance(s, str) or len(s) != width or not s.startswith("0x"):
            raise _fail(
                f"{where}.values[{i}]", f"expected a {width}-character hex pattern, got {s!r:.40}"
            )
        try:
            v = D.decode(s)
        except (ValueError, TypeError) as e:
            raise _fail(f"{where}.values[{i}]", f"not a {D.name} value ({e})") from None
        if D.encode(v) != s.lower():
            raise _fail(f"{where}.values[{i}]", f"{s!r} is not a canonical {D.name} pattern")
        out.append(v)
    return Tensor.of(shape, out)


def _size_cap(obj: dict[str, Any]) -> None:
    """Refuse more than `MAX_ELEMENTS` declared elements before anything is decoded."""
    ds = [*obj["inputs"], obj["cotangent"], *obj.get("tangents", [])]
    total = 0
    for i, d in enumerate(ds):
        shape, values = _declared(d, f"tensor {i}")
        total += max(math.prod(shape), len(values))
        if total > MAX_ELEMENTS:
            raise _fail("tensors", f"more than {MAX_ELEMENTS} elements (the replay size cap)")


def _graph(obj: dict[str, Any]) -> Node:
    gd = obj["graph"]
    if not isinstance(gd, dict) or not isinstance(gd.get("nodes"), list) or len(gd["nodes"]) != 1:
        raise _fail("graph", "expected a graph object of exactly one node")
    if not isinstance(gd.get("inputs"), list) or len(gd["inputs"]) != len(obj["inputs"]):
        raise _fail("graph.inputs", f"expected {len(obj['inputs'])} input shapes")
    try:
        g = graph_from_dict(gd)
    except TorchLeanError as e:
        raise _fail("graph", str(e)) from None
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError) as e:
        raise _fail("graph", f"malformed ({e!r:.200})") from None
    (node,) = g.nodes
    if node.op != obj["op"] or node.args != tuple(range(len(g.inputs))):
        raise _fail("graph.nodes[0]", f"expected op {obj['op']!r:.40} on every input in order")
    return node


def validate_engine_repro(obj: Any, where: str = "reproducer") -> EngineRepro:
    """The checked, decoded engine reproducer (see the module docstring)."""
    try:
        return _validate(obj)
    except ReproducerError as e:
        raise ReproducerError(f"{where}: {e}") from None


def _validate(obj: Any) -> EngineRepro:
    if not isinstance(obj, dict):
        raise _fail("reproducer", f"expected an object, got {type(obj).__name__}")
    missing = [k for k in _REQUIRED if k not in obj]
    extra = sorted(set(obj) - set(_KEYS))
    if missing or extra:
        raise _fail("reproducer", f"missing keys {missing}, unexpected keys {extra}")
    dt = obj["dtype"]
    if dt not in _IEEE:
        raise _fail("dtype", f"expected one of {list(_IEEE)}, got {dt!r:.40}")
    if not isinstance(obj["op"], str) or not isinstance(obj.get("engine", ""), str):
        raise _fail("op", "expected op (and engine) to be strings")
    if not isinstance(obj["inputs"], list) or not isinstance(obj.get("tangents", []), list):
        raise _fail("inputs", "expected inputs (and tangents) to be lists of tensors")
    _size_cap(obj)
    env = obj.get("env", [])
    if (
        not isinstance(env, list)
        or len(env) > 64
        or not all(isinstance(i, int) and not isinstance(i, bool) and abs(i) < 2**31 for i in env)
    ):
        raise _fail("env", "expected at most 64 integers")
    node = _graph(obj)
    shapes = [tuple(int(n) for n in s) for s in obj["graph"]["inputs"]]
    xs = tuple(
        _tensor(d, dt, s, f"inputs[{i}]")
        for i, (d, s) in enumerate(zip(obj["inputs"], shapes, strict=True))
    )
    out_shape = Graph(shapes, [node]).shapes[-1]
    g = _tensor(obj["cotangent"], dt, tuple(out_shape), "cotangent")
    tds = obj.get("tangents", obj["inputs"])  # older reproducers: the inputs as tangents
    if len(tds) != len(xs):
        raise _fail("tangents", f"expected {len(xs)} tensors, got {len(tds)}")
    ts = tuple(
        _tensor(d, dt, s, f"tangents[{i}]")
        for i, (d, s) in enumerate(zip(tds, shapes, strict=True))
    )
    return EngineRepro(dt, node, xs, g, ts, tuple(int(i) for i in env))


def read_engine_repro(path: str) -> EngineRepro:
    """Read and validate the engine reproducer at `path` (see the module docstring)."""
    return validate_engine_repro(read_json(path), path)


def replay_node(engine: Engine, repro: dict[str, Any]) -> NodeResult:
    """Re-run a per-node reproducer (as written in a failure report) on `engine`."""
    r = validate_engine_repro(repro)
    return check_node(
        engine, r.dtype, r.node.op, dict(r.node.attrs), r.inputs, r.cotangent, r.tangents, r.env
    )


def replay(engine: Engine, path: str, strict_conventions: bool = False) -> int:
    """Replay the file at `path` on `engine`: one line, and the exit code (module
    docstring)."""
    try:
        r = read_engine_repro(path)
        if r.dtype not in engine.dtypes:
            raise _fail(path, f"engine {engine.name!r} does not run {r.dtype}")
        if r.node.op not in engine.ops:
            raise _fail(path, f"engine {engine.name!r} does not cover op {r.node.op!r}")
        try:
            res = check_node(
                engine, r.dtype, r.node.op, dict(r.node.attrs), r.inputs, r.cotangent,
                r.tangents, r.env,
            )  # fmt: skip
        except (TorchLeanError, ValueError, IndexError, KeyError, TypeError) as e:
            raise _fail(path, f"cannot replay {r.node.op!r} ({type(e).__name__}: {e})") from None
        if not res.covered:
            raise _fail(
                path, f"the spec refuses these inputs of {r.node.op!r} (outside its domain)"
            )
    except ReproducerError as e:
        print(f"python -m conformance: {e}", file=sys.stderr)
        return 2
    if res.refused is not None:
        print(f"REFUSED: {r.node.op}: {res.refused}")
        return 1
    if res.wrong is not None:
        print(f"FAILED: {res.wrong}")
        return 1
    convs = [n for n in res.conventions if n != SIGNED_ZERO.name]
    if convs and strict_conventions:
        print(f"FAILED (strict conventions): {r.node.op} differs by {', '.join(convs)}")
        return 1
    print("ok" + (f" (conventions: {', '.join(convs)})" if convs else ""))
    return 0
