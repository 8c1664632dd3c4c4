"""alpha-CROWN on tanh / sigmoid networks: per-row slopes of both lines, intercepts enclosed
rigorously, never wider than CROWN, sound, re-validated by the checker (forged lines
refused); BatchNorm's real-level lines from its two ends.

Independent references: closed forms worked by hand for the tight intercepts; 200-bit MPFR
evaluation of the real network (level 1) and the runtime's own `predict` (level 2) at
sampled points.
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Linear, Sequential, Sigmoid, Tanh
from runtime.trainer import Result
from runtime.verification.alpha import tight_line
from runtime.verification.arithmetic import Arith
from runtime.verification.relaxations import smooth_line

# --------------------------------------------------------------------------- hand-worked


def test_tanh_tight_intercepts_hand_worked() -> None:
    # tanh(x) - x/2 on [-2, 1]: f' = 1 - tanh^2 = 1/2 at x = -+atanh(1/sqrt 2) = -+ln(1 + sqrt 2)
    # (both inside); the ends give tanh(-2) + 1 = 0.036 and tanh(1) - 1/2 = 0.262, so
    # min = ln(1 + sqrt 2)/2 - 1/sqrt 2 = -0.26642 (at -ln(1 + sqrt 2)) and max = -min.
    m = math.log(1 + math.sqrt(2)) / 2 - 1 / math.sqrt(2)
    lo, hi, a = np.array([-2.0]), np.array([1.0]), np.array([0.5])
    (v, x) = tight_line("tanh", a, lo, hi, True)
    assert abs(v[0] - m) < 1e-14 and abs(x[0] + math.log(1 + math.sqrt(2))) < 1e-9
    (v, x) = tight_line("tanh", a, lo, hi, False)
    assert abs(v[0] + m) < 1e-14 and abs(x[0] - math.log(1 + math.sqrt(2))) < 1e-9
    H = Arith(None)
    ivl = (gmpy2.mpfr(-2), gmpy2.mpfr(1))
    aL, cL = smooth_line(H, "tanh", ivl, 0, 0.5, True)
    aU, cU = smooth_line(H, "tanh", ivl, 0, 0.5, False)
    assert aL == aU == Fraction(1, 2)
    assert m - 1e-9 < cL <= m and -m <= cU < -m + 1e-9  # rigorous, and tight


def test_sigmoid_tight_intercept_hand_worked() -> None:
    # sigmoid' = s (1 - s) = 1/5 at s = (1 +- r)/2, r = 1/sqrt 5; on [-1, 3] the concave
    # side's point x = ln((1 + r)/(1 - r)) = 0.9624 is inside, and max of sigmoid(x) - x/5
    # is (1 + r)/2 - x/5 = 0.53112 (the ends give 0.2689 + 0.2 = 0.469 and
    # 0.9526 - 0.6 = 0.353).
    r = 1 / math.sqrt(5)
    xs = math.log((1 + r) / (1 - r))
    want = (1 + r) / 2 - xs / 5
    (v, x) = tight_line("sigmoid", np.array([0.2]), np.array([-1.0]), np.array([3.0]), False)
    assert abs(v[0] - want) < 1e-14 and abs(x[0] - xs) < 1e-9
    _, c = smooth_line(Arith(None), "sigmoid", (gmpy2.mpfr(-1), gmpy2.mpfr(3)), 0, 0.2, False)
    assert want <= c < want + 1e-9


@settings(max_examples=25, deadline=None)
@given(
    st.sampled_from(["tanh", "sigmoid"]),
    st.floats(-8, 8),
    st.floats(0.01, 8),
    st.floats(0, 1),
    st.booleans(),
)
def test_any_slope_gives_a_sound_tight_line(
    kind: str, lo: float, w: float, t: float, lower: bool
) -> None:
    hi = lo + w
    a = t * (1.0 if kind == "tanh" else 0.25)
    _, c = smooth_line(Arith(None), kind, (gmpy2.mpfr(lo), gmpy2.mpfr(hi)), 0, a, lower)
    f = np.tanh if kind == "tanh" else (lambda x: 1 / (1 + np.exp(-x)))
    xs = np.linspace(lo, hi, 401)
    gap = f(xs) - a * xs - float(c)
    assert (gap >= -1e-15).all() if lower else (gap <= 1e-15).all()
    v, _ = tight_line(kind, np.array([a]), np.array([lo]), np.array([hi]), lower)
    assert abs(float(c) - v[0]) < 1e-9  # the float optimiser's tight intercept


# --------------------------------------------------------------------------- networks


def _net(act: Any, seed: int) -> Result:
    rng = np.random.default_rng(seed)
    k = 5 if act is Tanh else 3  # sigmoid's intercepts cost more (time)
    model = Sequential(Linear(3, k), act(), Linear(k, k), act(), Linear(k, 2))
    state = [rng.normal(size=s.shape) * 2 / np.sqrt(s.shape[-1])
             for la in model.layers for s in la.state_specs()]  # fmt: skip
    np_dt = get_backend("numpy").dtype("float32")
    return Result(model, "mse", "float32", "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


def _real_eval(res: Result, x: np.ndarray) -> list[Any]:
    """The real network at x in 200-bit MPFR (stored values exactly)."""
    with gmpy2.context(precision=200):
        v = [gmpy2.mpfr(float(t)) for t in x]
        state = res.state()
        for layer, occ in zip(res.model.layers, res.model.occurrences(), strict=True):
            if isinstance(layer, Linear):
                w, b = (state[k] for k in occ)
                v = [sum((gmpy2.mpfr(float(w[i, j])) * v[j] for j in range(len(v))),
                         gmpy2.mpfr(float(b[i]))) for i in range(w.shape[0])]  # fmt: skip
            elif isinstance(layer, Tanh):
                v = [gmpy2.tanh(t) for t in v]
            else:
                v = [1 / (1 + gmpy2.exp(-t)) for t in v]
        return v


@pytest.fixture(scope="module", params=[Tanh, Sigmoid], ids=["tanh", "sigmoid"])
def pair(request: Any) -> tuple[Result, Any, Any, np.ndarray]:
    res = _net(request.param, 3)
    c = np.array([0.2, -0.1, 0.3])
    crown = res.verify(c, 0.3, algorithm="crown", property=("top_label", 0))
    alpha = res.verify(c, 0.3, algorithm="alpha-crown", property=("top_label", 0))
    return res, crown, alpha, c


def test_never_wider_than_crown_and_narrower(pair: Any) -> None:
    _, crown, alpha, _ = pair
    for a, b in ((alpha.real, crown.real), (alpha.runtime, crown.runtime)):
        for lo, hi, olo, ohi in zip(a.lower, a.upper, b.lower, b.upper, strict=True):
            assert olo <= lo <= hi <= ohi
        assert all(x >= y for x, y in zip(a.margins, b.margins, strict=True) if x is not None)
    assert sum(alpha.real.widths()) < sum(crown.real.widths())


def test_sound_at_sampled_points(pair: Any) -> None:
    res, _, alpha, c = pair
    rng = np.random.default_rng(0)
    pts = c + rng.uniform(-0.3, 0.3, (300, 3))
    pts = pts[[all(abs(Fraction(float(p)) - Fraction(float(q))) <= Fraction(0.3)
                   for p, q in zip(x, c, strict=True)) for x in pts]]  # fmt: skip
    out = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
    for j in range(2):
        assert alpha.runtime.lower[j] <= Fraction(float(out[:, j].min()))
        assert Fraction(float(out[:, j].max())) <= alpha.runtime.upper[j]
    for x in pts[:40]:
        for j, y in enumerate(_real_eval(res, x)):
            assert alpha.real.lower[j] <= Fraction(*y.as_integer_ratio()) <= alpha.real.upper[j]


def _redigest(cert: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in cert.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    cert["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cert


def _smooth_entry(c: dict[str, Any]) -> tuple[str, int, int]:
    """(stage, row, neuron) of a final lower-bound relaxation the optimiser changed."""
    lvl = c["levels"]["real"]
    for s, rows in lvl["alpha"]["lower"].items():
        relax = lvl["alpha_witness"][int(s) - 1]["relax"]
        for r, row in enumerate(rows):
            for j, e in enumerate(row):
                if e != relax[j]:
                    return s, r, j
    raise AssertionError("no optimised tanh / sigmoid line")


def test_certificate_holds_and_forged_lines_are_refused(pair: Any) -> None:
    if pair[0].model.layers[1].__class__ is Sigmoid:
        pytest.skip("the forgeries are the same for sigmoid (time: one activation suffices)")
    good = json.loads(json.dumps(pair[2].certificate()))
    assert "holds" in check_certificate(copy.deepcopy(good))
    s, r, j = _smooth_entry(good)

    def refused(edit: Any, match: str) -> None:
        c = copy.deepcopy(good)
        edit(c["levels"]["real"]["alpha"]["lower"][s][r])
        with pytest.raises(CertificateError, match=match):
            check_certificate(_redigest(c))

    def raise_lower(row: list[Any]) -> None:  # the lower line lifted by 1e-6: above f
        p, q = map(int, row[j][1].split("/"))
        v = Fraction(p, q) + Fraction(1, 10**6)
        row[j][1] = f"{v.numerator}/{v.denominator}"

    def lower_upper(row: list[Any]) -> None:  # the upper line lowered by 1e-6
        p, q = map(int, row[j][3].split("/"))
        v = Fraction(p, q) - Fraction(1, 10**6)
        row[j][3] = f"{v.numerator}/{v.denominator}"

    refused(raise_lower, "not valid")
    refused(lower_upper, "not valid")
    refused(lambda row: row.__setitem__(j, "1/2"), "expected 4 entries")


def test_batch_norm_real_level_lines_are_exact() -> None:
    # y = BN(x) - BN(x) with both channels identical: 0 for every x. BatchNorm is affine at
    # the real level, so CROWN's lines (intercepts from the two ends) cancel up to the
    # binary64 slope's distance from the true one (width ~ 1e-16); IBP cannot see the
    # cancellation, and lines with intercepts from 24 pieces lose ~ (range / 24) each.
    from runtime.nn import BatchNorm1d

    model = Sequential(Linear(1, 2), BatchNorm1d(2), Linear(2, 1))
    state = [[[1.0], [1.0]], [0.0, 0.0], [2.0, 2.0], [0.5, 0.5], [1.0, 1.0], [3.0, 3.0],
             0.0, [[1.0, -1.0]], [0.0]]  # fmt: skip
    np_dt = get_backend("numpy").dtype("float64")
    res = Result(model, "mse", "float64", "eager", "ordered", False,
                 [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip
    v = res.verify([1.0], 1.0, algorithm="crown")
    ibp = res.verify([1.0], 1.0, algorithm="ibp")
    assert v.real.lower[0] <= 0 <= v.real.upper[0]
    assert v.real.upper[0] - v.real.lower[0] < Fraction(1, 10**12)
    assert ibp.real.upper[0] - ibp.real.lower[0] > 1
    assert "holds" in check_certificate(json.loads(json.dumps(v.certificate())))
