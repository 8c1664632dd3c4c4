"""Verification of leaky_relu and hardtanh networks: the layers run in both kernel profiles;
hand-worked relaxations; IBP, CROWN and alpha-CROWN sound at both levels (sampled points
and the box's vertices: the real level against an exact Fraction forward written here, the
runtime level against `predict` with the ordered kernels), alpha <= CROWN <= IBP; the
checker re-validates the certificates and refuses forged relaxations and slopes.
"""

from __future__ import annotations

import copy
import itertools
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from gmpy2 import mpfr, mpq
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Hardtanh, LeakyReLU, Linear, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import VerificationError, verify
from runtime.verification.arithmetic import Arith
from runtime.verification.network import Stage
from runtime.verification.relaxations import relax
from spec.domains import BFLOAT16, BINARY32
from spec.errors import TorchLeanError
from tests.cert_forge import resign


def _result(model: Sequential, dtype: str, seed: int, kernels: str = "ordered") -> Result:
    rng = np.random.default_rng(seed)
    np_dt = get_backend("numpy").dtype(dtype)
    state = [np.asarray(rng.normal(size=sp.shape), dtype=np_dt)
             for layer in model.layers for sp in layer.state_specs()]  # fmt: skip
    return Result(model, "mse", dtype, "eager", kernels, False, state)


def _exact_forward(res: Result, x: list[Fraction]) -> list[Fraction]:
    """The real network on an exact input: stored weights as Fractions, exact attributes."""
    state = [np.asarray(a, dtype=np.float64) for a in res.state()]
    k = 0
    for layer in res.model.layers:
        if isinstance(layer, Linear):
            W, b = state[k], state[k + 1]
            k += 2
            x = [sum((Fraction(float(w)) * v for w, v in zip(row, x, strict=True)), Fraction(0))
                 + Fraction(float(bi)) for row, bi in zip(W, b, strict=True)]  # fmt: skip
        elif isinstance(layer, LeakyReLU):
            x = [v if v > 0 else layer.negative_slope * v for v in x]
        elif isinstance(layer, Hardtanh):
            x = [min(max(v, layer.min_val), layer.max_val) for v in x]
        else:
            x = [max(v, Fraction(0)) for v in x]
    return x


def _stage(op: str, **attrs: Fraction) -> Stage:
    return Stage(op, bits={k: f"{v.numerator}/{v.denominator}" for k, v in attrs.items()})


def _relax(st: Stage, lo: Fraction, hi: Fraction, domain: Any = None) -> tuple[Any, ...]:
    H, A = Arith(None), Arith(domain)
    return relax(H, A, st, 0, (mpfr(mpq(lo)), mpfr(mpq(hi))), mpq(0))


# --------------------------------------------------------------------------- layers


@pytest.mark.parametrize("kernels", ["ordered", "fast"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_layers_run_in_the_session(kernels: str, dtype: str) -> None:
    model = Sequential(LeakyReLU(Fraction(1, 4)), Hardtanh(Fraction(-1, 2), 2))
    res = Result(model, "mse", dtype, "eager", kernels, False, [])
    x = np.array([-4.0, -1.0, 0.0, 0.5, 1.5, 3.0])
    # leaky: -1, -1/4, 0, 1/2, 3/2, 3; clamp to [-1/2, 2]
    want = [-0.5, -0.25, 0.0, 0.5, 1.5, 2.0]
    assert np.asarray(res.predict(x), dtype=np.float64).tolist() == want


def test_layer_arguments_are_checked() -> None:
    with pytest.raises(TorchLeanError, match="min_val"):
        Hardtanh(1, 1)
    with pytest.raises(TorchLeanError, match="negative_slope"):
        LeakyReLU(float("nan"))
    with pytest.raises(TorchLeanError, match="negative_slope"):
        LeakyReLU("0.1")  # type: ignore[arg-type]
    assert LeakyReLU().negative_slope == Fraction(1, 100)


def test_slope_outside_0_1_is_refused() -> None:
    res = _result(Sequential(Linear(2, 2), LeakyReLU(2)), "float32", 0)
    with pytest.raises(VerificationError, match=r"verification is unavailable.*negative_slope"):
        verify(res, np.zeros(2), 0.1)


# --------------------------------------------------------------------------- hand-worked


def test_hand_worked_relaxations() -> None:
    leaky = _stage("leaky_relu", negative_slope=Fraction(1, 4))
    # on [-1, 3]: chord from (-1, -1/4) to (3, 3), slope 13/16, intercept 9/16; lower y = x
    assert _relax(leaky, Fraction(-1), Fraction(3)) == (1, 0, Fraction(13, 16), Fraction(9, 16))
    # on [-3, 1]: the lower line is y = x/4 (more of the interval is negative)
    assert _relax(leaky, Fraction(-3), Fraction(1))[:2] == (Fraction(1, 4), 0)
    assert _relax(leaky, Fraction(-3), Fraction(-1)) == (Fraction(1, 4), 0, Fraction(1, 4), 0)
    ht = _stage("hardtanh", min_val=Fraction(-1), max_val=Fraction(1))
    # [-2, 0]: max(x, -1): chord (slope 1/2, through (-2, -1) and (0, 0)); lower y = x
    assert _relax(ht, Fraction(-2), Fraction(0)) == (1, 0, Fraction(1, 2), 0)
    # [0, 4]: min(x, 1): chord slope 1/4 through (0, 0), (4, 1); upper y = 1 (slope 0)
    assert _relax(ht, Fraction(0), Fraction(4)) == (Fraction(1, 4), 0, 0, 1)
    # [-3, 3]: both kinks: slope 1/2 through (-1, -1) below and through (1, 1) above
    got = _relax(ht, Fraction(-3), Fraction(3))
    assert got == (Fraction(1, 2), Fraction(-1, 2), Fraction(1, 2), Fraction(1, 2))
    assert _relax(ht, Fraction(2), Fraction(5)) == (0, 1, 0, 1)
    assert _relax(ht, Fraction(-1, 2), Fraction(1, 2)) == (1, 0, 1, 0)


def test_level2_leaky_relaxation_covers_the_rounded_product() -> None:
    # float32: s = RN(1/10); on [-2, -1] the product s*x is rounded once: |error| is at
    # most 2^-24 * s * 2 + 2^-149 (eta, the least subnormal), taken off the lower line's
    # intercept and added to the upper one's
    s = Fraction(float(np.float32(0.1)))
    err = Fraction(1, 2**24) * s * 2 + Fraction(1, 2**149)
    got = _relax(_stage("leaky_relu", negative_slope=Fraction(1, 10)), Fraction(-2),
                 Fraction(-1), BINARY32)  # fmt: skip
    assert got == (s, -err, s, err)


# --------------------------------------------------------------------------- soundness


NETS = {
    "leaky": lambda: Sequential(
        Linear(3, 6), LeakyReLU(Fraction(1, 10)), Linear(6, 5), LeakyReLU(), Linear(5, 3)
    ),
    "hardtanh": lambda: Sequential(
        Linear(3, 6),
        Hardtanh(Fraction(-1, 2), Fraction(3, 4)),
        Linear(6, 5),
        Hardtanh(),
        Linear(5, 3),
    ),
    "mixed": lambda: Sequential(
        Linear(3, 5),
        LeakyReLU(Fraction(1, 3)),
        Linear(5, 5),
        Hardtanh(-1, Fraction(1, 3)),
        Linear(5, 3),
        ReLU(),
    ),
}


def _points(center: np.ndarray, r: float, dtype: str, n: int, seed: int) -> list[np.ndarray]:
    """The box's vertices and n uniform points, each coordinate a value of the dtype in the
    (format-rounded) box."""
    np_dt = get_backend("numpy").dtype(dtype)
    rng = np.random.default_rng(seed)
    pts = [center + np.array(v) * r for v in itertools.product((-1, 1), repeat=len(center))]
    pts += [center + rng.uniform(-r, r, len(center)) for _ in range(n)]
    out = []
    for p in pts:
        q = np.asarray(p, dtype=np_dt).astype(np.float64)
        out.append(np.clip(q, center - r, center + r) if dtype == "float64" else q)
    return out


def _inside(v: Any, x: Fraction) -> bool:
    return Fraction(v.lower) <= x <= Fraction(v.upper) if hasattr(v, "lower") else False


CASES = [("leaky", "float32"), ("hardtanh", "bfloat16"), ("mixed", "float16"), ("mixed", "float64")]


@pytest.mark.parametrize(("net", "dtype"), CASES)
def test_bounds_are_sound_and_nested(net: str, dtype: str) -> None:
    res = _result(NETS[net](), dtype, seed=len(net) + len(dtype))
    center, r = np.array([0.25, -0.5, 0.75]), 0.4
    vs = {alg: verify(res, center, r, algorithm=alg) for alg in ("ibp", "crown", "alpha-crown")}
    for lvl in ("real", "runtime"):
        b = {alg: getattr(v, lvl) for alg, v in vs.items()}
        for j in range(3):  # alpha <= CROWN <= IBP, output by output
            assert b["ibp"].lower[j] <= b["crown"].lower[j] <= b["alpha-crown"].lower[j]
            assert b["alpha-crown"].upper[j] <= b["crown"].upper[j] <= b["ibp"].upper[j]
    widths = [sum(v.real.upper[j] - v.real.lower[j] for j in range(3)) for v in vs.values()]
    assert widths[2] < widths[0]  # the relaxations gain something over IBP here
    for x in _points(center, r, dtype, 60, seed=7):
        y = np.asarray(res.predict(x), dtype=np.float64)
        ex = _exact_forward(res, [Fraction(float(v)) for v in x])
        for v in vs.values():
            for j in range(3):
                assert v.runtime.lower[j] <= Fraction(float(y[j])) <= v.runtime.upper[j]
                assert v.real.lower[j] <= ex[j] <= v.real.upper[j]
    for v in vs.values():
        assert "holds" in check_certificate(v.certificate())


def test_alpha_crown_optimises_leaky_slopes() -> None:
    res = _result(NETS["leaky"](), "float32", seed=3)
    center, r = np.array([0.1, 0.2, -0.3]), 0.5
    cr, al = (verify(res, center, r, algorithm=a) for a in ("crown", "alpha-crown"))
    w = [sum(v.real.upper[j] - v.real.lower[j] for j in range(3)) for v in (cr, al)]
    assert w[1] < w[0]  # some unstable leaky neuron's optimised lower slope helps
    cert = al.certificate()
    slopes = [Fraction(x) for e in cert["levels"]["real"]["alpha"]["lower"].values()
              for row in e for x in row]  # fmt: skip
    assert slopes and all(Fraction(1, 100) <= a <= 1 for a in slopes)


# --------------------------------------------------------------------------- forgeries


def _refused(good: dict[str, Any], edit: Any, match: str) -> None:
    c2 = copy.deepcopy(good)
    edit(c2)
    with pytest.raises(CertificateError, match=match):
        check_certificate(resign(c2))


def _find(cert: dict[str, Any], level: str, op: str, pick: Any) -> tuple[int, int]:
    """(stage, neuron) of the first relaxation of stage op that `pick` accepts."""
    for t, e in enumerate(cert["levels"][level]["witness"]):
        if e["op"] == op:
            for j, r in enumerate(e["relax"]):
                if pick([Fraction(v) for v in r]):
                    return t, j
    raise AssertionError(f"no {op} relaxation fits")


def test_forged_relaxations_are_refused() -> None:
    res = _result(NETS["mixed"](), "float32", seed=5)
    good = verify(res, np.array([0.25, -0.5, 0.75]), 0.4, algorithm="crown").certificate()
    assert "holds" in check_certificate(copy.deepcopy(good))
    for lvl in ("real", "runtime"):
        for op in ("leaky_relu", "hardtanh"):  # an unstable neuron's upper line lowered
            t, j = _find(good, lvl, op, lambda r: r[0] != r[2])

            def lower_cu(c: dict[str, Any], t: int = t, j: int = j, lvl: str = lvl) -> None:
                r = c["levels"][lvl]["witness"][t]["relax"][j]
                r[3] = str(Fraction(r[3]) - Fraction(1, 2**30))

            _refused(good, lower_cu, "not valid")
    # level 2: a leaky neuron on the negative side without the rounding error's margin
    t, j = _find(good, "runtime", "leaky_relu", lambda r: r[0] == r[2] != 1)
    _refused(
        good,
        lambda c: c["levels"]["runtime"]["witness"][t]["relax"].__setitem__(
            j, [good["levels"]["runtime"]["witness"][t]["relax"][j][0], "0/1"] * 2
        ),
        "not valid",
    )
    # a network entry with a slope outside [0, 1]
    _refused(good, lambda c: c["network"]["stages"][1].__setitem__("negative_slope", "3/2"),
             "negative_slope|model")  # fmt: skip


def test_forged_leaky_slope_is_refused() -> None:
    res = _result(NETS["leaky"](), "float32", seed=3)
    good = verify(res, np.array([0.1, 0.2, -0.3]), 0.5, algorithm="alpha-crown").certificate()
    assert "holds" in check_certificate(copy.deepcopy(good))
    rows = good["levels"]["real"]["alpha"]["lower"]
    key = next(iter(rows))

    def below_floor(c: dict[str, Any]) -> None:  # slope 1/200 < 1/10: above leaky on x < 0
        row = c["levels"]["real"]["alpha"]["lower"][key][0]
        row[:] = ["1/200"] * len(row)

    _refused(good, below_floor, "no lower line of leaky_relu")


def test_branch_and_bound_splits_leaky_neurons() -> None:
    # seeded 3-8-8-3 leaky net, radius 0.2: alpha-CROWN leaves the top label open, branch
    # and bound proves it by splitting leaky_relu inputs; the checker re-validates the tree
    model = Sequential(Linear(3, 8), LeakyReLU(Fraction(1, 10)), Linear(8, 8),
                       LeakyReLU(Fraction(1, 10)), Linear(8, 3))  # fmt: skip
    rng = np.random.default_rng(0)
    np_dt = get_backend("numpy").dtype("float32")
    state = [np.asarray(rng.normal(size=sp.shape) / np.sqrt(sp.shape[-1]), dtype=np_dt)
             for layer in model.layers for sp in layer.state_specs()]  # fmt: skip
    res = Result(model, "mse", "float32", "eager", "ordered", False, state)
    c = rng.uniform(-1, 1, 3)
    k = int(np.argmax(res.predict(c)))
    assert verify(res, c, 0.2, property=("top_label", k), algorithm="alpha-crown").holds is False
    v = verify(res, c, 0.2, property=("top_label", k), algorithm="bab")
    assert v.holds is True
    cert = v.certificate()
    splits = {x[0] for leaf in cert["levels"]["real"]["branches"] for x in leaf["splits"]}
    ops = [e["op"] for e in cert["network"]["stages"]]
    assert splits and all(ops[s - 1] == "leaky_relu" for s in splits)
    assert "holds" in check_certificate(cert)


rats = st.fractions(min_value=-8, max_value=8, max_denominator=64)


@settings(deadline=None)
@given(rats, rats, st.fractions(min_value=0, max_value=1, max_denominator=100), rats, rats,
       st.sampled_from([None, "float32", "bfloat16"]))  # fmt: skip
def test_relaxations_hold_on_sampled_points(
    x0: Fraction, x1: Fraction, s: Fraction, b0: Fraction, b1: Fraction, dtype: str | None
) -> None:
    """Every line below / above f at 65 evenly spaced points of [lo, hi] and its kinks; at
    level 2 f is the runtime's: the attributes and x in the format, one rounded product."""
    lo, hi = (Fraction(float(v)) for v in (min(x0, x1), max(x0, x1)))  # exact intervals
    a, b = min(b0, b1), max(b0, b1) + Fraction(1, 8)
    dom = {"float32": BINARY32, "bfloat16": BFLOAT16}.get(dtype or "")
    np_dt = get_backend("numpy").dtype(dtype) if dtype else None

    def rn(v: Fraction) -> Fraction:
        return v if np_dt is None else Fraction(float(np.asarray(float(v), dtype=np_dt)))

    ts = [lo + (hi - lo) * Fraction(i, 64) for i in range(65)] + [Fraction(0), a, b]
    pts = [p for p in sorted({rn(t) for t in ts}) if lo <= p <= hi]
    sd, ad, bd = rn(s), rn(a), rn(b)

    def leaky(x: Fraction) -> Fraction:
        return x if x > 0 else rn(sd * x)

    def ht(x: Fraction) -> Fraction:
        return ad if x < ad else (bd if bd < x else x)

    for stage, f in ((_stage("leaky_relu", negative_slope=s), leaky),
                     (_stage("hardtanh", min_val=a, max_val=b), ht)):  # fmt: skip
        aL, cL, aU, cU = (Fraction(v) for v in _relax(stage, lo, hi, dom))
        for p in pts:
            assert aL * p + cL <= f(p) <= aU * p + cU, (stage.op, p)
