"""spec.vector (the array evaluator of the spec's IEEE semantics) against its reference, the
pure-Python evaluator spec.graph: values, tangents and every cotangent, bit for bit."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.graphs import DEFAULT_FLOAT_OPS, graphs, inputs_for, seeds_for
from spec import vector
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, round_rational_to_format
from spec.errors import TorchLeanError
from spec.graph import Graph, GraphBuilder, backprop_all_ctx, eval_jvp
from spec.ops.table import OPS
from spec.tensor import Tensor, TensorPack

DOMAINS = {"float64": FLOAT64, "binary32": BINARY32, "bfloat16": BFLOAT16, "float16": FLOAT16}


def _reference(D, g, xs, pack):
    vals, tans = eval_jvp(D, g, xs, pack.tensors[: g.num_inputs])
    cots = backprop_all_ctx(D, g, xs, pack)
    return vals.tensors, cots.tensors, tans.tensors


def _agree(D, g: Graph, xs: list[Tensor], pack: TensorPack) -> vector.Stats:
    """Both evaluators on one case: the same error, or equal values, cotangents, tangents."""
    F = vector.format_of(D)
    st_ = vector.Stats()
    try:
        want = _reference(D, g, xs, pack)
    except TorchLeanError as e:
        with pytest.raises(type(e)):
            vector.link_sides(
                D, g, [F.array(x) for x in xs], (), [F.array(t) for t in pack.tensors]
            )
        return st_
    got = vector.link_sides(
        D, g, [F.array(x) for x in xs], (), [F.array(t) for t in pack.tensors], st_
    )
    for kind, a, b in zip(("value", "cotangent", "tangent"), got, want, strict=True):
        d = vector.first_difference(a, [F.array(t) for t in b])
        assert d is None, f"{D.name}: {kind} of value %{d[0]} element {d[1]} differs\n{g}"
    return st_


@st.composite
def _cases(draw, D, specials: bool):
    g = draw(graphs(list(DEFAULT_FLOAT_OPS), max_nodes=5, domain_kind="float"))
    xs = draw(inputs_for(g, D, specials=specials))
    pack = draw(seeds_for(g, D, specials=specials))
    return g, xs, pack


@pytest.mark.parametrize("name", sorted(DOMAINS))
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_vector_equals_reference_on_random_graphs(name: str, data) -> None:
    """Random graphs of every op the generator builds, inputs and seeds with NaN, ±inf,
    subnormals and −0 half of the time."""
    D = DOMAINS[name]
    g, xs, pack = data.draw(_cases(D, data.draw(st.booleans())))
    _agree(D, g, xs, pack)


def _sample_graph(op: str, sample) -> tuple[Graph, list[Tensor]]:
    b = GraphBuilder()
    ids = [b.input(shape) for shape, _ in sample.args]
    b.node(op, *ids, **dict(sample.attrs))
    return b.build(), [_tensor(shape, vals) for shape, vals in sample.args]


def _tensor(shape, vals) -> Tensor:
    return Tensor(tuple(shape), tuple(vals))


@pytest.mark.parametrize("name", sorted(DOMAINS))
def test_every_op_sample_agrees(name: str) -> None:
    """Every sample of every op in the table (ordinary, ties, ±0, kinks, boundaries,
    non-finite values), as a one-node graph with a seed of ±1/2, ±3, 0 and −0."""
    D = DOMAINS[name]
    F = vector.format_of(D)
    cycle = (Fraction(1, 2), Fraction(-3), 0.0, -0.0, Fraction(-1, 2), Fraction(3))
    seen = 0
    for op, d in sorted(OPS.items()):
        for s in d.samples:
            try:
                g, raw = _sample_graph(op, s)
            except TorchLeanError:
                continue
            xs = [Tensor(t.shape, tuple(_value(D, v) for v in t.data)) for t in raw]
            pack = TensorPack.of(
                [
                    Tensor(sh, tuple(_value(D, cycle[(k + i) % 6]) for i in range(math.prod(sh))))
                    for k, sh in enumerate(g.shapes)
                ]
            )
            _agree(D, g, xs, pack)
            seen += 1
    assert seen >= 2 * len(OPS) - 40, seen  # nearly every op has two samples or more
    assert F.name == D.name


def _value(D, v):
    return D.from_float(v) if isinstance(v, float) else D.from_rational(v)


# --------------------------------------------------------------------------- formats


@pytest.mark.parametrize("name", ["bfloat16", "float16", "binary32"])
@settings(max_examples=200, deadline=None)
@given(
    x=st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.sampled_from([0.0, -0.0, 5e-324, 1e-40, 65504.0, 65520.0, 3.4028235677973366e38])
)
def test_rounding_is_the_integer_oracle(name: str, x: float) -> None:
    """`Format.rnd` equals `round_rational_to_format` (integer arithmetic, independent of
    MPFR and NumPy) on binary64 values: normal, subnormal, overflow, ties."""
    D = DOMAINS[name]
    F = vector.format_of(D)
    got = float(F.rnd(np.array([x]))[0])
    want = round_rational_to_format(Fraction(x), D.precision, D.emin, D.emax)
    if isinstance(want, float):
        assert got == want
    elif want == 0:
        assert got == 0 and math.copysign(1, got) == math.copysign(1, x)
    else:
        assert Fraction(got) == want


def test_rounding_golden_ties() -> None:
    """Hand-worked: 1 + 2**-8 is the bfloat16 midpoint between 1 and 1 + 2**-7 (rounds to
    the even 1); 1 + 3*2**-8 rounds up to 1 + 2**-6; float16's largest finite 65504 and
    the midpoint 65520 above it (overflows to inf); float16's smallest subnormal 2**-24 and
    half of it (a tie to the even 0)."""
    bf, f16 = vector.FORMATS["bfloat16"], vector.FORMATS["float16"]
    got = bf.rnd(np.array([1 + 2**-8, 1 + 3 * 2**-8]))
    assert got.tolist() == [1.0, 1 + 2**-6]
    got = f16.rnd(np.array([65504.0, 65519.0, 65520.0, 2.0**-24, 2.0**-25, -(2.0**-25)]))
    assert got.tolist() == [65504.0, 65504.0, math.inf, 2.0**-24, 0.0, -0.0]
    assert math.copysign(1, got[-1]) == -1


def test_seed_arrays_are_the_spec_rng_pack() -> None:
    from runtime.session.link import random_seed_pack

    b = GraphBuilder()
    x = b.input((2, 3))
    b.node("relu", b.node("scale", x, c=Fraction(1, 3)))
    g = b.build()
    for dtype, D in (("float32", BINARY32), ("bfloat16", BFLOAT16)):
        F = vector.format_of(D)
        want = [F.array(t) for t in random_seed_pack(g, dtype, 7).tensors]
        assert vector.first_difference(vector.seed_arrays(g, F, 7), want) is None


def test_an_unvectorised_primitive_falls_back_and_is_counted() -> None:
    """cumsum has no array rule: it runs the spec rule on its node, and Stats says so."""
    assert "cumsum" not in vector.RULES
    b = GraphBuilder()
    x = b.input((2, 3))
    b.node("cumsum", b.node("relu", x), dim=1)
    g = b.build()
    xs = [Tensor((2, 3), tuple(BINARY32.from_rational(q) for q in (1, -2, 3, 4, 5, -6)))]
    pack = TensorPack.of([Tensor(s, (BINARY32.one(),) * math.prod(s)) for s in g.shapes])
    st_ = _agree(BINARY32, g, xs, pack)
    assert st_.fallbacks["cumsum"] == 2 and st_.rules["relu"] == 1


def test_correctly_rounded_functions_count_their_mpfr_elements() -> None:
    """binary64 takes every element through MPFR; binary32 only the undecided ones (here
    none of 1,000 ordinary arguments, whose results all equal MPFR's)."""
    from spec.vector.crmath import MPFR_ELEMENTS, correctly_rounded

    x = np.linspace(-3.0, 3.0, 1000)
    for D, expect in ((FLOAT64, 1000), (BINARY32, 0)):
        F = vector.format_of(D)
        xs = F.cast(F.rnd(x))
        before = MPFR_ELEMENTS.n
        got = correctly_rounded(F, "exp", xs)
        assert MPFR_ELEMENTS.n - before == expect
        want = np.array([float(D.exp(D.from_float(float(v)))) for v in xs])
        assert vector.same_arrays(got, want).all()


def _binary32_operands() -> tuple[np.ndarray, np.ndarray]:
    """Random binary32 values over the whole exponent range (normal, subnormal, near
    overflow), with ±0, ±inf, NaN and ties of products and sums."""
    rng = np.random.default_rng(5)
    m = rng.uniform(1, 2, 4000) * rng.choice([-1, 1], 4000)
    e = rng.integers(-150, 128, 4000)
    x = np.ldexp(m, e).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, 1 + 2**-23, 2.0**-149, 2.0**127])
    a = np.concatenate([x, special.astype(np.float32)])
    return a, np.roll(a, 1)


def test_hardware_binary32_equals_the_binary64_evaluation_rounded_once() -> None:
    """FORMATS["binary32"] (hardware binary32 operations) and EMULATED["binary32"] (binary64
    evaluation, one rounding) agree on + − × ÷ sqrt, operand by operand, and on the whole
    evaluation of a convolution graph."""
    nat, emu = vector.FORMATS["binary32"], vector.EMULATED["binary32"]
    assert nat.native and not emu.native
    a, b = _binary32_operands()
    with vector.quiet():
        for op in ("add", "sub", "mul", "div"):
            assert vector.same_arrays(getattr(nat, op)(a, b), getattr(emu, op)(a, b)).all(), op
        assert vector.same_arrays(nat.sqrt(a), emu.sqrt(a)).all()
    b_ = GraphBuilder()
    x, w = b_.input((1, 2, 5, 5)), b_.input((3, 2, 3, 3))
    b_.node("relu", b_.node("conv2d", x, w, padding=(1, 1)))
    g = b_.build()
    rng = np.random.default_rng(2)
    xs = [nat.cast(rng.standard_normal(s)) for s in g.inputs]
    sd = vector.seed_arrays(g, nat, 1)
    got = vector.link_sides(BINARY32, g, xs, (), sd)
    want = vector.link_sides(BINARY32, g, xs, (), sd, emulated=True)
    for p, q in zip(got, want, strict=True):
        assert vector.first_difference(p, q) is None
