"""Hand-worked golden cases of the op table's conventions.

Every expected value here is computed by hand (or with an independent oracle: Python's exact
`Fraction`, NumPy float32 arithmetic, `math`), never by the code under test.
"""

from __future__ import annotations

import math
from fractions import Fraction as Q
from typing import Any

import numpy as np
import pytest

from spec.domains import BINARY32, FLOAT64, RATIONAL, Domain
from spec.errors import DomainError, GraphError, ShapeError
from spec.graph import Graph, backprop_ctx, eval_graph
from spec.ops import OPS
from spec.tensor import Tensor, TensorPack, dot
from spec.validate import normalize_attrs

R, F32, F64 = RATIONAL, BINARY32, FLOAT64
NAN = float("nan")
LN2 = float.fromhex("0x1.62e42fefa39efp-1")  # ln 2 correctly rounded to binary64


def T(D: Domain, shape: tuple[int, ...], *vals: Any) -> Tensor:
    """A tensor from exact rationals (ints/Fractions) or Python floats."""
    return Tensor(
        shape,
        tuple(D.from_float(v) if isinstance(v, float) else D.from_rational(Q(v)) for v in vals),
    )


def fwd(D: Domain, op: str, args: list[Tensor], env: tuple[int, ...] = (), **attrs: Any) -> Tensor:
    return OPS[op].forward(D, args, normalize_attrs(op, attrs), env)


def jvp(
    D: Domain,
    op: str,
    args: list[Tensor],
    dargs: list[Tensor],
    env: tuple[int, ...] = (),
    **attrs: Any,
) -> Tensor:
    return OPS[op].jvp(D, args, dargs, normalize_attrs(op, attrs), env)


def vjp(
    D: Domain, op: str, args: list[Tensor], g: Tensor, env: tuple[int, ...] = (), **attrs: Any
) -> list[Tensor]:
    return OPS[op].vjp(D, args, g, normalize_attrs(op, attrs), env)


def vals(t: Tensor) -> tuple[Any, ...]:
    return t.data


def floats(t: Tensor) -> list[float]:
    return [float(v) for v in t.data]


def bits32(v: Any) -> int:
    return F32.to_bits(v)


def np_bits(x: float) -> int:
    return int(np.array([x], dtype=np.float32).view(np.uint32)[0])


def s(D: Domain, v: Any) -> Tensor:
    """A scalar tensor."""
    return T(D, (), v)


# --------------------------------------------------------------------------- relu, abs


def test_relu_derivative_convention() -> None:
    x = T(R, (3,), -1, 0, 2)
    g = T(R, (3,), 5, 5, 5)
    assert vals(fwd(R, "relu", [x])) == (0, 0, 2)
    assert vals(vjp(R, "relu", [x], g)[0]) == (0, 0, 5)  # relu'(0) = 0, relu'(2) = g
    assert vals(jvp(R, "relu", [x], [g])) == (0, 0, 5)


def test_relu_signed_zero_and_nan() -> None:
    y = fwd(F32, "relu", [T(F32, (3,), -0.0, -2.0, NAN)])
    assert bits32(y.data[0]) == 0x00000000  # relu(-0) = +0
    assert bits32(y.data[1]) == 0x00000000
    assert math.isnan(float(y.data[2]))  # NaN propagates


def test_abs_derivative_is_sign_with_zero_at_zero() -> None:
    x = T(R, (3,), -2, 0, 3)
    assert vals(vjp(R, "abs", [x], T(R, (3,), 7, 7, 7))[0]) == (-7, 0, 7)


# --------------------------------------------------------------------------- maximum, minimum


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_ties_split_the_cotangent(op: str) -> None:
    a, b, g = s(R, 2), s(R, 2), s(R, 1)
    ga, gb = vjp(R, op, [a, b], g)
    assert (ga.data[0], gb.data[0]) == (Q(1, 2), Q(1, 2))
    # JVP at a tie: (da + db)/2
    assert jvp(R, op, [a, b], [s(R, 1), s(R, 3)]).data[0] == 2


def test_strict_cases_give_all_to_the_winner() -> None:
    g = s(R, 1)
    for op, a, b, want in [
        ("maximum", 3, 2, (1, 0)),
        ("maximum", 2, 3, (0, 1)),
        ("minimum", 3, 2, (0, 1)),
        ("minimum", 2, 3, (1, 0)),
    ]:
        ga, gb = vjp(R, op, [s(R, a), s(R, b)], g)
        assert (ga.data[0], gb.data[0]) == want, (op, a, b)
    assert fwd(R, "maximum", [s(R, 3), s(R, 2)]).data[0] == 3
    assert fwd(R, "minimum", [s(R, 3), s(R, 2)]).data[0] == 2


def test_maximum_broadcast_reduces_the_scalar_cotangent() -> None:
    x, c = T(R, (3,), 1, 2, 3), s(R, 2)
    gx, gc = vjp(R, "maximum", [x, c], T(R, (3,), 1, 1, 1))
    assert vals(gx) == (0, Q(1, 2), 1)
    assert vals(gc) == (Q(3, 2),)  # c wins at 1, ties at 2, loses at 3: 1 + 1/2 + 0


def test_maximum_nan_and_signed_zero_ties() -> None:
    out = fwd(F32, "maximum", [T(F32, (2,), NAN, 1.0), T(F32, (2,), 1.0, NAN)])
    assert all(math.isnan(v) for v in floats(out))
    ga, gb = vjp(F32, "maximum", [s(F32, NAN), s(F32, 1.0)], s(F32, 1.0))
    assert floats(ga) == [0.0] and floats(gb) == [0.0]
    # A tie returns a: maximum(+0, -0) = +0 and maximum(-0, +0) = -0.
    assert bits32(fwd(F32, "maximum", [s(F32, 0.0), s(F32, -0.0)]).data[0]) == 0x00000000
    assert bits32(fwd(F32, "maximum", [s(F32, -0.0), s(F32, 0.0)]).data[0]) == 0x80000000
    ga, gb = vjp(F32, "minimum", [s(F32, -0.0), s(F32, 0.0)], s(F32, 1.0))
    assert floats(ga) == [0.5] and floats(gb) == [0.5]


# --------------------------------------------------------------------------- sqrt, clamp


def test_sqrt_derivative() -> None:
    assert fwd(R, "sqrt", [s(R, 4)]).data[0] == 2
    assert vjp(R, "sqrt", [s(R, 4)], s(R, 1))[0].data[0] == Q(1, 4)  # 1/(2*2)
    assert vjp(R, "sqrt", [s(R, Q(9, 4))], s(R, 1))[0].data[0] == Q(1, 3)  # 1/(2*3/2)
    assert vjp(R, "sqrt", [s(R, 0)], s(R, 1))[0].data[0] == 0  # not 1/0
    # x < 0: forward is NaN over IEEE, the cotangent is +0.
    x = T(F32, (2,), -1.0, 0.0)
    assert math.isnan(float(fwd(F32, "sqrt", [x]).data[0]))
    g = vjp(F32, "sqrt", [x], T(F32, (2,), 1.0, 1.0))[0]
    assert [bits32(v) for v in g.data] == [0, 0]


def test_sqrt_refuses_irrational_results_over_rationals() -> None:
    with pytest.raises(DomainError):
        fwd(R, "sqrt", [s(R, 2)])


def test_clamp_derivative_is_zero_at_the_bounds() -> None:
    x = T(R, (6,), -2, -1, 0, Q(1, 2), 1, 2)
    g = T(R, (6,), 1, 1, 1, 1, 1, 1)
    assert vals(fwd(R, "clamp", [x], lo=-1, hi=1)) == (-1, -1, 0, Q(1, 2), 1, 1)
    assert vals(vjp(R, "clamp", [x], g, lo=-1, hi=1)[0]) == (0, 0, 1, 1, 0, 0)
    # lo == hi is allowed: a constant with zero derivative
    assert vals(fwd(R, "clamp", [x], lo=1, hi=1)) == (1,) * 6
    assert vals(vjp(R, "clamp", [x], g, lo=1, hi=1)[0]) == (0,) * 6


def test_clamp_bounds_are_rational_and_cast_once() -> None:
    y = fwd(F32, "clamp", [s(F32, 5.0)], lo=0, hi=Q(1, 3))
    assert bits32(y.data[0]) == np_bits(1 / 3)


# --------------------------------------------------------------------------- div, sub, inv


def test_div_gradients() -> None:
    a, b, g = s(R, 3), s(R, 2), s(R, 1)
    assert fwd(R, "div", [a, b]).data[0] == Q(3, 2)
    ga, gb = vjp(R, "div", [a, b], g)
    assert ga.data[0] == Q(1, 2)
    assert gb.data[0] == Q(-3, 4)  # -(1 * ((3/2)/2))
    assert jvp(R, "div", [a, b], [s(R, 1), s(R, 1)]).data[0] == Q(1, 2) - Q(3, 4)


def test_div_broadcast_denominator_cotangent_is_folded() -> None:
    ga, gb = vjp(R, "div", [T(R, (2,), 2, 4), s(R, 2)], T(R, (2,), 1, 1))
    assert vals(ga) == (Q(1, 2), Q(1, 2))
    assert vals(gb) == (Q(-3, 2),)  # -(2/2/2) + -(4/2/2)


def test_div_denominator_formula_order_binary32() -> None:
    """-(g*((a/b)/b)) in binary32, not -(g*a/(b*b)): they differ at a=1, b=7."""
    f = np.float32
    want = -(f(1) * ((f(1) / f(7)) / f(7)))
    other = -(f(1) * (f(1) / (f(7) * f(7))))
    assert want != other
    _, gb = vjp(F32, "div", [s(F32, 1.0), s(F32, 7.0)], s(F32, 1.0))
    assert bits32(gb.data[0]) == np_bits(float(want))


def test_sub_second_cotangent_is_zero_minus_g() -> None:
    ga, gb = vjp(R, "sub", [s(R, 5), s(R, 3)], s(R, 2))
    assert (ga.data[0], gb.data[0]) == (2, -2)
    # In binary32 with g = +0: 0 - (+0) = +0 (neg would give -0).
    ga, gb = vjp(F32, "sub", [s(F32, 5.0), s(F32, 3.0)], s(F32, 0.0))
    assert bits32(ga.data[0]) == 0x00000000
    assert bits32(gb.data[0]) == 0x00000000
    ga, gb = vjp(F32, "sub", [s(F32, 5.0), s(F32, 3.0)], s(F32, -0.0))
    assert bits32(ga.data[0]) == 0x80000000  # the first cotangent is g itself
    assert bits32(gb.data[0]) == 0x00000000  # 0 - (-0) = +0


def test_inv_is_one_over_x() -> None:
    assert fwd(R, "inv", [T(R, (2,), 2, Q(-1, 4))]).data == (Q(1, 2), -4)
    assert vjp(R, "inv", [s(R, 2)], s(R, 1))[0].data[0] == Q(-1, 4)


# --------------------------------------------------------------------------- losses


def test_mse_loss() -> None:
    y, t = T(R, (3,), 1, 2, 3), T(R, (3,), 1, 0, 0)
    assert fwd(R, "mse_loss", [y, t]).data[0] == Q(13, 3)  # (0 + 4 + 9)/3
    gy, gt = vjp(R, "mse_loss", [y, t], s(R, 1))
    assert vals(gy) == (0, Q(4, 3), 2)  # (2/N)(y - t)
    assert vals(gt) == (0, Q(-4, 3), -2)
    # rank 0: N = 1
    assert fwd(R, "mse_loss", [s(R, 5), s(R, 2)]).data[0] == 9
    gy, gt = vjp(R, "mse_loss", [s(R, 5), s(R, 2)], s(R, 1))
    assert (gy.data[0], gt.data[0]) == (6, -6)


def test_cross_entropy_rank1_float64() -> None:
    x, t = T(F64, (3,), 1.0, 2.0, 3.0), T(F64, (3,), 0.0, 0.0, 1.0)
    z = math.exp(1) + math.exp(2) + math.exp(3)
    assert abs(float(fwd(F64, "cross_entropy", [x, t]).data[0]) - (math.log(z) - 3)) < 1e-12
    gx, gt = vjp(F64, "cross_entropy", [x, t], s(F64, 1.0))
    p = [math.exp(k) / z for k in (1, 2, 3)]
    for got, want in zip(floats(gx), [p[0], p[1], p[2] - 1], strict=True):
        assert abs(got - want) < 1e-12
    for got, want in zip(floats(gt), [-math.log(q) for q in p], strict=True):
        assert abs(got - want) < 1e-12


def test_cross_entropy_batched_float64() -> None:
    x = T(F64, (2, 3), 1.0, 2.0, 3.0, 0.0, 0.0, 0.0)
    t = T(F64, (2, 3), 0.0, 0.0, 1.0, 1.0, 0.0, 0.0)
    z = math.exp(1) + math.exp(2) + math.exp(3)
    want = ((math.log(z) - 3) + math.log(3)) / 2
    assert abs(float(fwd(F64, "cross_entropy", [x, t]).data[0]) - want) < 1e-12
    gx, _ = vjp(F64, "cross_entropy", [x, t], s(F64, 1.0))
    p = [math.exp(k) / z for k in (1, 2, 3)]
    hand = [p[0] / 2, p[1] / 2, (p[2] - 1) / 2, (1 / 3 - 1) / 2, 1 / 6, 1 / 6]
    for got, w in zip(floats(gx), hand, strict=True):
        assert abs(got - w) < 1e-12


def test_loss_shape_mismatch_is_rejected() -> None:
    with pytest.raises(ShapeError, match="mse_loss"):
        OPS["mse_loss"].shape([(3,), (2,)], {})
    with pytest.raises(ShapeError, match="cross_entropy"):
        OPS["cross_entropy"].shape([(2, 2, 3), (2, 2, 3)], {})


# --------------------------------------------------------------------------- matmul, linear


def test_matmul_2d() -> None:
    A, B = T(R, (2, 2), 1, 2, 3, 4), T(R, (2, 1), 5, 6)
    assert fwd(R, "matmul", [A, B]) == T(R, (2, 1), 17, 39)
    gA, gB = vjp(R, "matmul", [A, B], T(R, (2, 1), 1, 1))
    assert gA == T(R, (2, 2), 5, 6, 5, 6)  # g B^T
    assert gB == T(R, (2, 1), 4, 6)  # A^T g


def test_matmul_batched_left_with_broadcast_right() -> None:
    A, B = T(R, (2, 1, 2), 1, 2, 3, 4), T(R, (2, 1), 5, 6)
    assert fwd(R, "matmul", [A, B]) == T(R, (2, 1, 1), 17, 39)
    gA, gB = vjp(R, "matmul", [A, B], T(R, (2, 1, 1), 1, 2))
    assert gA == T(R, (2, 1, 2), 5, 6, 10, 12)
    assert gB == T(R, (2, 1), 7, 10)  # [1,2]·1 + [3,4]·2, reduced over the batch axis


def test_matmul_broadcast_left_with_batched_right() -> None:
    A = T(R, (2, 2), 1, 2, 3, 4)
    B = T(R, (3, 2, 1), 1, 0, 0, 1, 1, 1)
    assert fwd(R, "matmul", [A, B]) == T(R, (3, 2, 1), 1, 3, 2, 4, 3, 7)
    gA, gB = vjp(R, "matmul", [A, B], T(R, (3, 2, 1), 1, 1, 1, 1, 1, 1))
    assert gA == T(R, (2, 2), 2, 2, 2, 2)
    assert gB == T(R, (3, 2, 1), 4, 6, 4, 6, 4, 6)


def test_linear_vector_and_batched() -> None:
    W, b = T(R, (2, 2), 1, 2, 3, 4), T(R, (2,), 10, 20)
    x = T(R, (2,), 1, 1)
    assert fwd(R, "linear", [x, W, b]) == T(R, (2,), 13, 27)
    gx, gw, gb = vjp(R, "linear", [x, W, b], T(R, (2,), 1, 2))
    assert gx == T(R, (2,), 7, 10)
    assert gw == T(R, (2, 2), 1, 1, 2, 2)
    assert gb == T(R, (2,), 1, 2)
    xb = T(R, (2, 2), 1, 1, 1, 0)
    assert fwd(R, "linear", [xb, W, b]) == T(R, (2, 2), 13, 27, 11, 23)
    gx, gw, gb = vjp(R, "linear", [xb, W, b], T(R, (2, 2), 1, 0, 0, 1))
    assert gx == T(R, (2, 2), 1, 2, 3, 4)
    assert gw == T(R, (2, 2), 1, 1, 1, 0)
    assert gb == T(R, (2,), 1, 1)


# --------------------------------------------------------------------------- reductions


def test_reduce_sum_and_reduce_mean() -> None:
    x = T(R, (2, 3), 1, 2, 3, 4, 5, 6)
    assert fwd(R, "reduce_sum", [x], axis=0) == T(R, (3,), 5, 7, 9)
    assert fwd(R, "reduce_sum", [x], axis=1) == T(R, (2,), 6, 15)
    assert vjp(R, "reduce_sum", [x], T(R, (2,), 1, 2), axis=1)[0] == T(R, (2, 3), 1, 1, 1, 2, 2, 2)
    assert fwd(R, "reduce_mean", [x], axis=1) == T(R, (2,), 2, 5)
    assert fwd(R, "reduce_mean", [x], axis=0) == T(R, (3,), Q(5, 2), Q(7, 2), Q(9, 2))
    third, two_thirds = Q(1, 3), Q(2, 3)
    assert vjp(R, "reduce_mean", [x], T(R, (2,), 1, 2), axis=1)[0] == T(
        R, (2, 3), third, third, third, two_thirds, two_thirds, two_thirds
    )
    assert fwd(R, "mean", [x]).data == (Q(7, 2),)
    assert vjp(R, "mean", [x], s(R, 1))[0] == T(R, (2, 3), *([Q(1, 6)] * 6))
    assert fwd(R, "sum", [x]).data == (21,)
    assert vjp(R, "sum", [x], s(R, 3))[0] == T(R, (2, 3), *([3] * 6))


def test_reductions_of_empty_tensors() -> None:
    assert fwd(R, "sum", [T(R, (0,))]).data == (0,)
    assert fwd(R, "reduce_sum", [T(R, (2, 0))], axis=1) == T(R, (2,), 0, 0)
    with pytest.raises(ShapeError, match="mean"):
        OPS["mean"].shape([(0,)], {})


def test_sum_is_a_left_fold_binary32() -> None:
    # ((1e8 + 1) - 1e8) + 1: 1e8 + 1 rounds to 1e8 (spacing 8), so the fold gives 1.
    # A pairwise sum gives (1e8 + 1) + (-1e8 + 1) = 1e8 - 1e8 = 0; the exact sum is 2.
    x = T(F32, (4,), 1e8, 1.0, -1e8, 1.0)
    assert floats(fwd(F32, "sum", [x])) == [1.0]
    col = T(F32, (4, 1), 1e8, 1.0, -1e8, 1.0)
    assert floats(fwd(F32, "reduce_sum", [col], axis=0)) == [1.0]
    ones = T(F32, (1, 4), 1.0, 1.0, 1.0, 1.0)
    assert floats(fwd(F32, "matmul", [ones, col])) == [1.0]
    # The broadcast cotangent of a scalar operand is the same left fold.
    _, gc = vjp(F32, "add", [T(F32, (4,), 0.0, 0.0, 0.0, 0.0), s(F32, 0.0)], x)
    assert floats(gc) == [1.0]


# --------------------------------------------------------------------------- softmax family


@pytest.mark.parametrize("D", [F32, F64], ids=["binary32", "float64"])
def test_softmax_and_log_softmax_of_zeros(D: Domain) -> None:
    x = T(D, (2,), 0.0, 0.0)
    assert floats(fwd(D, "softmax", [x])) == [0.5, 0.5]
    y = fwd(D, "log_softmax", [x])
    if D is F32:
        assert [bits32(v) for v in y.data] == [0xBF317218, 0xBF317218]
        assert np_bits(-LN2) == 0xBF317218
    else:
        assert floats(y) == [-LN2, -LN2]
    g = T(D, (2,), 1.0, 0.0)
    assert floats(vjp(D, "softmax", [x], g)[0]) == [0.25, -0.25]  # y_j (g_j - Σ g_k y_k)
    assert floats(vjp(D, "log_softmax", [x], g)[0]) == [0.5, -0.5]  # g_j - p_j Σ g_k


def test_softmax_is_max_shifted() -> None:
    # exp(1000) overflows binary64, the max-shifted form does not.
    y = fwd(F64, "softmax", [T(F64, (2,), 1000.0, 1000.0)])
    assert floats(y) == [0.5, 0.5]


# --------------------------------------------------------------------------- smooth composites


def test_smooth_composites_at_zero_float64() -> None:
    zero, one = s(F64, 0.0), s(F64, 1.0)
    assert floats(fwd(F64, "sigmoid", [zero])) == [0.5]
    assert floats(fwd(F64, "softplus", [zero])) == [LN2]
    assert floats(fwd(F64, "gelu", [zero])) == [0.0]
    assert floats(fwd(F64, "silu", [zero])) == [0.0]
    # softplus'(0) = 1/2 via maximum's tie rule and abs'(0) = 0; gelu'(0) = silu'(0) = 1/2
    for op in ("sigmoid", "softplus", "gelu", "silu"):
        want = 0.25 if op == "sigmoid" else 0.5
        assert floats(vjp(F64, op, [zero], one)[0]) == [want], op
        assert floats(jvp(F64, op, [zero], [one])) == [want], op


# --------------------------------------------------------------------------- log, safe_log


def _log_graph() -> Graph:
    return Graph([(2,)]).snoc("log", [0])


@pytest.mark.parametrize("bad", [(1.0, 0.0), (-1.0, 2.0), (NAN, 1.0), (-0.0, 1.0)])
def test_log_refuses_nonpositive_or_nan_at_eval(bad: tuple[float, float]) -> None:
    g = _log_graph()  # building the graph succeeds: it cannot know values
    with pytest.raises(DomainError, match="log"):
        eval_graph(F32, g, [T(F32, (2,), *bad)])


def test_log_precondition_can_be_disabled() -> None:
    out = eval_graph(F32, _log_graph(), [T(F32, (2,), 0.0, 1.0)], check=False).tensors[1]
    assert floats(out) == [-math.inf, 0.0]


def test_log_refuses_in_backprop_too() -> None:
    g = _log_graph()
    seed = TensorPack.zeros(F32, g.shapes)
    with pytest.raises(DomainError):
        backprop_ctx(F32, g, [T(F32, (2,), 0.0, 1.0)], seed)


def test_safe_log_is_total() -> None:
    g = Graph([(4,)]).snoc("safe_log", [0])
    out = eval_graph(F64, g, [T(F64, (4,), 0.0, -3.0, 1.0, NAN)]).tensors[1]
    v = floats(out)
    floor = -24 * LN2  # log(2**-24)
    assert abs(v[0] - floor) < 1e-12 and abs(v[1] - floor) < 1e-12
    assert v[2] == 0.0 and math.isnan(v[3])
    # below the floor the derivative is 0 (maximum's strict case), at 1 it is 1
    gx = vjp(F64, "safe_log", [T(F64, (3,), 0.0, -3.0, 1.0)], T(F64, (3,), 1.0, 1.0, 1.0))[0]
    assert floats(gx) == [0.0, 0.0, 1.0]


# --------------------------------------------------------------------------- const, scale


def test_const_casts_rationals_once() -> None:
    c = fwd(F32, "const", [], shape=(2,), values=[Q(1, 3), Q(-2, 3)])
    assert [bits32(v) for v in c.data] == [np_bits(1 / 3), np_bits(-2 / 3)]
    assert fwd(R, "const", [], shape=(), values=[Q(1, 3)]).data == (Q(1, 3),)
    # 1 + 2^-24 + 2^-60 lies just above the midpoint of 1 and 1 + 2^-23: one rounding gives
    # 1 + 2^-23 (0x3f800001); rounding through binary64 first would give 1 (0x3f800000).
    q = 1 + Q(1, 2**24) + Q(1, 2**60)
    assert bits32(fwd(F32, "const", [], shape=(), values=[q]).data[0]) == 0x3F800001
    assert np_bits(float(q)) == 0x3F800000


def test_const_has_no_arguments_and_zero_tangent() -> None:
    assert vjp(R, "const", [], T(R, (2,), 5, 5), shape=(2,), values=[1, 2]) == []
    assert jvp(R, "const", [], [], shape=(2,), values=[1, 2]) == T(R, (2,), 0, 0)


def test_scale_by_a_third() -> None:
    assert fwd(R, "scale", [T(R, (2,), 3, 1)], c=Q(1, 3)).data == (1, Q(1, 3))
    y = fwd(F32, "scale", [s(F32, 1.0)], c=Q(1, 3))
    assert bits32(y.data[0]) == np_bits(1 / 3)
    assert vjp(R, "scale", [s(R, 7)], s(R, 6), c=Q(1, 3))[0].data == (2,)


# --------------------------------------------------------------------------- detach


def test_detach_has_zero_derivatives() -> None:
    x = T(R, (2,), 3, 4)
    assert fwd(R, "detach", [x]) == x
    assert vjp(R, "detach", [x], T(R, (2,), 1, 1))[0] == T(R, (2,), 0, 0)
    assert jvp(R, "detach", [x], [T(R, (2,), 1, 1)]) == T(R, (2,), 0, 0)


def test_detach_stops_one_path_in_a_graph() -> None:
    # y = detach(x) * x at x = 3: only the direct path counts, dy/dx = detach(x) = 3
    g = Graph([()]).snoc("detach", [0]).snoc("mul", [1, 0])
    seed = TensorPack.single(R, g.shapes, 2, s(R, 1))
    assert backprop_ctx(R, g, [s(R, 3)], seed).tensors[0].data == (3,)


# --------------------------------------------------------------------------- indexing


def test_select_with_literal_index() -> None:
    x = T(R, (3, 2), 1, 2, 3, 4, 5, 6)
    assert fwd(R, "select", [x], index=1) == T(R, (2,), 3, 4)
    assert vjp(R, "select", [x], T(R, (2,), 7, 8), index=1)[0] == T(R, (3, 2), 0, 0, 7, 8, 0, 0)


def test_select_with_env_slot_reads_the_environment() -> None:
    g = Graph([(3, 2)]).snoc("select", [0], env_slot=1)
    x = T(R, (3, 2), 1, 2, 3, 4, 5, 6)
    assert eval_graph(R, g, [x], env=(0, 2)).tensors[1] == T(R, (2,), 5, 6)
    assert eval_graph(R, g, [x], env=(9, 0)).tensors[1] == T(R, (2,), 1, 2)
    seed = TensorPack.single(R, g.shapes, 1, T(R, (2,), 7, 8))
    ct = backprop_ctx(R, g, [x], seed, env=(0, 2)).tensors[0]
    assert ct == T(R, (3, 2), 0, 0, 0, 0, 7, 8)
    with pytest.raises(GraphError, match="env slot"):
        eval_graph(R, g, [x], env=(0,))
    with pytest.raises(ShapeError, match="index out of range"):
        eval_graph(R, g, [x], env=(0, 3))


def test_select_needs_exactly_one_of_index_and_env_slot() -> None:
    with pytest.raises(GraphError, match="exactly one"):
        Graph([(3,)]).snoc("select", [0])
    with pytest.raises(GraphError, match="exactly one"):
        Graph([(3,)]).snoc("select", [0], index=0, env_slot=0)


def test_index_select_and_scatter_add_with_repeated_indices() -> None:
    x = T(R, (3, 1), 1, 2, 3)
    g = T(R, (3, 1), 10, 20, 30)
    y = fwd(R, "index_select", [x], indices=[2, 0, 2])
    assert y == T(R, (3, 1), 3, 1, 3)
    gx = vjp(R, "index_select", [x], g, indices=[2, 0, 2])[0]
    assert gx == T(R, (3, 1), 20, 0, 40)  # row 2 accumulates 10 + 30, row 1 gets none
    # adjointness by hand: <x[idx], g> = 30 + 20 + 90 = 140 = <x, scatter(g)> = 20 + 0 + 120
    assert dot(R, y, g) == dot(R, x, gx) == 140
    # scatter_add: out[j] = sum of x[k] with idx[k] == j; its VJP gathers
    sa = fwd(R, "scatter_add", [x], indices=[1, 1, 0], size=3)
    assert sa == T(R, (3, 1), 3, 3, 0)
    assert vjp(R, "scatter_add", [x], g, indices=[1, 1, 0], size=3)[0] == T(R, (3, 1), 20, 20, 10)
    assert vjp(R, "scatter_add", [x], g, indices=[1, 1, 0], size=3)[0] == fwd(
        R, "index_select", [g], indices=[1, 1, 0]
    )


def test_scatter_add_accumulates_in_index_order_binary32() -> None:
    # rows 0..3 all go to slot 0: ((1e8 + 1) + -1e8) + 1 = 1 in binary32
    x = T(F32, (4,), 1e8, 1.0, -1e8, 1.0)
    assert floats(fwd(F32, "scatter_add", [x], indices=[0, 0, 0, 0], size=2)) == [1.0, 0.0]


def test_concat_and_slice() -> None:
    a, b = T(R, (2,), 1, 2), T(R, (1,), 3)
    assert fwd(R, "concat", [a, b]) == T(R, (3,), 1, 2, 3)
    ga, gb = vjp(R, "concat", [a, b], T(R, (3,), 10, 20, 30))
    assert (ga, gb) == (T(R, (2,), 10, 20), T(R, (1,), 30))
    m = T(R, (2, 2), 1, 2, 3, 4)
    assert fwd(R, "concat", [m, m]) == T(R, (4, 2), 1, 2, 3, 4, 1, 2, 3, 4)
    x = T(R, (3, 2), 1, 2, 3, 4, 5, 6)
    assert fwd(R, "slice", [x], start=1, stop=3) == T(R, (2, 2), 3, 4, 5, 6)
    assert vjp(R, "slice", [x], T(R, (2, 2), 7, 8, 9, 10), start=1, stop=3)[0] == T(
        R, (3, 2), 0, 0, 7, 8, 9, 10
    )
    assert fwd(R, "slice", [x], start=2, stop=2) == T(R, (0, 2))


# --------------------------------------------------------------------------- structure


def test_structural_ops() -> None:
    x = T(R, (2, 3), 1, 2, 3, 4, 5, 6)
    assert fwd(R, "transpose", [x]) == T(R, (3, 2), 1, 4, 2, 5, 3, 6)
    assert fwd(R, "swap_adjacent", [x], axis=0) == T(R, (3, 2), 1, 4, 2, 5, 3, 6)
    assert vjp(R, "transpose", [x], T(R, (3, 2), 1, 4, 2, 5, 3, 6))[0] == x
    assert fwd(R, "reshape", [x], shape=(3, 2)) == T(R, (3, 2), 1, 2, 3, 4, 5, 6)
    assert vjp(R, "reshape", [x], T(R, (3, 2), 6, 5, 4, 3, 2, 1), shape=(3, 2))[0] == T(
        R, (2, 3), 6, 5, 4, 3, 2, 1
    )
    c = T(R, (2, 1), 1, 2)
    assert fwd(R, "broadcast_to", [c], shape=(2, 3)) == T(R, (2, 3), 1, 1, 1, 2, 2, 2)
    assert vjp(R, "broadcast_to", [c], x, shape=(2, 3))[0] == T(R, (2, 1), 6, 15)
    y = T(R, (2, 1, 2), 1, 2, 3, 4)
    assert fwd(R, "swap_adjacent", [y], axis=1) == T(R, (2, 2, 1), 1, 2, 3, 4)
    assert fwd(R, "swap_adjacent", [y], axis=0) == T(R, (1, 2, 2), 1, 2, 3, 4)
    z = T(R, (2, 2, 1), 1, 2, 3, 4)
    assert fwd(R, "swap_adjacent", [z], axis=0) == T(R, (2, 2, 1), 1, 3, 2, 4)


def test_add_and_mul_broadcast_both_ways() -> None:
    a, b = T(R, (2, 1), 1, 2), T(R, (1, 3), 10, 20, 30)
    assert fwd(R, "add", [a, b]) == T(R, (2, 3), 11, 21, 31, 12, 22, 32)
    ga, gb = vjp(R, "mul", [a, b], T(R, (2, 3), 1, 1, 1, 1, 1, 1))
    assert ga == T(R, (2, 1), 60, 60)
    assert gb == T(R, (1, 3), 3, 3, 3)
