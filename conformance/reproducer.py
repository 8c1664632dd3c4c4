"""Reading and validating a JSON reproducer (`python -m conformance --replay FILE`).

Invariants:
- A reproducer is data and never chooses code: nothing in it is imported, evaluated or
  used to pick a backend. Its optional `backend` field and the reference backend of a
  `differential_<name>` property are only compared, as strings, with the backends given
  on the command line (`check_backends`); a mismatch is a `ReproducerError` and the file
  is not run.
- `read_reproducer(path)` reads at most `MAX_BYTES`, parses strict JSON (no NaN/Infinity
  literals) and refuses nesting deeper than `MAX_DEPTH`; `validate(obj)` checks the
  structure against `SCHEMA` (keys, types, enums, integer and length bounds) and only then
  decodes the graph and tensors, checking that every tensor is in the dtype's domain and
  that the shapes fit the graph (inputs = `graph.inputs`, seed = `graph.shapes`).
- Every problem is one `ReproducerError` (a `TorchLeanError`) whose message names the file
  or the field (`inputs[1].shape`, ...) and what was expected; no other exception escapes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.backends import DTYPE_DOMAIN
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.serialize import graph_from_dict
from spec.tensor import Tensor, TensorPack

__all__ = [
    "DTYPES",
    "KERNELS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "SCHEMA",
    "Reproducer",
    "ReproducerError",
    "check_backends",
    "read_json",
    "read_reproducer",
    "validate",
    "validate_session_machine",
]

MAX_BYTES = 64 * 2**20
MAX_DEPTH = 32
MAX_ITEMS = 10**6  # tensor elements, graph nodes, list lengths
DTYPES = ("exact", "float64", "float32", "bfloat16", "float16")
KERNELS = ("exact", "fast", "ordered")


class ReproducerError(TorchLeanError, ValueError):
    """A reproducer file that cannot be replayed: unreadable, malformed, or naming a
    backend other than the command line's."""


# --------------------------------------------------------------------------- schema
# A schema is one of: a type name ("str", "int", "object"), ("enum", values),
# ("list", item schema), ("dict", {key: schema}, optional keys). Strings are at most
# 10,000 characters, ints in [-2**63, 2**63), lists at most MAX_ITEMS long.

Schema = Any
_TENSOR: Schema = (
    "dict",
    {"domain": "str", "shape": ("list", "nat"), "values": ("list", "str")},
    (),
)
_NODE: Schema = ("dict", {"op": "str", "args": ("list", "nat"), "attrs": "object"}, ("attrs",))
_GRAPH: Schema = (
    "dict",
    {"format": "str", "inputs": ("list", ("list", "nat")), "nodes": ("list", _NODE)},
    (),
)
SCHEMA: Schema = (
    "dict",
    {
        "property": "str",
        "dtype": ("enum", DTYPES),
        "kernels": ("enum", KERNELS),
        "backend": "str",
        "graph": _GRAPH,
        "inputs": ("list", _TENSOR),
        "seed": ("list", _TENSOR),
        "env": ("list", "int"),
    },
    ("backend", "env"),
)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63


_LEAF: dict[str, tuple[Callable[[Any], bool], str]] = {
    "str": (lambda v: isinstance(v, str) and len(v) <= 10_000, "a string (<= 10,000 chars)"),
    "int": (_is_int, "an integer in [-2**63, 2**63)"),
    "nat": (lambda v: _is_int(v) and v >= 0, "a non-negative integer < 2**63"),
    "object": (lambda v: isinstance(v, dict), "an object"),
}


def _check(v: Any, schema: Schema, where: str) -> None:
    if isinstance(schema, str):
        ok, want = _LEAF[schema]
        if not ok(v):
            raise ReproducerError(f"{where}: expected {want}, got {_show(v)}")
        return
    kind = schema[0]
    if kind == "enum":
        if v not in schema[1]:
            raise ReproducerError(f"{where}: expected one of {list(schema[1])}, got {_show(v)}")
    elif kind == "list":
        if not isinstance(v, list) or len(v) > MAX_ITEMS:
            raise ReproducerError(f"{where}: expected a list (<= {MAX_ITEMS}), got {_show(v)}")
        for i, item in enumerate(v):
            _check(item, schema[1], f"{where}[{i}]")
    else:  # dict
        _, keys, optional = schema
        if not isinstance(v, dict):
            raise ReproducerError(f"{where}: expected an object, got {_show(v)}")
        missing = [k for k in keys if k not in v and k not in optional]
        extra = sorted(set(v) - set(keys))
        if missing or extra:
            raise ReproducerError(
                f"{where}: expected keys {sorted(keys)} (optional {sorted(optional)}); "
                f"missing {missing}, unexpected {extra}"
            )
        for k, sub in keys.items():
            if k in v:
                _check(v[k], sub, f"{where}.{k}" if where != "reproducer" else k)


def _show(v: Any) -> str:
    r = repr(v)
    return f"{type(v).__name__} {r[:60]}{'...' if len(r) > 60 else ''}"


def _depth_ok(obj: Any) -> bool:
    stack = [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if d > MAX_DEPTH:
            return False
        if isinstance(o, dict):
            stack.extend((x, d + 1) for x in o.values())
        elif isinstance(o, list):
            stack.extend((x, d + 1) for x in o)
    return True


# --------------------------------------------------------------------------- decoding


@dataclass(frozen=True)
class Reproducer:
    property: str
    dtype: str
    kernels: str
    backend: str | None
    graph: Graph
    inputs: tuple[Tensor, ...]
    seed: TensorPack
    env: tuple[int, ...]


def _tensor(d: dict[str, Any], dtype: str, shape: tuple[int, ...], where: str) -> Tensor:
    D = DTYPE_DOMAIN[dtype]
    if d["domain"] != D.name:
        raise ReproducerError(
            f"{where}.domain: expected {D.name!r} (dtype {dtype}), got {d['domain']!r}"
        )
    if tuple(d["shape"]) != shape:
        raise ReproducerError(f"{where}.shape: expected {list(shape)}, got {d['shape']}")
    n = math.prod(shape)
    if len(d["values"]) != n:
        raise ReproducerError(f"{where}.values: expected {n} values, got {len(d['values'])}")
    out = []
    for i, s in enumerate(d["values"]):
        try:
            v = D.decode(s)
            canonical = D.encode(v) == s
        except (ValueError, TypeError, ArithmeticError, OverflowError, TorchLeanError) as e:
            raise ReproducerError(f"{where}.values[{i}]: not a {D.name} value ({e})") from None
        if not canonical:
            raise ReproducerError(
                f"{where}.values[{i}]: {s!r:.60} is not a canonical {D.name} encoding"
            )
        out.append(v)
    return Tensor.of(shape, out)


def validate(obj: Any, where: str = "reproducer") -> Reproducer:
    """The checked, decoded reproducer (see the module docstring), else `ReproducerError`."""
    if not _depth_ok(obj):
        raise ReproducerError(f"{where}: JSON nested deeper than {MAX_DEPTH} levels")
    _check(obj, SCHEMA, "reproducer")
    gd = obj["graph"]
    if len(gd["nodes"]) > MAX_ITEMS or any(math.prod(s) > MAX_ITEMS for s in gd["inputs"]):
        raise ReproducerError(f"{where}: graph too large")
    try:
        g = graph_from_dict(gd)
        shapes = [tuple(s) for s in g.shapes]
    except TorchLeanError as e:
        raise ReproducerError(f"graph: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError, ArithmeticError, RecursionError) as e:
        raise ReproducerError(f"graph: malformed ({e!r:.200})") from None
    dt = obj["dtype"]
    n_in = len(g.inputs)
    if len(obj["inputs"]) != n_in or len(obj["seed"]) != len(shapes):
        raise ReproducerError(
            f"inputs/seed: the graph has {n_in} inputs and {len(shapes)} values; got "
            f"{len(obj['inputs'])} inputs and {len(obj['seed'])} seed tensors"
        )
    xs = tuple(
        _tensor(d, dt, tuple(g.inputs[i]), f"inputs[{i}]") for i, d in enumerate(obj["inputs"])
    )
    seed = TensorPack.of(
        [_tensor(d, dt, shapes[i], f"seed[{i}]") for i, d in enumerate(obj["seed"])]
    )
    return Reproducer(
        obj["property"], dt, obj["kernels"], obj.get("backend"), g, xs, seed,
        tuple(obj.get("env", ())),
    )  # fmt: skip


def _refuse_constant(name: str) -> Any:
    raise ReproducerError(f"the JSON constant {name} is not allowed")


def read_reproducer(path: str) -> Reproducer:
    """Read, parse and `validate` the reproducer file at `path`."""
    obj = read_json(path)
    try:
        return validate(obj, path)
    except ReproducerError as e:
        raise ReproducerError(f"{path}: {e}") from None


def read_json(path: str) -> Any:
    """The JSON document in `path`, read under the size, depth and constant limits (not
    yet validated as a reproducer)."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)
    except (OSError, TypeError, ValueError) as e:
        raise ReproducerError(
            f"{path}: cannot read ({getattr(e, 'strerror', None) or e})"
        ) from None
    if len(data) > MAX_BYTES:
        raise ReproducerError(f"{path}: larger than {MAX_BYTES} bytes")
    try:
        obj = json.loads(data.decode("utf-8"), parse_constant=_refuse_constant)
    except ReproducerError as e:
        raise ReproducerError(f"{path}: {e}") from None
    except RecursionError:
        raise ReproducerError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:  # JSONDecodeError, UnicodeDecodeError, the int digit limit
        raise ReproducerError(f"{path}: not a valid JSON reproducer ({e})") from None
    if not _depth_ok(obj):
        raise ReproducerError(f"{path}: JSON nested deeper than {MAX_DEPTH} levels")
    return obj


def validate_session_machine(obj: Any, where: str, backend: str) -> dict[str, Any]:
    """A Session state-machine reproducer ({"property", "hypothesis", "blob", "step_count"}),
    checked before it is replayed; the state machine runs on NumPy only."""
    if backend != "numpy":
        raise ReproducerError(
            f"{where}: the Session state machine replays on --backend numpy only, got {backend!r}"
        )
    want = {"hypothesis": str, "blob": str}
    for key, typ in want.items():
        if not isinstance(obj.get(key), typ):
            raise ReproducerError(f"{where}: field {key!r} must be a string")
    steps = obj.get("step_count", 20)
    if not _is_int(steps) or not 1 <= steps <= 10_000:
        raise ReproducerError(f"{where}: field 'step_count' must be an int in [1, 10000]")
    if len(obj["blob"]) > 1_000_000:
        raise ReproducerError(f"{where}: field 'blob' is longer than 1000000 characters")
    return obj


def check_backends(r: Reproducer, backend: str, backend_name: str, against: str | None,
                   against_name: str | None) -> None:  # fmt: skip
    """Refuse a reproducer whose backend or differential reference backend is not the
    command line's (`backend`/`against` as given, `*_name` the backends' own names)."""
    if r.backend is not None and r.backend not in (backend, backend_name):
        raise ReproducerError(
            f"the reproducer names backend {r.backend!r} but the command line gives "
            f"{backend!r}; the backend comes only from --backend (the file is not run)"
        )
    if r.property.startswith("differential_"):
        ref = r.property.removeprefix("differential_")
        if against is None:
            raise ReproducerError(
                f"property {r.property!r} compares with backend {ref!r}: give it with "
                "--against (the file never chooses a backend; it is not run)"
            )
        if ref not in (against, against_name):
            raise ReproducerError(
                f"property {r.property!r} compares with backend {ref!r} but --against gives "
                f"{against!r} (the file is not run)"
            )
