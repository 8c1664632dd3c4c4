"""Lossless JSON for graphs and tensors, malformed JSON, and the text format of graphs."""

from __future__ import annotations

import json
from fractions import Fraction as Q
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.graphs import GRAPH_OPS, graphs, special_values, tensors_for
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, RATIONAL, IEEEDomain
from spec.errors import GraphError, TorchLeanError
from spec.graph import Graph, GraphBuilder, format_graph
from spec.serialize import (
    GRAPH_FORMAT,
    graph_from_dict,
    graph_from_json,
    graph_to_dict,
    graph_to_json,
    tensor_from_dict,
    tensor_to_dict,
)
from spec.tensor import Tensor

IEEE = [FLOAT64, BINARY32, BFLOAT16, FLOAT16]


# --------------------------------------------------------------------------- graphs


def _check_round_trip(g: Graph) -> None:
    text = graph_to_json(g)
    back = graph_from_json(text)
    assert back == g
    assert back.shapes == g.shapes
    assert graph_to_json(back) == text  # stable encoding
    for a, b in zip(g.nodes, back.nodes, strict=True):
        for key, v in a.attrs.items():
            assert type(b.attrs[key]) is type(v) and b.attrs[key] == v, (a.op, key)


@given(graphs())
def test_round_trip_random_rational_graphs(g: Graph) -> None:
    _check_round_trip(g)


@given(graphs(ops=GRAPH_OPS, domain_kind="float", max_nodes=8))
def test_round_trip_random_float_graphs(g: Graph) -> None:
    _check_round_trip(g)


def _hand_graph() -> Graph:
    b = GraphBuilder()
    x = b.input((3, 2))
    b.input(())
    c = b.node("const", shape=(3, 2), values=[Q(1, 3), Q(-2, 7), 5, 0, Q(10**30 + 1, 3), -1])
    y = b.node("scale", x, c=Q(1, 3))
    y = b.node("clamp", y, lo=Q(-1, 2), hi="3/4")
    y = b.node("add", y, c)
    b.node("select", y, index=2)
    b.node("select", y, env_slot=0)
    b.node("index_select", y, indices=[2, 0, 2])
    b.node("scatter_add", y, indices=[1, 1, 0], size=4)
    b.node("reshape", y, shape=[6])
    b.node("const", shape=(), values=[Q(2, 1)])
    return b.build()


def test_round_trip_hand_graph_with_rational_attributes() -> None:
    g = _hand_graph()
    _check_round_trip(g)
    back = graph_from_json(graph_to_json(g))
    assert back.nodes[1].attrs["c"] == Q(1, 3)
    assert back.nodes[0].attrs["values"][4] == Q(10**30 + 1, 3)
    assert back.nodes[2].attrs == {"lo": Q(-1, 2), "hi": Q(3, 4)}
    assert back.nodes[4].attrs == {"index": 2, "env_slot": None}
    assert back.nodes[5].attrs == {"index": None, "env_slot": 0}


def test_rationals_travel_as_strings() -> None:
    d = json.loads(graph_to_json(_hand_graph()))
    assert d["format"] == GRAPH_FORMAT
    assert d["nodes"][1]["attrs"]["c"] == {"q": "1/3"}
    assert d["nodes"][0]["attrs"]["values"][:2] == [{"q": "1/3"}, {"q": "-2/7"}]
    assert d["nodes"][2]["attrs"]["hi"] == {"q": "3/4"}
    assert d["nodes"][4]["attrs"] == {"index": 2}  # the absent optional attribute is omitted
    assert "." not in graph_to_json(_hand_graph())  # no decimal floats anywhere
    assert graph_from_dict(graph_to_dict(_hand_graph())) == _hand_graph()


# --------------------------------------------------------------------------- malformed JSON


def _doc(nodes: Any, inputs: Any = ((2,),), fmt: Any = GRAPH_FORMAT) -> dict[str, Any]:
    return {"format": fmt, "inputs": [list(s) for s in inputs], "nodes": nodes}


MALFORMED: dict[str, Any] = {
    "wrong format tag": _doc([], fmt="torchlean_graph_v0"),
    "missing format": {"inputs": [[2]], "nodes": []},
    "not an object": [],
    "missing nodes": {"format": GRAPH_FORMAT, "inputs": [[2]]},
    "missing inputs": {"format": GRAPH_FORMAT, "nodes": []},
    "bad op": _doc([{"op": "frobnicate", "args": [0]}]),
    "op not a string": _doc([{"op": ["neg"], "args": [0]}]),
    "missing op": _doc([{"args": [0]}]),
    "forward reference": _doc([{"op": "neg", "args": [1]}]),
    "self reference": _doc([{"op": "neg", "args": [0]}, {"op": "neg", "args": [2]}]),
    "negative id": _doc([{"op": "neg", "args": [-1]}]),
    "bool id": _doc([{"op": "neg", "args": [True]}]),
    "string id": _doc([{"op": "neg", "args": ["0"]}]),
    "float id": _doc([{"op": "neg", "args": [0.0]}]),
    "args not a list": _doc([{"op": "neg", "args": 0}]),
    "wrong arity": _doc([{"op": "add", "args": [0]}]),
    "unknown attribute": _doc([{"op": "neg", "args": [0], "attrs": {"axis": 0}}]),
    "missing attribute": _doc([{"op": "scale", "args": [0], "attrs": {}}]),
    "attrs not an object": _doc([{"op": "neg", "args": [0], "attrs": []}]),
    "rational with zero denominator": _doc(
        [{"op": "scale", "args": [0], "attrs": {"c": {"q": "1/0"}}}]
    ),
    "rational not a number": _doc([{"op": "scale", "args": [0], "attrs": {"c": {"q": "abc"}}}]),
    "node not an object": _doc(["neg"]),
    "nodes not a list": _doc({"op": "neg"}),
    "inputs not shapes": {"format": GRAPH_FORMAT, "inputs": [2], "nodes": []},
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_graph_json_raises_graph_error(case: str) -> None:
    with pytest.raises(GraphError):
        graph_from_json(json.dumps(MALFORMED[case]))


def test_malformed_json_text_raises_graph_error() -> None:
    for text in ['{"format": ', "", "not json", "[1, 2"]:
        with pytest.raises(GraphError):
            graph_from_json(text)


def test_invalid_shapes_in_json_raise_torchlean_errors() -> None:
    bad_shape = _doc([{"op": "matmul", "args": [0, 0]}], inputs=[(2, 3)])
    with pytest.raises(TorchLeanError, match="matmul"):
        graph_from_json(json.dumps(bad_shape))
    with pytest.raises(TorchLeanError):
        graph_from_json(json.dumps(_doc([], inputs=[(-1,)])))


def test_error_messages_name_the_problem() -> None:
    with pytest.raises(GraphError, match="torchlean_graph_v0"):
        graph_from_json(json.dumps(MALFORMED["wrong format tag"]))
    with pytest.raises(GraphError, match="frobnicate"):
        graph_from_json(json.dumps(MALFORMED["bad op"]))
    with pytest.raises(GraphError, match=r"node %1: neg: input 0.*got 1"):
        graph_from_json(json.dumps(MALFORMED["forward reference"]))


# --------------------------------------------------------------------------- tensors


def test_tensor_encoding_bits_by_hand() -> None:
    t = Tensor((4,), tuple(BINARY32.from_float(v) for v in (1.0, -0.0, 2.0**-149, -2.0)))
    d = tensor_to_dict(BINARY32, t)
    assert d == {
        "domain": "binary32",
        "shape": [4],
        "values": ["0x3f800000", "0x80000000", "0x00000001", "0xc0000000"],
    }
    d64 = tensor_to_dict(FLOAT64, Tensor((), (FLOAT64.from_float(1.0),)))
    assert d64["values"] == ["0x3ff0000000000000"]
    nan = tensor_to_dict(BINARY32, Tensor((), (BINARY32.from_float(float("nan")),)))
    assert nan["values"] == ["0x7fc00000"]  # the canonical quiet NaN
    assert tensor_to_dict(RATIONAL, Tensor((2,), (Q(1, 3), Q(-4))))["values"] == ["1/3", "-4/1"]


def _check_tensor_round_trip(D: Any, t: Tensor) -> None:
    d = json.loads(json.dumps(tensor_to_dict(D, t)))
    D2, back = tensor_from_dict(d)
    assert D2 is D
    assert back.shape == t.shape
    assert back.same(D, t)
    if isinstance(D, IEEEDomain):
        assert [D.to_bits(v) for v in back.data] == [D.to_bits(v) for v in t.data]
    else:
        assert back.data == t.data


@pytest.mark.parametrize("D", IEEE, ids=lambda D: D.name)
def test_special_values_round_trip_bit_exactly(D: IEEEDomain) -> None:
    sp = special_values(D)
    t = Tensor((len(sp),), tuple(sp))
    _check_tensor_round_trip(D, t)
    back = tensor_from_dict(tensor_to_dict(D, t))[1]
    assert D.to_bits(back.data[4]) == 1 << (D.width - 1)  # -0 keeps its sign
    assert D.is_nan(back.data[0])


@pytest.mark.parametrize("D", IEEE, ids=lambda D: D.name)
@given(data=st.data())
def test_ieee_tensors_round_trip(D: IEEEDomain, data: st.DataObject) -> None:
    shape = data.draw(st.sampled_from([(), (3,), (2, 2), (0,)]))
    (t,) = data.draw(tensors_for([shape], D, specials=True))
    _check_tensor_round_trip(D, t)


@given(st.lists(st.fractions(max_denominator=10**20), max_size=6))
def test_rational_tensors_round_trip(xs: list[Q]) -> None:
    _check_tensor_round_trip(RATIONAL, Tensor((len(xs),), tuple(xs)))


@pytest.mark.parametrize("D", IEEE, ids=lambda D: D.name)
@given(bits=st.data())
def test_every_bit_pattern_round_trips(D: IEEEDomain, bits: st.DataObject) -> None:
    b = bits.draw(st.integers(0, 2**D.width - 1))
    v = D.from_bits(b)
    _check_tensor_round_trip(D, Tensor((), (v,)))
    if not D.is_nan(v):
        assert D.to_bits(v) == b


# --------------------------------------------------------------------------- text format


def test_format_graph_lines() -> None:
    g = (
        Graph([(2, 3), (3,)])
        .snoc("relu", [0])
        .snoc("add", [2, 1])
        .snoc("scale", [3], c=Q(1, 3))
        .snoc("select", [4], index=1)
        .snoc("sum", [5])
    )
    text = format_graph(g)
    lines = text.splitlines()
    assert lines[0] == "graph(%0: (2, 3), %1: (3,)) {"
    assert "  %2 = relu(%0) : (2, 3)" in lines
    assert "  %3 = add(%2, %1) : (2, 3)" in lines
    assert "  %4 = scale(%3; c=1/3) : (2, 3)" in lines
    assert "  %5 = select(%4; index=1) : (3,)" in lines
    assert "  %6 = sum(%5) : ()" in lines
    assert lines[-1] == "}"
    assert len(lines) == 2 + len(g.nodes)
    assert str(g) == text


def test_format_graph_attribute_lists_and_consts() -> None:
    g = (
        Graph([(3,)])
        .snoc("const", [], shape=(2,), values=[Q(1, 2), 3])
        .snoc("index_select", [0], indices=[2, 0])
    )
    lines = format_graph(g).splitlines()
    assert "  %1 = const(shape=[2]; values=[1/2, 3]) : (2,)" in lines
    assert "  %2 = index_select(%0; indices=[2, 0]) : (2,)" in lines
