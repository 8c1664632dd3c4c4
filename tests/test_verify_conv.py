"""Verification of convolutional networks: Conv2d (stride, padding, dilation, groups),
AvgPool2d, BatchNorm2d (evaluation mode) and Flatten; sound at both levels (sampled points,
every bfloat16 input of a small box), re-validated by the checker, which builds the
convolution windows itself; MaxPool2d (max >= x_k, max <= u, or max = x_k when it
dominates), hand-worked, sound, and its forged relaxations refused.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import (
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
)
from runtime.trainer import Result
from runtime.verification import VerificationError, verify
from tests.cert_forge import resign


def _result(model: Sequential, state: list[Any], dtype: str) -> Result:
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


def _rand_state(model: Sequential, rng: np.random.Generator) -> list[Any]:
    """Weights ~ N(0, 1/4), BatchNorm running variances in [0.5, 2] and eps 0.1."""
    out: list[Any] = []
    for layer in model.layers:
        if isinstance(layer, BatchNorm2d):
            c = layer.c
            out += [rng.uniform(0.5, 1.5, c), rng.normal(size=c) * 0.1,
                    rng.normal(size=c) * 0.1, rng.uniform(0.5, 2, c), np.asarray(0.0)]  # fmt: skip
        else:
            out += [rng.normal(size=sp.shape) / 2 for sp in layer.state_specs()]
    return out


@pytest.mark.parametrize(
    ("attrs", "cin", "cout"),
    [
        ({"stride": 1, "padding": 0}, 1, 2),
        ({"stride": 2, "padding": 1}, 2, 2),
        ({"stride": (1, 2), "padding": (2, 1), "dilation": 2}, 2, 3),
        ({"stride": 1, "padding": 1, "groups": 2}, 2, 4),
    ],
)
def test_conv_matrix_is_the_runtime_convolution(attrs: dict[str, Any], cin: int, cout: int) -> None:
    # radius 0 in float64: the real bounds are the exact value of the stage's matrix at the
    # center; the runtime's own float64 convolution is within rounding of it
    model = Sequential(Conv2d(cin, cout, (3, 2), **attrs), Flatten())
    rng = np.random.default_rng(cin + cout)
    res = _result(model, _rand_state(model, rng), "float64")
    x = rng.uniform(-1, 1, (cin, 5, 6))
    v = verify(res, x, 0.0, algorithm="ibp" if attrs.get("groups") else "crown")
    y = np.asarray(res.predict(x), dtype=np.float64).reshape(-1)
    assert len(y) == len(v.real.lower)
    for j, t in enumerate(y):
        assert v.real.lower[j] == v.real.upper[j]  # a point: its exact image
        assert abs(float(v.real.lower[j]) - t) <= 1e-12 * (1 + abs(t))
        assert v.runtime.lower[j] <= Fraction(float(t)) <= v.runtime.upper[j]
    check_certificate(v.certificate())


def _cnn(dtype: str, seed: int) -> tuple[Result, np.ndarray]:
    model = Sequential(
        Conv2d(1, 3, 3, padding=1), BatchNorm2d(3), ReLU(), AvgPool2d(2),
        Conv2d(3, 4, 2), ReLU(), Flatten(), Linear(4, 3),
    )  # fmt: skip
    rng = np.random.default_rng(seed)
    return _result(model, _rand_state(model, rng), dtype), rng.uniform(0, 1, (1, 4, 4))


def test_small_cnn_sound_at_sampled_points() -> None:
    res, c = _cnn("float32", 0)
    r = 0.05
    rng = np.random.default_rng(1)
    pts = np.stack([c + rng.uniform(-r, r, c.shape) for _ in range(200)])
    pts = np.concatenate([pts, c[None]])
    inside = [all(abs(Fraction(float(a)) - Fraction(float(b))) <= Fraction(r)
                  for a, b in zip(p.ravel(), c.ravel(), strict=True)) for p in pts]  # fmt: skip
    out = np.asarray(res.predict(pts[inside], batch=True), dtype=np.float64)
    widths = {}
    for alg in ("ibp", "crown", "alpha-crown"):
        v = verify(res, c, r, algorithm=alg)
        widths[alg] = sum(v.real.widths())
        for j in range(3):
            assert v.runtime.lower[j] <= Fraction(float(out[:, j].min()))
            assert Fraction(float(out[:, j].max())) <= v.runtime.upper[j]
    assert widths["alpha-crown"] <= widths["crown"] < widths["ibp"]


def test_tiny_cnn_every_bfloat16_input() -> None:
    model = Sequential(Conv2d(1, 2, 2, padding=1), ReLU(), AvgPool2d(2, stride=1),
                       Flatten(), Linear(8, 2))  # fmt: skip
    res = _result(model, _rand_state(model, np.random.default_rng(5)), "bfloat16")
    c = np.array([[[1.25, -1.5], [1.75, 1.125]]])
    r = 0.0078125  # bfloat16 spacing in [1, 2): three values per coordinate
    v = verify(res, c, r, algorithm="alpha-crown")
    check_certificate(json.loads(json.dumps(v.certificate())))
    np_dt = get_backend("numpy").dtype("bfloat16")
    with np.errstate(invalid="ignore"):
        vals = np.unique(np.arange(2**16, dtype=np.uint16).view(np_dt).astype(np.float64))
    vals = vals[np.isfinite(vals)]
    axes = []
    for x in c.ravel():
        lo, hi = vals[vals <= x - r].max(), vals[vals >= x + r].min()
        axes.append([float(t) for t in vals if lo <= t <= hi])
    pts = np.array(list(itertools.product(*axes))).reshape(-1, 1, 2, 2)
    assert len(pts) == 81
    out = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
    for j in range(2):
        assert v.runtime.lower[j] <= Fraction(float(out[:, j].min()))
        assert Fraction(float(out[:, j].max())) <= v.runtime.upper[j]


def test_image_outputs_are_refused() -> None:
    img = Sequential(Conv2d(1, 1, 2))
    res = _result(img, _rand_state(img, np.random.default_rng(0)), "float32")
    with pytest.raises(VerificationError, match=r"outputs of shape \(1, 2, 2\)"):
        verify(res, np.zeros((1, 3, 3)), 0.1)


def _pool1() -> Result:
    # y = max(x) over a 2x2 input (MaxPool2d(2), Flatten, Linear(1, 1) = identity)
    model = Sequential(MaxPool2d(2), Flatten(), Linear(1, 1))
    return _result(model, [[[1.0]], [0.0]], "float64")


def test_max_pool_hand_worked() -> None:
    res = _pool1()
    # inputs [-1/2, 1/2], [1/2, 3/2], [3/2, 5/2], [5/2, 7/2]: the last dominates (5/2 >= 5/2)
    # so max = x_3 exactly: [5/2, 7/2] (CROWN's line max = x_3, both ways)
    v = verify(res, np.array([[[0.0, 1.0], [2.0, 3.0]]]), 0.5, algorithm="crown")
    assert (v.real.lower, v.real.upper) == ((Fraction(5, 2),), (Fraction(7, 2),))
    pool = v.certificate()["levels"]["real"]["witness"][0]["pool"]
    assert pool == [[3, 1, "7/2"]]
    # all inputs in [-1, 1], none dominates: max >= x_k (k = 0, the first largest lower
    # end) and max <= 1, so [-1, 1]
    v = verify(res, np.zeros((1, 2, 2)), 1.0, algorithm="alpha-crown")
    assert (v.real.lower, v.real.upper) == ((Fraction(-1),), (Fraction(1),))
    assert v.certificate()["levels"]["real"]["witness"][0]["pool"] == [[0, 0, "1/1"]]
    assert "holds" in check_certificate(v.certificate())


def _pool_net(dtype: str, seed: int) -> Result:
    model = Sequential(Conv2d(1, 2, 2, padding=1), ReLU(), MaxPool2d(2, stride=1),
                       Conv2d(2, 2, 2), ReLU(), MaxPool2d(2, padding=1), Flatten(),
                       Linear(8, 3))  # fmt: skip
    return _result(model, _rand_state(model, np.random.default_rng(seed)), dtype)


def test_max_pool_net_sound_never_wider_and_checked() -> None:
    res = _pool_net("float32", 3)
    rng = np.random.default_rng(0)
    c, r = rng.uniform(0, 1, (1, 4, 4)), 0.05
    pts = np.stack([c + rng.uniform(-r, r, c.shape) for _ in range(300)])
    out = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
    vs = {alg: verify(res, c, r, algorithm=alg) for alg in ("ibp", "crown")}
    for v in vs.values():
        for j in range(3):
            assert v.runtime.lower[j] <= Fraction(float(out[:, j].min()))
            assert Fraction(float(out[:, j].max())) <= v.runtime.upper[j]
    assert sum(vs["crown"].real.widths()) < sum(vs["ibp"].real.widths())
    good = json.loads(json.dumps(vs["crown"].certificate()))
    assert "holds" in check_certificate(copy.deepcopy(good))
    wit = good["levels"]["real"]["witness"]
    t = next(i for i, e in enumerate(wit) if "pool" in e)
    o = next(i for i, e in enumerate(wit[t]["pool"]) if e[1] == 0)

    def refused(edit: Any) -> None:
        c2 = copy.deepcopy(good)
        edit(c2["levels"]["real"]["witness"][t]["pool"][o])
        body = {k: v for k, v in c2.items() if k != "digest"}
        text = json.dumps(body, sort_keys=True, separators=(",", ":"))
        c2["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
        with pytest.raises(CertificateError, match="pool"):
            check_certificate(c2)

    refused(lambda e: e.__setitem__(1, 1))  # claims to dominate
    refused(lambda e: e.__setitem__(2, "-1000/1"))  # an upper end below the window's
    refused(lambda e: e.__setitem__(0, 10**4))  # not an input of the window


def test_tiny_max_pool_net_every_bfloat16_input() -> None:
    model = Sequential(Conv2d(1, 2, 2, padding=1), ReLU(), MaxPool2d(2, stride=1),
                       Flatten(), Linear(8, 2))  # fmt: skip
    res = _result(model, _rand_state(model, np.random.default_rng(5)), "bfloat16")
    c = np.array([[[1.25, -1.5], [1.75, 1.125]]])
    r = 0.0078125  # bfloat16 spacing in [1, 2): three values per coordinate
    v = verify(res, c, r, algorithm="alpha-crown")
    crown = verify(res, c, r, algorithm="crown")
    np_dt = get_backend("numpy").dtype("bfloat16")
    with np.errstate(invalid="ignore"):
        vals = np.unique(np.arange(2**16, dtype=np.uint16).view(np_dt).astype(np.float64))
    vals = vals[np.isfinite(vals)]
    axes = []
    for x in c.ravel():
        lo, hi = vals[vals <= x - r].max(), vals[vals >= x + r].min()
        axes.append([float(t) for t in vals if lo <= t <= hi])
    pts = np.array(list(itertools.product(*axes))).reshape(-1, 1, 2, 2)
    assert len(pts) == 81
    out = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
    for j in range(2):
        assert crown.runtime.lower[j] <= v.runtime.lower[j] <= Fraction(float(out[:, j].min()))
        assert Fraction(float(out[:, j].max())) <= v.runtime.upper[j] <= crown.runtime.upper[j]


def test_forged_conv_certificates_are_refused() -> None:
    model = Sequential(Conv2d(1, 2, 2, padding=1), ReLU(), Flatten(), Linear(18, 2))
    res = _result(model, _rand_state(model, np.random.default_rng(2)), "float32")
    good = verify(res, np.full((1, 2, 2), 0.5), 0.1, algorithm="crown").certificate()
    assert "holds" in check_certificate(copy.deepcopy(good))

    def refused(edit: Any, match: str) -> None:
        c = copy.deepcopy(good)
        edit(c["network"]["stages"][0])
        with pytest.raises(CertificateError, match=match):
            check_certificate(resign(c, network=True))

    refused(lambda s: s.update(in_shape=[1, 2, 3]), "does not hold 4 inputs")
    refused(lambda s: s.update(stride=[2, 2]), "does not match|expected|not sound")
    refused(lambda s: s.update(padding=[0, 0]), "does not match|expected|not sound")
    refused(lambda s: s.update(groups=2), "channels and groups")
    refused(lambda s: s["weight"][0][0][0].__setitem__(0, "0x40800000"), "not sound|contain")
