"""alpha-CROWN (`algorithm="alpha-crown"`): optimised ReLU lower slopes, recomputed exactly,
never wider than CROWN or IBP, sound, and re-validated (slopes included) by the independent
checker, which refuses forged slopes.

Soundness is tested against values the code under test does not compute: exact rational
evaluation of the real network (Linear/ReLU only) for level 1, and the runtime's own outputs
(`Result.predict` with the ordered kernels) for level 2, at sampled points and, in bfloat16,
at every representable input of a box.
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
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Linear, ReLU, Sequential, Tanh
from runtime.trainer import Result
from runtime.verification import VerificationError


def _result(model: Sequential, state: list[Any], dtype: str = "float32") -> Result:
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


def _relu_net(dims: list[int], seed: int, dtype: str = "float32") -> Result:
    rng = np.random.default_rng(seed)
    layers: list[Any] = []
    state: list[Any] = []
    for i, (a, b) in enumerate(itertools.pairwise(dims)):
        layers.append(Linear(a, b))
        state += [rng.normal(size=(b, a)) / np.sqrt(a), rng.normal(size=b) * 0.1]
        if i < len(dims) - 2:
            layers.append(ReLU())
    return _result(Sequential(*layers), state, dtype)


def _exact_eval(res: Result, x: list[Fraction]) -> list[Fraction]:
    """The real Linear/ReLU network at x, in exact rationals (the stored values exactly)."""
    v = list(x)
    st = res.state()
    for layer, occ in zip(res.model.layers, res.model.occurrences(), strict=True):
        if isinstance(layer, Linear):
            w, b = (st[k] for k in occ)
            v = [sum((Fraction(float(w[i, j])) * v[j] for j in range(len(v))), Fraction(0))
                 + Fraction(float(b[i])) for i in range(w.shape[0])]  # fmt: skip
        else:
            assert isinstance(layer, ReLU)
            v = [max(t, Fraction(0)) for t in v]
    return v


def _points(center: list[float], radius: float, n: int, seed: int) -> list[list[float]]:
    """The box's vertices, its center and n random points, all inside the exact box."""
    pts = [[c + s * radius for c, s in zip(center, signs, strict=True)]
           for signs in itertools.product((-1.0, 1.0), repeat=len(center))]  # fmt: skip
    pts.append(list(center))
    rng = np.random.default_rng(seed)
    pts += [[c + radius * float(u) for c, u in zip(center, rng.uniform(-1, 1, len(center)),
                                                   strict=True)] for _ in range(n)]  # fmt: skip
    r = Fraction(radius)
    return [p for p in pts
            if all(Fraction(c) - r <= Fraction(x) <= Fraction(c) + r
                   for x, c in zip(p, center, strict=True))]  # fmt: skip


def _assert_sound(res: Result, v: Any, pts: list[list[float]]) -> None:
    for p in pts:
        rt = np.atleast_1d(res.predict(p))
        real = _exact_eval(res, [Fraction(x) for x in p])
        for j in range(len(rt)):
            assert v.runtime.lower[j] <= Fraction(float(rt[j])) <= v.runtime.upper[j], (p, j)
            assert v.real.lower[j] <= real[j] <= v.real.upper[j], (p, j)


def _within(inner: Any, outer: Any) -> None:
    """Level by level: inner's bounds inside outer's, margins at least as large."""
    for a, b in ((inner.real, outer.real), (inner.runtime, outer.runtime)):
        for lo, hi, olo, ohi in zip(a.lower, a.upper, b.lower, b.upper, strict=True):
            assert olo <= lo <= hi <= ohi
        if a.margins is not None:
            for x, y in zip(a.margins, b.margins, strict=True):
                assert (x is None) == (y is None) and (x is None or x >= y)


# --------------------------------------------------------------------------- hand-worked


def _kink() -> Result:
    # y = relu(x) - relu(x + 10)/2 + 5 = relu(x) - x/2 on [-1, 2] (x + 10 > 0 there):
    # min 0 at x = 0, max 1 at x = 2.
    model = Sequential(Linear(1, 2), ReLU(), Linear(2, 1))
    return _result(model, [[[1.0], [1.0]], [0.0, 10.0], [[1.0, -0.5]], [5.0]], "float64")


def test_hand_worked_kink() -> None:
    # IBP: relu(x) in [0, 2], relu(x + 10)/2 in [4.5, 6]: y >= 0 - 6 + 5 = -1.
    # CROWN: lower line relu(x) >= x (slope 1 since u = 2 >= -l = 1): y >= x/2 >= -1/2.
    # alpha-CROWN: relu(x) >= a x gives y >= (a - 1/2) x, whose minimum over [-1, 2] is
    # -|a - 1/2| (at x = -1 or 2): the best slope is 1/2, giving the exact minimum 0.
    res = _kink()
    ibp, crown, alpha = (res.verify([0.5], 1.5, algorithm=a) for a in
                         ("ibp", "crown", "alpha-crown"))  # fmt: skip
    assert ibp.real.lower == (Fraction(-1),) and crown.real.lower == (Fraction(-1, 2),)
    assert -Fraction(1, 100) < alpha.real.lower[0] <= 0  # 0 is attained (x = 0)
    assert alpha.real.upper == crown.real.upper == (Fraction(1),)
    assert alpha.runtime.lower[0] > crown.runtime.lower[0]
    cert = alpha.certificate()
    (slope,) = cert["levels"]["real"]["alpha"]["lower"]["2"][0][:1]
    p, q = map(int, slope.split("/"))
    assert abs(Fraction(p, q) - Fraction(1, 2)) < Fraction(1, 100)
    assert "holds" in check_certificate(cert)
    _assert_sound(res, alpha, [*_points([0.5], 1.5, 20, 0), [0.0]])


def test_tighter_than_crown_on_a_deeper_network() -> None:
    res = _relu_net([4, 16, 16, 3], seed=0)
    c = [0.1, 0.2, -0.3, 0.4]
    crown = res.verify(c, 0.3, algorithm="crown", property=("top_label", 0))
    alpha = res.verify(c, 0.3, algorithm="alpha-crown", property=("top_label", 0))
    _within(alpha, crown)
    assert sum(alpha.real.widths()) < 0.9 * sum(crown.real.widths())
    assert sum(alpha.runtime.widths()) < 0.9 * sum(crown.runtime.widths())
    wit = alpha.certificate()["levels"]["real"]["alpha_witness"]
    assert "alpha" in wit[2]  # the second hidden layer's bounds used optimised slopes
    assert "holds" in check_certificate(alpha.certificate())
    _assert_sound(res, alpha, _points(c, 0.3, 30, 1))


def test_tanh_only_network_never_wider() -> None:
    # no ReLU: only tanh lines are optimised (tests/test_verify_smooth.py); never wider
    model = Sequential(Linear(2, 3), Tanh(), Linear(3, 2))
    res = _result(model, [[[0.5, -1.0], [1.0, 1.0], [-0.25, 2.0]], [0.0, 0.5, -0.5],
                          [[1.0, -1.0, 0.5], [0.5, 0.5, 0.5]], [0.0, 0.25]])  # fmt: skip
    a = res.verify([0.1, 0.2], 0.25, algorithm="alpha-crown", property=("top_label", 1))
    c = res.verify([0.1, 0.2], 0.25, algorithm="crown", property=("top_label", 1))
    _within(a, c)
    assert set(a.certificate()["levels"]["real"]["alpha"]) <= {"lower", "upper", "margins"}
    assert "holds" in check_certificate(a.certificate())


def test_unknown_algorithm_is_refused() -> None:
    with pytest.raises(VerificationError, match=r"'alpha-crown'.*got 'beta-crown'"):
        _kink().verify([0.0], 1.0, algorithm="beta-crown")


# --------------------------------------------------------------------------- properties


@st.composite
def _nets(draw: Any) -> tuple[Result, list[float], float, int | None]:
    dims = [draw(st.integers(1, 3)), *draw(st.lists(st.integers(1, 5), min_size=1, max_size=3))]
    dims.append(draw(st.integers(1, 3)))
    dtype = draw(st.sampled_from(["float32", "float64", "float16", "bfloat16"]))
    res = _relu_net(dims, draw(st.integers(0, 2**16)), dtype)
    center = [draw(st.floats(-2, 2, width=16)) for _ in range(dims[0])]
    radius = draw(st.sampled_from([0.0, 0.03125, 0.25, 1.0]))
    top = draw(st.none() | st.integers(0, dims[-1] - 1))
    return res, center, radius, top


@settings(max_examples=15)
@given(_nets(), st.integers(0, 2**16))
def test_random_relu_networks_sound_and_never_wider(net: Any, seed: int) -> None:
    res, center, radius, top = net
    prop = "bounds" if top is None else ("top_label", top)
    ibp = res.verify(center, radius, algorithm="ibp", property=prop)
    crown = res.verify(center, radius, algorithm="crown", property=prop)
    alpha = res.verify(center, radius, algorithm="alpha-crown", property=prop)
    _within(crown, ibp)
    _within(alpha, crown)
    _assert_sound(res, alpha, _points(center, radius, 8, seed))
    assert "holds" in check_certificate(json.loads(json.dumps(alpha.certificate())))


def _grid(dtype: str, lo: float, hi: float) -> list[float]:
    """Every value of the format in [RD(lo), RU(hi)] (the box as the runtime rounds it),
    from all 2^16 bit patterns."""
    np_dt = get_backend("numpy").dtype(dtype)
    with np.errstate(invalid="ignore"):
        vals = np.unique(np.arange(2**16, dtype=np.uint16).view(np_dt).astype(np.float64))
    vals = vals[np.isfinite(vals)]
    a = vals[vals <= lo].max()
    b = vals[vals >= hi].min()
    return [float(v) for v in vals if a <= v <= b]


def test_exhaustive_bfloat16_box() -> None:
    # every bfloat16 input of the box (each a binary64 input that predict rounds to itself):
    # the runtime's outputs all lie in alpha-CROWN's runtime bounds
    res = _relu_net([2, 6, 6, 2], seed=3, dtype="bfloat16")
    c, r = [0.25, -0.5], 0.0625
    v = res.verify(c, r, algorithm="alpha-crown")
    crown = res.verify(c, r, algorithm="crown")
    _within(v, crown)
    g0, g1 = _grid("bfloat16", c[0] - r, c[0] + r), _grid("bfloat16", c[1] - r, c[1] + r)
    pts = [[a, b] for a in g0 for b in g1]
    assert len(pts) > 200
    out = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
    for j in range(2):
        lo, hi = float(v.runtime.lower[j]), float(v.runtime.upper[j])
        assert lo <= out[:, j].min() and out[:, j].max() <= hi, j
        assert v.runtime.lower[j] <= Fraction(float(out[:, j].min()))
        assert Fraction(float(out[:, j].max())) <= v.runtime.upper[j]


# --------------------------------------------------------------------------- forgeries


def _redigest(cert: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in cert.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    cert["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cert


@pytest.fixture(scope="module")
def deep() -> dict[str, Any]:
    res = _relu_net([3, 6, 6, 2], seed=7)
    return res.verify([0.1, -0.2, 0.3], 0.25, algorithm="alpha-crown",
                      property=("top_label", 0)).certificate()  # fmt: skip


def _refused(good: dict[str, Any], edit: Any, match: str) -> None:
    c = copy.deepcopy(good)
    edit(c)
    with pytest.raises(CertificateError, match=match):
        check_certificate(_redigest(c))


def _final(c: dict[str, Any], kind: str = "lower") -> list[list[str]]:
    rows: list[list[str]] = c["levels"]["real"]["alpha"][kind]["4"]
    return rows


def _free(c: dict[str, Any]) -> tuple[int, int]:
    """A (row, neuron) of the final lower slopes at an unstable neuron of stage 4."""
    outs = c["levels"]["real"]["alpha_witness"][2]["out"]
    for j, (a, b) in enumerate(outs):
        if a.startswith("-") and not b.startswith("-") and b != "0/1":
            return 0, j
    raise AssertionError("no unstable neuron")


def test_genuine_alpha_certificate_holds(deep: dict[str, Any]) -> None:
    assert "alpha-crown bounds" in check_certificate(copy.deepcopy(deep))
    assert set(deep["levels"]["runtime"]) >= {"witness", "alpha_witness", "alpha"}


def test_out_of_range_slopes_are_refused(deep: dict[str, Any]) -> None:
    r, j = _free(deep)
    for bad in ("3/2", "-1/4"):
        _refused(deep, lambda c, bad=bad: _final(c)[r].__setitem__(j, bad), "not valid")
    # an intermediate bound's slopes (the alpha chain's second linear stage)
    inter = deep["levels"]["real"]["alpha_witness"][2]["alpha"]["lower"]["2"]
    assert inter

    def edit(c: dict[str, Any]) -> None:
        row = c["levels"]["real"]["alpha_witness"][2]["alpha"]["lower"]["2"][0]
        row[:] = ["2/1"] * len(row)

    _refused(deep, edit, "not valid")


def test_slopes_that_do_not_give_the_bound_are_refused(deep: dict[str, Any]) -> None:
    # every final lower slope replaced by CROWN's default and by 0: the certified
    # (optimised) lower bound is then not what the slopes give (at least for one choice)
    def edit(v: str) -> Any:
        def f(c: dict[str, Any]) -> None:
            for kind in ("lower", "margins"):
                for row in _final(c, kind):
                    row[:] = [v] * len(row)

        return f

    msgs = []
    for v in ("0/1", "1/1"):
        c = copy.deepcopy(deep)
        edit(v)(c)
        try:
            check_certificate(_redigest(c))
        except CertificateError as e:
            msgs.append(str(e))
    assert msgs and all("does not contain" in m or "margins" in m for m in msgs)


def test_misplaced_or_malformed_slopes_are_refused(deep: dict[str, Any]) -> None:
    def key(c: dict[str, Any]) -> None:
        c["levels"]["real"]["alpha"]["lower"]["1"] = c["levels"]["real"]["alpha"]["lower"]["4"]

    _refused(deep, key, "not a ReLU, tanh or sigmoid stage")
    _refused(deep, lambda c: _final(c).pop(), "expected 2 entries")
    _refused(deep, lambda c: _final(c)[0].pop(), "expected 6 entries")
    _refused(deep, lambda c: c["levels"]["real"]["alpha"].update(beta={}), "unexpected keys")

    def in_crown(c: dict[str, Any]) -> None:
        c["levels"]["real"]["witness"][2]["alpha"] = {"lower": {}}

    _refused(deep, in_crown, r"witness\[2\]\.alpha: slopes are not expected")

    def narrowed(c: dict[str, Any]) -> None:
        out = c["levels"]["real"]["alpha_witness"][2]["out"][_free(c)[1]]
        out[0] = "0/1"  # an unstable neuron "proved" inactive below 0

    _refused(deep, narrowed, "not sound")

    def as_crown(c: dict[str, Any]) -> None:
        c["algorithm"] = "crown"

    _refused(deep, as_crown, "unknown fields")
