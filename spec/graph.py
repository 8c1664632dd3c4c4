"""The typed SSA graph IR and its reference semantics.

A graph holds input shapes Γ and a snoc-list of nodes; value ids are the inputs 0..|Γ|-1,
then nodes in creation order, and a node's arguments name earlier ids only. Every graph is
validated (`spec.validate`) on construction, so a `Graph` value is always well-typed.

Semantics (DESIGN.md, the link theorem's right-hand side):
- `eval_graph` returns every value (inputs and intermediates) as a `TensorPack`.
- `jvp_ctx` returns the tangent of every value given tangents of the inputs.
- `node_vjp_dense`: a node's VJP as a dense cotangent over its whole prefix context:
  entry j is the left fold, in argument order, of the rule's cotangents for the arguments
  equal to j (first stored as is), or zero when j is not an argument (fan-in is handled
  here, never by rules).
- `backprop_all_ctx(seed)`: nil -> seed; snoc(prefix, node) -> contrib =
  node_vjp_dense(eval(prefix), seed_out); recurse on prefix with `seed_prev + contrib`
  (existing on the left); append seed_out. One cotangent per value. Computed in time
  linear in the graph (runs of zero additions collapsed into one, which is exact: adding
  zero is idempotent in every domain).
- `backprop_ctx`: the first |Γ| entries of `backprop_all_ctx`.
A non-differentiable integer environment `env` is threaded through every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .domains import Domain
from .errors import GraphError, ShapeError
from .ops.table import get_op
from .shape import Shape, as_shape
from .tensor import Tensor, TensorPack, fold_add
from .validate import check_node, validate_graph

__all__ = [
    "Graph",
    "GraphBuilder",
    "Node",
    "backprop_all_ctx",
    "backprop_ctx",
    "eval_graph",
    "eval_jvp",
    "format_graph",
    "jvp_ctx",
    "node_vjp_dense",
]


@dataclass(frozen=True)
class Node:
    """One node: op name, argument ids, attributes (stored read-only)."""

    op: str
    args: tuple[int, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "attrs", MappingProxyType(dict(self.attrs)))

    __hash__ = None  # type: ignore[assignment]  # attributes are a mapping


class Graph:
    """An immutable, validated graph. `shapes` lists the shape of every value."""

    __slots__ = ("inputs", "nodes", "shapes")

    inputs: tuple[Shape, ...]
    nodes: tuple[Node, ...]
    shapes: tuple[Shape, ...]

    def __init__(self, inputs: Sequence[Sequence[int]], nodes: Sequence[Node] = ()) -> None:
        ins = tuple(as_shape(s, f"graph input {i}") for i, s in enumerate(inputs))
        ns = tuple(nodes)
        object.__setattr__(self, "inputs", ins)
        object.__setattr__(self, "nodes", ns)
        object.__setattr__(self, "shapes", tuple(validate_graph(ins, ns)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Graph is immutable (cannot set {name!r}); build a new one")

    @property
    def num_inputs(self) -> int:
        return len(self.inputs)

    @property
    def num_values(self) -> int:
        return len(self.shapes)

    def snoc(self, op: str, args: Sequence[int], **attrs: Any) -> Graph:
        """A new graph with one more node (validated)."""
        norm, _ = check_node(op, list(args), attrs, self.shapes)
        return Graph(self.inputs, (*self.nodes, Node(op, tuple(args), norm)))

    def prefix(self, k: int) -> Graph:
        """The graph made of the first k nodes."""
        return Graph(self.inputs, self.nodes[:k])

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Graph)
            and self.inputs == other.inputs
            and len(self.nodes) == len(other.nodes)
            and all(
                a.op == b.op and a.args == b.args and dict(a.attrs) == dict(b.attrs)
                for a, b in zip(self.nodes, other.nodes, strict=True)
            )
        )

    def __hash__(self) -> int:
        return hash((self.inputs, tuple((n.op, n.args) for n in self.nodes)))

    def __str__(self) -> str:
        return format_graph(self)

    def __repr__(self) -> str:
        return f"<Graph {len(self.inputs)} inputs, {len(self.nodes)} nodes>"


class GraphBuilder:
    """Mutable helper that validates each node as it is added."""

    def __init__(self) -> None:
        self._inputs: list[Shape] = []
        self._nodes: list[Node] = []
        self._shapes: list[Shape] = []

    def input(self, shape: Sequence[int]) -> int:
        if self._nodes:
            raise GraphError("GraphBuilder.input: all inputs must precede the first node")
        s = as_shape(shape, "graph input")
        self._inputs.append(s)
        self._shapes.append(s)
        return len(self._shapes) - 1

    def node(self, op: str, *args: int, **attrs: Any) -> int:
        norm, out = check_node(op, list(args), attrs, self._shapes)
        self._nodes.append(Node(op, tuple(args), norm))
        self._shapes.append(out)
        return len(self._shapes) - 1

    def shape_of(self, i: int) -> Shape:
        return self._shapes[i]

    @property
    def num_inputs(self) -> int:
        """The number of inputs declared so far."""
        return len(self._inputs)

    @property
    def num_nodes(self) -> int:
        """The number of nodes added so far."""
        return len(self._nodes)

    @property
    def num_values(self) -> int:
        """The number of values (inputs and nodes) so far."""
        return len(self._shapes)

    def truncate(self, num_inputs: int, num_nodes: int, num_values: int) -> None:
        """Drop what was declared after the given counts (a caller's rollback)."""
        del self._inputs[num_inputs:]
        del self._nodes[num_nodes:]
        del self._shapes[num_values:]

    def build(self, output: int | None = None) -> Graph:
        if output is not None and output != len(self._shapes) - 1:
            raise GraphError(f"GraphBuilder.build: output %{output} is not the last value")
        return Graph(self._inputs, self._nodes)


def _check_inputs(what: str, g: Graph, xs: Sequence[Tensor]) -> None:
    if len(xs) != len(g.inputs):
        raise ShapeError(f"{what}: expected {len(g.inputs)} inputs, got {len(xs)}")
    for i, (x, s) in enumerate(zip(xs, g.inputs, strict=True)):
        if x.shape != s:
            raise ShapeError(f"{what}: input {i} (expected shape {s}, got {x.shape})")


def _node_forward(
    D: Domain, node: Node, vals: Sequence[Tensor], env: Sequence[int], check: bool
) -> Tensor:
    d = get_op(node.op)
    args = [vals[a] for a in node.args]
    attrs = dict(node.attrs)
    if check and d.precondition is not None:
        d.precondition(D, args, attrs)
    return d.forward(D, args, attrs, env)


def eval_graph(
    D: Domain, g: Graph, xs: Sequence[Tensor], env: Sequence[int] = (), *, check: bool = True
) -> TensorPack:
    """Every value of g on inputs xs. `check` runs op preconditions (e.g. log's x > 0)."""
    _check_inputs("eval_graph", g, xs)
    vals = list(xs)
    for node in g.nodes:
        vals.append(_node_forward(D, node, vals, env, check))
    return TensorPack(g.shapes, tuple(vals))


def eval_jvp(
    D: Domain,
    g: Graph,
    xs: Sequence[Tensor],
    dxs: Sequence[Tensor],
    env: Sequence[int] = (),
    *,
    check: bool = True,
) -> tuple[TensorPack, TensorPack]:
    """Every value and every tangent of g, given inputs xs and input tangents dxs (one
    forward pass: `eval_graph` and `jvp_ctx` together)."""
    _check_inputs("jvp_ctx", g, xs)
    _check_inputs("jvp_ctx (tangents)", g, dxs)
    vals, tans = list(xs), list(dxs)
    for node in g.nodes:
        d = get_op(node.op)
        args = [vals[a] for a in node.args]
        tans.append(d.jvp(D, args, [tans[a] for a in node.args], dict(node.attrs), env))
        vals.append(_node_forward(D, node, vals, env, check))
    return TensorPack(g.shapes, tuple(vals)), TensorPack(g.shapes, tuple(tans))


def jvp_ctx(
    D: Domain,
    g: Graph,
    xs: Sequence[Tensor],
    dxs: Sequence[Tensor],
    env: Sequence[int] = (),
    *,
    check: bool = True,
) -> TensorPack:
    """Tangents of every value, given input tangents dxs."""
    return eval_jvp(D, g, xs, dxs, env, check=check)[1]


def node_vjp_dense(
    D: Domain,
    node: Node,
    prefix_shapes: Sequence[Shape],
    vals: Sequence[Tensor],
    seed_out: Tensor,
    env: Sequence[int],
) -> list[Tensor]:
    """The node's VJP as one cotangent per prefix value (fan-in folded in argument order)."""
    sparse = _node_vjp_sparse(D, node, prefix_shapes, vals, seed_out, env)
    return [
        Tensor.zeros(D, s) if j not in sparse else sparse[j] for j, s in enumerate(prefix_shapes)
    ]


def _check_seed(what: str, g: Graph, seed: TensorPack) -> None:
    if seed.shapes != g.shapes:
        raise ShapeError(
            f"{what}: seed shapes (expected {list(g.shapes)}, got {list(seed.shapes)})"
        )


def _node_vjp_sparse(
    D: Domain,
    node: Node,
    prefix_shapes: Sequence[Shape],
    vals: Sequence[Tensor],
    seed_out: Tensor,
    env: Sequence[int],
) -> dict[int, Tensor]:
    """The node's VJP for its arguments only (fan-in folded in argument order): the
    entries of `node_vjp_dense` that are not the zero tensor."""
    d = get_op(node.op)
    per_arg = d.vjp(D, [vals[a] for a in node.args], seed_out, dict(node.attrs), env)
    buckets: dict[int, list[Tensor]] = {}
    for a, ct in zip(node.args, per_arg, strict=True):
        if ct.shape != prefix_shapes[a]:
            raise ShapeError(
                f"{node.op}: VJP for argument %{a} (expected shape "
                f"{prefix_shapes[a]}, got {ct.shape})"
            )
        buckets.setdefault(a, []).append(ct)
    return {
        j: Tensor(
            prefix_shapes[j],
            tuple(fold_add(D, col) for col in zip(*(c.data for c in cts), strict=True)),
        )
        for j, cts in buckets.items()
    }


def _add_zero(D: Domain, t: Tensor) -> Tensor:
    zero = D.zero()
    return Tensor(t.shape, tuple(D.add(p, zero) for p in t.data))


def _add(D: Domain, a: Tensor, b: Tensor) -> Tensor:
    return Tensor(a.shape, tuple(D.add(p, q) for p, q in zip(a.data, b.data, strict=True)))


def backprop_all_ctx(
    D: Domain,
    g: Graph,
    xs: Sequence[Tensor],
    seed: TensorPack,
    env: Sequence[int] = (),
    *,
    check: bool = True,
) -> TensorPack:
    """One cotangent per value (inputs and intermediates); the last entry equals its seed.

    The definition: nodes last to first, each adding its dense VJP (`node_vjp_dense`: the
    folded contributions for its arguments, the zero tensor for every other earlier value)
    to the cotangents of all earlier values, `existing + new`. Computed here in time linear
    in the graph: adding the zero tensor is idempotent in every domain (IEEE: -0 + +0 = +0,
    any other value unchanged; rationals and sympy: unchanged), so each run of consecutive
    zero additions to one value is performed once, just before that value's next real
    contribution (or at the end), which gives the same values, signed zeros included."""
    _check_seed("backprop_all_ctx", g, seed)
    vals = eval_graph(D, g, xs, env, check=check).tensors
    ct = list(seed.tensors)
    n_in, n_nodes = g.num_inputs, len(g.nodes)
    last: dict[int, int] = {}  # value id -> the node that last added a real contribution
    for k in range(n_nodes - 1, -1, -1):
        idx = n_in + k
        # the nodes after k added zero to k's own cotangent before k runs (-0 seed -> +0)
        if last.get(idx, n_nodes) - k > 1:
            ct[idx] = _add_zero(D, ct[idx])
            last[idx] = k + 1
        contrib = _node_vjp_sparse(D, g.nodes[k], g.shapes[:idx], vals, ct[idx], env)
        for j, c in contrib.items():
            # the nodes after k (and before the previous real contribution) added zero
            if last.get(j, n_nodes) - k > 1:
                ct[j] = _add_zero(D, ct[j])
            ct[j] = _add(D, ct[j], c)
            last[j] = k
    for j in range(len(ct)):
        # nodes first..: every node k with n_in + k > j added zero after the last real one
        first_after = max(0, j - n_in + 1)
        if first_after < last.get(j, n_nodes):
            ct[j] = _add_zero(D, ct[j])
    return TensorPack(g.shapes, tuple(ct))


def backprop_ctx(
    D: Domain,
    g: Graph,
    xs: Sequence[Tensor],
    seed: TensorPack,
    env: Sequence[int] = (),
    *,
    check: bool = True,
) -> TensorPack:
    """Cotangents of the inputs only: the first |Γ| entries of `backprop_all_ctx`."""
    full = backprop_all_ctx(D, g, xs, seed, env, check=check)
    return TensorPack(g.inputs, full.tensors[: g.num_inputs])


def _fmt_attr(v: Any) -> str:
    if isinstance(v, tuple):
        return "[" + ", ".join(_fmt_attr(x) for x in v) + "]"
    return str(v)


def format_graph(g: Graph) -> str:
    """Readable text: one line per value with its op, arguments, attributes and shape."""
    ins = ", ".join(f"%{i}: {s}" for i, s in enumerate(g.inputs))
    lines = [f"graph({ins}) {{"]
    for k, n in enumerate(g.nodes):
        idx = g.num_inputs + k
        args = ", ".join(f"%{a}" for a in n.args)
        attrs = "; ".join(f"{key}={_fmt_attr(v)}" for key, v in n.attrs.items() if v is not None)
        inner = args + (("; " if args else "") + attrs if attrs else "")
        lines.append(f"  %{idx} = {n.op}({inner}) : {g.shapes[idx]}")
    lines.append("}")
    return "\n".join(lines)
