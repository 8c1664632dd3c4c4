"""Whole-graph check: the engine's gradients of a random graph (its own ops composed, its
own autograd) against the exact spec gradient, measured against a propagated bound.

Propagation method (first order, stated as such): every node k contributes at most
F_k + B_k ulps (its forward and backward budgets, `budgets.budget_for`, with n its largest
input size), and these add along the graph; the ulp is that of M, the input gradient
propagated with absolute values through the inlined graph (composites as their
primitives): M = backprop of |seed| through every primitive's exact VJP on the exact
values, each node's contributions made absolute before they are summed (Higham-style
|.|-propagation, `propagate.abs_backprop`). So

    bound_i = (sum_k (F_k + B_k)) * ulp(M_i)   for every element i of every input gradient.

It ignores second-order terms (a forward error changing a later derivative is covered only
through the forward budgets), so it is reported as a ratio error/bound, never a failure by
itself (per-node checks decide failures). Elements where the exact or the engine gradient
is not finite are counted, not measured. Graphs with a node that differed by a convention
are not measured (the engine computes another function there). A forward-only engine's
graphs are checked on their output instead (`check_graph_forward`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2

from spec.errors import TorchLeanError
from spec.graph import Graph, backprop_ctx, eval_graph
from spec.inline import inline
from spec.ops import get_op
from spec.shape import size
from spec.tensor import Tensor, TensorPack

from ..bounds.core import HP, exact_q, fmt, ulp
from .base import Engine, KeyedCall, freeze, from_numpy, ieee_domain, refusal, to_numpy
from .budgets import budget_for
from .propagate import abs_backprop
from .scale import lift, safe_float

__all__ = ["CONSTANT_OPS", "GraphCall", "GraphResult", "check_graph", "check_graph_forward"]

CONSTANT_OPS = ("const", "one_hot")  # materialised from their exact constants (no arithmetic)


@dataclass
class GraphResult:
    ratio: float = 0.0
    max_ulp: float = 0.0
    nonfinite: int = 0
    refused: str | None = None
    worst: str | None = None  # where the largest error/bound ratio was seen


class GraphCall(KeyedCall):
    """The engine's ops composed along a graph (constants materialised in the dtype); `key`
    names every node: op, arguments, the engine's callable, frozen attributes, and the
    dtype the constants are built in."""

    def __init__(self, engine: Engine, dtype: str, g: Graph) -> None:
        D = ieee_domain(dtype)
        self.engine, self.dtype, self.g = engine, dtype, g
        self.consts = {
            k: to_numpy(get_op(n.op).forward(D, [], dict(n.attrs), ()), dtype)
            for k, n in enumerate(g.nodes)
            if n.op in CONSTANT_OPS
        }
        self.key = (
            "graph",
            dtype,
            g.num_inputs,
            tuple((n.op, tuple(n.args), engine.ops.get(n.op), freeze(n.attrs)) for n in g.nodes),
        )

    def __call__(self, *arrs: Any) -> Any:
        vals = list(arrs)
        for k, node in enumerate(self.g.nodes):
            if k in self.consts:
                vals.append(self.engine.asarray(self.consts[k], self.dtype))
            else:
                args = [vals[a] for a in node.args]
                vals.append(self.engine.ops[node.op](*args, **dict(node.attrs)))
        return vals[-1]


def check_graph(
    engine: Engine, dtype: str, g: Graph, xs: list[Tensor], g_out: Tensor
) -> GraphResult:
    D = ieee_domain(dtype)
    f = fmt(D)
    fn = GraphCall(engine, dtype, g)
    res = GraphResult()
    try:
        arrs = [engine.asarray(to_numpy(x, dtype), dtype) for x in xs]
        _, cts = engine.vjp(fn, arrs, engine.asarray(to_numpy(g_out, dtype), dtype))
        got = [from_numpy(engine.to_numpy(c, dtype), dtype) for c in cts]
    except Exception as e:
        res.refused = refusal(e, 160)
        return res
    hx = [lift(x) for x in xs]
    seed = TensorPack(
        g.shapes,
        (*tuple(Tensor.zeros(HP, s) for s in g.shapes[:-1]), lift(g_out)),
    )
    exact = backprop_ctx(HP, g, hx, seed, (), check=False).tensors
    gi, vmap = inline(g)  # |.|-propagate through the primitives: composites cancel inside
    iseed = [Tensor.zeros(HP, s) for s in gi.shapes]
    iseed[vmap[-1]] = lift(g_out)
    mags = abs_backprop(gi, hx, TensorPack(gi.shapes, tuple(iseed)))
    units = Fraction(0)
    for node in g.nodes:
        if node.op in CONSTANT_OPS:
            continue
        n = max([1] + [size(g.shapes[a]) for a in node.args])
        for d in ("forward", "backward"):
            units += Fraction(budget_for(engine.name, dtype, node.op, d).allowed(n))
    for gt, et, mt in zip(got, exact, mags, strict=True):
        for gv, ev, mv in zip(gt.data, et.data, mt.data, strict=True):
            gq, eq, mq = exact_q(gv), exact_q(ev), exact_q(mv)
            if gq is None or eq is None or mq is None:
                same = (gmpy2.is_nan(gv) and gmpy2.is_nan(ev)) or gv == ev
                res.nonfinite += 0 if same else 1
                continue
            err = abs(gq - eq)
            if err == 0:
                continue
            u = ulp(f, abs(mq))
            res.max_ulp = max(res.max_ulp, safe_float(err / ulp(f, abs(eq))))
            r = safe_float(err / (units * u)) if units else float("inf")
            if r > res.ratio:
                res.ratio = r
                res.worst = (
                    f"engine {float(gv)!r} vs exact {float(ev)!r} (|.|-scale {float(mv):.3g}, "
                    f"{float(units):.3g} ulp budget) in\n{g}"
                )
    return res


def check_graph_forward(engine: Engine, dtype: str, g: Graph, xs: list[Tensor]) -> GraphResult:
    """A forward-only engine's output of the whole graph (`engine.forward` of a
    `GraphCall`, which such an engine may run as one program) against the exact forward.
    `max_ulp` is in ulps of |exact|; the ratio divides the error by the sum of the nodes'
    forward budgets in ulps of max(|exact|, M), M the graph evaluated exactly on |inputs|
    (a first-order pointer, as for gradients: never a failure by itself)."""
    D = ieee_domain(dtype)
    f = fmt(D)
    res = GraphResult()
    try:
        arrs = [engine.asarray(to_numpy(x, dtype), dtype) for x in xs]
        out = engine.forward(GraphCall(engine, dtype, g), arrs)
        got = from_numpy(engine.to_numpy(out, dtype), dtype)
    except Exception as e:
        res.refused = refusal(e, 160)
        return res
    hx = [lift(x) for x in xs]
    exact = eval_graph(HP, g, hx, check=False).tensors[-1]
    try:
        mags = eval_graph(HP, g, [x.map(abs) for x in hx], check=False).tensors[-1]
    except TorchLeanError:
        mags = exact
    units = Fraction(0)
    for node in g.nodes:
        if node.op not in CONSTANT_OPS:
            n = max([1] + [size(g.shapes[a]) for a in node.args])
            units += Fraction(budget_for(engine.name, dtype, node.op, "forward").allowed(n))
    for gv, ev, mv in zip(got.data, exact.data, mags.data, strict=True):
        gq, eq, mq = exact_q(gv), exact_q(ev), exact_q(mv)
        if gq is None or eq is None:
            same = (gmpy2.is_nan(gv) and gmpy2.is_nan(ev)) or gv == ev
            res.nonfinite += 0 if same else 1
            continue
        err = abs(gq - eq)
        if err == 0:
            continue
        res.max_ulp = max(res.max_ulp, safe_float(err / ulp(f, abs(eq))))
        u = ulp(f, max(abs(eq), abs(mq) if mq is not None else Fraction(0)))
        r = safe_float(err / (units * u)) if units else float("inf")
        if r > res.ratio:
            res.ratio = r
            res.worst = f"engine {float(gv)!r} vs exact {float(ev)!r} in\n{g}"
    return res
