"""The op table, iterated: every entry is complete, and every op's forward/JVP/VJP runs on a
small valid example in BINARY32 and (when algebraic) RATIONAL, with the right shapes, exact
adjointness over RATIONAL and a finite-difference check of the derivative over FLOAT64.

The example table `EXAMPLES` must name every op in `spec.ops.OPS`, so an op added to the
table without an example (or removed from it) fails here.
"""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

from conformance.graphs import GRAPH_OPS
from spec.domains import BINARY32, FLOAT64, RATIONAL, Domain
from spec.errors import GraphError
from spec.graph import Graph
from spec.ops import OPS, AttrSpec, OpDef, get_op
from spec.shape import size
from spec.tensor import Tensor, dot
from spec.validate import check_node

REQUIRED = """
add sub neg mul scale div inv matmul linear sum reduce_sum reduce_mean mean relu abs maximum
minimum clamp sqrt exp log safe_log tanh sigmoid softplus gelu silu sin cos reshape
swap_adjacent transpose broadcast_to concat slice select index_select scatter_add softmax
log_softmax mse_loss cross_entropy detach const gather reduce_max mask_neg_inf conv2d
conv_transpose2d avg_pool2d max_pool2d layer_norm batch_norm scaled_dot_product_attention
multi_head_attention embedding one_hot
""".split()

ATTR_KINDS = {"int", "nat", "ints", "shape", "rational", "rationals"}


def _vals(shape: tuple[int, ...], *values: Any) -> tuple[tuple[int, ...], tuple[Q, ...]]:
    assert len(values) == size(shape), (shape, values)
    return shape, tuple(Q(v) for v in values)


# op -> (arguments as (shape, exact values), attributes). Points are generic: no ties, no
# kinks, positive where a log/sqrt needs it, nonzero denominators, so every differentiable
# op is smooth in a neighbourhood (finite differences apply).
EXAMPLES: dict[str, tuple[list[tuple[tuple[int, ...], tuple[Q, ...]]], dict[str, Any]]] = {
    "add": ([_vals((2, 3), 1, -2, Q(3, 2), Q(1, 2), Q(5, 4), -3), _vals((3,), Q(1, 2), -1, 2)], {}),
    "sub": ([_vals((2, 1), 1, -2), _vals((1, 3), Q(1, 2), -1, 3)], {}),
    "mul": ([_vals((3,), 1, -2, Q(3, 4)), _vals((), Q(-3, 2))], {}),
    "div": ([_vals((2, 2), 1, -2, 3, Q(1, 2)), _vals((2,), 2, Q(-1, 2))], {}),
    "maximum": ([_vals((3,), 1, -2, 3), _vals((3,), 2, -3, Q(1, 2))], {}),
    "minimum": ([_vals((2, 3), 1, -2, 3, Q(-1, 2), Q(1, 4), -1), _vals((), Q(1, 3))], {}),
    "neg": ([_vals((3,), 1, -2, Q(1, 2))], {}),
    "scale": ([_vals((3,), 1, -2, Q(1, 2))], {"c": Q(1, 3)}),
    "relu": ([_vals((4,), -1, 2, Q(-1, 2), 3)], {}),
    "abs": ([_vals((3,), -1, 2, Q(-1, 2))], {}),
    "clamp": ([_vals((4,), -2, Q(-1, 2), Q(1, 2), 3)], {"lo": -1, "hi": 1}),
    "sqrt": ([_vals((3,), Q(1, 4), 4, 2)], {}),
    "exp": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "log": ([_vals((3,), Q(1, 2), 2, 3)], {}),
    "tanh": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "sin": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "cos": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "detach": ([_vals((2,), 1, -2)], {}),
    "const": ([], {"shape": (2,), "values": (Q(1, 3), -2)}),
    "sum": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {}),
    "reduce_sum": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {"axis": 1}),
    "matmul": (
        [_vals((2, 2, 3), *range(1, 13)), _vals((3, 2), 1, -1, 2, Q(1, 2), 0, 3)],
        {},
    ),
    "linear": (
        [
            _vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1),
            _vals((2, 3), 1, 0, -1, 2, 1, Q(1, 2)),
            _vals((2,), Q(1, 4), -3),
        ],
        {},
    ),
    "reshape": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {"shape": (3, 2)}),
    "swap_adjacent": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {"axis": 0}),
    "broadcast_to": ([_vals((2, 1), 1, -2)], {"shape": (2, 2, 3)}),
    "concat": ([_vals((1, 2), 1, -2), _vals((2, 2), 3, Q(1, 2), 4, -1)], {}),
    "slice": ([_vals((3, 2), 1, -2, 3, Q(1, 2), 4, -1)], {"start": 1, "stop": 3}),
    "select": ([_vals((3, 2), 1, -2, 3, Q(1, 2), 4, -1)], {"index": 2}),
    "index_select": ([_vals((3, 2), 1, -2, 3, Q(1, 2), 4, -1)], {"indices": (2, 0, 2)}),
    "scatter_add": (
        [_vals((3, 2), 1, -2, 3, Q(1, 2), 4, -1)],
        {"indices": (1, 1, 0), "size": 3},
    ),
    "softmax": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {}),
    "log_softmax": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {}),
    "inv": ([_vals((3,), 2, Q(-1, 2), 4)], {}),
    "mean": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {}),
    "reduce_mean": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {"axis": 0}),
    "transpose": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {}),
    "sigmoid": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "softplus": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "gelu": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "silu": ([_vals((3,), -1, Q(1, 2), 2)], {}),
    "safe_log": ([_vals((3,), Q(1, 2), 2, 3)], {}),
    "mse_loss": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1), _vals((2, 3), 0, 1, 2, 0, 3, -2)], {}),
    "cross_entropy": (
        [_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1), _vals((2, 3), 0, 0, 1, 1, 0, 0)],
        {},
    ),
    # model-scale ops (spec/ops_model.py)
    "gather": (
        [_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)],
        {"indices": (2, 0, 3, 2), "shape": (2, 2)},
    ),
    "reduce_max": ([_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)], {"axis": 1}),
    # all kept: a masked -inf output would make the finite differences NaN (masking is
    # tested in tests/test_ops_model.py)
    "mask_neg_inf": (
        [_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1)],
        {"mask": (1, 1, 1), "mask_shape": (3,)},
    ),
    "conv2d": (
        [
            _vals((1, 3, 3), 1, -2, 3, Q(1, 2), 4, -1, 2, Q(-3, 2), 1),
            _vals((2, 1, 2, 2), 1, 0, -1, 2, Q(1, 2), 1, -2, 3),
            _vals((2,), Q(1, 4), -3),
        ],
        {"padding": (1, 0), "stride": (1, 2)},
    ),
    "conv_transpose2d": (
        [
            _vals((1, 2, 2), 1, -2, 3, Q(1, 2)),
            _vals((1, 2, 2, 2), 1, 0, -1, 2, Q(1, 2), 1, -2, 3),
            _vals((2,), Q(1, 4), -3),
        ],
        {"stride": (2, 1)},
    ),
    "avg_pool2d": (
        [_vals((1, 3, 3), 1, -2, 3, Q(1, 2), 4, -1, 2, Q(-3, 2), 1)],
        {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
    ),
    "max_pool2d": (
        [_vals((1, 3, 3), 1, -2, 3, Q(1, 2), 4, -1, 2, Q(-3, 2), Q(3, 4))],
        {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)},
    ),
    "layer_norm": (
        [_vals((2, 3), 1, -2, 3, Q(1, 2), 4, -1), _vals((3,), 1, 2, -1), _vals((3,), 0, 1, 2)],
        {},
    ),
    "batch_norm": (
        [
            _vals((2, 2, 2), 1, -2, 3, Q(1, 2), 4, -1, 2, Q(-3, 2)),
            _vals((2,), 1, 2),
            _vals((2,), 0, 1),
        ],
        {},
    ),
    "scaled_dot_product_attention": (
        [
            _vals((2, 2), 1, -2, Q(1, 2), 1),
            _vals((3, 2), 1, 0, -1, 2, Q(1, 2), 1),
            _vals((3, 2), Q(1, 4), -3, 2, 1, -1, Q(1, 2)),
        ],
        {"causal": 1},
    ),
    "multi_head_attention": (
        [
            _vals((2, 2), 1, -2, Q(1, 2), 1),
            _vals((2, 2), 1, 0, -1, 2),
            _vals((2, 2), Q(1, 4), -3, 2, 1),
            _vals((2, 2), 1, Q(1, 2), 0, 1),
            _vals((2, 2), Q(1, 2), 1, -1, 0),
            _vals((2, 2), 1, -1, Q(1, 2), 2),
            _vals((2, 2), Q(3, 4), 0, 1, -1),
        ],
        {"heads": 2},
    ),
    "embedding": ([_vals((3, 2), 1, -2, 3, Q(1, 2), 4, -1)], {"indices": (2, 0, 2)}),
    "one_hot": ([], {"indices": (2, 0), "num_classes": 3}),
}

# Deterministic, non-degenerate tangent / cotangent patterns.
_PATTERN = (Q(3, 10), Q(-7, 10), Q(1, 2), Q(9, 10), Q(-1, 5), Q(2, 5), Q(-3, 5), Q(1, 10))


def _pattern(shape: tuple[int, ...], shift: int) -> tuple[Q, ...]:
    return tuple(_PATTERN[(i + shift) % len(_PATTERN)] for i in range(size(shape)))


def _example(D: Domain, op: str) -> tuple[list[Tensor], dict[str, Any], list[Tensor], Tensor]:
    args, attrs = EXAMPLES[op]
    norm, out = check_node(op, list(range(len(args))), attrs, [s for s, _ in args])
    xs = [Tensor(s, tuple(D.from_rational(v) for v in vals)) for s, vals in args]
    dxs = [
        Tensor(s, tuple(D.from_rational(v) for v in _pattern(s, 3 * i)))
        for i, (s, _) in enumerate(args)
    ]
    g = Tensor(out, tuple(D.from_rational(v) for v in _pattern(out, 5)))
    return xs, norm, dxs, g


# --------------------------------------------------------------------------- table contents


def test_required_ops_present() -> None:
    missing = [op for op in REQUIRED if op not in OPS]
    assert not missing, f"ops missing from the table: {missing}"


def test_examples_cover_the_table() -> None:
    assert set(EXAMPLES) == set(OPS)


def test_graph_generator_covers_the_table() -> None:
    # Every op must have a Hypothesis strategy in the conformance layer.
    assert set(OPS) <= set(GRAPH_OPS), sorted(set(OPS) - set(GRAPH_OPS))


def test_get_op() -> None:
    for name, d in OPS.items():
        assert get_op(name) is d
    with pytest.raises(GraphError, match="unknown op 'no_such_op'"):
        get_op("no_such_op")


@pytest.mark.parametrize("name", sorted(OPS))
def test_entry_is_complete(name: str) -> None:
    d = OPS[name]
    assert isinstance(d, OpDef)
    assert d.name == name
    for fn in (d.shape, d.forward, d.jvp, d.vjp):
        assert callable(fn)
    assert isinstance(d.doc, str) and d.doc.strip(), f"{name}: empty doc"
    assert isinstance(d.saves, str) and d.saves.strip(), f"{name}: empty saves"
    assert d.arity is None or (isinstance(d.arity, int) and d.arity >= 0)
    assert d.kind in ("primitive", "composite")
    for a in d.attrs:
        assert isinstance(a, AttrSpec) and a.kind in ATTR_KINDS, (name, a)
    if d.kind == "composite":
        assert callable(d.body), f"{name}: composite without a body"
        args, attrs = EXAMPLES[name]
        shapes = [s for s, _ in args]
        norm, out = check_node(name, list(range(len(shapes))), attrs, shapes)
        body = d.body(shapes, norm)
        assert isinstance(body, Graph)
        assert body.inputs == tuple(shapes)
        assert body.shapes[-1] == out
        assert len(body.nodes) >= 1
    else:
        assert d.body is None, f"{name}: primitive with a body"
    if d.algebraic is False:
        # Non-algebraic ops must actually need a non-rational function somewhere.
        assert name not in {"add", "sub", "mul", "div", "matmul", "linear", "sum"}


def test_algebraic_flags() -> None:
    transcendental = {
        "sqrt",
        "exp",
        "log",
        "tanh",
        "sin",
        "cos",
        "sigmoid",
        "softplus",
        "gelu",
        "silu",
        "safe_log",
        "softmax",
        "log_softmax",
        "cross_entropy",
        "mask_neg_inf",
        "layer_norm",
        "batch_norm",
        "scaled_dot_product_attention",
        "multi_head_attention",
    }
    assert {n for n, d in OPS.items() if not d.algebraic} == transcendental


# --------------------------------------------------------------------------- run every op


def _is_binary32(v: Any) -> bool:
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        return True
    exact = BINARY32.to_rational(v)
    return Q(float(np.float32(f))) == exact and Q(f) == exact


def _check_run(D: Domain, op: str) -> tuple[Tensor, Tensor, list[Tensor], list[Tensor], Tensor]:
    d = OPS[op]
    xs, attrs, dxs, g = _example(D, op)
    out_shape = d.shape([x.shape for x in xs], attrs)
    y = d.forward(D, xs, attrs, ())
    assert isinstance(y, Tensor) and y.shape == out_shape
    t = d.jvp(D, xs, dxs, attrs, ())
    assert isinstance(t, Tensor) and t.shape == out_shape
    cts = d.vjp(D, xs, g, attrs, ())
    assert isinstance(cts, list) and len(cts) == len(xs), f"{op}: one cotangent per argument"
    for i, (ct, x) in enumerate(zip(cts, xs, strict=True)):
        assert isinstance(ct, Tensor) and ct.shape == x.shape, f"{op}: cotangent {i} shape"
    return y, t, cts, dxs, g


@pytest.mark.parametrize("op", sorted(EXAMPLES))
def test_runs_in_binary32(op: str) -> None:
    y, t, cts, _, _ = _check_run(BINARY32, op)
    for v in (*y.data, *t.data, *(v for ct in cts for v in ct.data)):
        assert _is_binary32(v), f"{op}: {v} is not a binary32 value"


@pytest.mark.parametrize("op", sorted(n for n in EXAMPLES if OPS[n].algebraic))
def test_runs_in_rational_and_is_adjoint(op: str) -> None:
    _, t, cts, dxs, g = _check_run(RATIONAL, op)
    for v in (*t.data, *(v for ct in cts for v in ct.data)):
        assert isinstance(v, Q)
    # <jvp(dx), g> == sum_i <dx_i, vjp(g)_i>, exactly.
    lhs = dot(RATIONAL, t, g)
    rhs = sum((dot(RATIONAL, dx, ct) for dx, ct in zip(dxs, cts, strict=True)), Q(0))
    assert lhs == rhs


# --------------------------------------------------------------------------- derivatives


def _f64(values: Any) -> tuple[Any, ...]:
    return tuple(FLOAT64.from_float(float(v)) for v in values)


@pytest.mark.parametrize("op", sorted(n for n in EXAMPLES if OPS[n].differentiable))
def test_finite_differences_float64(op: str) -> None:
    """Central differences of <g, f(x + h·dx)> against <g, jvp(dx)> and <dx, vjp(g)>."""
    D, d = FLOAT64, OPS[op]
    xs, attrs, dxs, g = _example(D, op)
    gf = [float(v) for v in g.data]

    def objective(step: float) -> float:
        moved = [
            Tensor(
                x.shape,
                _f64(float(a) + step * float(b) for a, b in zip(x.data, dx.data, strict=True)),
            )
            for x, dx in zip(xs, dxs, strict=True)
        ]
        y = d.forward(D, moved, attrs, ())
        return math.fsum(float(u) * w for u, w in zip(y.data, gf, strict=True))

    h = 1e-5
    numeric = (objective(h) - objective(-h)) / (2 * h)
    jvp = math.fsum(
        float(u) * w for u, w in zip(d.jvp(D, xs, dxs, attrs, ()).data, gf, strict=True)
    )
    vjp = math.fsum(
        float(a) * float(b)
        for ct, dx in zip(d.vjp(D, xs, g, attrs, ()), dxs, strict=True)
        for a, b in zip(ct.data, dx.data, strict=True)
    )
    tol = 1e-6 * max(1.0, abs(numeric))
    assert abs(jvp - numeric) <= tol, (op, jvp, numeric)
    assert abs(vjp - numeric) <= tol, (op, vjp, numeric)
    assert abs(jvp) > 1e-3, f"{op}: degenerate example (zero directional derivative)"


@pytest.mark.parametrize("op", sorted(n for n in EXAMPLES if not OPS[n].differentiable))
def test_non_differentiable_ops_have_zero_derivatives(op: str) -> None:
    for D in (RATIONAL, BINARY32):
        xs, attrs, dxs, g = _example(D, op)
        d = OPS[op]
        t = d.jvp(D, xs, dxs, attrs, ())
        assert all(D.same(v, D.zero()) for v in t.data)
        for ct in d.vjp(D, xs, g, attrs, ()):
            assert all(D.same(v, D.zero()) for v in ct.data)
