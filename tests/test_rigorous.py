"""The rigorous vectorised engine (`runtime.verification.rigorous`): its bounds hold for
the exact real network (Fractions) and for the runtime's outputs (`Result.predict`) at
sampled points of random boxes, a hand-worked 2-2-1 network gives the textbook CROWN
numbers, and it agrees with plain float CROWN and the exact-rational CROWN of crown.py."""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime.nn import Linear, ReLU, Sequential, Tanh
from runtime.trainer import Result
from runtime.verification import VerificationError, verify
from runtime.verification.floatnet import FloatNet
from runtime.verification.from_graph import Network
from runtime.verification.rigorous import SHARE, SoundNet, enclose, gamma

NP = {"float32": np.float32, "float64": np.float64}


def _net(ws: list[tuple[Any, Any]], dtype: str, act: Any = ReLU) -> Network:
    layers: list[Any] = []
    state: list[np.ndarray] = []
    for i, (W, b) in enumerate(ws):
        if i:
            layers.append(act())
        W = np.asarray(W, dtype=NP[dtype])
        layers.append(Linear(W.shape[1], W.shape[0]))
        state += [W, np.asarray(b, dtype=NP[dtype])]
    res = Result(Sequential(*layers), "mse", dtype, "eager", "ordered", False, state)
    n_in = np.shape(ws[0][0])[1]
    return Network(res, n_in, np.shape(ws[-1][0])[0], [], (n_in,))


def _real(net: Network, x: Any) -> tuple[list[list[Fraction]], list[Fraction]]:
    """Exact pre-activations of each hidden linear stage and the outputs at x."""
    st = net.result.state()
    v = [Fraction(float(t)) for t in x]
    pre = []
    for k in range(0, len(st), 2):
        if k:
            pre.append(v)
            v = [max(t, Fraction(0)) for t in v]
        W, b = st[k], st[k + 1]
        v = [sum((Fraction(float(w)) * t for w, t in zip(row, v, strict=True)),
                 Fraction(float(c))) for row, c in zip(W, b, strict=True)]  # fmt: skip
    return pre, v


# --------------------------------------------------------------------------- golden


GOLD = [([[1, 1], [1, -1]], [0, 0]), ([[1, 1]], [0])]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_golden_2_2_1(dtype: str) -> None:
    """z = (x1 + x2, x1 - x2) on [-1, 1]^2: both unstable on [-2, 2]; lower slope 1 (u >= -l)
    gives Y >= z1 + z2 = 2 x1 >= -2; the upper lines z/2 + 1 give -Y >= -(x1 + 2) >= -3.
    The rigorous bounds are these less the rounding terms (gamma_3 of the dtype)."""
    sn = SoundNet.build(_net(GOLD, dtype))
    assert sn is not None and sn.widths == (2, 2, 1) and sn.relu_stages == (1,)
    low, pre = sn.lower(np.array([[-1.0, -1]]), np.array([[1.0, 1]]), np.array([[1.0], [-1.0]]))
    # plus the binary64 bound arithmetic's own terms and the SHARE given up of the pieces'
    # magnitudes (at most 16 here: |W| max|x| <= 2 per neuron, two stages)
    tol = 40 * gamma(dtype, 3) + 1e-12 + 16 * SHARE
    assert -2 - tol <= low[0, 0] < -2 and -3 - tol <= low[0, 1] < -3
    assert np.allclose(pre[0][0], -2, rtol=0, atol=tol) and np.allclose(pre[0][1], 2, atol=tol)
    assert pre[0][0].max() < -2 and pre[0][1].min() > 2  # the runtime's error is included
    both_dead = [np.array([[-1, -1]], np.int8)]
    low, _ = sn.lower(np.array([[-1.0, -1]]), np.array([[1.0, 1]]), np.array([[1.0]]), both_dead)
    eta = 2.0 ** (-127 if dtype == "float32" else -1023)
    assert -3 * eta < low[0, 0] <= 0  # Y = 0 exactly, less the underflow term 2 eta (1 + g)


def test_empty_leaf_and_overflow() -> None:
    sn = SoundNet.build(_net(GOLD, "float64"))
    assert sn is not None
    low, _ = sn.lower(np.array([[-1.0, -1]]), np.array([[-0.5, -0.5]]), np.array([[1.0]]),
                      [np.array([[1, 0]], np.int8)])  # fmt: skip
    assert low[0, 0] == np.inf  # z1 in [-2, -1] cannot be >= 0
    big = _net([([[3e38, 3e38]], [0]), ([[1]], [0])], "float32")
    sb = SoundNet.build(big)
    assert sb is not None
    low, _ = sb.lower(np.array([[0.5, 0.5]]), np.array([[1.0, 1]]), np.array([[1.0]]))
    assert low[0, 0] == -np.inf  # the runtime's sum could overflow float32


def test_build_refuses_other_networks() -> None:
    assert SoundNet.build(_net(GOLD, "float32", act=Tanh)) is None
    ws = [([[1.0, 2]], [0])]
    assert SoundNet.build(_net(ws, "float32")).widths == (2, 1)  # type: ignore[union-attr]


def test_enclose_rounds_outward() -> None:
    lo, hi = enclose(((Fraction(1, 3), Fraction(-1, 10)), (Fraction(2, 3), Fraction(1, 4))))
    assert Fraction(lo[0]) < Fraction(1, 3) < Fraction(hi[0]) == Fraction(float(hi[0]))
    assert Fraction(lo[1]) <= Fraction(-1, 10) and Fraction(hi[1]) == Fraction(1, 4)
    assert Fraction(hi[0]) - Fraction(2, 3) < 2.0**-52 and np.nextafter(lo[0], 1) > 1 / 3 - 1e-16


# --------------------------------------------------------------------------- properties


@st.composite
def _case(draw: Any) -> tuple[Network, np.ndarray, np.ndarray, np.ndarray, Any, Any]:
    dtype = draw(st.sampled_from(["float32", "float64"]))
    sizes = [draw(st.integers(1, 3))] + [draw(st.integers(2, 4)) for _ in range(
        draw(st.integers(1, 2)))] + [2]  # fmt: skip
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    ws = [(rng.standard_normal((b, a)), rng.standard_normal(b) * 0.5)
          for a, b in itertools.pairwise(sizes)]  # fmt: skip
    net = _net(ws, dtype)
    lo = rng.uniform(-1, 1, sizes[0])
    hi = lo + rng.uniform(0, 1, sizes[0]) * draw(st.sampled_from([1e-3, 0.1, 1.0]))
    A = rng.integers(-2, 3, (2, 2)).astype(float)
    hidden = sizes[1:-1]
    splits = alpha = None
    if draw(st.booleans()):
        splits = [rng.integers(-1, 2, (1, n)).astype(np.int8) for n in hidden]
    if draw(st.booleans()):
        alpha = [rng.uniform(0, 1, (1, 2, n)) for n in hidden]
    return net, lo, hi, A, splits, alpha


def _points(net: Network, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Vertices and random points of the box, as values of the dtype inside it."""
    dt = NP[net.result.dtype]
    rng = np.random.default_rng(1)
    pts = np.array(list(itertools.product(*zip(lo, hi, strict=True))) +
                   list(lo + rng.random((24, lo.size)) * (hi - lo))).astype(dt)  # fmt: skip
    pts = np.where(pts < lo, np.nextafter(pts, dt(np.inf)), pts)
    pts = np.where(pts > hi, np.nextafter(pts, dt(-np.inf)), pts)
    return pts[((pts >= lo) & (pts <= hi)).all(axis=1)]


@given(_case())
def test_bounds_hold_at_both_levels(case: Any) -> None:
    net, lo, hi, A, splits, alpha = case
    sn = SoundNet.build(net)
    assert sn is not None
    low, pre = sn.lower(lo[None], hi[None], A, splits, alpha)
    assert not np.isnan(low).any()
    pts = _points(net, lo, hi)
    ys = np.asarray(net.result.predict(pts, batch=True), dtype=np.float64)
    for x, yr in zip(pts, ys, strict=True):
        z, y = _real(net, x)
        inside = splits is None or all(
            (s > 0 and v >= 0) or (s < 0 and v <= 0) or s == 0
            for S, zs in zip(splits, z, strict=True)
            for s, v in zip(S[0], zs, strict=True)
        )
        if inside:  # the leaf's region: the real network's sign constraints hold
            for a, lb in zip(A, low[0], strict=True):
                assert sum(Fraction(c) * v for c, v in zip(a, y, strict=True)) >= Fraction(lb)
            for (l, u), zs in zip(pre, z, strict=True):
                assert all(
                    Fraction(a) <= v <= Fraction(b) for a, b, v in zip(l[0], u[0], zs, strict=True)
                )
        if splits is None:  # the runtime's outputs (its own sign pattern: no constraints)
            for a, lb in zip(A, low[0], strict=True):
                got = sum(Fraction(c) * Fraction(v) for c, v in zip(a, yr, strict=True))
                assert got >= Fraction(lb)


@given(st.integers(0, 2**32 - 1))
def test_equals_float_crown_in_the_easy_case(seed: int) -> None:
    """One hidden layer in float64: CROWN's first-layer bounds are IBP's, so the rigorous
    bound is float CROWN's less rounding terms only."""
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((6, 3)), rng.standard_normal(6)),
          (rng.standard_normal((2, 6)), rng.standard_normal(2))]  # fmt: skip
    net = _net(ws, "float64")
    sn, fn = SoundNet.build(net), FloatNet.build(net.result, net.in_shape)
    assert sn is not None and fn is not None
    lo = rng.uniform(-1, 0, 3)
    hi = lo + rng.uniform(0, 1, 3)
    A = np.array([[1.0, -1], [0.5, 2]])
    low, _ = sn.lower(lo[None], hi[None], A)
    ref, _ = fn.crown(lo, hi, A)
    assert np.all(low[0] <= ref + 1e-12 * (1 + np.abs(ref)))
    assert np.allclose(low[0], ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_never_above_exact_crown(seed: int) -> None:
    """The exact-rational CROWN of crown.py (real level) on the network followed by an
    exact linear layer of the rows is an upper limit for the rigorous bound (which adds
    the runtime's rounding of every stage)."""
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((4, 2)), rng.standard_normal(4) * 0.3),
          (rng.standard_normal((3, 4)), rng.standard_normal(3) * 0.3),
          (rng.standard_normal((2, 3)), rng.standard_normal(2) * 0.3)]  # fmt: skip
    A = np.array([[1.0, -1], [-2, 1]])
    net = _net(ws, "float32")
    sn = SoundNet.build(net)
    assert sn is not None
    low, _ = sn.lower(np.array([[-0.25, 0.0]]), np.array([[0.25, 0.5]]), A)
    res = net.result
    obj = Result(
        Sequential(*res.model.layers, Linear(2, 2)),
        "mse",
        "float32",
        "eager",
        "ordered",
        False,
        [*res.state(), A.astype(np.float32), np.zeros(2, np.float32)],
    )
    c = np.array([Fraction(0), Fraction(1, 4)], dtype=object)
    r = np.array([Fraction(1, 4), Fraction(1, 4)], dtype=object)
    vr = verify(obj, c, r, algorithm="crown")
    for i in range(2):
        exact = Fraction(vr.real.lower[i])
        assert Fraction(low[0, i]) <= exact


def test_slopes_outside_the_unit_interval_are_refused() -> None:
    sn = SoundNet.build(_net(GOLD, "float64"))
    assert sn is not None
    box = (np.array([[-1.0, -1]]), np.array([[1.0, 1]]))
    for bad in (1.5, -0.5, np.nan):
        with pytest.raises(VerificationError, match=r"alpha must be in \[0, 1\]"):
            sn.lower(*box, np.array([[1.0]]), alpha=[np.full((1, 1, 2), bad)])


# ------------------------------------------------------- review regressions (found by hand)


def test_an_overflowed_coefficient_proves_nothing() -> None:
    """y = 1e200 relu(1e200 x) on x in [1e-300, 2e-300]: y is in [1e100, 2e100], but the
    back-substituted coefficient 1e400 overflows binary64; the bound must not become the
    largest finite number (nextafter(+inf, -inf)) but 'not computable'."""
    net = _net([([[1e200]], [0.0]), ([[1e200]], [0.0])], "float64")
    sn = SoundNet.build(net)
    assert sn is not None
    low, _ = sn.lower(np.array([[1e-300]]), np.array([[2e-300]]), np.array([[1.0]]))
    exact_min = _real(net, [1e-300])[1][0]
    assert low[0, 0] == -np.inf or Fraction(float(low[0, 0])) <= exact_min


def test_the_independent_checker_reaches_the_verifiers_bound_on_large_values() -> None:
    """Intermediate values near 1e7, output bound near -76: the checker's looser (sound)
    rounding terms cost about 1e-5 there, more than a margin relative to |d|; the
    verifier's bound gives up SHARE of its pieces' magnitude, so every leaf it closes the
    checker accepts."""
    from proofs.split_certificate_check import check_certificate
    from runtime.verification.splitcert import split_certificate
    from runtime.verification.splitting import sound_split_search

    rng = np.random.default_rng(18)
    sizes = [5, 50, 50, 50, 2]
    ws = [((rng.standard_normal((b, a)) * 100 / np.sqrt(a)).astype(np.float32),
           (rng.standard_normal(b) * 100).astype(np.float32))
          for a, b in itertools.pairwise(sizes)]  # fmt: skip
    lo = rng.uniform(-1, 1, 5).astype(np.float32).astype(float)
    hi = (lo + 1e-4).astype(np.float32).astype(float)
    net = _net(ws, "float32")
    sn = SoundNet.build(net)
    assert sn is not None
    a = np.array([[1.0, -1.0]])
    low, _ = sn.lower(lo[None], hi[None], a)
    d = Fraction(float(low[0, 0])) - Fraction(1, 10**6)
    box = (tuple(Fraction(v) for v in lo), tuple(Fraction(v) for v in hi))
    status, got = sound_split_search(sn, None, box, (a, np.array([float(d)])),
                                     lambda p: None, float("inf"))  # fmt: skip
    assert status == "unsat"
    cert = split_certificate(net, box, [((Fraction(1), Fraction(-1)), d)], got[0], got[1])
    assert check_certificate(cert).startswith("certificate holds")
