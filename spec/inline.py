"""Inlining composite ops into their bodies.

Invariant: `inline(g)` is a graph of primitive ops only that computes the same values in
every domain, bit for bit, because a composite's semantics *is* its body's (spec.ops).
`value_map[i]` gives the id in the inlined graph of value i of g. Used by checks that
reason per primitive node (the fast-profile error bounds).
"""

from __future__ import annotations

from .graph import Graph, GraphBuilder
from .ops import get_op

__all__ = ["inline"]


def _emit(b: GraphBuilder, g: Graph, ids: list[int]) -> list[int]:
    """Emit g's nodes on b with g's inputs bound to `ids`; return the ids of all values."""
    out = list(ids)
    for node in g.nodes:
        op = get_op(node.op)
        args = [out[a] for a in node.args]
        if op.kind == "composite":
            assert op.body is not None
            body = op.body([b.shape_of(a) for a in args], dict(node.attrs))
            out.append(_emit(b, body, args)[-1])
        else:
            out.append(b.node(node.op, *args, **dict(node.attrs)))
    return out


def inline(g: Graph) -> tuple[Graph, list[int]]:
    b = GraphBuilder()
    ids = [b.input(s) for s in g.inputs]
    value_map = _emit(b, g, ids)
    return b.build(), value_map
