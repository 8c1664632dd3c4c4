"""The `fast` profile's derivative bounds (`conformance.bounds.balls`, `.derivatives`).

Oracles: independent computations of the same quantities in NumPy (several summation
orders, BLAS, wider accumulators, the platform's libm) and exact `Fraction` arithmetic
rounded once by `spec` (an emulated fused multiply-add); hand-worked γ bounds; planted bugs
that the check must name.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance.bounds.balls import Ball, Undecided, contains
from conformance.bounds.derivatives import ball_domain, check_derivative_bounds
from conformance.suite import default_properties, run_property
from runtime.engine.context import KernelContext
from runtime.kernels import KERNELS, Kernel
from spec.domains import BINARY32, FLOAT16
from spec.graph import GraphBuilder
from spec.tensor import Tensor, TensorPack, fold_add

D32 = ball_domain("float32")
D16 = ball_domain("float16")


def f32(v: float) -> Any:
    return BINARY32.from_float(float(np.float32(v)))


def ball(D: Any, v: Any) -> Ball:
    return D.exact_ball(v)


finite32 = st.floats(-1e4, 1e4, allow_nan=False, width=32)


# --------------------------------------------------------------------------- the model


@given(st.lists(finite32, min_size=2, max_size=14))
def test_a_sum_ball_holds_for_every_summation_order(xs: list[float]) -> None:
    x = np.array(xs, dtype=np.float32)
    want = fold_add(D32, [ball(D32, f32(v)) for v in xs])
    ways = {
        "left fold": np.add.accumulate(x)[-1],
        "right fold": np.add.accumulate(x[::-1])[-1],
        "pairwise (np.sum)": np.sum(x),
        "float64 accumulator, rounded once": np.float32(np.sum(x.astype(np.float64))),
        "exact, rounded once": np.float32(float(sum(Fraction(float(v)) for v in x))),
    }
    for how, got in ways.items():
        ok, err, bound = contains(D32, want, f32(got))
        assert ok, (how, float(got), float(err), float(bound))


@given(st.lists(st.tuples(finite32, finite32), min_size=1, max_size=10))
def test_a_dot_ball_holds_for_blas_and_fused_multiply_add(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p for p, _ in pairs], dtype=np.float32)
    b = np.array([q for _, q in pairs], dtype=np.float32)
    want = fold_add(D32, [D32.mul(ball(D32, f32(p)), ball(D32, f32(q))) for p, q in pairs])
    fma = Fraction(0)
    for p, q in zip(a, b, strict=True):  # acc = RN(acc + p*q): a fused multiply-add
        fma = BINARY32.to_rational(BINARY32.from_rational(fma + Fraction(float(p)) * float(q)))
    ways = {
        "BLAS np.dot": np.dot(a, b),
        "products rounded, left fold": np.add.accumulate(a * b)[-1],
        "fused multiply-add loop": np.float32(float(fma)),
    }
    for how, got in ways.items():
        ok, err, bound = contains(D32, want, f32(got))
        assert ok, (how, float(got), float(err), float(bound))


@pytest.mark.parametrize("fn", ["exp", "log", "tanh", "sin", "cos"])
@given(x=st.floats(0.0625, 30.0, width=32))
def test_a_libm_ball_holds_for_numpy(fn: str, x: float) -> None:
    got = getattr(np, fn)(np.float32(x))
    ok, err, bound = contains(D32, getattr(D32, fn)(ball(D32, f32(x))), f32(got))
    assert ok, (fn, x, float(got), float(err), float(bound))


@given(finite32, finite32)
def test_exact_operands_give_the_correctly_rounded_result(p: float, q: float) -> None:
    a, b = ball(D32, f32(p)), ball(D32, f32(q))
    for op, got in (("mul", np.float32(p) * np.float32(q)), ("add", np.float32(p) + q)):
        r = D32.settle(getattr(D32, op)(a, b))
        assert r.r == 0 and r.c == f32(got), (op, p, q)
    if q != 0:
        r = D32.div(a, b)
        assert r.r == 0 and r.c == f32(np.float32(p) / np.float32(q))


def test_hand_worked_radii() -> None:
    u = Fraction(1, 2**24)
    one, tiny = ball(D32, f32(1.0)), ball(D32, f32(2.0**-24))
    # two exact addends: one correctly rounded add, 1 + 2**-24 is a tie -> 1 (even)
    two = D32.settle(D32.add(one, tiny))
    assert (two.c, two.r) == (1, 0)
    # three addends: any order, radius gamma_2 * (1 + 2**-23)
    three = D32.settle(D32.add(D32.add(one, tiny), tiny))
    g2 = 2 * u / (1 - 2 * u)
    assert Fraction(*three.r.as_integer_ratio()) == pytest.approx(g2 * (1 + 2 * u), rel=2**-200)
    assert three.c == 1 + 2.0**-23  # the exact sum is the center
    # a product enters a sum with its own rounding error (a BLAS may fuse it)
    third = ball(D32, f32(1 / 3))
    p = D32.mul(third, ball(D32, f32(3.0)))
    assert D32.settle(p).r == 0 and D32.settle(p).c == 1  # RN(3 * RN(1/3)) = 1
    s = D32.settle(D32.add(p, ball(D32, f32(0.0))))
    assert s.r > 0 and s.c == 3 * f32(1 / 3)  # exact product +- its rounding error


def test_overflow_and_decisions() -> None:
    big = ball(D16, FLOAT16.from_float(300.0))
    inf = D16.mul(big, big)  # 90000 >= float16's threshold: +inf for certain
    assert not inf.wild and inf.c == float("inf")
    near = D16.add(D16.add(big, big), ball(D16, FLOAT16.from_float(65000.0)))
    assert D16.settle(near).wild  # a partial sum may overflow: anything goes
    assert contains(D16, near, FLOAT16.from_float(float("nan")))[0] is None
    fuzzy = D32.settle(fold_add(D32, [ball(D32, f32(v)) for v in (1.0, 1e-3, -1.0)]))
    with pytest.raises(Undecided):
        D32.lt(fuzzy, ball(D32, f32(1e-3)))
    assert D32.lt(ball(D32, f32(-0.0)), ball(D32, f32(0.0))) is False  # exact: IEEE
    assert D32.settle(D32.div(one := ball(D32, f32(1.0)), fuzzy)).r > 0
    assert D32.div(one, D32.sub(fuzzy, fuzzy)).wild  # divisor's ball holds 0


def test_a_float16_accumulation_lies_outside_the_ball() -> None:
    xs = [1 + k * 2.0**-20 for k in range(1, 10)]  # full-width float32 values
    want = fold_add(D32, [ball(D32, f32(v)) for v in xs])
    low = np.float32(np.sum(np.array(xs, dtype=np.float32), dtype=np.float16))
    assert contains(D32, want, f32(low))[0] is False
    assert contains(D32, want, f32(np.sum(np.array(xs, dtype=np.float32))))[0] is True


# --------------------------------------------------------------------------- the check


def _broadcast_case() -> tuple[Any, list[Tensor], TensorPack]:
    b = GraphBuilder()
    x, y = b.input((2, 3, 2)), b.input((1, 3, 1))
    z = b.node("mul", x, y)
    b.node("sum", z)
    g = b.build()
    vals = [1 + k * 2.0**-19 for k in range(12)]
    xs = [
        Tensor((2, 3, 2), tuple(f32(v) for v in vals)),
        Tensor((1, 3, 1), tuple(f32(v) for v in (1.5, -0.75, 1 + 2.0**-20))),
    ]
    seeds = [Tensor.zeros(BINARY32, s) for s in g.shapes]
    seeds[-1] = Tensor((), (f32(1 + 2.0**-21),))
    seeds[0] = Tensor((2, 3, 2), tuple(f32(v / 3) for v in vals))  # input tangents too
    seeds[1] = Tensor((1, 3, 1), (f32(0.5), f32(1 / 3), f32(-2.0)))
    return g, xs, TensorPack.of(seeds)


def test_the_check_passes_on_the_fast_runtime() -> None:
    g, xs, seed = _broadcast_case()
    rep = check_derivative_bounds(g, xs, seed, dtype="float32")
    assert rep.ok, rep.first_violation
    assert rep.nodes == 2 and rep.details["checked"] > 20 and rep.details["wild"] == 0


def test_a_broadcast_cotangent_reduced_in_float16_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = KernelContext.unbroadcast

    def low(self: KernelContext, g: Any, shape: tuple[int, ...]) -> Any:
        out = real(self, g, shape)
        if self.ordered or tuple(g.shape) == tuple(shape):
            return out
        return out.astype(np.float16).astype(self.dt)

    monkeypatch.setattr(KernelContext, "unbroadcast", low)
    g, xs, seed = _broadcast_case()
    rep = check_derivative_bounds(g, xs, seed, dtype="float32")
    assert not rep.ok
    assert rep.first_violation.startswith("node %2 mul vjp (argument 1, to %1) element")


def test_a_wrong_fast_tangent_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real = KERNELS["mul"]

    def jvp(ctx: Any, saved: Any, dxs: Any, attrs: Any, env: Any) -> Any:
        t = real.jvp(ctx, saved, dxs, attrs, env)
        return t if ctx.ordered else t * ctx.const(Fraction(1025, 1024))

    monkeypatch.setitem(
        KERNELS, "mul", Kernel("mul", real.forward, real.vjp, jvp, real.saves, real.check)
    )
    g, xs, seed = _broadcast_case()
    rep = check_derivative_bounds(g, xs, seed, dtype="float32")
    assert not rep.ok and rep.first_violation.startswith("node %2 mul jvp (tangent) element")


def test_a_lost_contribution_fails_the_accumulation(monkeypatch: pytest.MonkeyPatch) -> None:
    from runtime.engine.tape import Tape

    real = Tape.backward_dense_from

    def lossy(self: Tape, grads0: Any) -> list[Any]:
        out = real(self, grads0)
        out[0] = out[0] * np.float32(1 + 2.0**-8)  # x's cotangent no longer the sum
        return out

    monkeypatch.setattr(Tape, "backward_dense_from", lossy)
    g, xs, seed = _broadcast_case()
    rep = check_derivative_bounds(g, xs, seed, dtype="float32")
    assert not rep.ok
    assert rep.first_violation.startswith("node %0 accumulated cotangent element")


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_the_property_compares_almost_everything(dtype: str) -> None:
    prop = next(p for p in default_properties([dtype], ["fast"]) if p.name == "derivative_bounds")
    counts = {"checked": 0, "wild": 0, "undecided": 0}
    real = prop.check

    def counting(case: Any) -> Any:
        rep = check_derivative_bounds(case.graph, case.inputs, case.seed, dtype=dtype)
        for k in counts:
            counts[k] += rep.details.get(k, 0)
        return real(case)

    prop.check = counting
    row = run_property(prop, max_examples=30)
    assert row.failed == 0 and row.cases == 30
    assert counts["checked"] > 500
    assert counts["wild"] + counts["undecided"] <= 0.05 * counts["checked"], counts


def test_a_failure_names_the_op_and_replays(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.suite import replay

    real = KernelContext.unbroadcast

    def low(self: KernelContext, g: Any, shape: tuple[int, ...]) -> Any:
        out = real(self, g, shape)
        return out if self.ordered else out.astype(np.float16).astype(self.dt)

    prop = next(
        p for p in default_properties(["float64"], ["fast"]) if p.name == "derivative_bounds"
    )
    monkeypatch.setattr(KernelContext, "unbroadcast", low)
    row = run_property(prop, max_examples=60)
    assert row.failed == 1 and row.failure is not None
    f = row.failure
    assert " vjp (argument " in f["message"] and f["op"].startswith("step %")
    assert f["graph_text"].startswith("graph(")
    assert not replay(f["repro"]).ok
    monkeypatch.undo()
    assert replay(f["repro"]).ok
