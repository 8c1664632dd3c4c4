"""Certified output bounds (`runtime.verification`, `Result.verify`) and the independent
certificate checker (`proofs.bounds_certificate_check`, `python -m proofs check-cert`).

Soundness is tested against values the code under test does not compute: the runtime's own
binary32 outputs (`Result.predict` with the ordered kernels) for level 2, and an evaluator
written here for level 1 (exact rationals for Linear/ReLU networks, 400-bit MPFR otherwise).
"""

from __future__ import annotations

import copy
import io
import itertools
import json
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import gmpy2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import proofs.bounds_certificate_check as bcc
import runtime.verification as verification
from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import DTYPE_DOMAIN, get_backend
from runtime.nn import (
    GELU,
    BatchNorm1d,
    Dropout,
    Forward,
    Layer,
    LayerNorm,
    Linear,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from runtime.optim import SGD
from runtime.trainer import Result, Trainer
from runtime.verification import VerificationError, model_hash, verify
from runtime.verification.crown import BACKWARD, FORWARD
from runtime.verification.intervals import ELEMENTWISE, LAYERS
from runtime.verification.network import CERT_NAMES, DTYPES, LAYER_STAGES
from runtime.verification.oporder import OP_ORDER
from runtime.verification.relaxations import RELAXATIONS
from spec.ops import GELU_C, GELU_K, OPS
from spec.tensor import Tensor

ROOT = Path(__file__).resolve().parent.parent


def _result(model: Sequential, state: list[Any], dtype: str = "float32") -> Result:
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


# --------------------------------------------------------------------------- a reference


_HP = gmpy2.context(precision=400)


def _real_eval(res: Result, x: list[Fraction]) -> list[Any]:
    """The real-valued network at x: Fractions for Linear/ReLU, 400-bit MPFR otherwise."""
    v: list[Any] = list(x)
    state = res._state
    for layer, occ in zip(res.model.layers, res.model.occurrences(), strict=True):
        p = [state[k] for k in occ]
        if isinstance(layer, Linear):
            w, b = p
            if all(isinstance(t, Fraction) for t in v):
                v = [
                    sum((Fraction(float(w[i, j])) * v[j] for j in range(len(v))), Fraction(0))
                    + Fraction(float(b[i]))
                    for i in range(w.shape[0])
                ]
            else:
                with gmpy2.context(_HP):
                    v = [
                        sum((gmpy2.mpfr(float(w[i, j])) * v[j] for j in range(len(v))),
                            gmpy2.mpfr(0)) + gmpy2.mpfr(float(b[i]))
                        for i in range(w.shape[0])
                    ]  # fmt: skip
        elif isinstance(layer, ReLU):
            v = [max(t, 0) for t in v]
        elif isinstance(layer, Dropout):
            continue
        else:
            with gmpy2.context(_HP):
                y = [gmpy2.mpfr(gmpy2.mpq(t.numerator, t.denominator))
                     if isinstance(t, Fraction) else t for t in v]  # fmt: skip
                if isinstance(layer, Tanh):
                    y = [gmpy2.tanh(t) for t in y]
                elif isinstance(layer, Sigmoid):
                    y = [1 / (1 + gmpy2.exp(-t)) for t in y]
                elif isinstance(layer, GELU):
                    c = gmpy2.mpq(GELU_C.numerator, GELU_C.denominator)
                    k = gmpy2.mpq(GELU_K.numerator, GELU_K.denominator)
                    y = [t / 2 * (1 + gmpy2.tanh(c * (t + k * t * t * t))) for t in y]
                elif isinstance(layer, LayerNorm):
                    w, b = p
                    n = len(y)
                    mu = sum(y, gmpy2.mpfr(0)) / n
                    var = sum(((t - mu) * (t - mu) for t in y), gmpy2.mpfr(0)) / n
                    den = gmpy2.sqrt(var + gmpy2.mpq(Fraction(layer.eps)))
                    y = [(t - mu) / den * float(w[j]) + float(b[j]) for j, t in enumerate(y)]
                elif isinstance(layer, BatchNorm1d):
                    w, b, rm, rv, _ = p
                    eps = Fraction(layer.eps)
                    y = [(t - float(rm[j])) / gmpy2.sqrt(float(rv[j]) + gmpy2.mpq(eps))
                         * float(w[j]) + float(b[j]) for j, t in enumerate(y)]  # fmt: skip
                else:  # pragma: no cover
                    raise AssertionError(layer)
            v = y
    return v


def _inside_real(v: Any, lo: Fraction, hi: Fraction) -> bool:
    if isinstance(v, Fraction):
        return lo <= v <= hi
    tol = Fraction(1, 2**300)  # far below any rounding of the verifier; MPFR's own error
    n, d = v.as_integer_ratio()
    q = Fraction(int(n), int(d))
    return lo - tol <= q <= hi + tol


def _points(center: list[float], radius: float, seed: int, extra: int = 6) -> list[list[float]]:
    """Every vertex of the box, its center, and a few random points inside (binary64)."""
    n = len(center)
    pts = [[c + s * radius for c, s in zip(center, signs, strict=True)]
           for signs in itertools.product((-1.0, 1.0), repeat=n)]  # fmt: skip
    pts.append(list(center))
    rng = np.random.default_rng(seed)
    for _ in range(extra):
        pts.append([c + radius * float(u) for c, u in zip(center, rng.uniform(-1, 1, n),
                                                          strict=True)])  # fmt: skip
    lo = [Fraction(c) - Fraction(radius) for c in center]
    hi = [Fraction(c) + Fraction(radius) for c in center]
    # keep only points inside the exact box (c +- r in binary64 may round outward)
    inside = [all(a <= Fraction(x) <= b for x, a, b in zip(p, lo, hi, strict=True)) for p in pts]
    return [p for p, ok in zip(pts, inside, strict=True) if ok]


def _assert_sound(res: Result, v: Any, pts: list[list[float]]) -> None:
    for p in pts:
        rt = np.atleast_1d(res.predict(p))
        real = _real_eval(res, [Fraction(x) for x in p])
        for j in range(len(rt)):
            q = Fraction(float(rt[j]))
            assert v.runtime.lower[j] <= q <= v.runtime.upper[j], (p, j, float(rt[j]))
            assert _inside_real(real[j], v.real.lower[j], v.real.upper[j]), (p, j)
    for b in (v.real, v.runtime):
        for lo, hi, il, ih in zip(b.lower, b.upper, b.ibp_lower, b.ibp_upper, strict=True):
            assert il <= lo <= hi <= ih  # CROWN (or IBP itself) within IBP: never wider


# --------------------------------------------------------------------------- hand-worked


def _two_relu() -> Result:
    # h1 = relu(x1 + x2), h2 = relu(x1 - x2), y = h1 + h2, on the box [-1, 1]^2.
    # Exact range: y = 0 at x = (-1, 0) (both arguments <= 0) and y = 2 whenever x1 = 1
    # ((1 + x2) + (1 - x2)); y <= 2 since h1 + h2 <= 2 max(x1, 0)... so the range is [0, 2].
    # IBP: both pre-activations in [-2, 2], both relus in [0, 2], so y in [0, 4].
    # CROWN: for l = -2, u = 2 the upper line is h <= u/(u-l) (z - l) = z/2 + 1 and the lower
    # line h >= z (slope 1 since u >= -l). Upper: y <= (z1 + z2)/2 + 2 = x1 + 2 <= 3.
    # Lower: y >= z1 + z2 = 2 x1 >= -2, intersected with IBP's 0. So CROWN gives [0, 3].
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 1))
    return _result(model, [[[1, 1], [1, -1]], [0, 0], [[1, 1]], [0]])


def test_hand_worked_two_relu_ibp_and_crown() -> None:
    res = _two_relu()
    ibp = res.verify([0.0, 0.0], 1.0, algorithm="ibp")
    assert (ibp.real.lower, ibp.real.upper) == ((Fraction(0),), (Fraction(4),))
    assert (ibp.runtime.lower, ibp.runtime.upper) == ((Fraction(0),), (Fraction(4),))
    crown = res.verify([0.0, 0.0], 1.0, algorithm="crown")
    assert (crown.real.lower, crown.real.upper) == ((Fraction(0),), (Fraction(3),))
    assert crown.real.widths() == [3.0] and crown.real.ibp_widths() == [4.0]
    # level 2 adds the binary32 rounding terms of both linear layers: a hair above 3
    assert crown.runtime.lower == (Fraction(0),)
    assert Fraction(3) < crown.runtime.upper[0] < Fraction(3) + Fraction(1, 10**5)
    _assert_sound(res, crown, _points([0.0, 0.0], 1.0, 0))


def test_hand_worked_top_label() -> None:
    # outputs out0 = y and out1 = 7 - y with y = h1 + h2 in [0, 2] as above (box [-1, 1]^2):
    # the true margin out1 - out0 = 7 - 2y >= 3, so label 1 stays on top; label 0 never is.
    # IBP: out0 in [0, 4], out1 = (-h1) + (-h2) + 7 in [-1, 7]... precisely [7 - 4, 7] =
    # [3, 7], so its margin is 3 - 4 = -1: not proved.
    # CROWN on the difference: 7 - 2 h1 - 2 h2 >= 7 - 2 (z1/2 + 1) - 2 (z2/2 + 1)
    # = 3 - (z1 + z2) = 3 - 2 x1 >= 1 > 0: proved, with margin exactly 1 (real level).
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 2))
    res = _result(model, [[[1, 1], [1, -1]], [0, 0], [[1, 1], [-1, -1]], [0, 7]])
    i = res.verify([0.0, 0.0], 1.0, property=("top_label", 1), algorithm="ibp")
    c = res.verify([0.0, 0.0], 1.0, property=("top_label", 1), algorithm="crown")
    assert i.real.margins == (Fraction(-1), None) and i.holds is False
    assert "real: crown width" in c.summary() and "top_label 1 holds" in c.summary()
    assert "top_label 1 not proved" in i.summary()
    assert c.real.margins == (Fraction(1), None) and c.holds is True
    assert c.runtime.margins is not None and c.runtime.margins[0] is not None
    assert Fraction(1) - Fraction(1, 10**5) < c.runtime.margins[0] < Fraction(1)
    for alg in ("ibp", "crown"):
        v0 = res.verify([0.0, 0.0], 1.0, property=("top_label", 0), algorithm=alg)
        assert v0.holds is False and v0.real.margins is not None and v0.real.margins[0] is None


# --------------------------------------------------------------------------- random networks


_DTYPES = ("float32", "float32", "float64", "float16", "bfloat16")
_ACTS = {"relu": ReLU, "tanh": Tanh, "sigmoid": Sigmoid, "gelu": GELU}
_w = st.floats(-2, 2, allow_nan=False, width=32)


@st.composite
def _networks(draw: Any) -> tuple[Result, list[float], float]:
    n_in = draw(st.integers(1, 3))
    widths = [n_in, *draw(st.lists(st.integers(1, 3), min_size=1, max_size=2))]
    n_out = draw(st.integers(1, 2))
    layers: list[Any] = []
    state: list[Any] = []
    dims = [*widths, n_out]
    for idx, (a, b) in enumerate(itertools.pairwise(dims)):
        layers.append(Linear(a, b))
        state += [[[draw(_w) for _ in range(a)] for _ in range(b)], [draw(_w) for _ in range(b)]]
        if idx < len(dims) - 2:
            if draw(st.integers(0, 3)) == 0 and b > 1:
                layers.append(LayerNorm(b))
                state += [[draw(_w) for _ in range(b)], [draw(_w) for _ in range(b)]]
            elif draw(st.booleans()):
                layers.append(BatchNorm1d(b))
                pos = st.floats(0.25, 4, width=32)
                vec = [[draw(_w) for _ in range(b)] for _ in range(3)]
                state += [*vec, [draw(pos) for _ in range(b)], 0.1]
            layers.append(_ACTS[draw(st.sampled_from(sorted(_ACTS)))]())
    if draw(st.booleans()):
        layers.insert(len(layers) - 1, Dropout(0.5))  # the identity in evaluation mode
    res = _result(Sequential(*layers), state, draw(st.sampled_from(_DTYPES)))
    center = [draw(st.floats(-2, 2, width=32)) for _ in range(n_in)]
    radius = draw(st.sampled_from([0.0, 0.01, 0.125, 0.5, 1.0]))
    return res, center, radius


@given(_networks(), st.integers(0, 2**16))
def test_random_networks_sound_and_crown_within_ibp(net: Any, seed: int) -> None:
    res, center, radius = net
    pts = _points(center, radius, seed)
    for alg in ("ibp", "crown"):
        v = res.verify(center, radius, algorithm=alg)
        _assert_sound(res, v, pts)
        check_certificate(v.certificate())


def test_runtime_level_is_needed_and_covers_rounding() -> None:
    # y = x at x = 0.1 (binary64): the real network outputs exactly that binary64 number,
    # the binary32 runtime outputs RN32(0.1) != 0.1, which only the runtime level contains
    res = _result(Sequential(Linear(1, 1)), [[[1.0]], [0.0]])
    for alg in ("ibp", "crown"):
        v = res.verify([0.1], 0.0, algorithm=alg)
        assert v.real.lower == v.real.upper == (Fraction(0.1),)
        y = Fraction(float(res.predict([0.1])[0]))
        assert y == Fraction(float(np.float32(0.1))) != Fraction(0.1)
        assert not (v.real.lower[0] <= y <= v.real.upper[0])
        assert v.runtime.lower[0] <= y <= v.runtime.upper[0]


def test_tied_layers_from_a_trainer_run() -> None:
    # the same Linear object twice shares its state slots; verify follows the occurrences
    lin = Linear(2, 2)
    model = Sequential(lin, Tanh(), lin, ReLU(), Linear(2, 1))
    tr = Trainer(model, "mse", SGD(0.1), dtype="float32", kernels="ordered", seed=3)
    run = tr.open()
    run.step(([0.5, -0.5], [1.0]))
    res = run.finish()
    assert len(res.state()) == 4
    for alg in ("ibp", "crown"):
        v = res.verify([0.5, -0.5], 0.25, algorithm=alg)
        _assert_sound(res, v, _points([0.5, -0.5], 0.25, 5))
        check_certificate(v.certificate())


def test_relu_network_float64_and_exact_dtype() -> None:
    model = Sequential(Linear(2, 3), ReLU(), Linear(3, 2))
    st0 = [[[0.5, -1.25], [2.0, 0.75], [-0.5, 0.25]], [0.1, -0.2, 0.3],
           [[1.0, -1.0, 0.5], [0.25, 0.5, -2.0]], [0.0, 1.0]]  # fmt: skip
    res64 = _result(model, st0, "float64")
    v = res64.verify([0.3, -0.1], 0.2, algorithm="crown")
    _assert_sound(res64, v, _points([0.3, -0.1], 0.2, 1))
    ex = Result(model, "mse", "exact", "eager", "ordered", False,
                [np.vectorize(lambda t: Fraction(t), otypes=[object])(np.asarray(a, dtype=float))
                 for a in st0])  # fmt: skip
    ve = ex.verify([0.3, -0.1], 0.2, algorithm="crown")
    assert ve.runtime.lower == ve.real.lower and "exactly" in ve.runtime.statement
    for p in _points([0.3, -0.1], 0.2, 2):
        y = ex.predict(p)
        real = _real_eval(ex, [Fraction(x) for x in p])
        for j in range(2):
            assert ve.real.lower[j] <= real[j] <= ve.real.upper[j]
            assert abs(float(y[j]) - float(real[j])) < 1e-12
    check_certificate(ve.certificate())


def test_crown_lines_tighten_smooth_and_batchnorm_networks() -> None:
    # a fixed 2-4-4-2 network per activation (weights k/8 patterns, exact in binary32):
    # CROWN's lines (tanh/sigmoid tangents and chords, GELU/BatchNorm parallel lines) must
    # make it strictly tighter than IBP here, and stay sound at the sampled points
    w1 = [[((i + 2 * j) % 5 - 2) / 4 for j in range(2)] for i in range(4)]
    w2 = [[((3 * i + j) % 7 - 3) / 8 for j in range(4)] for i in range(4)]
    w3 = [[((i + j) % 3 - 1) / 2 for j in range(4)] for i in range(2)]
    b = [0.125, -0.25, 0.0, 0.5]
    for act in (Tanh, Sigmoid, GELU):
        for bn in (False, True):
            layers: list[Any] = [Linear(2, 4), act(), Linear(4, 4)]
            state: list[Any] = [w1, b, w2, b]
            if bn:
                layers.append(BatchNorm1d(4))
                state += [
                    [1.5, -0.5, 1.0, 2.0],
                    b,
                    [0.25, 0.0, -0.5, 1.0],
                    [0.5, 2.0, 1.0, 4.0],
                    0.1,
                ]
            layers += [act(), Linear(4, 2)]
            state += [w3, [0.0, 0.25]]
            res = _result(Sequential(*layers), state)
            v = res.verify([0.25, -0.5], 0.5, algorithm="crown")
            assert sum(v.real.widths()) < sum(v.real.ibp_widths()), (act, bn)
            assert sum(v.runtime.widths()) < sum(v.runtime.ibp_widths()), (act, bn)
            _assert_sound(res, v, _points([0.25, -0.5], 0.5, 4))
            check_certificate(v.certificate())


# --------------------------------------------------------------------------- certificates


def _redigest(cert: dict[str, Any]) -> dict[str, Any]:
    import hashlib

    body = {k: v for k, v in cert.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    cert["digest"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return cert


def _q(s: str) -> Fraction:
    p, q = s.split("/")
    return Fraction(int(p), int(q))


def _s(q: Fraction) -> str:
    return f"{q.numerator}/{q.denominator}"


@pytest.mark.parametrize("alg", ["ibp", "crown"])
def test_certificate_tampering_is_rejected(alg: str, tmp_path: Path) -> None:
    model = Sequential(Linear(2, 3), Tanh(), Linear(3, 2))
    res = _result(model, [[[0.5, -1.0], [1.0, 1.0], [-0.25, 2.0]], [0.0, 0.5, -0.5],
                          [[1.0, -1.0, 0.5], [0.5, 0.5, 0.5]], [0.0, 0.25]])  # fmt: skip
    v = res.verify([0.1, 0.2], 0.25, algorithm=alg, property=("top_label", 1))
    good = v.certificate()
    assert "holds" in check_certificate(copy.deepcopy(good))
    assert good["model_hash"] == model_hash(res)

    def rejected(cert: dict[str, Any], match: str) -> None:
        with pytest.raises(CertificateError, match=match):
            check_certificate(cert)

    # any edit without a new digest
    c = copy.deepcopy(good)
    c["levels"]["real"]["upper"][0] = _s(_q(c["levels"]["real"]["upper"][0]) - 1)
    rejected(c, "digest")
    # a tighter (false) bound with a recomputed digest: the recomputation refutes it
    c = _redigest(c)
    rejected(c, "does not contain")
    c = copy.deepcopy(good)
    c["levels"]["runtime"]["lower"][1] = _s(_q(c["levels"]["runtime"]["lower"][1]) + 1)
    rejected(_redigest(c), "does not contain")
    # a changed model hash
    c = copy.deepcopy(good)
    c["model_hash"] = "0" * 64
    rejected(_redigest(c), "model_hash")
    # a changed weight (and a model hash to match): the bounds no longer hold
    c = copy.deepcopy(good)
    c["network"]["stages"][0]["weight"][0][0] = "0x40800000"  # 4.0 instead of 0.5
    import hashlib

    c["model_hash"] = hashlib.sha256(
        json.dumps(c["network"], sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    rejected(_redigest(c), "not sound|does not contain|not valid")
    # a wider box (consistently edited): the certified bounds no longer contain the enclosure
    c = copy.deepcopy(good)
    c["box"]["radius"] = [_s(Fraction(2)), _s(Fraction(2))]
    c["box"]["lower"] = [_s(_q(x) - 2) for x in c["box"]["center"]]
    c["box"]["upper"] = [_s(_q(x) + 2) for x in c["box"]["center"]]
    rejected(_redigest(c), "not sound|does not contain|not valid")
    # an inconsistent box
    c = copy.deepcopy(good)
    c["box"]["lower"][0] = _s(_q(c["box"]["lower"][0]) + Fraction(1, 8))
    rejected(_redigest(c), "center -\\+ radius")
    # a false margin claim
    c = copy.deepcopy(good)
    c["levels"]["real"]["margins"][0] = _s(_q(c["levels"]["real"]["margins"][0]) + 10)
    rejected(_redigest(c), "margins")
    if alg == "crown":
        # a relaxation line moved up by 1: no longer below tanh
        c = copy.deepcopy(good)
        r = c["levels"]["real"]["witness"][1]["relax"][0]
        r[1] = _s(_q(r[1]) + 1)
        rejected(_redigest(c), "not valid")
    # the command line: exit 0 on the good certificate, 1 on a tampered one
    path = tmp_path / "cert.json"
    v.save_certificate(path)
    ok = subprocess.run([sys.executable, "-m", "proofs", "check-cert", str(path)],
                        capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert ok.returncode == 0 and "holds" in ok.stdout
    bad = json.loads(path.read_text())
    bad["levels"]["real"]["lower"][0] = _s(_q(bad["levels"]["real"]["lower"][0]) + 1)
    path.write_text(json.dumps(_redigest(bad)))
    no = subprocess.run([sys.executable, "-m", "proofs", "check-cert", str(path)],
                        capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert no.returncode == 1 and "rejected" in no.stderr


# --------------------------------------------------------------------------- unavailable


def test_open_typed_results_are_refused() -> None:
    tr = Trainer(Sequential(Linear(2, 1)), "mse", SGD(0.1), dtype="float32", seed=0)
    res = tr.open_typed("float32").finish()
    with pytest.raises(VerificationError, match="verification is unavailable for results of "
                       "open_typed"):  # fmt: skip
        res.verify([0.0, 0.0], 0.1)


def test_unsupported_layers_norms_and_arguments_are_refused() -> None:
    class Square(Layer):  # a custom layer the verifier does not know
        def forward(self, f: Any, state: Any, slots: Any, x: Any) -> Any:
            return f.s.mul(x, x)

    res = _result(Sequential(Linear(2, 2), Square()), [[[1, 0], [0, 1]], [0, 0]])
    assert res.predict([1.0, 2.0]).tolist() == [1.0, 4.0]
    with pytest.raises(VerificationError, match="verification is unavailable for Square"):
        res.verify([0.0, 0.0], 0.1)
    ok = _two_relu()
    with pytest.raises(VerificationError, match="verification is unavailable for norm 'l2'"):
        ok.verify([0.0, 0.0], 0.1, norm="l2")
    with pytest.raises(VerificationError, match="algorithm"):
        ok.verify([0.0, 0.0], 0.1, algorithm="beta-crown")
    with pytest.raises(VerificationError, match="top_label"):
        ok.verify([0.0, 0.0], 0.1, property=("top_label", 5))
    with pytest.raises(VerificationError, match="does not fit"):
        ok.verify([0.0, 0.0, 0.0], 0.1)
    with pytest.raises(VerificationError, match="radius must be >= 0"):
        ok.verify([0.0, 0.0], -0.1)
    with pytest.raises(VerificationError, match="finite"):
        verify(ok, [float("nan"), 0.0], 0.1)


# --------------------------------------------------------------------------- the demo model


def test_iris_demo_model_both_algorithms() -> None:
    from runtime.examples import mlp

    res = mlp.main(["--steps", "20", "--kernels", "ordered"], out=io.StringIO())
    data = mlp.load_iris()
    x, t = data[0]
    label = t.index(1.0)
    widths = {}
    for alg in ("ibp", "crown"):
        v = res.verify(x, 0.05, algorithm=alg, property=("top_label", label))
        _assert_sound(res, v, _points(x, 0.05, 3, extra=4))
        check_certificate(v.certificate())
        widths[alg] = sum(v.real.widths())
        # a certified top label is the runtime's argmax at every sampled point of the box
        assert v.holds is True  # setosa (sample 0) is far from the other classes
        for p in _points(x, 0.05, 6, extra=10):
            y = list(res.predict(p))
            assert y.index(max(y)) == label
    assert widths["crown"] <= widths["ibp"]
    # the demo's default kernels are "fast": the runtime statement says they are not covered
    fast = mlp.main(["--steps", "2"], out=io.StringIO())
    assert "not covered" in fast.verify(x, 0.05).runtime.statement
    assert "not covered" not in res.verify(x, 0.05).runtime.statement


def test_readme_verification_snippet_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (ROOT / "README.md").read_text()
    sec = text.split("## Verification", 1)[1]
    code = re.search(r"```python\n(.*?)```", sec, re.S)
    assert code is not None
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    exec(compile(code.group(1), "README.md", "exec"), {})
    assert "crown" in out.getvalue()


# --------------------------------------------------------------------------- review fixes


def _rehash(cert: dict[str, Any]) -> dict[str, Any]:
    """A new model hash for an edited network, then a new digest."""
    import hashlib

    text = json.dumps(cert["network"], sort_keys=True, separators=(",", ":"))
    cert["model_hash"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return _redigest(cert)


def _kink() -> Result:
    # h = relu([x, x + 10]); y = h1 - h2/2 + 5 = relu(x) - x/2 on [-1, 1]: its minimum is
    # 0, at the kink x = 0 (and the endpoints give 1/2 at both x = -1 and x = 1)
    model = Sequential(Linear(1, 2), ReLU(), Linear(2, 1))
    return _result(model, [[[1.0], [1.0]], [0.0, 10.0], [[1.0, -0.5]], [5.0]], "float64")


def test_relu_lower_line_is_checked_at_the_kink() -> None:
    good = _kink().verify([0.0], 1.0, algorithm="crown").certificate()
    assert "holds" in check_certificate(copy.deepcopy(good))
    for level in ("real", "runtime"):
        rel = good["levels"][level]["witness"][1]["relax"]
        assert rel[0][:2] == ["1/1", "0/1"]  # the verifier's lower line: y >= x
        # 0.5x + 0.5 lies below relu at x = -1 and x = 1 but above it at x = 0 (0.5 > 0);
        # with it the backward pass "proves" y >= 2/5 although y(0) = 0
        c = copy.deepcopy(good)
        c["levels"][level]["witness"][1]["relax"][0][:2] = ["1/2", "1/2"]
        c["levels"][level]["lower"] = ["2/5"]
        with pytest.raises(CertificateError, match=rf"levels\.{level}\.witness\[1\]\.relax\[0\]"
                           ".*not valid"):  # fmt: skip
            check_certificate(_redigest(c))
        # a valid lower line through the kink (0.5x <= relu(x)) is still accepted
        c = copy.deepcopy(good)
        c["levels"][level]["witness"][1]["relax"][0][:2] = ["1/2", "0/1"]
        assert "holds" in check_certificate(_redigest(c))


def test_malformed_certificates_are_rejected(tmp_path: Path) -> None:
    good = _two_relu().verify([0.0, 0.0], 1.0, algorithm="crown").certificate()

    def rejected(edit: Any, match: str, rehash: bool = True) -> None:
        c = copy.deepcopy(good)
        edit(c)
        with pytest.raises(CertificateError, match=match):
            check_certificate(_rehash(c) if rehash else c)

    w0 = lambda c: c["network"]["stages"][0]["weight"]  # noqa: E731
    rejected(lambda c: w0(c)[0].append("0x3f800000"), r"stage 0\.weight\[0\]: expected 2")
    rejected(lambda c: w0(c)[1].pop(), r"stage 0\.weight\[1\]: expected 2")
    rejected(lambda c: w0(c).append(["0x3f800000"] * 2), r"stage 0\.bias: expected 3")
    rejected(lambda c: c["network"]["stages"][2]["weight"][0].pop(), r"stage 2\.weight\[0\]")
    rejected(lambda c: c["network"]["stages"][0].update(weight="x"), r"stage 0\.weight")
    rejected(lambda c: c["network"]["stages"].append(7), r"stage 3: expected an object")
    rejected(lambda c: c["network"].update(stages={}), r"network\.stages")
    rejected(lambda c: w0(c)[0].__setitem__(0, "0xzz"), "malformed certificate")

    def neg_radius(c: dict[str, Any]) -> None:
        c["box"].update(radius=["-1/1", "1/1"], lower=["1/1", "-1/1"], upper=["-1/1", "1/1"])

    rejected(neg_radius, r"box\.radius: must be >= 0")
    rejected(lambda c: c["box"].update(radius=["1/1"]), "equal lengths")
    for k in (1, 5, -1, "0", 0.0, True, None):
        rejected(lambda c, k=k: c.update(property=["top_label", k]), "top_label expects")
    wit = lambda c: c["levels"]["real"]["witness"]  # noqa: E731
    rejected(lambda c: wit(c)[1]["relax"][0].pop(), r"relax\[0\]: expected 4")
    rejected(lambda c: wit(c)[0]["out"][0].append("0/1"), r"witness\[0\]\.out: expected 2")
    rejected(lambda c: wit(c).__setitem__(1, None), r"witness\[1\]: expected an object")
    rejected(lambda c: c.update(levels=[]), "levels")
    rejected(lambda c: c.pop("box"), "box")
    rejected(lambda c: c["box"].update(center="x"), r"box\.center")
    rejected(lambda c: c.update(network=[]), "network")
    # the command line reports a malformed certificate, never a traceback
    c = copy.deepcopy(good)
    w0(c)[0].append("0x3f800000")
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_rehash(c)))
    out = subprocess.run([sys.executable, "-m", "proofs", "check-cert", str(path)],
                         capture_output=True, text=True, cwd=ROOT)  # fmt: skip
    assert out.returncode == 1 and "certificate rejected" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr


def test_fast_kernel_results_claim_nothing_at_the_runtime_level() -> None:
    # the hand-worked top_label network: CROWN proves label 1 at both levels
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 2))
    state = [[[1, 1], [1, -1]], [0, 0], [[1, 1], [-1, -1]], [0, 7]]
    ordered = _result(model, state)
    fast = Result(model, "mse", "float32", "eager", "fast", False, list(ordered._state))
    for alg, proved in (("crown", True), ("ibp", False)):
        o = ordered.verify([0.0, 0.0], 1.0, property=("top_label", 1), algorithm=alg)
        f = fast.verify([0.0, 0.0], 1.0, property=("top_label", 1), algorithm=alg)
        assert o.runtime_covered and not f.runtime_covered
        assert f.real.holds is proved and f.runtime.holds is proved  # ordered kernels' bounds
        assert o.holds is proved
        assert f.holds is (None if proved else False)  # predict with "fast" is not covered
        assert "not covered" in f.summary() and "not covered" not in o.summary()
        assert "not covered" in f.runtime.statement
    assert ordered.verify([0.0, 0.0], 1.0).holds is None  # property "bounds"


def test_level1_overflow_is_an_enclosure_or_an_error() -> None:
    # 2^3001 is beyond level 1's exponent range: the box is [largest finite, +inf]
    res = _result(Sequential(Tanh(), Linear(1, 1)), [[[1.0]], [0.0]])
    for alg in ("ibp", "crown"):
        v = res.verify([2**3001], 0, algorithm=alg)
        assert v.real.lower[0] < 1 <= v.real.upper[0]  # tanh(2^3001) is a hair below 1
        assert v.real.upper[0] - v.real.lower[0] < Fraction(1, 2**150)
    with pytest.raises(VerificationError, match="not finite"):
        _result(Sequential(Linear(1, 1)), [[[1.0]], [0.0]]).verify([2**3001], 0)


# --------------------------------------------------------------------------- sync with spec


def _spec_tree(g: Any, ins: list[Any]) -> Any:
    """A body graph as an expression tree over the input trees `ins`: composites expanded
    into their bodies, shape-only ops (reshape, swap_adjacent) dropped, consts as values."""
    vals = list(ins)
    for node in g.nodes:
        args = [vals[a] for a in node.args]
        if node.op == "const":
            assert node.attrs["shape"] == ()
            v: Any = node.attrs["values"][0]
        elif node.op in ("reshape", "swap_adjacent"):
            v = args[0]
        elif OPS[node.op].kind == "composite":
            body = OPS[node.op].body([g.shapes[a] for a in node.args], dict(node.attrs))
            v = _spec_tree(body, args)
        else:
            v = (node.op, *args)
        vals.append(v)
    return vals[-1]


def _subst(tree: Any, old: Any, new: Any) -> Any:
    if tree == old and type(tree) is type(old):
        return new
    if isinstance(tree, tuple):
        return tuple(_subst(t, old, new) for t in tree)
    return tree


class _TraceDomain:
    """A scalar 'domain' that records the operations a primitive's rule performs."""

    def one(self) -> Any:
        return Fraction(1)

    def zero(self) -> Any:
        return Fraction(0)

    def __getattr__(self, op: str) -> Any:
        return lambda *args: (op, *args)


def _spec_op_order(name: str) -> Any:
    """The spec's definition of `name` as verify's OP_ORDER writes it."""
    if name == "sigmoid":  # a primitive: trace its scalar rule
        return OPS["sigmoid"].forward(_TraceDomain(), [Tensor((), ("x",))], {}, None).data[0]
    if name == "gelu":  # the GELU layer is gelu's tanh form, named in its call
        return _spec_tree(OPS["gelu"].body([(3,)], {"approximate": "tanh"}), ["x"])
    n = 7  # the normalised width: its const is "n"
    eps = Fraction(1, 100000)  # the spec's LN_EPS: the layer's "eps"
    if name == "layer_norm":
        t = _spec_tree(OPS["layer_norm"].body([(2, n), (n,), (n,)], {}), ["x", "weight", "bias"])
        return _subst(_subst(t, Fraction(n), "n"), eps, "eps")
    # batch_norm in evaluation mode: the batch statistics replaced by the running ones
    t = _spec_tree(OPS["batch_norm"].body([(n, 2), (2,), (2,)], {}), ["x", "weight", "bias"])
    t = _subst(_subst(t, Fraction(n), "n"), eps, "eps")
    t = _subst(t, ("div", ("reduce_sum", "x"), "n"), "mean")
    xc = ("sub", "x", "mean")
    return _subst(t, ("div", ("reduce_sum", ("mul", xc, xc)), "n"), "var")


def test_op_order_follows_the_spec_bodies() -> None:
    # level 2 executes OP_ORDER (intervals.py evaluates these trees); a change of a spec
    # body's ops, argument order or constants must show up here
    assert set(OP_ORDER) == {"sigmoid", "gelu", "batch_norm", "layer_norm"}
    for name, tree in OP_ORDER.items():
        assert _spec_op_order(name) == tree, name


class _Ref:
    def __init__(self, tree: Any, shape: tuple[int, ...]) -> None:
        self.tree, self.shape = tree, shape


class _TraceSession:
    """Records the Session calls of a runtime.nn layer's evaluation-mode forward."""

    def __init__(self, eps: float) -> None:
        self.eps = eps

    def _t(self, v: Any) -> Any:
        if isinstance(v, _Ref):
            return v.tree
        assert v == self.eps
        return "eps"

    def reduce_mean(self, x: _Ref, axis: int) -> _Ref:
        return _Ref(("div", ("reduce_sum", x.tree), "n"), x.shape)

    def reshape(self, x: _Ref, shape: tuple[int, ...]) -> _Ref:
        return _Ref(x.tree, shape)

    def __getattr__(self, op: str) -> Any:
        return lambda *args: _Ref((op, *(self._t(a) for a in args)), args[0].shape)


def test_runtime_layers_follow_op_order() -> None:
    # the runtime.nn layers compose Session ops in the order verify follows
    eps = 1e-3
    for layer, names, op in (
        (BatchNorm1d(3, eps=eps), ["weight", "bias", "mean", "var", "momentum"], "batch_norm"),
        (LayerNorm(3, eps=eps), ["weight", "bias"], "layer_norm"),
    ):
        f = Forward.__new__(Forward)
        f.s, f.train = _TraceSession(eps), False  # type: ignore[assignment]
        state = [_Ref(n, (3,)) for n in names]
        y = layer.forward(f, state, list(range(len(names))), _Ref("x", (3,)))
        assert y.tree == OP_ORDER[op], op


def test_layer_table_and_dispatch_tables_agree() -> None:
    for cls, op in ((ReLU, "relu"), (Tanh, "tanh"), (Sigmoid, "sigmoid"), (GELU, "gelu")):
        assert cls.op == op and LAYER_STAGES[cls](cls(), [], "float32").op == op
    assert set(LAYERS) == set(FORWARD) == set(BACKWARD)
    assert set(RELAXATIONS) == set(ELEMENTWISE)
    window = {"linear", "conv2d", "avg_pool2d", "max_pool2d", "layer_norm", "add"}
    assert set(LAYERS) == set(ELEMENTWISE) | window
    assert set(CERT_NAMES) <= set(LAYERS)


def test_constants_shared_with_the_certificate_checker() -> None:
    # bounds_certificate_check restates these (it imports nothing from runtime/)
    assert bcc.FORMAT == verification.CERT_FORMAT
    assert bcc.PIECES == verification.PIECES
    assert tuple(bcc.GELU_GRID) == verification.GELU_GRID
    assert bcc.PRECISION > verification.LEVEL1_PRECISION  # the checker's finer enclosure
    assert bcc.GELU_C == GELU_C and bcc.GELU_K == GELU_K
    gelu = OP_ORDER["gelu"]  # the constants verify executes are the spec's
    assert GELU_C in _leaves(gelu) and GELU_K in _leaves(gelu)
    for dt, (p, _) in bcc.FORMATS.items():
        D = DTYPE_DOMAIN[dt]
        assert bcc.mpfr_format(dt) == (D.precision, D.emin, D.emax) and p == D.precision, dt
    assert set(bcc.FORMATS) | {"exact"} == set(DTYPES)


def _leaves(tree: Any) -> list[Any]:
    if isinstance(tree, tuple):
        return [v for t in tree[1:] for v in _leaves(t)]
    return [tree]
