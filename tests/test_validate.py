"""The IR validator: bad ids, unknown ops, arity, attributes and shape rules are rejected with
errors that name the op, the input index and expected vs got; failed construction changes
nothing."""

from __future__ import annotations

import re
from fractions import Fraction as Q
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from conformance.graphs import GRAPH_OPS, graphs
from spec.errors import GraphError, ShapeError
from spec.graph import Graph, GraphBuilder, Node
from spec.ops import OPS
from spec.validate import check_node, normalize_attrs, validate_graph

# name -> (input shapes, op, args, attrs, error class, fragments the message must contain)
CASES: dict[str, tuple[list[tuple[int, ...]], str, list[Any], dict[str, Any], type, list[str]]] = {
    # ids
    "forward reference": (
        [(2,)],
        "neg",
        [1],
        {},
        GraphError,
        ["neg", "input 0", "expected an id in 0..0", "got 1"],
    ),
    "negative id": ([(2,)], "neg", [-1], {}, GraphError, ["neg", "input 0", "got -1"]),
    "bool id": ([(2,), (2,)], "add", [0, True], {}, GraphError, ["add", "input 1", "got True"]),
    "float id": ([(2,)], "neg", [0.0], {}, GraphError, ["neg", "input 0", "got 0.0"]),
    "string id": ([(2,)], "neg", ["0"], {}, GraphError, ["neg", "input 0", "got 0"]),
    # ops and arity
    "unknown op": ([(2,)], "frobnicate", [0], {}, GraphError, ["unknown op 'frobnicate'"]),
    "too few args": ([(2,)], "add", [0], {}, GraphError, ["add", "expected 2", "got 1"]),
    "too many args": ([(2,)], "neg", [0, 0], {}, GraphError, ["neg", "expected 1", "got 2"]),
    "empty concat": ([(2,)], "concat", [], {}, GraphError, ["concat", "expected >= 1", "got 0"]),
    "const with args": (
        [(2,)],
        "const",
        [0],
        {"shape": (), "values": [1]},
        GraphError,
        ["const", "expected 0", "got 1"],
    ),
    # attributes
    "unknown attribute": (
        [(2,)],
        "relu",
        [0],
        {"axis": 0},
        GraphError,
        ["relu", "unknown attributes", "got ['axis']"],
    ),
    "missing attribute": ([(2,)], "scale", [0], {}, GraphError, ["scale", "missing", "'c'"]),
    "rational is bool": (
        [(2,)],
        "scale",
        [0],
        {"c": True},
        GraphError,
        ["scale", "'c'", "got True"],
    ),
    "rational is nan": (
        [(2,)],
        "scale",
        [0],
        {"c": float("nan")},
        GraphError,
        ["scale", "'c'", "finite", "got nan"],
    ),
    "rational is junk": (
        [(2,)],
        "scale",
        [0],
        {"c": "x"},
        GraphError,
        ["scale", "'c'", "rational", "got 'x'"],
    ),
    "nat is negative": (
        [(2, 3)],
        "reduce_sum",
        [0],
        {"axis": -1},
        GraphError,
        ["reduce_sum", "'axis'", "non-negative int", "got -1"],
    ),
    "nat is float": (
        [(2, 3)],
        "reduce_sum",
        [0],
        {"axis": 1.0},
        GraphError,
        ["reduce_sum", "'axis'", "got 1.0"],
    ),
    "nat is bool": (
        [(2, 3)],
        "slice",
        [0],
        {"start": False, "stop": 1},
        GraphError,
        ["slice", "'start'", "got False"],
    ),
    "shape is a string": (
        [(2,)],
        "reshape",
        [0],
        {"shape": "ab"},
        GraphError,
        ["reshape", "'shape'", "got 'ab'"],
    ),
    "shape has negative dim": (
        [(2,)],
        "reshape",
        [0],
        {"shape": (-2,)},
        GraphError,
        ["reshape", "'shape'"],
    ),
    "ints is an int": (
        [(2,)],
        "index_select",
        [0],
        {"indices": 1},
        GraphError,
        ["index_select", "'indices'", "got 1"],
    ),
    "ints has negative": (
        [(2,)],
        "index_select",
        [0],
        {"indices": [0, -1]},
        GraphError,
        ["index_select", "'indices'", "got -1"],
    ),
    "rationals is a string": (
        [],
        "const",
        [],
        {"shape": (1,), "values": "1"},
        GraphError,
        ["const", "'values'", "got '1'"],
    ),
    # shape rules
    "matmul contraction": (
        [(2, 3), (2, 3)],
        "matmul",
        [0, 1],
        {},
        ShapeError,
        ["matmul", "input 1", "contraction", "expected leading matrix dim 3", "got 2"],
    ),
    "matmul rank": (
        [(3,), (3, 2)],
        "matmul",
        [0, 1],
        {},
        ShapeError,
        ["matmul", "input 0", "rank >= 2", "got (3,)"],
    ),
    "matmul batch": (
        [(2, 2, 3), (3, 3, 2)],
        "matmul",
        [0, 1],
        {},
        ShapeError,
        ["matmul", "input 1", "batch", "(2,)", "got (3,)"],
    ),
    "broadcast failure": (
        [(2, 3), (2,)],
        "add",
        [0, 1],
        {},
        ShapeError,
        ["add", "input 1", "broadcast", "expected broadcastable with (2, 3)", "got (2,)"],
    ),
    "reshape size": (
        [(2, 3)],
        "reshape",
        [0],
        {"shape": (4,)},
        ShapeError,
        ["reshape", "input 0", "expected size 4", "got (2, 3) (size 6)"],
    ),
    "slice past the end": (
        [(2, 3)],
        "slice",
        [0],
        {"start": 1, "stop": 3},
        ShapeError,
        ["slice", "input 0", "expected 0 <= start <= stop <= 2", "got (1, 3)"],
    ),
    "slice reversed": (
        [(2, 3)],
        "slice",
        [0],
        {"start": 2, "stop": 1},
        ShapeError,
        ["slice", "input 0", "got (2, 1)"],
    ),
    "slice of a scalar": (
        [()],
        "slice",
        [0],
        {"start": 0, "stop": 0},
        ShapeError,
        ["slice", "input 0", "rank >= 1"],
    ),
    "axis out of range": (
        [(2, 3)],
        "reduce_sum",
        [0],
        {"axis": 2},
        ShapeError,
        ["reduce_sum", "input 0", "expected 0 <= axis < 2", "got 2"],
    ),
    "reduce_mean axis": (
        [(3,)],
        "reduce_mean",
        [0],
        {"axis": 1},
        ShapeError,
        ["reduce_mean", "input 0", "axis", "got 1"],
    ),
    "swap axis": (
        [(2, 3)],
        "swap_adjacent",
        [0],
        {"axis": 1},
        ShapeError,
        ["swap_adjacent", "input 0", "expected 0 <= axis < 1", "got 1"],
    ),
    "transpose rank": (
        [(3,)],
        "transpose",
        [0],
        {},
        ShapeError,
        ["transpose", "input 0", "rank >= 2", "got (3,)"],
    ),
    "clamp lo > hi": (
        [(2,)],
        "clamp",
        [0],
        {"lo": 1, "hi": Q(1, 2)},
        GraphError,
        ["clamp", "expected lo <= hi", "'1'", "'1/2'"],
    ),
    "select index": (
        [(2, 3)],
        "select",
        [0],
        {"index": 2},
        ShapeError,
        ["select", "input 0", "expected 0 <= index < 2", "got 2"],
    ),
    "index_select index": (
        [(2, 3)],
        "index_select",
        [0],
        {"indices": [0, 2]},
        ShapeError,
        ["index_select", "input 0", "expected 0 <= index < 2", "got 2"],
    ),
    "scatter_add count": (
        [(2, 3)],
        "scatter_add",
        [0],
        {"indices": [0], "size": 2},
        ShapeError,
        ["scatter_add", "input 0", "expected 2", "got 1"],
    ),
    "scatter_add index": (
        [(2, 3)],
        "scatter_add",
        [0],
        {"indices": [0, 5], "size": 2},
        ShapeError,
        ["scatter_add", "input 0", "got 5"],
    ),
    "concat trailing": (
        [(2, 3), (2, 2)],
        "concat",
        [0, 1],
        {},
        ShapeError,
        ["concat", "input 1", "expected (3,)", "got (2,)"],
    ),
    "linear bias": (
        [(3,), (2, 3), (3,)],
        "linear",
        [0, 1, 2],
        {},
        ShapeError,
        ["linear", "input 2", "expected (2,)", "got (3,)"],
    ),
    "linear features": (
        [(2,), (2, 3), (2,)],
        "linear",
        [0, 1, 2],
        {},
        ShapeError,
        ["linear", "input 0", "expected 3", "got 2"],
    ),
    "linear weight rank": (
        [(3,), (3,), (3,)],
        "linear",
        [0, 1, 2],
        {},
        ShapeError,
        ["linear", "input 1", "rank 2"],
    ),
    "broadcast_to": (
        [(2, 3)],
        "broadcast_to",
        [0],
        {"shape": (3, 3)},
        ShapeError,
        ["broadcast_to", "input 0", "(3, 3)", "got (2, 3)"],
    ),
    "softmax empty axis": (
        [(2, 0)],
        "softmax",
        [0],
        {},
        ShapeError,
        ["softmax", "input 0", "got (2, 0)"],
    ),
    "mean of empty": ([(0,)], "mean", [0], {}, ShapeError, ["mean", "input 0", "got 0"]),
    "mse shapes": (
        [(3,), (2,)],
        "mse_loss",
        [0, 1],
        {},
        ShapeError,
        ["mse_loss", "input 1", "expected (3,)", "got (2,)"],
    ),
    "cross_entropy rank": (
        [(1, 2, 3), (1, 2, 3)],
        "cross_entropy",
        [0, 1],
        {},
        ShapeError,
        ["cross_entropy", "input 0", "got (1, 2, 3)"],
    ),
    "const count": (
        [],
        "const",
        [],
        {"shape": (2,), "values": [1]},
        ShapeError,
        ["const", "expected 2", "got 1"],
    ),
}


def _graph(inputs: list[tuple[int, ...]]) -> Graph:
    return Graph(inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_invalid_node_is_rejected_with_a_precise_message(name: str) -> None:
    inputs, op, args, attrs, exc, fragments = CASES[name]
    g = _graph(inputs)
    with pytest.raises(exc) as info:
        g.snoc(op, args, **attrs)
    msg = str(info.value)
    for frag in fragments:
        assert frag in msg, f"{name}: {frag!r} not in {msg!r}"
    if op in OPS:
        assert msg.startswith(op), msg  # the op is named first
    # check_node raises the same
    with pytest.raises(exc):
        check_node(op, args, attrs, list(g.shapes))


@pytest.mark.parametrize("name", sorted(CASES))
def test_failed_snoc_leaves_the_graph_unchanged(name: str) -> None:
    inputs, op, args, attrs, exc, _ = CASES[name]
    g = _graph(inputs)
    before = (g.inputs, g.nodes, g.shapes)
    with pytest.raises(exc):
        g.snoc(op, args, **attrs)
    assert (g.inputs, g.nodes, g.shapes) == before
    # and the graph is still usable: the next node gets the next id
    h = g.snoc("const", [], shape=(), values=[1])
    assert h.num_values == len(inputs) + 1 and g.num_values == len(inputs)


def test_failed_builder_node_leaves_the_builder_unchanged() -> None:
    b = GraphBuilder()
    x = b.input((2, 3))
    with pytest.raises(ShapeError):
        b.node("matmul", x, x)
    with pytest.raises(GraphError):
        b.node("neg", x + 1)
    y = b.node("neg", x)
    assert y == 1  # no id was consumed by the failures
    assert b.build().shapes == ((2, 3), (2, 3))


def test_graph_constructor_names_the_failing_node() -> None:
    nodes = [Node("neg", (0,), {}), Node("add", (0, 5), {})]
    with pytest.raises(GraphError, match=r"^node %2: add: input 1: .*got 5"):
        Graph([(2,)], nodes)
    with pytest.raises(ShapeError, match=r"^node %1: matmul: input 1: contraction"):
        Graph([(2, 3)], [Node("matmul", (0, 0), {})])


def test_graph_constructor_requires_normalised_attributes() -> None:
    with pytest.raises(GraphError, match="not normalised"):
        Graph([(2,)], [Node("scale", (0,), {"c": 1.5})])  # equal to 3/2, but a float
    with pytest.raises(GraphError, match="not normalised"):
        Graph([], [Node("const", (), {"shape": (1,), "values": (1,)})])  # int, not Fraction
    with pytest.raises(GraphError, match="not normalised"):
        Graph([(2,)], [Node("reshape", (0,), {"shape": [2]})])  # list, not tuple
    with pytest.raises(GraphError, match="not normalised"):
        Graph([(2,)], [Node("select", (0,), {"index": 1})])  # env_slot: None is missing
    g = Graph([(2,)], [Node("scale", (0,), {"c": Q(3, 2)})])
    assert g.shapes == ((2,), (2,))


def test_graph_inputs_must_be_shapes() -> None:
    with pytest.raises(ShapeError, match="graph input 0"):
        Graph([(-1,)])
    with pytest.raises(ShapeError, match="graph input 1"):
        Graph([(), (2, True)])


def test_attributes_are_normalised() -> None:
    assert normalize_attrs("scale", {"c": "1/3"}) == {"c": Q(1, 3)}
    assert normalize_attrs("scale", {"c": 0.5}) == {"c": Q(1, 2)}
    assert normalize_attrs("reshape", {"shape": [2, 3]}) == {"shape": (2, 3)}
    assert normalize_attrs("select", {"index": 1}) == {"index": 1, "env_slot": None}
    assert normalize_attrs("const", {"shape": [], "values": [1, "2/4"]}) == {
        "shape": (),
        "values": (Q(1), Q(1, 2)),
    }
    assert type(normalize_attrs("scale", {"c": 2})["c"]) is Q


# --------------------------------------------------------------------------- properties


@given(graphs(ops=GRAPH_OPS, domain_kind="float"))
def test_validate_graph_recomputes_the_shapes(g: Graph) -> None:
    assert validate_graph(g.inputs, g.nodes) == list(g.shapes)
    for k, node in enumerate(g.nodes):
        norm, out = check_node(
            node.op, list(node.args), dict(node.attrs), g.shapes[: g.num_inputs + k]
        )
        assert norm == dict(node.attrs)  # normalisation is idempotent
        assert out == g.shapes[g.num_inputs + k]


@given(graphs(ops=GRAPH_OPS, domain_kind="float"), st.data())
def test_a_non_earlier_argument_is_always_rejected(g: Graph, data: st.DataObject) -> None:
    with_args = [k for k, n in enumerate(g.nodes) if n.args]
    assume(with_args)
    k = data.draw(st.sampled_from(with_args))
    node = g.nodes[k]
    i = data.draw(st.integers(0, len(node.args) - 1))
    own = g.num_inputs + k
    bad = data.draw(st.sampled_from([own, own + 1, own + 7, -1, -own - 1]))
    args = list(node.args)
    args[i] = bad
    nodes = [*g.nodes[:k], Node(node.op, tuple(args), node.attrs), *g.nodes[k + 1 :]]
    with pytest.raises(GraphError, match=rf"node %{own}: {node.op}: input {i}: .*got {bad}\)"):
        Graph(g.inputs, nodes)


@given(graphs(ops=GRAPH_OPS, domain_kind="float"), st.data())
def test_a_wrong_arity_is_always_rejected(g: Graph, data: st.DataObject) -> None:
    fixed = [k for k, n in enumerate(g.nodes) if OPS[n.op].arity is not None]
    assume(fixed)
    k = data.draw(st.sampled_from(fixed))
    node = g.nodes[k]
    args = (*node.args, 0) if data.draw(st.booleans()) or not node.args else node.args[:-1]
    nodes = [*g.nodes[:k], Node(node.op, tuple(args), node.attrs), *g.nodes[k + 1 :]]
    with pytest.raises(GraphError, match=re.escape(f"{node.op}: wrong number of arguments")):
        Graph(g.inputs, nodes)
