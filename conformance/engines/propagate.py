"""Absolute-value propagation of cotangents: the magnitude scale of the per-node and the
whole-graph checks.

Invariant: `abs_backprop(g, xs, seed)` runs the spec's reverse sweep in `HP` on the exact
values, feeding each node |its cotangent| and adding the *absolute values* of the node's
contributions (Higham-style |.|-propagation with nodes as atoms); it returns one tensor per
input of g. Entries are >= the magnitude of the true cotangent wherever no node cancels
internally.
"""

from __future__ import annotations

from spec.graph import Graph, eval_graph, node_vjp_dense
from spec.tensor import Tensor, TensorPack

from ..bounds.core import HP

__all__ = ["abs_backprop"]


def abs_backprop(g: Graph, xs: list[Tensor], seed: TensorPack) -> list[Tensor]:
    vals = eval_graph(HP, g, xs, (), check=False).tensors
    ct = [t.map(abs) for t in seed.tensors]
    for k in range(len(g.nodes) - 1, -1, -1):
        idx = g.num_inputs + k
        contrib = node_vjp_dense(HP, g.nodes[k], g.shapes[:idx], vals, ct[idx], ())
        for j in range(idx):
            ct[j] = Tensor(
                ct[j].shape,
                tuple(p + abs(q) for p, q in zip(ct[j].data, contrib[j].data, strict=True)),
            )
    return ct[: g.num_inputs]
