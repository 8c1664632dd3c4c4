"""runtime.engine.lower: the tape layout of a lowered graph, its dense backward closures, the
compiled artifact, and lowering-time errors.

Oracles: the spec graph semantics (`eval_graph`, `node_vjp_dense`, `backprop_all_ctx`) in the
matching domain, and the structure stated in the module's invariants.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.graphs import graphs, inputs_for, seeds_for, tensors_for
from runtime.backends.base import DTYPE_DOMAIN, from_spec, to_spec
from runtime.engine.lower import Compiled, compile_graph, lower
from spec.errors import DomainError, GraphError, ShapeError, TorchLeanError
from spec.graph import (
    Graph,
    GraphBuilder,
    Node,
    backprop_all_ctx,
    eval_graph,
    jvp_ctx,
    node_vjp_dense,
)
from spec.tensor import Tensor, TensorPack

DTYPES = ("exact", "float32", "bfloat16", "float64", "float16")


@st.composite
def cases(draw: Any, dtype: str) -> tuple[Graph, list[Tensor], TensorPack]:
    D = DTYPE_DOMAIN[dtype]
    kind = "rational" if dtype == "exact" else "float"
    g = draw(graphs(domain_kind=kind, max_nodes=5))
    xs = draw(inputs_for(g, D, specials=dtype != "exact" and draw(st.booleans())))
    seed = draw(seeds_for(g, D))
    return g, xs, seed


def _same(D: Any, dtype: str, a: Any, b: Tensor) -> bool:
    return to_spec(np.asarray(a), dtype).same(D, b)


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25)
@given(data=st.data())
def test_lowered_tape_layout_and_values(dtype: str, data: st.DataObject) -> None:
    D = DTYPE_DOMAIN[dtype]
    g, xs, _ = data.draw(cases(dtype))
    tape = lower(g, [from_spec(x, dtype) for x in xs], dtype=dtype, kernels="ordered")
    n_in = g.num_inputs
    assert len(tape) == g.num_values == n_in + len(g.nodes)
    for i in range(n_in):
        node = tape.nodes[i]
        assert node.parents == () and node.requires_grad and node.backward is None
    for k, gnode in enumerate(g.nodes):
        node = tape.nodes[n_in + k]
        assert node.name == gnode.op and node.parents == gnode.args
        assert node.requires_grad and node.backward is not None  # even detach and const
    want = eval_graph(D, g, xs).tensors
    for i, (node, w) in enumerate(zip(tape.nodes, want, strict=True)):
        assert tuple(node.value.shape) == g.shapes[i]
        assert _same(D, dtype, node.value, w), f"value %{i}"


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=25)
@given(data=st.data())
def test_lowered_backward_is_dense_over_every_earlier_id(dtype: str, data: st.DataObject) -> None:
    D = DTYPE_DOMAIN[dtype]
    g, xs, seed = data.draw(cases(dtype))
    tape = lower(
        g, [from_spec(x, dtype) for x in xs], dtype=dtype, kernels="ordered", emission="dense"
    )
    vals = eval_graph(D, g, xs).tensors
    for k, gnode in enumerate(g.nodes):
        i = g.num_inputs + k
        with np.errstate(all="ignore"):  # as in the tape's reverse pass
            out = tape.nodes[i].backward(from_spec(seed.tensors[i], dtype))  # type: ignore[misc]
        assert [j for j, _ in out] == list(range(i))  # every earlier id, increasing
        want = node_vjp_dense(D, gnode, g.shapes[:i], vals, seed.tensors[i], ())
        for (j, grad), w in zip(out, want, strict=True):
            assert tuple(grad.shape) == g.shapes[j] and grad.dtype == tape.nodes[j].value.dtype
            assert _same(D, dtype, grad, w), f"node %{i} -> %{j}"
            if j not in gnode.args:
                assert _same(D, dtype, grad, Tensor.zeros(D, g.shapes[j]))  # +0 elsewhere


def _bits(a: Any) -> Any:
    a = np.asarray(a)
    return a.tolist() if a.dtype == object else (a.dtype.str, a.shape, a.tobytes())


@pytest.mark.parametrize("dtype", ["exact", "float32", "float16"])
@settings(max_examples=40)
@given(data=st.data())
def test_lazy_zero_rest_equals_dense_emission(dtype: str, data: st.DataObject) -> None:
    """The default emission (one ZERO_REST pair, applied lazily by the tape) gives the same
    bits as the dense reference for every seed, signed zeros included: a slot that is −0
    becomes +0 exactly when a dense zero would have been added to it."""
    D = DTYPE_DOMAIN[dtype]
    g, xs, seed = data.draw(cases(dtype))
    if dtype != "exact":  # make −0 slots common: some seeds all −0, the rest as drawn
        negz = D.from_float(-0.0)
        pick = data.draw(st.lists(st.booleans(), min_size=g.num_values, max_size=g.num_values))
        seed = TensorPack.of(
            [
                Tensor(t.shape, (negz,) * len(t.data)) if z else t
                for t, z in zip(seed.tensors, pick, strict=True)
            ]
        )
    arrays = [from_spec(x, dtype) for x in xs]
    seeds = [from_spec(t, dtype) for t in seed.tensors]
    dense = lower(g, arrays, dtype=dtype, kernels="ordered", emission="dense")
    lazy = lower(g, arrays, dtype=dtype, kernels="ordered")
    with np.errstate(all="ignore"):
        want = dense.backward_dense_from(list(seeds))
        got = lazy.backward_dense_from(list(seeds))
        out = g.num_values - 1
        want_sparse = dense.backward_dense(out, seeds[out])
        got_sparse = lazy.backward_dense(out, seeds[out])
    assert [_bits(a) for a in got] == [_bits(a) for a in want]
    assert [None if a is None else _bits(a) for a in got_sparse] == [
        None if a is None else _bits(a) for a in want_sparse
    ]


def test_lazy_zero_rest_turns_a_negative_zero_slot_positive() -> None:
    """Hand-worked: %1 = neg(%0), %2 = neg(%1), every seed −0, visited %2, %1, %0.
    Node %2 gives %1 neg(−0) = +0 (−0 + +0 = +0) and %0 a dense zero (−0 + 0 = +0);
    node %1 then gives %0 neg(+0) = −0 (+0 + −0 = +0). So %0 = +0, %1 = +0, %2 = −0; a
    tape that dropped the zeros would leave %0 = −0 + −0 = −0."""
    b = GraphBuilder()
    x = b.input((1,))
    y = b.node("neg", x)
    b.node("neg", y)
    g = b.build()
    for emission in ("dense", "zero_rest"):
        tape = lower(g, [np.array([1.5], np.float32)], dtype="float32", kernels="ordered",
                     emission=emission)  # fmt: skip
        got = tape.backward_dense_from([np.array([-0.0], np.float32) for _ in range(3)])
        assert [float(np.copysign(1, v[0])) for v in got] == [1.0, 1.0, -1.0], emission


@pytest.mark.parametrize(
    ("dtype", "kernels"),
    [("exact", "ordered"), ("float32", "ordered"), ("float32", "fast"), ("float16", "fast")],
)
@settings(max_examples=25)
@given(data=st.data())
def test_compile_matches_lower(dtype: str, kernels: str, data: st.DataObject) -> None:
    D = DTYPE_DOMAIN[dtype]
    g, xs, seed = data.draw(cases(dtype))
    xs2 = data.draw(inputs_for(g, D))
    c = compile_graph(g, dtype=dtype, kernels=kernels)
    assert isinstance(c, Compiled) and c.graph is g
    for inputs in (xs, xs2, xs):  # reusable: later runs do not depend on earlier ones
        arrays = [from_spec(x, dtype) for x in inputs]
        run = c(arrays)
        ref = lower(g, arrays, dtype=dtype, kernels=kernels)
        assert len(run.values) == len(ref)
        for a, node in zip(run.values, ref.nodes, strict=True):
            assert _same(D, dtype, a, to_spec(node.value, dtype))
        seeds = [from_spec(t, dtype) for t in seed.tensors]
        got = run.backward(seeds)
        want = ref.backward_dense_from(seeds)
        for a, b in zip(got, want, strict=True):
            assert _same(D, dtype, a, to_spec(b, dtype))
        if kernels == "ordered":  # and both equal spec
            spec_ct = backprop_all_ctx(D, g, inputs, seed).tensors
            for a, b in zip(got, spec_ct, strict=True):
                assert _same(D, dtype, a, b)


# --------------------------------------------------------------------------- errors


def _g_add() -> Graph:
    b = GraphBuilder()
    x = b.input((2, 3))
    y = b.input((3,))
    b.node("add", x, y)
    return b.build()


def test_lower_rejects_wrong_input_counts_and_shapes() -> None:
    g = _g_add()
    x, y = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with pytest.raises(ShapeError, match="expected 2 inputs, got 1"):
        lower(g, [x])
    with pytest.raises(ShapeError, match="expected 2 inputs, got 3"):
        lower(g, [x, y, y])
    with pytest.raises(ShapeError, match=r"input 1 \(expected shape \(3,\), got \(2,\)\)"):
        lower(g, [x, np.ones(2, np.float32)])
    with pytest.raises(ShapeError, match="input 0"):
        lower(g, [np.ones((3, 2), np.float32), y])
    with pytest.raises(TorchLeanError, match="no silent casts"):
        lower(g, [x.astype(np.float64), y])
    with pytest.raises(ShapeError):
        compile_graph(g)([x])
    # Python numbers are accepted and rounded once
    t = lower(g, [[[0.1] * 3] * 2, [1, 2, 3]], dtype="float32")
    assert t.nodes[0].value.dtype == np.float32
    assert float(t.nodes[0].value[0, 0]) == float(np.float32(0.1))


@pytest.mark.parametrize(
    "nodes",
    [
        (Node("add", (0, 5), {}),),  # argument id out of range
        (Node("relu", (0,), {"alpha": 1}),),  # unknown attribute
        (Node("matmul", (0, 1), {}),),  # shape rule: (2, 3) @ (3,) is not allowed
        (Node("no_such_op", (0,), {}),),
        (Node("add", (0, 1), {}), Node("add", (3, 0), {})),  # forward reference
    ],
)
def test_lower_validates_the_graph(nodes: tuple[Node, ...]) -> None:
    g = _g_add()
    with pytest.raises(AttributeError):
        g.nodes = nodes  # a Graph is immutable ...
    object.__setattr__(g, "nodes", nodes)  # ... but lower() re-validates even a forced one
    x, y = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with pytest.raises((GraphError, ShapeError)):
        lower(g, [x, y])


@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16", "float16"])
@pytest.mark.parametrize("bad", [0.0, -0.0, -1.0, float("nan"), float("-inf")])
def test_log_precondition_raises_at_lowering(dtype: str, bad: float) -> None:
    b = GraphBuilder()
    x = b.input((3,))
    b.node("log", b.node("exp", x))
    b2 = GraphBuilder()
    x2 = b2.input((3,))
    b2.node("log", x2)
    D = DTYPE_DOMAIN[dtype]
    vals = Tensor((3,), (D.from_float(2.0), D.from_float(bad), D.one()))
    with pytest.raises(DomainError, match="log"):
        lower(b2.build(), [from_spec(vals, dtype)], dtype=dtype, kernels="ordered")
    with pytest.raises(DomainError, match="log"):
        compile_graph(b2.build(), dtype=dtype)([from_spec(vals, dtype)])
    # checked on log's actual argument, not on the graph inputs: exp(-inf) = +0, exp(NaN)
    # = NaN are refused, exp(0) = 1 and exp(-1) > 0 are fine
    if bad == float("-inf") or bad != bad:
        with pytest.raises(DomainError):
            lower(b.build(), [from_spec(vals, dtype)], dtype=dtype, kernels="ordered")
    else:
        lower(b.build(), [from_spec(vals, dtype)], dtype=dtype, kernels="ordered")
    # the spec refuses the same inputs
    with pytest.raises(DomainError):
        eval_graph(D, b2.build(), [vals])


def test_log_of_positive_inputs_and_safe_log_of_zero_lower_fine() -> None:
    b = GraphBuilder()
    x = b.input((2,))
    b.node("log", x)
    t = lower(b.build(), [np.array([1.0, 2.0**-149], np.float32)], kernels="ordered")
    assert float(t.nodes[1].value[0]) == 0.0
    b = GraphBuilder()
    x = b.input((2,))
    b.node("safe_log", x)
    t = lower(b.build(), [np.array([0.0, -1.0], np.float32)], kernels="ordered")
    want = float(
        DTYPE_DOMAIN["float32"].log(DTYPE_DOMAIN["float32"].from_rational(Fraction(1, 2**24)))
    )
    assert [float(v) for v in t.nodes[-1].value] == [want, want]


def test_env_is_threaded_to_select() -> None:
    b = GraphBuilder()
    x = b.input((3, 2))
    b.node("select", x, env_slot=0)
    g = b.build()
    D = DTYPE_DOMAIN["exact"]
    xs = [Tensor((3, 2), tuple(Fraction(i) for i in range(6)))]
    t = lower(g, [from_spec(xs[0], "exact")], (2,), dtype="exact", kernels="ordered")
    assert to_spec(t.nodes[1].value, "exact").same(D, eval_graph(D, g, xs, (2,)).tensors[1])
    assert list(t.nodes[1].value) == [Fraction(4), Fraction(5)]
    with pytest.raises(GraphError):
        lower(g, [from_spec(xs[0], "exact")], (), dtype="exact")
    with pytest.raises(ShapeError):
        lower(g, [from_spec(xs[0], "exact")], (3,), dtype="exact")


@settings(max_examples=10)
@given(data=st.data())
def test_lowered_tape_backward_dense_from_is_the_link(data: st.DataObject) -> None:
    """The link theorem on one concrete dtype through the tape's own pass (smoke)."""
    D = DTYPE_DOMAIN["exact"]
    g = data.draw(graphs(max_nodes=4))
    xs = data.draw(tensors_for(g.inputs, D))
    seed = data.draw(seeds_for(g, D))
    tape = lower(g, [from_spec(x, "exact") for x in xs], dtype="exact", kernels="ordered")
    got = tape.backward_dense_from([from_spec(t, "exact") for t in seed.tensors])
    want = backprop_all_ctx(D, g, xs, seed).tensors
    for a, b in zip(got, want, strict=True):
        assert _same(D, "exact", a, b)


# --------------------------------------------------------------------------- forward mode


@pytest.mark.parametrize("dtype", DTYPES)
@settings(max_examples=20)
@given(data=st.data())
def test_lowered_tape_forward_mode_is_jvp_ctx(dtype: str, data: st.DataObject) -> None:
    """A lowered tape carries its kernels' JVPs: `forward_tangents` == spec `jvp_ctx`, bit
    for bit with the ordered kernels (it used to return silent zeros)."""
    D = DTYPE_DOMAIN[dtype]
    g, xs, seed = data.draw(cases(dtype))
    dxs = list(seed.tensors[: g.num_inputs])
    tape = lower(g, [from_spec(x, dtype) for x in xs], dtype=dtype, kernels="ordered")
    got = tape.forward_tangents({i: from_spec(t, dtype) for i, t in enumerate(dxs)})
    want = jvp_ctx(D, g, xs, dxs).tensors
    for i, (a, w) in enumerate(zip(got, want, strict=True)):
        assert _same(D, dtype, a, w), f"tangent %{i}"


def test_forward_tangents_refuses_a_node_without_a_forward_rule() -> None:
    from runtime.engine.tape import Tape

    t = Tape()
    x = t.leaf(np.float32(2.0))
    y = t.add_node("custom", np.float32(4.0), True, (x,), lambda g: [(x, g)])
    with pytest.raises(GraphError, match=r"node 1 \(custom\) has no forward-mode rule"):
        t.forward_tangents({x: np.float32(1.0)})
    with pytest.raises(GraphError, match="invalid tape id 7"):
        t.forward_tangents({7: np.float32(1.0)})
    frozen = Tape()
    a = frozen.leaf(np.float32(2.0), requires_grad=False)
    frozen.add_node("custom", np.float32(4.0), False, (a,), None)
    assert [float(v) for v in frozen.forward_tangents({})] == [0.0, 0.0]  # frozen: zeros
    assert y == 1
