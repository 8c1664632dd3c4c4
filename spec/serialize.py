"""Lossless JSON for graphs and tensors.

Invariants: `graph_from_json(graph_to_json(g)) == g` exactly; rationals travel as "p/q"
strings and IEEE values as hex bit patterns, never as decimal floats. Decoding validates the
graph like any other construction.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from .domains import Domain, domain_by_name
from .errors import GraphError, TorchLeanError
from .graph import Graph, Node
from .tensor import Tensor
from .validate import normalize_attrs

__all__ = [
    "GRAPH_FORMAT",
    "graph_from_dict",
    "graph_from_json",
    "graph_to_dict",
    "graph_to_json",
    "tensor_from_dict",
    "tensor_to_dict",
]

GRAPH_FORMAT = "torchlean_graph_v1"


def _enc(v: Any) -> Any:
    if isinstance(v, Fraction):
        return {"q": f"{v.numerator}/{v.denominator}"}
    if isinstance(v, tuple):
        return [_enc(x) for x in v]
    return v


def _dec(v: Any) -> Any:
    if isinstance(v, dict) and set(v) == {"q"}:
        return Fraction(v["q"])
    if isinstance(v, list):
        return tuple(_dec(x) for x in v)
    return v


def graph_to_dict(g: Graph) -> dict[str, Any]:
    return {
        "format": GRAPH_FORMAT,
        "inputs": [list(s) for s in g.inputs],
        "nodes": [
            {
                "op": n.op,
                "args": list(n.args),
                "attrs": {k: _enc(v) for k, v in n.attrs.items() if v is not None},
            }
            for n in g.nodes
        ],
    }


def graph_from_dict(d: dict[str, Any]) -> Graph:
    if not isinstance(d, dict) or d.get("format") != GRAPH_FORMAT:
        got = d.get("format") if isinstance(d, dict) else type(d).__name__
        raise GraphError(f"graph JSON: expected format {GRAPH_FORMAT!r}, got {got!r}")
    try:
        nodes = [
            Node(
                n["op"],
                tuple(n["args"]),
                normalize_attrs(n["op"], {k: _dec(v) for k, v in n.get("attrs", {}).items()}),
            )
            for n in d["nodes"]
        ]
        return Graph([tuple(s) for s in d["inputs"]], nodes)
    except TorchLeanError:
        raise
    except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError) as e:
        # e.g. a missing key, attrs that are not an object, {"q": "1/0"} or {"q": "abc"}
        raise GraphError(f"graph JSON: malformed ({e!r})") from None


def graph_to_json(g: Graph) -> str:
    return json.dumps(graph_to_dict(g), sort_keys=True)


def graph_from_json(s: str) -> Graph:
    try:
        d = json.loads(s)
    except json.JSONDecodeError as e:
        raise GraphError(f"graph JSON: not valid JSON ({e})") from None
    return graph_from_dict(d)


def tensor_to_dict(D: Domain, t: Tensor) -> dict[str, Any]:
    return {"domain": D.name, "shape": list(t.shape), "values": [D.encode(v) for v in t.data]}


def tensor_from_dict(d: dict[str, Any]) -> tuple[Domain, Tensor]:
    D = domain_by_name(d["domain"])
    return D, Tensor.of(d["shape"], (D.decode(v) for v in d["values"]))
