"""Graph-level semantics: eval_graph, jvp_ctx, node_vjp_dense, backprop_ctx and
backprop_all_ctx, as Hypothesis properties over random valid graphs plus hand-worked cases."""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest
from hypothesis import given, reject, settings
from hypothesis import strategies as st

from conformance.graphs import (
    ALGEBRAIC_OPS,
    DEFAULT_FLOAT_OPS,
    GRAPH_OPS,
    INPUT_SHAPES,
    MAX_ELEMENTS,
    graph_cases,
    graphs,
    inputs_for,
    is_algebraic,
    seeds_for,
)
from spec.domains import BINARY32, RATIONAL, Domain
from spec.errors import DomainError, GraphError, ShapeError
from spec.graph import (
    Graph,
    GraphBuilder,
    backprop_all_ctx,
    backprop_ctx,
    eval_graph,
    format_graph,
    jvp_ctx,
    node_vjp_dense,
)
from spec.ops import get_op
from spec.shape import size
from spec.tensor import Tensor, TensorPack, dot_list

R, F32 = RATIONAL, BINARY32


def _same_pack(D: Domain, a: TensorPack | list[Tensor], b: TensorPack | list[Tensor]) -> bool:
    ta = a.tensors if isinstance(a, TensorPack) else tuple(a)
    tb = b.tensors if isinstance(b, TensorPack) else tuple(b)
    return len(ta) == len(tb) and all(x.same(D, y) for x, y in zip(ta, tb, strict=True))


def _run_or_reject(fn: Any, *args: Any, **kw: Any) -> Any:
    """Graphs that request `log` may feed it a NaN (see conformance.graphs, invariant 6)."""
    try:
        return fn(*args, **kw)
    except DomainError:
        reject()


def _is_binary32(v: Any) -> bool:
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        return True
    exact = F32.to_rational(v)
    return Q(f) == exact and Q(float(np.float32(f))) == exact


# --------------------------------------------------------------------------- the generator


@pytest.mark.parametrize("kind", ["rational", "float"])
@given(data=st.data())
def test_generated_graphs_keep_the_documented_invariants(kind: str, data: st.DataObject) -> None:
    g = data.draw(graphs(ops=None if kind == "rational" else GRAPH_OPS, domain_kind=kind))
    assert 1 <= g.num_inputs <= 3 and len(g.nodes) <= 6
    assert all(s in INPUT_SHAPES for s in g.inputs)
    assert all(size(s) <= MAX_ELEMENTS for s in g.shapes)
    producer = {g.num_inputs + k: n for k, n in enumerate(g.nodes)}

    def positive(v: int) -> bool:
        n = producer.get(v)
        if n is None:
            return False
        if n.op == "clamp":
            return n.attrs["lo"] > 0
        return n.op == "const" and all(q > 0 for q in n.attrs["values"])

    for n in g.nodes:
        assert n.op != "select" or n.attrs["env_slot"] is None
        if kind == "rational":
            assert is_algebraic(n.op), n.op
            if n.op in ("div", "inv"):
                assert positive(n.args[-1]), format_graph(g)
        if n.op == "log":
            assert positive(n.args[0]), format_graph(g)


def test_generator_rejects_bad_op_lists() -> None:
    with pytest.raises(ValueError, match="not algebraic"):
        graphs(ops=["exp"])
    with pytest.raises(ValueError, match="no generator"):
        graphs(ops=["frobnicate"], domain_kind="float")
    with pytest.raises(ValueError, match="domain_kind"):
        graphs(domain_kind="complex")
    with pytest.raises(ValueError, match="min <= max"):
        graphs(min_nodes=3, max_nodes=2)
    assert "log" not in DEFAULT_FLOAT_OPS and "log" in GRAPH_OPS
    assert {op for op in GRAPH_OPS if is_algebraic(op)} == ALGEBRAIC_OPS


# --------------------------------------------------------------------------- backprop_all_ctx


def _check_all_ctx_prefix(D: Domain, g: Graph, xs: list[Tensor], seed: TensorPack) -> None:
    full = _run_or_reject(backprop_all_ctx, D, g, xs, seed)
    ctx = backprop_ctx(D, g, xs, seed)
    assert full.shapes == g.shapes
    assert ctx.shapes == g.inputs
    assert _same_pack(D, list(full.tensors[: g.num_inputs]), ctx)
    # the last value's cotangent is its seed (nothing comes after it)
    assert full.tensors[-1].same(D, seed.tensors[-1])


@given(graph_cases(R))
def test_all_ctx_prefix_is_backprop_ctx_rational(case: Any) -> None:
    _check_all_ctx_prefix(R, *case)


@given(graph_cases(F32, ops=GRAPH_OPS, domain_kind="float"))
def test_all_ctx_prefix_is_backprop_ctx_binary32(case: Any) -> None:
    _check_all_ctx_prefix(F32, *case)


@given(graph_cases(F32, specials=True, ops=DEFAULT_FLOAT_OPS, domain_kind="float"))
def test_all_ctx_prefix_is_backprop_ctx_binary32_specials(case: Any) -> None:
    _check_all_ctx_prefix(F32, *case)


def _check_recursive_definition(D: Domain, g: Graph, xs: list[Tensor], seed: TensorPack) -> None:
    """DESIGN.md: snoc(prefix, node) -> contrib = node.vjp(eval(prefix), seed_out); recurse on
    the prefix with seed_prev + contrib (existing on the left); append seed_out."""
    full = _run_or_reject(backprop_all_ctx, D, g, xs, seed)
    if not g.nodes:
        assert _same_pack(D, full, seed)  # nil -> seed
        return
    prefix = g.prefix(len(g.nodes) - 1)
    seed_prev, seed_out = seed.unsnoc()
    vals = eval_graph(D, prefix, xs).tensors
    contrib = node_vjp_dense(D, g.nodes[-1], prefix.shapes, vals, seed_out, ())
    inner = backprop_all_ctx(D, prefix, xs, seed_prev.add(D, TensorPack.of(contrib)))
    assert _same_pack(D, full, inner.snoc(seed_out))


@given(graph_cases(R))
def test_backprop_all_ctx_follows_the_recursive_definition_rational(case: Any) -> None:
    _check_recursive_definition(R, *case)


@given(graph_cases(F32, ops=GRAPH_OPS, domain_kind="float"))
def test_backprop_all_ctx_follows_the_recursive_definition_binary32(case: Any) -> None:
    _check_recursive_definition(F32, *case)


# --------------------------------------------------------------------------- adjointness


@given(st.data())
def test_adjointness_rational(data: st.DataObject) -> None:
    """<jvp_ctx(x, dx), seed> == <dx, backprop_ctx(x, seed)>, exactly, for algebraic ops."""
    g, xs, seed = data.draw(graph_cases(R))
    dxs = data.draw(inputs_for(g, R))
    tangents = jvp_ctx(R, g, xs, dxs)
    cot = backprop_ctx(R, g, xs, seed)
    assert dot_list(R, tangents, seed) == dot_list(R, TensorPack.of(dxs), cot)


@given(st.data())
def test_backprop_is_linear_in_the_seed_rational(data: st.DataObject) -> None:
    g, xs, s1 = data.draw(graph_cases(R))
    s2 = data.draw(seeds_for(g, R))
    lhs = backprop_all_ctx(R, g, xs, s1.add(R, s2))
    rhs = backprop_all_ctx(R, g, xs, s1).add(R, backprop_all_ctx(R, g, xs, s2))
    assert lhs == rhs


@given(st.data())
def test_jvp_is_linear_in_the_tangent_rational(data: st.DataObject) -> None:
    g, xs, _ = data.draw(graph_cases(R))
    d1, d2 = data.draw(inputs_for(g, R)), data.draw(inputs_for(g, R))
    dsum = TensorPack.of(d1).add(R, TensorPack.of(d2)).tensors
    lhs = jvp_ctx(R, g, xs, dsum)
    rhs = jvp_ctx(R, g, xs, d1).add(R, jvp_ctx(R, g, xs, d2))
    assert lhs == rhs


@pytest.mark.parametrize("op", sorted(ALGEBRAIC_OPS))
@settings(max_examples=6)
@given(data=st.data())
def test_adjointness_per_algebraic_op(op: str, data: st.DataObject) -> None:
    g = data.draw(graphs(ops=[op, "reshape"], min_nodes=2))
    xs, dxs = data.draw(inputs_for(g, R)), data.draw(inputs_for(g, R))
    seed = data.draw(seeds_for(g, R))
    assert dot_list(R, jvp_ctx(R, g, xs, dxs), seed) == dot_list(
        R, TensorPack.of(dxs), backprop_ctx(R, g, xs, seed)
    )


# --------------------------------------------------------------------------- per-node rules


def _check_node_rules(D: Domain, g: Graph, xs: list[Tensor], seed: TensorPack) -> None:
    """Every node's rules return the right number of tensors with the right shapes."""
    vals = _run_or_reject(eval_graph, D, g, xs).tensors
    tans = jvp_ctx(D, g, xs, xs).tensors
    for k, node in enumerate(g.nodes):
        idx = g.num_inputs + k
        d = get_op(node.op)
        args = [vals[a] for a in node.args]
        attrs = dict(node.attrs)
        out = d.forward(D, args, attrs, ())
        assert out.shape == g.shapes[idx] == d.shape([a.shape for a in args], attrs)
        assert d.jvp(D, args, [tans[a] for a in node.args], attrs, ()).shape == g.shapes[idx]
        per_arg = d.vjp(D, args, seed.tensors[idx], attrs, ())
        assert len(per_arg) == len(node.args), f"{node.op}: one cotangent per argument"
        for ct, a in zip(per_arg, node.args, strict=True):
            assert ct.shape == g.shapes[a], node.op
        dense = node_vjp_dense(D, node, g.shapes[:idx], vals, seed.tensors[idx], ())
        assert [t.shape for t in dense] == list(g.shapes[:idx])
        for j, t in enumerate(dense):
            if j not in node.args:  # not an argument: an exact zero
                assert all(D.same(v, D.zero()) for v in t.data), (node.op, j)
            elif node.args.count(j) == 1:  # a single use: the rule's cotangent as is
                assert t.same(D, per_arg[node.args.index(j)])


@given(graph_cases(R))
def test_node_rules_shapes_rational(case: Any) -> None:
    _check_node_rules(R, *case)


@given(graph_cases(F32, ops=GRAPH_OPS, domain_kind="float"))
def test_node_rules_shapes_binary32(case: Any) -> None:
    _check_node_rules(F32, *case)


@pytest.mark.parametrize("op", sorted(GRAPH_OPS))
@settings(max_examples=6)
@given(data=st.data())
def test_node_rules_shapes_per_op(op: str, data: st.DataObject) -> None:
    g = data.draw(graphs(ops=[op, "reshape"], min_nodes=2, domain_kind="float"))
    _check_node_rules(F32, g, data.draw(inputs_for(g, F32)), data.draw(seeds_for(g, F32)))


# --------------------------------------------------------------------------- eval, jvp shapes


def _check_shapes(D: Domain, g: Graph, xs: list[Tensor]) -> None:
    vals = _run_or_reject(eval_graph, D, g, xs)
    assert [t.shape for t in vals.tensors] == list(g.shapes)
    assert all(len(t.data) == size(t.shape) for t in vals.tensors)
    assert _same_pack(D, list(vals.tensors[: g.num_inputs]), xs)  # inputs pass through
    tans = jvp_ctx(D, g, xs, xs)
    assert [t.shape for t in tans.tensors] == list(g.shapes)
    assert _same_pack(D, list(tans.tensors[: g.num_inputs]), xs)  # input tangents too


@given(st.data())
def test_eval_shapes_match_graph_shapes_rational(data: st.DataObject) -> None:
    g = data.draw(graphs())
    _check_shapes(R, g, data.draw(inputs_for(g, R)))


@given(st.data())
def test_eval_shapes_match_graph_shapes_binary32(data: st.DataObject) -> None:
    g = data.draw(graphs(ops=GRAPH_OPS, domain_kind="float"))
    _check_shapes(F32, g, data.draw(inputs_for(g, F32, specials=True)))


@given(graph_cases(F32, specials=True, ops=DEFAULT_FLOAT_OPS, domain_kind="float"))
def test_every_binary32_result_is_a_binary32_number(case: Any) -> None:
    g, xs, seed = case
    packs = [eval_graph(F32, g, xs), jvp_ctx(F32, g, xs, xs), backprop_all_ctx(F32, g, xs, seed)]
    for p in packs:
        for t in p.tensors:
            for v in t.data:
                assert _is_binary32(v), v


# --------------------------------------------------------------------------- hand-worked cases


def _s(D: Domain, v: Any) -> Tensor:
    return Tensor((), (D.from_float(v) if isinstance(v, float) else D.from_rational(Q(v)),))


def _pack(D: Domain, g: Graph, *vs: Any) -> TensorPack:
    return TensorPack(g.shapes, tuple(_s(D, v) for v in vs))


def _fanout() -> Graph:
    b = GraphBuilder()
    x = b.input(())
    sq = b.node("mul", x, x)
    return b.build(b.node("add", sq, x))


def test_fanout_x_squared_plus_x() -> None:
    g = _fanout()  # y = x*x + x
    x = [_s(R, 3)]
    assert eval_graph(R, g, x).tensors[-1] == _s(R, 12)
    assert backprop_ctx(R, g, x, _pack(R, g, 0, 0, 1)).tensors[0] == _s(R, 7)  # 2x + 1
    assert backprop_all_ctx(R, g, x, _pack(R, g, 0, 0, 1)) == _pack(R, g, 7, 1, 1)
    assert jvp_ctx(R, g, x, [_s(R, 1)]) == _pack(R, g, 1, 6, 7)


def test_fanout_with_seeds_on_intermediates() -> None:
    # node 2 (add %1, %0), seed_out 1: ct = [1+1, 10+1];
    # node 1 (mul %0, %0), seed_out 11: contrib 11*3 + 3*11 = 66 -> ct0 = 2 + 66.
    g = _fanout()
    full = backprop_all_ctx(R, g, [_s(R, 3)], _pack(R, g, 1, 10, 1))
    assert full == _pack(R, g, 68, 11, 1)


def test_accumulation_order_is_existing_plus_contribution_binary32() -> None:
    # %1 = scale(%0, c=1), %2 = add(%0, %1); seed [1, -2^25, 2^24].
    # node 2: ct0 = 1 + 2^24 = 2^24 (tie to even), ct1 = -2^25 + 2^24 = -2^24
    # node 1: ct0 = 2^24 + 1*(-2^24) = 0.  (Adding the contributions first would give 1.)
    g = Graph([()]).snoc("scale", [0], c=1).snoc("add", [0, 1])
    seed = _pack(F32, g, 1.0, -(2.0**25), 2.0**24)
    full = backprop_all_ctx(F32, g, [_s(F32, 5.0)], seed)
    assert [float(t.data[0]) for t in full.tensors] == [0.0, -(2.0**24), 2.0**24]
    # Exactly, the same seed gives 1 for the input.
    rat = backprop_all_ctx(R, g, [_s(R, 5)], _pack(R, g, 1, -(2**25), 2**24))
    assert rat.tensors[0] == _s(R, 1)


def test_fan_in_is_folded_within_the_node_first_binary32() -> None:
    # %1 = mul(%0, %0) at x = 3/4, seed [2^24, 1]: the node's two cotangents 3/4 and 3/4
    # fold to 3/2 first, then 2^24 + 3/2 = 16777217.5 rounds to 16777218 (spacing 2).
    # Adding them one at a time would give (2^24 + 3/4) + 3/4 = 2^24.
    g = Graph([()]).snoc("mul", [0, 0])
    full = backprop_all_ctx(F32, g, [_s(F32, 0.75)], _pack(F32, g, 2.0**24, 1.0))
    assert float(full.tensors[0].data[0]) == 16777218.0


def test_broadcast_cotangent_in_a_graph() -> None:
    g = Graph([(3,), ()]).snoc("add", [0, 1])
    x = [Tensor((3,), (Q(1), Q(2), Q(3))), _s(R, 10)]
    seed = TensorPack.single(R, g.shapes, 2, Tensor((3,), (Q(1), Q(2), Q(3))))
    ct = backprop_ctx(R, g, x, seed)
    assert ct.tensors[0] == Tensor((3,), (Q(1), Q(2), Q(3)))
    assert ct.tensors[1] == _s(R, 6)


def test_unused_values_get_their_seed_only() -> None:
    g = Graph([(), ()]).snoc("neg", [0])
    full = backprop_all_ctx(R, g, [_s(R, 1), _s(R, 2)], _pack(R, g, 5, 7, 1))
    assert full == _pack(R, g, 4, 7, 1)


def test_graph_without_nodes_returns_the_seed() -> None:
    g = Graph([(2,)])
    seed = TensorPack.of([Tensor((2,), (Q(1), Q(-1)))])
    assert backprop_all_ctx(R, g, [Tensor((2,), (Q(0), Q(0)))], seed) == seed


# --------------------------------------------------------------------------- checks


def test_eval_checks_inputs() -> None:
    g = Graph([(2,)]).snoc("neg", [0])
    with pytest.raises(ShapeError, match="expected 1 inputs, got 0"):
        eval_graph(R, g, [])
    with pytest.raises(ShapeError, match=r"input 0 \(expected shape \(2,\), got \(3,\)\)"):
        eval_graph(R, g, [Tensor((3,), (Q(0),) * 3)])
    with pytest.raises(ShapeError, match="tangents"):
        jvp_ctx(R, g, [Tensor((2,), (Q(0),) * 2)], [Tensor((), (Q(0),))])


def test_backprop_checks_seed_shapes() -> None:
    g = Graph([(2,)]).snoc("sum", [0])
    x = [Tensor((2,), (Q(1), Q(2)))]
    with pytest.raises(ShapeError, match="seed shapes"):
        backprop_all_ctx(R, g, x, TensorPack.of([x[0]]))
    with pytest.raises(ShapeError, match="seed shapes"):
        backprop_ctx(R, g, x, TensorPack.of([x[0], x[0]]))


def test_builder_output_must_be_last() -> None:
    b = GraphBuilder()
    x = b.input((2,))
    b.node("neg", x)
    with pytest.raises(GraphError, match="not the last value"):
        b.build(output=x)
    with pytest.raises(GraphError, match="precede"):
        b.input(())


def test_graph_equality_and_prefix() -> None:
    g = _fanout()
    assert g == _fanout() and hash(g) == hash(_fanout())
    assert g.prefix(1) == Graph([()]).snoc("mul", [0, 0])
    assert g != Graph([()]).snoc("mul", [0, 0]).snoc("add", [0, 1])
    assert g.num_inputs == 1 and g.num_values == 3
