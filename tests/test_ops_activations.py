"""Issue 28's elementwise, activation and reduction ops: hand-worked golden values at their
kinks, thresholds and special points (the conventions their rules state), the `ordered`
transcendentals erf/log1p/expm1 bit for bit against MPFR in every dtype, attribute errors,
gelu's default form, and the engines' adapters on the ops' samples.

The expected values are worked by hand or by Python's `math`/`statistics` (independent of
the code under test); MPFR (the spec domains) is the reference for correct rounding.
"""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, from_spec, np_dtype, to_spec
from runtime.engine.context import KernelContext, fp_quiet
from runtime.session import Session
from spec.errors import GraphError, ShapeError

NEW_OPS = (
    "leaky_relu sign hardtanh relu6 hardsigmoid hardswish softsign add_n maximum_n minimum_n "
    "mean_n var std erf log1p expm1 elu celu selu mish logsumexp"
).split()


def _f64(x: Any) -> np.ndarray:
    return np.asarray(x, dtype=np.float64)


def _grad(op: str, x: list[float], *attrs: Any, **kw: Any) -> tuple[np.ndarray, np.ndarray]:
    """(value, d sum(op(x)) / dx) in float64 ordered."""
    s = Session(dtype="float64", kernels="ordered")
    r = s.input(_f64(x), requires_grad=True)
    out = getattr(s, op)(r, *attrs, **kw)
    g = s.backward_dense_all(out, np.ones(out.shape))[r.id]
    return s.get_value(out), g


# --------------------------------------------------------------------------- conventions


def test_leaky_relu_slope_at_zero_and_signed_zero() -> None:
    y, g = _grad("leaky_relu", [0.0, -0.0, -2.0, 3.0], 0.125)
    assert list(y) == [0.0, -0.0, -0.25, 3.0]
    assert math.copysign(1, y[1]) == -1.0  # leaky_relu(-0) = 0.125 * -0 = -0
    assert list(g) == [0.125, 0.125, 0.125, 1.0]  # the slope at 0 (PyTorch's choice)
    _, g = _grad("leaky_relu", [0.0, -1.0])  # default slope 1/100
    assert list(g) == [0.01, 0.01]


def test_sign_values_and_zero_derivative() -> None:
    y, g = _grad("sign", [-0.0, 0.0, -3.5, 2.0, float("nan")])
    assert [math.copysign(1, v) for v in y[:2]] == [1.0, 1.0]  # +0 at both zeros
    assert list(y[2:4]) == [-1.0, 1.0] and math.isnan(y[4])
    assert not np.any(g)


def test_hardtanh_relu6_hardsigmoid_hardswish_at_their_bounds() -> None:
    _, g = _grad("hardtanh", [-0.5, 0.8, 0.0, 1.0], -0.5, 0.8)
    assert list(g) == [0.0, 0.0, 1.0, 0.0]  # 0 at the bounds (clamp's), as PyTorch's
    y, g = _grad("relu6", [0.0, 6.0, 3.0, 7.0, -0.0])
    assert list(y) == [0.0, 6.0, 3.0, 6.0, 0.0] and list(g) == [0.0, 0.0, 1.0, 0.0, 0.0]
    y, g = _grad("hardsigmoid", [-3.0, 3.0, 0.0])
    assert list(y) == [0.0, 1.0, 0.5] and list(g) == [0.0, 0.0, 1 / 6]
    y, g = _grad("hardswish", [-3.0, 3.0, 0.0, -4.0, 4.0])
    assert list(y) == [-0.0, 3.0, 0.0, -0.0, 4.0]
    assert list(g) == [0.0, 1.0, 0.5, 0.0, 1.0]  # (2x + 3)/6 inside; 0 at -3, 1 at 3


def test_softsign_and_elu_family_at_zero() -> None:
    y, g = _grad("softsign", [0.0, 1.0, -3.0])
    assert list(y) == [0.0, 0.5, -0.75] and list(g) == [1.0, 0.25, 1 / 16]
    _, g = _grad("elu", [0.0, 1.0], 1.5)
    assert list(g) == [1.5, 1.0]  # alpha at x = 0 (the x <= 0 branch)
    y, g = _grad("celu", [0.0, -2.0], 2.0)
    assert g[0] == 1.0 and y[1] == 2 * math.expm1(-1.0)
    sa, ss = 1.6732632423543772, 1.0507009873554805
    y, g = _grad("selu", [0.0, 1.0, -1.0])
    assert g[0] == ss * sa and y[1] == ss
    assert abs(y[2] - ss * sa * math.expm1(-1.0)) <= 4e-16


def test_variadic_ties_split_as_nested_pairs() -> None:
    s = Session(dtype="float64", kernels="ordered")
    xs = [s.input(_f64([1.0, 2.0]), requires_grad=True) for _ in range(3)]
    out = s.maximum_n(*xs)
    grads = s.backward_dense_all(out, np.ones(2))
    # a three-way tie: maximum(maximum(a, b), c) gives a, b 1/4 each and c 1/2
    assert [list(grads[x.id]) for x in xs] == [[0.25, 0.25], [0.25, 0.25], [0.5, 0.5]]
    m = s.mean_n(xs[0], s.input(_f64([4.0, -1.0])))
    assert list(s.get_value(m)) == [2.5, 0.5]
    with pytest.raises((GraphError, ShapeError), match="at least two"):
        s.add_n(xs[0])


def test_var_std_logsumexp_golden() -> None:
    rows = [[1.0, -2.0, 3.0, 0.5], [4.0, 4.0, 4.0, 4.0]]
    s = Session(dtype="float64", kernels="ordered")
    x = s.input(_f64(rows), requires_grad=True)
    v, sd = s.var(x, 1), s.std(x, 1, correction=0)
    assert s.get_value(v)[0] == pytest.approx(statistics.variance(rows[0]), rel=1e-15)
    assert s.get_value(v)[1] == 0.0
    assert s.get_value(sd)[0] == pytest.approx(statistics.pstdev(rows[0]), rel=1e-15)
    g = s.backward_dense_all(sd, np.ones(2))[x.id]
    assert not np.any(g[1])  # a constant row: std's derivative is taken as 0 (sqrt's rule)
    lse = s.logsumexp(x, 1)
    want = math.log(sum(math.exp(t) for t in rows[0]))
    assert s.get_value(lse)[0] == pytest.approx(want, rel=1e-15)
    assert s.get_value(lse)[1] == pytest.approx(4 + math.log(4), rel=1e-15)
    g = s.backward_dense_all(lse, np.ones(2))[x.id]
    assert list(g[1]) == [0.25] * 4  # tied maxima: the detached shift leaves the softmax
    with pytest.raises((GraphError, ShapeError), match="correction"):
        s.var(x, 1, correction=4)


# --------------------------------------------------------------------------- gelu forms


def test_gelu_default_is_the_erf_form_and_tanh_is_named() -> None:
    xs = [-3.0, -0.5, 0.25, 2.0]
    s = Session(dtype="float64", kernels="ordered")
    x = s.input(_f64(xs))
    default = s.get_value(s.gelu(x))
    erf_form = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in xs]
    assert np.allclose(default, erf_form, rtol=4e-16, atol=0)  # F.gelu's default
    assert np.array_equal(default, s.get_value(s.gelu(x, approximate="none")))
    tanh = s.get_value(s.gelu(x, approximate="tanh"))
    c, k = 0.7978845608028654, 0.044715
    tanh_form = [0.5 * v * (1 + math.tanh(c * (v + k * v**3))) for v in xs]
    assert np.allclose(tanh, tanh_form, rtol=4e-16, atol=0)
    with pytest.raises(GraphError, match="approximate"):
        s.gelu(x, approximate="sigmoid")
    with pytest.raises(GraphError, match="alpha"):
        s.celu(x, 0)


# --------------------------------------------------------------------------- correct rounding

_DTYPES = ("float64", "float32", "bfloat16", "float16")
_HARD = [0.0, -0.0, math.inf, -math.inf, math.nan, -1.0, -2.0, 1e-30, -1e-30, 6.0, -6.0, 700.0]


@pytest.mark.parametrize("fn", ["erf", "log1p", "expm1"])
@pytest.mark.parametrize("dtype", _DTYPES)
@given(xs=st.lists(st.floats(-30, 30, allow_subnormal=True), min_size=1, max_size=40))
def test_ordered_transcendentals_are_correctly_rounded(fn: str, dtype: str, xs: list) -> None:
    x = np.asarray(xs + _HARD, dtype=np.float64).astype(np_dtype(dtype))
    with fp_quiet():
        got = np.asarray(KernelContext(dtype, "ordered").unary(fn, x))
    D = DTYPE_DOMAIN[dtype]
    want = np.asarray(from_spec(to_spec(x, dtype).map(getattr(D, fn)), dtype))
    both_nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    same = got.view(np.uint8).reshape(len(x), -1) == want.view(np.uint8).reshape(len(x), -1)
    assert np.all(same.all(axis=1) | both_nan)


def test_fast_erf_is_within_its_budget_and_keeps_the_dtype() -> None:
    x = np.linspace(-5, 5, 201)
    for dtype, ulps in (("float64", 4), ("float32", 1), ("bfloat16", 1), ("float16", 1)):
        xd = x.astype(np_dtype(dtype))
        y = KernelContext(dtype, "fast").unary("erf", xd)
        assert y.dtype == np_dtype(dtype)
        want = [math.erf(float(v)) for v in xd]  # binary64; far more precise than 16 bits
        err = np.abs(y.astype(np.float64) - want)
        spacing = np.spacing(np.abs(np.asarray(want)).astype(np_dtype(dtype))).astype(float)
        assert np.all(err <= ulps * spacing + 2**-60), dtype


# --------------------------------------------------------------------------- engines


def _finite_samples(op: str) -> list[Any]:
    from spec.ops import get_op

    return [
        smp
        for smp in get_op(op).samples
        if all(isinstance(v, Fraction) for _, vals in smp.args for v in vals)
    ]


@pytest.mark.parametrize("engine", ["autograd", "torch"])
def test_adapters_agree_with_the_spec_on_the_samples(engine: str) -> None:
    pytest.importorskip(engine, reason=f"pip install {engine}")
    from conformance.engines import load_engine
    from conformance.engines.local import check_node
    from spec.ops import get_op
    from spec.tensor import Tensor

    eng = load_engine(engine)
    D = DTYPE_DOMAIN["float32"]
    covered = 0
    for op in NEW_OPS:
        if op not in eng.ops:
            continue
        for smp in _finite_samples(op):
            xs = [Tensor(s, tuple(D.from_rational(v) for v in vals)) for s, vals in smp.args]
            y = get_op(op).forward(D, xs, dict(smp.attrs), ())
            g = Tensor(y.shape, tuple(D.from_float(math.cos(j)) for j in range(len(y.data))))
            ts = [Tensor(t.shape, tuple(D.from_float(0.5) for _ in t.data)) for t in xs]
            res = check_node(eng, "float32", op, dict(smp.attrs), xs, g, ts)
            assert res.covered and res.refused is None, (op, res.refused)
            assert res.wrong is None, (op, res.wrong)
            covered += 1
    assert covered >= 20
