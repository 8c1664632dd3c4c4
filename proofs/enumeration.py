"""Systematic enumeration of small typed graphs for the bounded enumerations.

Invariants:
- A `Tier` is a grammar: a list of input contexts Γ, a list of op choices (op name plus
  fixed attributes) and a node bound N. `enumerate_tier` yields *every* graph over each
  context with 0..N nodes where every node is any op choice applied to any tuple of earlier
  value ids (repetitions allowed, so fan-in such as mul(x, x) and fan-out occur) that the
  spec validator accepts (`spec.validate.check_node`, the same check `Graph` runs). Nothing
  is sampled, filtered by value, or deduplicated up to symmetry.
- The order is deterministic: contexts in order; within a context a pre-order walk (a
  graph comes before its extensions), op choices in order, argument tuples in
  lexicographic order. `count_tier` gives the number of graphs per node count.
- `GraphSpec` is a compact, picklable description; `build()` re-validates it as a
  `spec.graph.Graph`.
- `GRAMMARS["full"]` and `GRAMMARS["quick"]` are the grammars of the graph-level
  theorems; their bounds are part of the theorems' scope and of the certificate.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec.errors import GraphError, ShapeError
from spec.graph import Graph, Node
from spec.ops import OPS
from spec.shape import Shape
from spec.validate import check_node

__all__ = [
    "GRAMMARS",
    "GraphSpec",
    "OpChoice",
    "Tier",
    "count_tier",
    "enumerate_tier",
    "grammar_summary",
]


@dataclass(frozen=True)
class OpChoice:
    op: str
    attrs: tuple[tuple[str, Any], ...] = ()

    def text(self) -> str:
        if not self.attrs:
            return self.op
        return self.op + "[" + ", ".join(f"{k}={v}" for k, v in self.attrs) + "]"


@dataclass(frozen=True)
class Tier:
    name: str
    contexts: tuple[tuple[Shape, ...], ...]
    ops: tuple[OpChoice, ...]
    max_nodes: int

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "contexts": [[list(s) for s in c] for c in self.contexts],
            "ops": [o.text() for o in self.ops],
            "max_nodes": self.max_nodes,
        }


@dataclass(frozen=True)
class GraphSpec:
    """A graph as plain tuples: input shapes and (op, args, attrs) per node."""

    inputs: tuple[Shape, ...]
    nodes: tuple[tuple[str, tuple[int, ...], tuple[tuple[str, Any], ...]], ...]

    def build(self) -> Graph:
        return Graph(
            self.inputs, tuple(Node(op, args, dict(attrs)) for op, args, attrs in self.nodes)
        )


def _extend(
    inputs: tuple[Shape, ...], shapes: list[Shape], nodes: list[Any], tier: Tier
) -> Iterator[GraphSpec]:
    yield GraphSpec(inputs, tuple(nodes))
    if len(nodes) == tier.max_nodes:
        return
    for choice in tier.ops:
        arity = OPS[choice.op].arity
        if arity is None:
            raise GraphError(f"enumeration: variadic op {choice.op!r} is not supported")
        for args in itertools.product(range(len(shapes)), repeat=arity):
            try:
                norm, out = check_node(choice.op, list(args), dict(choice.attrs), shapes)
            except (ShapeError, GraphError):
                continue
            node = (choice.op, tuple(args), tuple(sorted(norm.items())))
            yield from _extend(inputs, [*shapes, out], [*nodes, node], tier)


def enumerate_tier(tier: Tier) -> Iterator[GraphSpec]:
    """Every graph of the tier, in the deterministic order of the module invariants."""
    for ctx in tier.contexts:
        yield from _extend(tuple(ctx), list(ctx), [], tier)


def count_tier(tier: Tier) -> dict[int, int]:
    """Number of graphs per node count."""
    counts = dict.fromkeys(range(tier.max_nodes + 1), 0)
    for gs in enumerate_tier(tier):
        counts[len(gs.nodes)] += 1
    return counts


_SCALE = OpChoice("scale", (("c", Fraction(-3, 2)),))
_BREADTH_OPS = (
    OpChoice("add"),
    OpChoice("sub"),
    OpChoice("mul"),
    OpChoice("neg"),
    _SCALE,
    OpChoice("sum"),
    OpChoice("matmul"),
    OpChoice("linear"),
)
_DEPTH_OPS = (OpChoice("sub"), OpChoice("mul"), OpChoice("sum"))
_ONE_INPUT = (((),), ((2,),), ((2, 2),))
_TWO_INPUTS = (((), (2,)), ((2,), (2, 2)))

GRAMMARS: dict[str, tuple[Tier, ...]] = {
    "full": (
        Tier("breadth", _ONE_INPUT, _BREADTH_OPS, 3),
        Tier("two-inputs", _TWO_INPUTS, _BREADTH_OPS, 2),
        Tier("depth", (((2,),),), _DEPTH_OPS, 4),
    ),
    "quick": (
        Tier("breadth", _ONE_INPUT, _BREADTH_OPS, 2),
        Tier("two-inputs", _TWO_INPUTS, _BREADTH_OPS, 1),
        Tier("depth", (((2,),),), _DEPTH_OPS, 3),
    ),
}


def grammar_summary(mode: str) -> str:
    """One line per tier: contexts, ops and the node bound."""
    lines = []
    for t in GRAMMARS[mode]:
        ctxs = " | ".join("[" + ", ".join(str(s) for s in c) + "]" for c in t.contexts)
        lines.append(
            f"{t.name}: Γ ∈ {{{ctxs}}}, ops {{{', '.join(o.text() for o in t.ops)}}}, "
            f"N ≤ {t.max_nodes} nodes"
        )
    return "; ".join(lines)
