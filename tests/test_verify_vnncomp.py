"""VNN-COMP files as published: the forms built here with onnx.helper (a Sub of a zero
image on a (1, 1, 1, 5) input, a (1, n, 1) input then Flatten, ONNX Constant nodes feeding
Sub / Div, elementwise Sub / Mul / Add between layers, transposes of unit axes), input
disjunctions (ACAS Xu property 6), the projected-gradient attack on a planted violation,
the timeout on a large conv box, and the audit of `scripts/vnncomp.py`.

Every imported network is compared bit for bit with onnxruntime on random inputs, every
counterexample re-checked with an independent NumPy forward, every certificate
re-validated by `proofs.bounds_certificate_check`.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proofs import split_certificate_check as split_check
from proofs.bounds_certificate_check import check_certificate
from runtime.verification import VerificationError, verify
from runtime.verification.floatnet import FloatNet
from runtime.verification.from_graph import network_from_imported
from runtime.verification.splitting import cover_boxes, pgd
from runtime.verification.vnn import GRACE, decide, decide_cases, verify_vnnlib
from runtime.verification.vnnlib import parse_vnnlib_cases
from tests.scripts_load import load_script

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import helper, numpy_helper  # noqa: E402

from runtime.interop import from_onnx  # noqa: E402
from tests.onnx_build import onnx_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
F32 = np.float32


def _const(name: str, v: np.ndarray) -> Any:
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(v, name + "_v"))


def _same_as_onnxruntime(
    m: bytes, shape: list[int], seed: int = 0, n: int = 200, exact: bool = False
) -> Any:
    """The imported network's `predict` equals onnxruntime on n random inputs: bit for bit
    with `exact` (elementwise models: one IEEE rounding per op either way), else to 1e-5
    (onnxruntime's matrix products sum in another order than the ordered kernels)."""
    ort = pytest.importorskip("onnxruntime", reason="needs onnxruntime")
    net = network_from_imported(from_onnx(m))
    sess = ort.InferenceSession(m, providers=["CPUExecutionProvider"])
    xs = np.random.default_rng(seed).uniform(-2, 2, (n, *shape[1:])).astype(F32)
    for x in xs:
        want = sess.run(None, {"X": x[None]})[0].reshape(-1)
        got = np.asarray(net.result.predict(x.reshape(net.in_shape)), dtype=F32).reshape(-1)
        if exact:
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), (x, got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return net


def _dense(rng: Any, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
    return rng.standard_normal((b, a)).astype(F32), rng.standard_normal(b).astype(F32)


# --------------------------------------------------------------------------- published forms


def test_acas_form_sub_of_a_zero_image_flatten_matmul_add() -> None:
    rng = np.random.default_rng(1)
    (W0, b0), (W1, b1) = _dense(rng, 5, 6), _dense(rng, 6, 5)
    nodes = [
        helper.make_node("Sub", ["X", "avg"], ["s"]),
        helper.make_node("Flatten", ["s"], ["f"]),
        helper.make_node("MatMul", ["f", "W0"], ["m0"]),
        helper.make_node("Add", ["m0", "b0"], ["a0"]),
        helper.make_node("Relu", ["a0"], ["r0"]),
        helper.make_node("MatMul", ["r0", "W1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["Y"]),
    ]
    inits = {"avg": np.zeros((1, 1, 1, 5), F32), "W0": W0.T.copy(), "b0": b0,
             "W1": W1.T.copy(), "b1": b1}  # fmt: skip
    net = _same_as_onnxruntime(onnx_model(nodes, inits, [1, 1, 1, 5], [1, 5]), [1, 1, 1, 5])
    assert net.layers == ["Flatten", "Linear", "ReLU", "Linear"] and net.n_in == 5


def test_mnistfc_form_unit_dimension_input_then_flatten() -> None:
    rng = np.random.default_rng(2)
    (W0, b0), (W1, b1) = _dense(rng, 6, 4), _dense(rng, 4, 3)
    nodes = [
        helper.make_node("Flatten", ["X"], ["f"]),
        helper.make_node("Gemm", ["f", "W0", "b0"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "W1", "b1"], ["Y"], transB=1),
    ]
    inits = {"W0": W0, "b0": b0, "W1": W1, "b1": b1}
    net = _same_as_onnxruntime(onnx_model(nodes, inits, [1, 6, 1], [1, 3]), [1, 6, 1])
    assert net.layers == ["Linear", "ReLU", "Linear"] and net.in_shape == (6,)


def test_eran_form_constants_feeding_sub_and_div() -> None:
    """Constant nodes with a per-channel mean and a power-of-two divisor (non-neutral: two
    exact batch-norm stages), and the neutral ones of the published files (dropped)."""
    rng = np.random.default_rng(3)
    W, b = _dense(rng, 12, 3)
    for mean, std, stages in ((0.25, 0.5, 2), (0.0, 1.0, 0)):
        nodes = [
            _const("m", np.full((1, 2, 1, 1), mean, F32)),
            helper.make_node("Sub", ["X", "m"], ["s"]),
            _const("d", np.full((1, 2, 1, 1), std, F32)),
            helper.make_node("Div", ["s", "d"], ["n"]),
            helper.make_node("Flatten", ["n"], ["f"]),
            helper.make_node("Gemm", ["f", "W", "b"], ["Y"], transB=1),
        ]
        m = onnx_model(nodes, {"W": W, "b": b}, [1, 2, 2, 3], [1, 3])
        net = _same_as_onnxruntime(m, [1, 2, 2, 3])
        assert net.layers.count("BatchNorm2d") == stages and net.layers[-1] == "Linear"


def _elementwise(shape: list[int], per: tuple[int, ...], gemm: bool) -> bytes:
    """X -> Sub(m) -> Mul(k) (parameter first) -> Add(t) -> Div(0.5) -> Relu [-> Gemm]."""
    rng = np.random.default_rng(4)
    par = {k: rng.uniform(-2, 2, per).astype(F32) for k in ("m", "k", "t")}
    nodes = [
        helper.make_node("Sub", ["X", "m"], ["s"]),
        helper.make_node("Mul", ["k", "s"], ["p"]),
        helper.make_node("Add", ["p", "t"], ["a"]),
        helper.make_node("Div", ["a", "h"], ["d"]),
        helper.make_node("Relu", ["d"], ["r"]),
    ]
    inits = {**par, "h": np.full(per, 0.5, F32)}
    n = int(np.prod(shape))
    if gemm:
        W, b = _dense(rng, n, 2)
        nodes += [helper.make_node("Flatten", ["r"], ["f"]),
                  helper.make_node("Gemm", ["f", "W", "b"], ["Y"], transB=1)]  # fmt: skip
        inits |= {"W": W, "b": b}
    else:
        nodes.append(helper.make_node("Flatten", ["r"], ["Y"]))
    return onnx_model(nodes, inits, shape, [1, 2] if gemm else [1, n])


@pytest.mark.parametrize(("shape", "per"), [([1, 4], (1, 4)), ([1, 2, 2, 2], (1, 2, 1, 1))])
def test_elementwise_ops_round_like_onnxruntime(shape: list[int], per: tuple[int, ...]) -> None:
    """Each of Sub / Mul / Add / Div (by a power of two) by a parameter is one rounding, bit
    for bit onnxruntime's (vector: per element; image: per channel)."""
    net = _same_as_onnxruntime(_elementwise(shape, per, False), shape, n=400, exact=True)
    bn = "BatchNorm1d" if len(shape) == 2 else "BatchNorm2d"
    assert net.layers == [bn] * 4 + ["ReLU"] + ["Flatten"] * (len(shape) == 4)


def test_elementwise_stages_are_sound_at_both_levels() -> None:
    net = network_from_imported(from_onnx(_elementwise([1, 4], (1, 4), True)))
    c, r = np.array([0.2, -0.1, 0.4, 0.3]), 0.05
    vr = verify(net.result, c, r, algorithm="crown")
    xs = c + np.random.default_rng(0).uniform(-r, r, (300, 4))
    ys = np.asarray(net.result.predict(xs.astype(F32), batch=True), dtype=np.float64)
    for lv in (vr.real, vr.runtime):
        lo, hi = np.array(lv.lower, dtype=float), np.array(lv.upper, dtype=float)
        assert (ys >= lo - 1e-12).all() and (ys <= hi + 1e-12).all()
    assert "certificate holds" in check_certificate(vr.certificate())


def test_refused_forms_name_the_node() -> None:
    nodes = [helper.make_node("Div", ["X", "d"], ["n"]), helper.make_node("Relu", ["n"], ["Y"])]
    m = onnx_model(nodes, {"d": np.array([[0.3, 0.7, 0.3]], F32)}, [1, 3], [1, 3])
    with pytest.raises(VerificationError, match=r"node \d+ \(div\): division .* power of two"):
        network_from_imported(from_onnx(m))
    moves = [helper.make_node("Transpose", ["X"], ["t"], perm=[0, 1, 3, 2]),
             helper.make_node("Flatten", ["t"], ["Y"])]  # fmt: skip
    with pytest.raises(VerificationError, match="transpose that moves values"):
        network_from_imported(from_onnx(onnx_model(moves, {}, [1, 1, 2, 3], [1, 6])))


def test_transpose_of_unit_axes_is_the_identity() -> None:
    rng = np.random.default_rng(5)
    W, b = _dense(rng, 4, 2)
    nodes = [
        helper.make_node("Transpose", ["X"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "s"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "b"], ["Y"], transB=1),
    ]
    inits = {"W": W, "b": b, "s": np.array([1, 4], np.int64)}
    net = _same_as_onnxruntime(onnx_model(nodes, inits, [1, 4], [1, 2]), [1, 4])
    assert net.layers == ["Linear"]


# --------------------------------------------------------------------------- input disjunctions


def _identity_net() -> Any:
    """y = (x0, x1) exactly (a Gemm with the identity and zero bias)."""
    m = onnx_model([helper.make_node("Gemm", ["X", "W", "b"], ["Y"], transB=1)],
               {"W": np.eye(2, dtype=F32), "b": np.zeros(2, F32)}, [1, 2], [1, 2])  # fmt: skip
    return m, network_from_imported(from_onnx(m))


PROP6 = """
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(assert (or
    (and (>= X_0 0) (<= X_0 1) (>= X_1 -1) (<= X_1 1))
    (and (>= X_0 2) (<= X_0 3) (>= X_1 -1) (<= X_1 1))
))
(assert (>= Y_0 {d}))
"""


def test_input_disjunction_one_case_per_box() -> None:
    cases = parse_vnnlib_cases(PROP6.format(d="5"))
    assert [(c.lower, c.upper) for c in cases] == [
        ((Fraction(0), Fraction(-1)), (Fraction(1), Fraction(1))),
        ((Fraction(2), Fraction(-1)), (Fraction(3), Fraction(1))),
    ]
    assert all(c.disjuncts == ((((Fraction(-1), Fraction(0)), Fraction(-5)),),) for c in cases)


def test_input_disjunction_unsat_only_if_every_case_is() -> None:
    _, net = _identity_net()
    out = decide_cases(net, parse_vnnlib_cases(PROP6.format(d="5")), 60)
    assert out.status == "unsat" and {q["case"] for q in out.proofs} == {0, 1}
    for cert in out.certificates:
        checker = split_check.check_certificate if cert["format"] == split_check.FORMAT else None
        assert "certificate holds" in (checker or check_certificate)(cert)
    hit = decide_cases(net, parse_vnnlib_cases(PROP6.format(d="2.5")), 60)
    assert hit.status == "sat" and hit.x is not None and 2.5 <= hit.x[0] <= 3
    first = decide_cases(net, parse_vnnlib_cases(PROP6.format(d="0.5")), 60)
    assert first.status == "sat" and first.x is not None and 0.5 <= first.x[0] <= 1


def _script() -> Any:
    return load_script("vnncomp")


def test_file_run_and_the_scripts_audit(tmp_path: Path) -> None:
    """The child-process run of files, and `scripts/vnncomp.py`'s independent audit: it
    accepts the answer and refuses one with a certificate missing or moved to another box."""
    m, _ = _identity_net()
    (tmp_path / "m.onnx").write_bytes(m)
    (tmp_path / "p.vnnlib").write_text(PROP6.format(d="5"))
    paths = str(tmp_path / "m.onnx"), str(tmp_path / "p.vnnlib")
    res = verify_vnnlib(*paths, timeout=60)
    assert res.status == "unsat"
    audit = _script().audit
    assert audit(*paths, res) is None
    res.proofs = res.proofs[:1]
    assert "without a proof" in audit(*paths, res)
    res = verify_vnnlib(*paths, timeout=60)
    res.certificates = res.certificates[::-1]
    assert "another box" in audit(*paths, res)


def test_cover_boxes_tile_the_box() -> None:
    tree = {"split": 0, "children": [{"leaf": 0}, {"split": 1, "children": [{"leaf": 1},
            {"leaf": 2}]}]}  # fmt: skip
    box = ((Fraction(0), Fraction(0)), (Fraction(4), Fraction(2)))
    got = cover_boxes(box, tree)
    assert got == [
        (0, ((0, 0), (2, 2))),
        (1, ((2, 0), (4, 1))),
        (2, ((2, 1), (4, 2))),
    ]


# --------------------------------------------------------------------------- the attack


def _planted(n: int = 20) -> tuple[bytes, str]:
    """Y_0 = 10 relu(sum x - (n - 0.05)) on [-1, 1]^n: Y_0 >= 0.25 only near the all-ones
    vertex (sum x >= n - 0.025), which uniform and vertex sampling miss."""
    nodes = [
        helper.make_node("Gemm", ["X", "W0", "b0"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["r"]),
        helper.make_node("Gemm", ["r", "W1", "b1"], ["Y"], transB=1),
    ]
    inits = {"W0": np.ones((1, n), F32), "b0": np.array([-(n - 0.05)], F32),
             "W1": np.array([[10.0], [0.0]], F32), "b1": np.zeros(2, F32)}  # fmt: skip
    head = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} -1))(assert (<= X_{i} 1))\n"
                   for i in range(n))  # fmt: skip
    prop = head + "(declare-const Y_0 Real)(declare-const Y_1 Real)(assert (>= Y_0 0.25))\n"
    return onnx_model(nodes, inits, [1, n], [1, 2]), prop


def test_attack_finds_a_planted_violation() -> None:
    m, prop = _planted()
    net = network_from_imported(from_onnx(m))
    (p,) = parse_vnnlib_cases(prop)
    fn = FloatNet.build(net.result, net.in_shape)
    assert fn is not None
    lo, hi = -np.ones(20), np.ones(20)
    rng = np.random.default_rng(0)
    sampled = fn.forward(rng.uniform(-1, 1, (4096, 20)))[:, 0]
    assert sampled.max() < 0.25  # sampling alone does not reach the region
    _, f = pgd(fn, lo, hi, (np.array([[-1.0, 0.0]]), np.array([-0.25])), time.monotonic() + 30)
    assert f[0] <= 0
    out = decide(net, p, 60)
    assert out.status == "sat" and out.x is not None and out.y is not None
    x = np.array(out.x, dtype=F32).astype(np.float64)
    assert (np.abs(x) <= 1).all()
    y0 = 10 * max(x.sum() - np.float64(F32(19.95)), 0.0)  # independent float64 forward
    assert y0 >= 0.25 and abs(out.y[0] - y0) < 1e-3


# --------------------------------------------------------------------------- the timeout


def test_timeout_honoured_on_a_large_conv_box(tmp_path: Path) -> None:
    """Conv 3x3 on a 96x96 image, Relu, AveragePool over the whole map, Flatten (a model
    of a few hundred bytes): the answer comes within T + 2 s."""
    nodes = [
        helper.make_node("Conv", ["X", "Wc", "bc"], ["c"]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("AveragePool", ["r"], ["a"], kernel_shape=[94, 94]),
        helper.make_node("Flatten", ["a"], ["Y"]),
    ]
    inits = {"Wc": np.full((1, 1, 3, 3), 0.1, F32), "bc": np.zeros(1, F32)}
    m = onnx_model(nodes, inits, [1, 1, 96, 96], [1, 1])
    assert len(m) < 400
    (tmp_path / "c.onnx").write_bytes(m)
    box = "".join(f"(declare-const X_{i} Real)(assert (>= X_{i} 0))(assert (<= X_{i} 1))\n"
                  for i in range(96 * 96))  # fmt: skip
    (tmp_path / "c.vnnlib").write_text(box + "(declare-const Y_0 Real)(assert (<= Y_0 -1))\n")
    T = 3.0
    t0 = time.monotonic()
    res = verify_vnnlib(str(tmp_path / "c.onnx"), str(tmp_path / "c.vnnlib"), timeout=T)
    took = time.monotonic() - t0
    assert res.status in ("timeout", "unknown", "unsat") and took < T + GRACE + 1.0
