"""The graph semantics of `spec.graph` on whole arrays: values, tangents, all cotangents.

Invariants:
- `forward` is `spec.graph.eval_jvp` (values and tangents of every value, op preconditions
  checked on the graph's own nodes only) and `backprop_all` is
  `spec.graph.backprop_all_ctx`, with the same structure step for step: fan-in folded in
  argument order (first contribution as is), `existing + new`, and each run of zero
  additions performed once, at the same places (so signed zeros agree).
- A composite without an array rule of its own is its body, exactly as in the spec:
  forward and JVP are the body's forward, its VJP is `backprop_all` of the body seeded with
  zeros and the output's cotangent (the body values of the forward pass are reused: they are
  the same values).
- A primitive without an array rule falls back to the spec's own rule on that node (the
  arrays converted to spec tensors and back, exactly); every fallback (a node's forward
  with its JVP, and its VJP) is counted in `Stats.fallbacks` by op name, every composite
  expanded in `Stats.composites`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..graph import Graph, Node
from ..ops.table import get_op
from .formats import Format
from .table import RULES

__all__ = ["Run", "Stats", "backprop_all", "forward"]

Arr = np.ndarray


@dataclass
class Stats:
    """What an evaluation did: spec-rule fallbacks, composite expansions and array rules,
    per op; `mpfr` the elements a correctly rounded function computed with MPFR."""

    fallbacks: Counter[str] = field(default_factory=Counter)
    composites: Counter[str] = field(default_factory=Counter)
    rules: Counter[str] = field(default_factory=Counter)
    mpfr: int = 0


@dataclass
class Run:
    """One graph's forward pass: every value and tangent, and the body runs of its
    composite nodes (by node index) for the reverse pass."""

    graph: Graph
    vals: list[Arr]
    tans: list[Arr]
    bodies: dict[int, Run]


def _attrs(node: Node) -> dict[str, Any]:
    return dict(node.attrs)


def _fallback_forward(
    F: Format, node: Node, xs: list[Arr], dxs: list[Arr], env: Sequence[int]
) -> tuple[Arr, Arr]:
    d = get_op(node.op)
    ts, dts = [F.tensor(x) for x in xs], [F.tensor(x) for x in dxs]
    a = _attrs(node)
    tan = d.jvp(F.domain, ts, dts, a, env)
    val = d.forward(F.domain, ts, a, env)
    return F.array(val), F.array(tan)


def _node_forward(
    F: Format, node: Node, xs: list[Arr], dxs: list[Arr], env: Sequence[int], stats: Stats
) -> tuple[Arr, Arr, Run | None]:
    r = RULES.get(node.op)
    a = _attrs(node)
    if r is not None:
        stats.rules[node.op] += 1
        return r.forward(F, xs, a, env), r.jvp(F, xs, dxs, a, env), None
    d = get_op(node.op)
    if d.body is not None:
        stats.composites[node.op] += 1
        body = d.body([tuple(x.shape) for x in xs], a)
        run = forward(F, body, xs, dxs, env, check=False, stats=stats)
        val, tan = run.vals[-1], run.tans[-1]
        run.tans.clear()  # the reverse pass needs the body's values only
        return val, tan, run
    stats.fallbacks[node.op] += 1
    val, tan = _fallback_forward(F, node, xs, dxs, env)
    return val, tan, None


def forward(
    F: Format,
    g: Graph,
    xs: Sequence[Arr],
    dxs: Sequence[Arr],
    env: Sequence[int] = (),
    *,
    check: bool = True,
    stats: Stats | None = None,
) -> Run:
    """Every value and tangent of g (`spec.graph.eval_jvp` on arrays)."""
    stats = stats if stats is not None else Stats()
    vals, tans = [F.cast(x) for x in xs], [F.cast(x) for x in dxs]
    bodies: dict[int, Run] = {}
    for k, node in enumerate(g.nodes):
        args = [vals[i] for i in node.args]
        d = get_op(node.op)
        if check and d.precondition is not None:
            d.precondition(F.domain, [F.tensor(x) for x in args], _attrs(node))
        val, tan, run = _node_forward(F, node, args, [tans[i] for i in node.args], env, stats)
        vals.append(F.cast(val))
        tans.append(F.cast(tan))
        if run is not None:
            bodies[k] = run
    return Run(g, vals, tans, bodies)


# --------------------------------------------------------------------------- reverse


def _node_vjp(
    F: Format, run: Run, k: int, g_out: Arr, env: Sequence[int], stats: Stats
) -> list[Arr]:
    node = run.graph.nodes[k]
    args = [run.vals[i] for i in node.args]
    a = _attrs(node)
    r = RULES.get(node.op)
    if r is not None:
        return r.vjp(F, args, g_out, a, env)
    body = run.bodies.get(k)
    if body is not None:
        bg = body.graph
        seed = [F.zeros(s) for s in bg.shapes[:-1]] + [g_out]
        return backprop_all(F, body, seed, env, stats)[: bg.num_inputs]
    stats.fallbacks[node.op] += 1
    d = get_op(node.op)
    cts = d.vjp(F.domain, [F.tensor(x) for x in args], F.tensor(g_out), a, env)
    return [F.array(c) for c in cts]


def _sparse(
    F: Format, run: Run, k: int, g_out: Arr, env: Sequence[int], stats: Stats
) -> dict[int, Arr]:
    """The node's cotangents per argument id, fan-in folded in argument order."""
    node = run.graph.nodes[k]
    per_arg = _node_vjp(F, run, k, g_out, env, stats)
    out: dict[int, Arr] = {}
    for i, ct in zip(node.args, per_arg, strict=True):
        ct = F.cast(ct)
        out[i] = F.add(out[i], ct) if i in out else ct
    return out


def _add_zero(F: Format, x: Arr) -> Arr:
    return F.add(x, 0.0)


def backprop_all(
    F: Format, run: Run, seed: Sequence[Arr], env: Sequence[int] = (), stats: Stats | None = None
) -> list[Arr]:
    """One cotangent per value (`spec.graph.backprop_all_ctx` on arrays, on the values of
    `run`), with the spec's placement of zero additions. Consumes `run.bodies` (a second
    reverse pass over the same run takes the spec rules of its composites)."""
    stats = stats if stats is not None else Stats()
    g = run.graph
    ct = [F.cast(s) for s in seed]
    n_in, n_nodes = g.num_inputs, len(g.nodes)
    last: dict[int, int] = {}
    for k in range(n_nodes - 1, -1, -1):
        idx = n_in + k
        if last.get(idx, n_nodes) - k > 1:
            ct[idx] = _add_zero(F, ct[idx])
            last[idx] = k + 1
        for j, c in _sparse(F, run, k, ct[idx], env, stats).items():
            if last.get(j, n_nodes) - k > 1:
                ct[j] = _add_zero(F, ct[j])
            ct[j] = F.add(ct[j], c)
            last[j] = k
        run.bodies.pop(k, None)  # consumed: a body's values serve one reverse pass
    for j in range(len(ct)):
        first_after = max(0, j - n_in + 1)
        if first_after < last.get(j, n_nodes):
            ct[j] = _add_zero(F, ct[j])
    return ct
