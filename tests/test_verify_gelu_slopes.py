"""alpha-CROWN's GELU lines: per row and neuron, any slope with the intercept of the
piecewise enclosure (`relaxations.gelu_line`). Sound at the runtime level (sampled points
and box vertices through `predict` with the ordered kernels), never wider than CROWN and
narrower on a seeded net; the checker re-validates the lines with its own piecewise
enclosure and refuses a forged intercept.
"""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import GELU, Linear, Sequential
from runtime.trainer import Result
from runtime.verification import verify
from tests.cert_forge import resign


def _net(dtype: str) -> Result:
    model = Sequential(Linear(3, 6), GELU(), Linear(6, 3))
    rng = np.random.default_rng(0)
    np_dt = get_backend("numpy").dtype(dtype)
    state = [np.asarray(rng.normal(size=sp.shape), dtype=np_dt)
             for layer in model.layers for sp in layer.state_specs()]  # fmt: skip
    return Result(model, "mse", dtype, "eager", "ordered", False, state)


def _width(b: Any) -> Fraction:
    return sum((b.upper[j] - b.lower[j] for j in range(3)), Fraction(0))


def test_gelu_slopes_are_sound_and_tighter() -> None:
    dtype = "bfloat16"  # level 2 in a coarse format (float32 is checked by the forgery test)
    res = _net(dtype)
    center, r = np.array([0.3, -0.4, 0.1]), 0.5
    cr, al = (verify(res, center, r, algorithm=a) for a in ("crown", "alpha-crown"))
    for lvl in ("real", "runtime"):
        b0, b1 = getattr(cr, lvl), getattr(al, lvl)
        assert all(b0.lower[j] <= b1.lower[j] and b1.upper[j] <= b0.upper[j] for j in range(3))
    assert _width(al.real) < _width(cr.real)
    np_dt = get_backend("numpy").dtype(dtype)
    rng = np.random.default_rng(3)
    pts = [center + r * np.array(v) for v in itertools.product((-1, 1), repeat=3)]
    pts += [center + rng.uniform(-r, r, 3) for _ in range(200)]
    for x in pts:
        y = np.asarray(res.predict(np.asarray(x, dtype=np_dt).astype(np.float64)), np.float64)
        for j in range(3):
            assert al.runtime.lower[j] <= Fraction(float(y[j])) <= al.runtime.upper[j]
    assert "holds" in check_certificate(al.certificate())


def test_forged_gelu_line_is_refused() -> None:
    cert = verify(_net("float32"), np.array([0.3, -0.4, 0.1]), 0.5,
                  algorithm="alpha-crown").certificate()  # fmt: skip
    rows = cert["levels"]["real"]["alpha"]["lower"]["2"]
    r, j = next((r, j) for r, row in enumerate(rows) for j, e in enumerate(row)
                if e[0] != e[2])  # fmt: skip  # a neuron with its own optimised line
    c2 = copy.deepcopy(cert)
    e = c2["levels"]["real"]["alpha"]["lower"]["2"][r][j]
    e[1] = str(Fraction(e[1]) + Fraction(1, 2**20))  # the lower intercept raised
    with pytest.raises(CertificateError, match="not valid"):
        check_certificate(resign(c2))
