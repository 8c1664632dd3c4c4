"""MaxPool2d's optimised upper lines max <= sum lam_i x_i + c(lam) (`pool_lines`):
the intercept hand-worked and checked against every vertex of random windows (the line
minus max is concave, so the vertices decide); alpha-CROWN with them sound at the runtime
level (sampled points and vertices of the box through `predict`), never wider than CROWN
and narrower on a seeded net; the checker recomputes the intercepts and refuses slopes
outside [0, 1] or of the wrong window size.
"""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Conv2d, Flatten, Linear, MaxPool2d, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import verify
from runtime.verification.pool_lines import intercept
from tests.cert_forge import resign

F = Fraction


def test_hand_worked_intercepts() -> None:
    lo, hi = [F(0), F(-1)], [F(2), F(1)]
    assert intercept([F(0), F(0)], lo, hi) == 2  # CROWN's constant line max <= 2
    assert intercept([F(1), F(0)], lo, hi) == 1  # max <= x0 + 1
    assert intercept([F(1, 2), F(0)], lo, hi) == 1  # the chord of max(x0, 1): x0/2 + 1
    assert intercept([F(1, 2), F(1, 2)], lo, hi) == F(3, 2)  # (x0 + x1)/2 + 3/2


small = st.fractions(min_value=-4, max_value=4, max_denominator=8)


@given(st.lists(st.tuples(small, small, st.fractions(0, 1, max_denominator=16)),
                min_size=1, max_size=4))  # fmt: skip
def test_intercept_is_the_least_sound_one(win: list[tuple[Fraction, Fraction, Fraction]]) -> None:
    lo = [min(a, b) for a, b, _ in win]
    hi = [max(a, b) for a, b, _ in win]
    lam = [x for _, _, x in win]
    c = intercept(lam, lo, hi)
    gaps = [c + sum(a * x for a, x in zip(lam, v, strict=True)) - max(v)
            for v in itertools.product(*zip(lo, hi, strict=True))]  # fmt: skip
    assert min(gaps) == 0  # above max at every vertex, touching it at one


def _net(dtype: str, seed: int = 0) -> Result:
    """1x4x4: Conv 2x3x3 pad 1, ReLU, MaxPool2d 2 (-> 2x2x2), Flatten, Linear 8 -> 3."""
    model = Sequential(Conv2d(1, 2, 3, padding=1), ReLU(), MaxPool2d(2), Flatten(),
                       Linear(8, 3))  # fmt: skip
    rng = np.random.default_rng(seed)
    np_dt = get_backend("numpy").dtype(dtype)
    state = [np.asarray(rng.normal(size=sp.shape) / 2, dtype=np_dt)
             for layer in model.layers for sp in layer.state_specs()]  # fmt: skip
    return Result(model, "mse", dtype, "eager", "ordered", False, state)


def _width(b: Any) -> Fraction:
    return sum((b.upper[j] - b.lower[j] for j in range(len(b.upper))), Fraction(0))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_alpha_pool_lines_are_sound_and_tighter(dtype: str) -> None:
    res = _net(dtype)
    center, r = np.random.default_rng(1).uniform(0, 1, (1, 4, 4)), 0.1
    cr, al = (verify(res, center, r, algorithm=a) for a in ("crown", "alpha-crown"))
    for lvl in ("real", "runtime"):
        b0, b1 = getattr(cr, lvl), getattr(al, lvl)
        assert all(b0.lower[j] <= b1.lower[j] and b1.upper[j] <= b0.upper[j] for j in range(3))
    assert _width(al.real) < _width(cr.real)
    lines = al.certificate()["levels"]["real"]["alpha"]["upper"]
    assert any(Fraction(v) for rows in lines.values() for row in rows for e in row
               for v in (e if isinstance(e, list) else [e]))  # fmt: skip
    np_dt = get_backend("numpy").dtype(dtype)
    rng = np.random.default_rng(2)
    pts = [center + rng.uniform(-r, r, center.shape) for _ in range(150)]
    pts += [center + r * np.array(s).reshape(center.shape) for s in
            itertools.islice(itertools.product((-1, 1), repeat=16), 0, 2**16, 4099)]  # fmt: skip
    for x in pts:
        y = np.asarray(res.predict(np.asarray(x, dtype=np_dt).astype(np.float64)), np.float64)
        for j in range(3):
            assert al.runtime.lower[j] <= Fraction(float(y[j])) <= al.runtime.upper[j]
    assert "holds" in check_certificate(al.certificate())


def test_forged_pool_slopes_are_refused() -> None:
    good = verify(_net("float32"), np.full((1, 4, 4), 0.5), 0.1, algorithm="alpha-crown")
    cert = good.certificate()
    assert "holds" in check_certificate(copy.deepcopy(cert))
    ups = cert["levels"]["real"]["alpha"]["upper"]
    key = next(k for k, rows in ups.items() if isinstance(rows[0][0], list))

    def edit(f: Any, match: str) -> None:
        c2 = copy.deepcopy(cert)
        f(c2["levels"]["real"]["alpha"]["upper"][key][0])
        with pytest.raises(CertificateError, match=match):
            check_certificate(resign(c2))

    edit(lambda row: row[0].__setitem__(0, "3/2"), r"not in \[0, 1\]")
    edit(lambda row: row[0].append("0/1"), "expected")
