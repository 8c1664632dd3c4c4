"""The op table, iterated: every entry is complete, and every op's forward/JVP/VJP runs on a
small valid example in BINARY32 and (when algebraic) RATIONAL, with the right shapes, exact
adjointness over RATIONAL and a finite-difference check of the derivative over FLOAT64.

The points are the ops' own samples (`OpDef.samples`): every op must have an ordinary first
sample, so an op added to the table without one fails here. Every sample runs in BINARY32
(and, when exact and algebraic, RATIONAL with the adjointness check); finite differences run
at the ordinary samples only. Every op is defined in `spec.ops.<family>` of its family.
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
from spec.ops import FAMILIES, OPS, SAMPLE_KINDS, AttrSpec, OpDef, Sample, get_op
from spec.shape import size
from spec.tensor import Tensor, dot
from spec.validate import check_node, validate_graph

REQUIRED = """
add sub neg mul scale div inv matmul linear sum reduce_sum reduce_mean mean relu abs maximum
minimum clamp sqrt exp log safe_log tanh sigmoid softplus gelu silu sin cos reshape
swap_adjacent transpose broadcast_to concat slice select index_select scatter_add softmax
log_softmax mse_loss cross_entropy detach const gather reduce_max mask_neg_inf conv2d
conv_transpose2d avg_pool2d max_pool2d layer_norm batch_norm scaled_dot_product_attention
multi_head_attention embedding one_hot
""".split()

ATTR_KINDS = {"int", "nat", "ints", "sints", "bool", "str", "shape", "rational", "rationals"}


# Every sample of every op: (op, index into OPS[op].samples). The first sample of each op is
# its ordinary point (generic: no ties, no kinks, positive where a log/sqrt needs it, nonzero
# denominators), so every differentiable op is smooth in a neighbourhood there.
SAMPLES = [(n, i) for n in sorted(OPS) for i in range(len(OPS[n].samples))]


def _exact(op: str, i: int) -> bool:
    """No float value (−0.0, ±inf, NaN): the sample lives in RATIONAL too."""
    return all(isinstance(v, Q) for _, vals in OPS[op].samples[i].args for v in vals)


def _ordinary(op: str, i: int) -> bool:
    return OPS[op].samples[i].kind == "ordinary"


def _ids(cases: list[tuple[str, int]]) -> list[str]:
    return [f"{n}-{i}" for n, i in cases]


# Deterministic, non-degenerate tangent / cotangent patterns.
_PATTERN = (Q(3, 10), Q(-7, 10), Q(1, 2), Q(9, 10), Q(-1, 5), Q(2, 5), Q(-3, 5), Q(1, 10))


def _pattern(shape: tuple[int, ...], shift: int) -> tuple[Q, ...]:
    return tuple(_PATTERN[(i + shift) % len(_PATTERN)] for i in range(size(shape)))


def _value(D: Domain, v: Any) -> Any:
    return D.from_rational(v) if isinstance(v, Q) else D.from_float(v)


def _example(
    D: Domain, op: str, i: int = 0
) -> tuple[list[Tensor], dict[str, Any], list[Tensor], Tensor]:
    smp = OPS[op].samples[i]
    args, attrs = smp.args, dict(smp.attrs)
    norm, out = check_node(op, list(range(len(args))), attrs, [s for s, _ in args])
    xs = [Tensor(s, tuple(_value(D, v) for v in vals)) for s, vals in args]
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


def test_every_op_has_an_ordinary_first_sample() -> None:
    for name, d in OPS.items():
        assert d.samples, f"{name}: no samples"
        assert d.samples[0].kind == "ordinary", f"{name}: first sample is not ordinary"
        for smp in d.samples:
            assert isinstance(smp, Sample) and smp.kind in SAMPLE_KINDS, (name, smp)
            assert smp.note.strip(), f"{name}: sample without a note"


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
        for smp in d.samples:
            shapes = [s for s, _ in smp.args]
            norm, out = check_node(name, list(range(len(shapes))), dict(smp.attrs), shapes)
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
        "instance_norm",
        "group_norm",
        "erf",
        "log1p",
        "expm1",
        "elu",
        "celu",
        "selu",
        "mish",
        "logsumexp",
        "std",
        "pow",
        "pow_tensor",
        "scaled_dot_product_attention",
        "multi_head_attention",
        "batch_norm_eval",  # sqrt
        "local_response_norm",  # exp, log
    }
    assert {n for n, d in OPS.items() if not d.algebraic} == transcendental


# --------------------------------------------------------------------------- run every op


def _is_binary32(v: Any) -> bool:
    f = float(v)
    if math.isnan(f) or math.isinf(f):
        return True
    exact = BINARY32.to_rational(v)
    return Q(float(np.float32(f))) == exact and Q(f) == exact


def _check_run(
    D: Domain, op: str, i: int
) -> tuple[Tensor, Tensor, list[Tensor], list[Tensor], Tensor]:
    d = OPS[op]
    xs, attrs, dxs, g = _example(D, op, i)
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


@pytest.mark.parametrize(("op", "i"), SAMPLES, ids=_ids(SAMPLES))
def test_runs_in_binary32(op: str, i: int) -> None:
    y, t, cts, _, _ = _check_run(BINARY32, op, i)
    for v in (*y.data, *t.data, *(v for ct in cts for v in ct.data)):
        assert _is_binary32(v), f"{op}: {v} is not a binary32 value"


RATIONAL_SAMPLES = [(n, i) for n, i in SAMPLES if OPS[n].algebraic and _exact(n, i)]


@pytest.mark.parametrize(("op", "i"), RATIONAL_SAMPLES, ids=_ids(RATIONAL_SAMPLES))
def test_runs_in_rational_and_is_adjoint(op: str, i: int) -> None:
    _, t, cts, dxs, g = _check_run(RATIONAL, op, i)
    for v in (*t.data, *(v for ct in cts for v in ct.data)):
        assert isinstance(v, Q)
    # <jvp(dx), g> == sum_i <dx_i, vjp(g)_i>, exactly.
    lhs = dot(RATIONAL, t, g)
    rhs = sum((dot(RATIONAL, dx, ct) for dx, ct in zip(dxs, cts, strict=True)), Q(0))
    assert lhs == rhs


# --------------------------------------------------------------------------- derivatives


def _f64(values: Any) -> tuple[Any, ...]:
    return tuple(FLOAT64.from_float(float(v)) for v in values)


SMOOTH_SAMPLES = [(n, i) for n, i in SAMPLES if OPS[n].differentiable and _ordinary(n, i)]


@pytest.mark.parametrize(("op", "i"), SMOOTH_SAMPLES, ids=_ids(SMOOTH_SAMPLES))
def test_finite_differences_float64(op: str, i: int) -> None:
    """Central differences of <g, f(x + h·dx)> against <g, jvp(dx)> and <dx, vjp(g)>, at the
    ordinary samples (smooth points)."""
    D, d = FLOAT64, OPS[op]
    xs, attrs, dxs, g = _example(D, op, i)
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


FLAT_SAMPLES = [(n, i) for n, i in SAMPLES if not OPS[n].differentiable]


@pytest.mark.parametrize(("op", "i"), FLAT_SAMPLES, ids=_ids(FLAT_SAMPLES))
def test_non_differentiable_ops_have_zero_derivatives(op: str, i: int) -> None:
    for D in (RATIONAL, BINARY32) if _exact(op, i) else (BINARY32,):
        xs, attrs, dxs, g = _example(D, op, i)
        d = OPS[op]
        t = d.jvp(D, xs, dxs, attrs, ())
        assert all(D.same(v, D.zero()) for v in t.data)
        for ct in d.vjp(D, xs, g, attrs, ()):
            assert all(D.same(v, D.zero()) for v in ct.data)


# --------------------------------------------------------------------------- samples, families


def _registered_names(family: str) -> set[str]:
    """The op names a family module registers: every `name="..."` keyword of a call."""
    import ast
    import importlib
    import inspect

    tree = ast.parse(inspect.getsource(importlib.import_module(f"spec.ops.{family}")))
    return {
        k.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for k in node.keywords
        if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str)
    }


def test_each_op_lives_in_its_family_module() -> None:
    assert len(FAMILIES) == 14
    defined = {f: _registered_names(f) for f in FAMILIES}
    for name, d in OPS.items():
        assert d.family in FAMILIES, (name, d.family)
        homes = [f for f, names in defined.items() if name in names]
        assert homes == [d.family], (name, d.family, homes)
    assert set().union(*defined.values()) == set(OPS)


@pytest.mark.parametrize(("op", "i"), SAMPLES, ids=_ids(SAMPLES))
def test_sample_validates_and_runs_forward(op: str, i: int) -> None:
    """A one-node graph of the sample validates (shape rule and attributes) and its forward
    runs in BINARY32 with the validated output shape."""
    from spec.graph import GraphBuilder, eval_graph

    smp = OPS[op].samples[i]
    b = GraphBuilder()
    ids = [b.input(s) for s, _ in smp.args]
    out = b.node(op, *ids, **dict(smp.attrs))
    g = b.build(output=out)
    assert validate_graph(g.inputs, g.nodes) == list(g.shapes)
    xs = [Tensor(s, tuple(_value(BINARY32, v) for v in vals)) for s, vals in smp.args]
    y = eval_graph(BINARY32, g, xs).tensors[-1]
    assert y.shape == g.shapes[-1]
    assert all(_is_binary32(v) for v in y.data)
