"""ONNX `Div` by one parameter that is not a power of two (ERAN's (x - 0.1307) / 0.3081):
imported as a batch norm whose only inexact step is the division, exact at both levels.

- Runtime level: the imported network's `predict` equals RN(x / d) in float32 bit for bit
  (NumPy's IEEE division, and onnxruntime's on the published Sub / Div form).
- Real level: the stage's running variance plus eps is d^2 exactly (Fractions), so
  (x - 0) / sqrt(var + eps) * sign(d) is x / d.
- Verification: CROWN bounds contain the exact real values and the runtime's values at
  sampled points of the box, and the certificate checks.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as hs

from proofs.bounds_certificate_check import check_certificate
from runtime.verification import verify
from runtime.verification.from_graph import network_from_imported
from runtime.verification.network import stages

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import helper  # noqa: E402

from runtime.interop import from_onnx  # noqa: E402
from tests.onnx_build import onnx_model  # noqa: E402

F32 = np.float32


def _div_net(d: float, n: int) -> bytes:
    nodes = [helper.make_node("Div", ["X", "d"], ["Y"])]
    return onnx_model(nodes, {"d": np.full((1, 1), d, F32)}, [1, n], [1, n])


@settings(max_examples=25)
@given(hs.floats(min_value=2.0**-20, max_value=2.0**20, width=32),
       hs.booleans(), hs.integers(0, 2**16))  # fmt: skip
def test_division_is_one_rounding_and_exact_at_the_real_level(a: float, neg: bool,
                                                              seed: int) -> None:  # fmt: skip
    assume(np.frexp(a)[0] != 0.5)  # powers of two: a product by 1/d (tested elsewhere)
    d = F32(-a if neg else a)
    net = network_from_imported(from_onnx(_div_net(float(d), 8)))
    (st,) = stages(net.result, net.in_shape)
    assert st.op == "batch_norm" and st.mean[0] == 0 and st.bias[0] == 0
    assert st.var[0] + st.eps == Fraction(float(d)) ** 2  # sqrt(var + eps) = |d| exactly
    assert st.weight[0][0] == (-1 if neg else 1)
    rng = np.random.default_rng(seed)
    xs = (rng.standard_normal((64, 8)) * 10.0 ** rng.integers(-6, 6, (64, 1))).astype(F32)
    got = np.asarray(net.result.predict(xs, batch=True), dtype=F32)
    want = xs / d  # IEEE float32 division: one rounding to nearest
    assert np.array_equal(got.view(np.uint32) & 0x7FFFFFFF, want.view(np.uint32) & 0x7FFFFFFF)
    assert np.array_equal(got, want)  # equal values (a zero's sign may differ)


def _eran(n: int) -> bytes:
    """ERAN's published normalisation: (x - 0.1307) / 0.3081, then Gemm, Relu, Gemm."""
    rng = np.random.default_rng(6)
    W0, b0 = rng.standard_normal((5, n)).astype(F32), rng.standard_normal(5).astype(F32)
    W1, b1 = rng.standard_normal((2, 5)).astype(F32), rng.standard_normal(2).astype(F32)
    nodes = [
        helper.make_node("Sub", ["X", "m"], ["s"]),
        helper.make_node("Div", ["s", "d"], ["z"]),
        helper.make_node("Flatten", ["z"], ["f"]),
        helper.make_node("Gemm", ["f", "W0", "b0"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "W1", "b1"], ["Y"], transB=1),
    ]
    inits = {"m": np.full((1, 1, 1, 1), 0.1307, F32), "d": np.full((1, 1, 1, 1), 0.3081, F32),
             "W0": W0, "b0": b0, "W1": W1, "b1": b1}  # fmt: skip
    return onnx_model(nodes, inits, [1, 1, 2, 2], [1, 2])


def test_eran_normalisation_matches_onnxruntime() -> None:
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime")
    rng = np.random.default_rng(7)
    nodes = [helper.make_node("Sub", ["X", "m"], ["s"]), helper.make_node("Div", ["s", "d"], ["z"]),
             helper.make_node("Flatten", ["z"], ["Y"])]  # fmt: skip
    inits = {"m": np.full((1, 1, 1, 1), 0.1307, F32), "d": np.full((1, 1, 1, 1), 0.3081, F32)}
    m = onnx_model(nodes, inits, [1, 1, 2, 2], [1, 4])
    net = network_from_imported(from_onnx(m))
    assert net.layers == ["BatchNorm2d", "BatchNorm2d", "Flatten"]
    sess = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    for x in rng.uniform(0, 1, (300, 1, 1, 2, 2)).astype(F32):
        want = sess.run(None, {"X": x})[0].reshape(-1)
        got = np.asarray(net.result.predict(x.reshape(net.in_shape)), dtype=F32).reshape(-1)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_eran_normalisation_sound_at_both_levels_and_checked() -> None:
    net = network_from_imported(from_onnx(_eran(4)))
    c, r = np.array([[[0.2, 0.5], [0.7, 0.9]]]), 0.02
    vr = verify(net.result, c, r, algorithm="crown")
    rng = np.random.default_rng(8)
    xs = (c + rng.uniform(-r, r, (200, *c.shape))).astype(F32)
    xs = xs[np.abs(xs.astype(np.float64) - c).max(axis=(1, 2, 3)) <= r]
    ys = np.asarray(net.result.predict(xs, batch=True), dtype=np.float64)
    lo, hi = (np.array(v, dtype=np.float64) for v in (vr.runtime.lower, vr.runtime.upper))
    assert (ys >= lo).all() and (ys <= hi).all()
    # the real network at the same points, exactly: ((x - m) / d) then the two layers
    st = net.result.state()
    m, d = Fraction(float(F32(0.1307))), Fraction(float(F32(0.3081)))
    W0, b0, W1, b1 = (np.vectorize(Fraction, otypes=[object])(a.astype(np.float64))
                      for a in st[-4:])  # fmt: skip
    for x in xs[:50]:
        z = np.array([(Fraction(float(v)) - m) / d for v in x.reshape(-1)], dtype=object)
        h = np.maximum(W0.dot(z) + b0, 0)
        y = W1.dot(h) + b1
        assert all(vr.real.lower[j] <= y[j] <= vr.real.upper[j] for j in range(2))
    assert "certificate holds" in check_certificate(vr.certificate())
