"""Pointing a failure at the op: which node of the graph (and which step of a composite's
body) a mismatch message is about.

Invariants:
- `describe(g, i)` names value i: "input k" or "%i = op(%a, %b)".
- `locate(g, message, recheck)` never raises. It reads the first "%i" of the message: a
  value mismatch is blamed on the op that produced %i, a cotangent mismatch on the ops that
  consume %i (their VJPs produce it). When the blamed op is composite and `recheck` is
  given, the case is re-run on the inlined graph (`recheck(inlined graph, value map)` ->
  the new message or None) and the first mismatching primitive step is named inside its
  composite ("step %j = reduce_max(...) of max_pool2d %i").
"""

from __future__ import annotations

import re
from collections.abc import Callable

from spec.graph import Graph
from spec.inline import inline
from spec.ops import get_op

__all__ = ["describe", "locate", "owner_of_inlined"]

_VALUE = re.compile(r"%(\d+)")


def describe(g: Graph, i: int) -> str:
    if i < g.num_inputs:
        return f"input {i} (%{i})"
    node = g.nodes[i - g.num_inputs]
    args = ", ".join(f"%{a}" for a in node.args)
    return f"%{i} = {node.op}({args})"


def _blamed(g: Graph, i: int, cotangent: bool) -> list[int]:
    if not cotangent:
        return [i] if i >= g.num_inputs else []
    return [g.num_inputs + k for k, n in enumerate(g.nodes) if i in n.args]


def owner_of_inlined(value_map: list[int], j: int) -> int:
    """The original value whose body (or which itself) became inlined value j."""
    for i, m in enumerate(value_map):
        if m >= j:
            return i
    return len(value_map) - 1


def locate(
    g: Graph,
    message: str | None,
    recheck: Callable[[Graph, list[int]], str | None] | None = None,
) -> str:
    try:
        m = _VALUE.search(message or "")
        if m is None or int(m.group(1)) >= g.num_values:
            return ""
        i = int(m.group(1))
        cot = "cotangent" in (message or "")[: m.start()]
        blamed = _blamed(g, i, cot)
        what = f"{'cotangent' if cot else 'value'} of {describe(g, i)}"
        if not blamed:
            return f"{what} (a seed or input)"
        ops = "; ".join(describe(g, b) for b in blamed)
        out = f"{what}; produced by {ops}"
        composite = any(get_op(g.nodes[b - g.num_inputs].op).kind == "composite" for b in blamed)
        if composite and recheck is not None:
            gi, vmap = inline(g)
            msg2 = recheck(gi, vmap)
            m2 = _VALUE.search(msg2 or "")
            if m2 is not None:
                j = int(m2.group(1))
                cot2 = "cotangent" in (msg2 or "")[: m2.start()]
                steps = _blamed(gi, j, cot2) or [j]
                parts = []
                for s in steps:
                    o = owner_of_inlined(vmap, s)
                    parts.append(f"step {describe(gi, s)} of {describe(g, o)}")
                out += "; inside the body: " + "; ".join(parts)
        return out
    except Exception as e:  # locating is a help: it must never hide the failure
        return f"(could not locate: {type(e).__name__})"
