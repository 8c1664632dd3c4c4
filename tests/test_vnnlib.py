"""VNN-LIB properties on ONNX networks (`python -m runtime.verification MODEL PROPERTY`).

The network is an ACAS Xu-shaped fully connected ReLU net (5 inputs, two hidden layers of
16, 5 outputs; seeded random binary32 weights) exported with onnx.helper. At the origin
label 4 is on top; measured with the top-label region "some Y_j >= Y_4" on the box
[-r, r]^5: r = 0.01 is proved by alpha-CROWN, r = 0.06 needs branch and bound, r = 0.5 has
a counterexample at a vertex. Every counterexample is re-checked here with NumPy on the
generator's own weights, and every `unsat` is sampled for contradicting points.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proofs import split_certificate_check as split_check
from proofs.bounds_certificate_check import check_certificate as check_bounds
from runtime.verification import VerificationError
from runtime.verification.__main__ import main
from runtime.verification.from_graph import network_from_imported
from runtime.verification.vnn import decide, format_result
from runtime.verification.vnnlib import VNNLibError, parse_vnnlib


def check_certificate(cert: dict[str, Any]) -> str:
    """The checker of the certificate's format (as `python -m proofs check-cert`)."""
    fmt = cert.get("format")
    return (split_check.check_certificate if fmt == split_check.FORMAT else check_bounds)(cert)


onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from runtime.interop import from_onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DIMS = (5, 16, 16, 5)


def _weights(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [((rng.standard_normal((b, a)) / np.sqrt(a)).astype(np.float32),
             (0.1 * rng.standard_normal(b)).astype(np.float32))
            for a, b in itertools.pairwise(DIMS)]  # fmt: skip


def _model(ws: list[tuple[np.ndarray, np.ndarray]], matmul: bool = False) -> bytes:
    """Gemm layers (or MatMul + Add with the transposed weight) with ReLU between them."""
    nodes, inits, cur = [], [], "X"
    for i, (W, b) in enumerate(ws):
        inits.append(numpy_helper.from_array(b, f"b{i}"))
        if matmul:
            inits.append(numpy_helper.from_array(np.ascontiguousarray(W.T), f"W{i}"))
            nodes += [helper.make_node("MatMul", [cur, f"W{i}"], [f"m{i}"]),
                      helper.make_node("Add", [f"m{i}", f"b{i}"], [f"h{i}"])]  # fmt: skip
        else:
            inits.append(numpy_helper.from_array(W, f"W{i}"))
            nodes.append(helper.make_node("Gemm", [cur, f"W{i}", f"b{i}"], [f"h{i}"], transB=1))
        cur = f"h{i}"
        if i < len(ws) - 1:
            nodes.append(helper.make_node("Relu", [cur], [f"r{i}"]))
            cur = f"r{i}"
    nodes.append(helper.make_node("Flatten", [cur], ["Y"]))
    g = helper.make_graph(
        nodes, "acas",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, DIMS[0]])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, DIMS[-1]])], inits,
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _forward64(ws: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
    """An independent NumPy float64 forward on the binary32 weights (batch of rows)."""
    h = np.asarray(x, dtype=np.float64)
    for i, (W, b) in enumerate(ws):
        h = h @ W.astype(np.float64).T + b.astype(np.float64)
        if i < len(ws) - 1:
            h = np.maximum(h, 0)
    return h


def _header(n_in: int = 5, n_out: int = 5) -> str:
    return "".join(f"(declare-const X_{i} Real)\n" for i in range(n_in)) + "".join(
        f"(declare-const Y_{j} Real)\n" for j in range(n_out)
    )


def _box(r: float) -> str:
    return "".join(f"(assert (<= X_{i} {r}))\n(assert (>= X_{i} (- {r})))\n" for i in range(5))


def _top(r: float, k: int = 4) -> str:
    ors = " ".join(f"(and (>= Y_{j} Y_{k}))" for j in range(5) if j != k)
    return _header() + _box(r) + f"(assert (or {ors}))\n"


@pytest.fixture(scope="module")
def ws() -> list[tuple[np.ndarray, np.ndarray]]:
    return _weights()


@pytest.fixture(scope="module")
def net(ws: Any) -> Any:
    return network_from_imported(from_onnx(_model(ws)))


# --------------------------------------------------------------------------- the parser


def test_parser_golden() -> None:
    text = """; a comment
(declare-const X_0 Real)
(declare-const X_1 Real)
(declare-const Y_0 Real)
(declare-const Y_1 Real)
(assert (<= X_0 0.5))
(assert (>= X_0 -0.5))
(assert (and (<= X_1 1e-1) (>= X_1 (- 0.1))))
(assert (or (and (<= Y_0 Y_1) (>= (+ Y_0 (* 2 Y_1)) 3)) (and (<= (- Y_1) 1))))
(assert (<= Y_0 (* Y_1 0.25)))
"""
    p = parse_vnnlib(text)
    F = Fraction
    assert p.lower == (F(-1, 2), F(-1, 10)) and p.upper == (F(1, 2), F(1, 10))
    assert p.n_out == 2
    last = ((F(1), F(-1, 4)), F(0))  # Y_0 - Y_1/4 <= 0, conjoined with every disjunct
    assert p.disjuncts == (
        (((F(1), F(-1)), F(0)), ((F(-1), F(-2)), F(-3)), last),
        (((F(0), F(-1)), F(1)), last),
    )


@pytest.mark.parametrize(
    ("body", "line", "words"),
    [
        ("(assert (<= (* Y_0 Y_1) 1))", 13, "nonlinear"),
        ("(assert (= Y_0 1))", 13, "unsupported formula"),
        ("(assert (or (and (<= X_0 1) (<= Y_0 1)) (and (<= Y_1 0))))", 13, "X_i"),
        ("(assert (<= (+ X_0 Y_0) 1))", 13, "Y only"),
        ("(assert (<= (* 2 X_0) 1))", 13, "coefficient 1"),
        ("(assert (<= Y_0 foo))", 13, "unknown term"),
        ("(assert (<= Y_0 1)", 13, "never closed"),
        ("(check-sat)", 13, "expected declare-const or assert"),
        ("(declare-const X_0 Real)", 13, "declared twice"),
    ],
)
def test_parser_refuses_outside_the_subset(body: str, line: int, words: str) -> None:
    text = _header(1, 2) + "(assert (<= X_0 1))\n(assert (>= X_0 0))\n" + "\n" * 7 + body
    assert text.splitlines()[line - 1] == body
    with pytest.raises(VNNLibError, match=f"line {line}: .*{words}"):
        parse_vnnlib(text)


def test_parser_needs_every_input_bounded() -> None:
    with pytest.raises(VNNLibError, match="X_1 needs a lower and an upper bound"):
        parse_vnnlib(_header(2, 1) + "(assert (<= X_0 1))(assert (>= X_0 0))(assert (<= X_1 1))")
    with pytest.raises(VNNLibError, match="empty range"):
        parse_vnnlib(_header(1, 1) + "(assert (<= X_0 0))(assert (>= X_0 1))")


# --------------------------------------------------------------------------- the network


def test_network_import_matches_numpy(ws: Any, net: Any) -> None:
    alt = network_from_imported(from_onnx(_model(ws, matmul=True)))
    assert net.layers == alt.layers == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    xs = np.random.default_rng(1).uniform(-1, 1, (20, 5)).astype(np.float32)
    want = _forward64(ws, xs)
    for n in (net, alt):
        got = np.asarray(n.result.predict(xs.astype(np.float64), batch=True), dtype=np.float64)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_network_refuses_an_unsupported_op() -> None:
    g = helper.make_graph(
        [helper.make_node("Exp", ["X"], ["Y"])], "e",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3])],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(VerificationError, match=r"node 0 \(exp\): op 'exp' is not supported"):
        network_from_imported(from_onnx(m))


# --------------------------------------------------------------------------- decisions


def _sampled_hits(ws: Any, text: str, n: int = 4000) -> int:
    """Points of the box (vertices and uniform samples) where an independent NumPy forward
    lands in the unsafe region (exact row checks on the float64 outputs)."""
    p = parse_vnnlib(text)
    lo, hi = np.array(p.lower, dtype=float), np.array(p.upper, dtype=float)
    pts = np.vstack([np.array(list(itertools.product(*zip(lo, hi, strict=True)))),
                     lo + np.random.default_rng(2).random((n, 5)) * (hi - lo)])  # fmt: skip
    hits = 0
    for y in _forward64(ws, pts.astype(np.float32)):
        ys = [Fraction(float(v)) for v in y]
        hits += any(all(sum(a * v for a, v in zip(r, ys, strict=True)) <= d for r, d in c)
                    for c in p.disjuncts)  # fmt: skip
    return hits


@pytest.mark.parametrize("r", [0.01, 0.06])
def test_unsat_is_certified_and_not_contradicted(ws: Any, net: Any, r: float) -> None:
    text = _top(r)
    out = decide(net, parse_vnnlib(text), timeout=60)
    assert out.status == "unsat" and format_result(out) == "unsat"
    assert out.certificates
    for cert in out.certificates:
        assert "certificate holds" in check_certificate(cert)
    if r == 0.06:  # CROWN on the whole box leaves a disjunct open: input splitting closed it
        assert all(q["split"] for q in out.proofs) and len(out.certificates) == 4
        assert any("split" in c["tree"] for c in out.certificates)
    assert _sampled_hits(ws, text) == 0


def test_sat_counterexample_rechecked_with_numpy(ws: Any, net: Any) -> None:
    p = parse_vnnlib(_top(0.5))
    out = decide(net, p, timeout=60)
    assert out.status == "sat" and out.x is not None and out.y is not None
    x = np.array(out.x)
    assert all(a <= Fraction(v) <= b for v, a, b in zip(out.x, p.lower, p.upper, strict=True))
    assert np.array_equal(x.astype(np.float32).astype(np.float64), x)  # a binary32 input
    y = _forward64(ws, x[None].astype(np.float32))[0]
    np.testing.assert_allclose(out.y, y, rtol=1e-5, atol=1e-6)
    assert max(y[j] - y[4] for j in range(4)) > 1e-4  # the region holds with a margin
    lines = format_result(out).splitlines()
    assert lines[0] == "sat" and lines[1].startswith("((X_0 ") and lines[-1].endswith("))")
    assert len(lines) == 1 + 5 + 5


def test_general_linear_rows(ws: Any, net: Any) -> None:
    far = _header() + _box(0.05) + "(assert (>= (- Y_0 (* 0.5 Y_1)) 2))\n"
    assert decide(net, parse_vnnlib(far), 60).status == "unsat"
    assert _sampled_hits(ws, far) == 0
    near = _header() + _box(0.05) + "(assert (and (<= Y_1 Y_4) (>= Y_0 0)))\n"
    out = decide(net, parse_vnnlib(near), 60)
    assert out.status == "sat" and out.y is not None
    y = _forward64(ws, np.array([out.x], dtype=np.float32))[0]
    assert y[1] <= y[4] and y[0] >= 0


def test_unknown_when_the_budget_is_spent(net: Any) -> None:
    assert decide(net, parse_vnnlib(_top(0.01)), timeout=0).status == "unknown"


def test_property_must_fit_the_network(net: Any) -> None:
    text = _header(5, 3) + _box(0.1) + "(assert (<= Y_0 Y_1))"
    with pytest.raises(VerificationError, match="3 outputs, the network 5 and 5"):
        decide(net, parse_vnnlib(text), 60)


# --------------------------------------------------------------------------- the CLI


def test_cli(ws: Any, tmp_path: Path, capsys: Any) -> None:
    model = tmp_path / "acas.onnx"
    model.write_bytes(_model(ws))
    prop = tmp_path / "p.vnnlib"
    prop.write_text(_header() + _box(0.05) + "(assert (>= Y_0 2))\n")
    assert (
        main([str(model), str(prop), "--timeout", "60", "--certificate", str(tmp_path / "c")]) == 0
    )
    assert capsys.readouterr() == ("unsat\n", "")
    (cert,) = sorted(tmp_path.glob("c.*.json"))
    assert "certificate holds" in check_certificate(json.loads(cert.read_text()))
    bad = tmp_path / "bad.vnnlib"
    bad.write_text(_header() + "(assert (< Y_0 1))")
    assert main([str(model), str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "line 11: unsupported formula" in err
    done = subprocess.run(
        [sys.executable, "-m", "runtime.verification", str(tmp_path / "missing.onnx"), str(prop)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error:") and done.stderr.count("\n") == 1


def test_tanh_sigmoid_chain_with_reshape() -> None:
    rng = np.random.default_rng(3)
    W0, W1 = rng.standard_normal((4, 3)), rng.standard_normal((2, 4))
    b0, b1 = rng.standard_normal(4), rng.standard_normal(2)
    nodes = [
        helper.make_node("Reshape", ["X", "s"], ["f"]),
        helper.make_node("Gemm", ["f", "W0", "b0"], ["h"], transB=1),
        helper.make_node("Tanh", ["h"], ["t"]),
        helper.make_node("Gemm", ["t", "W1", "b1"], ["u"], transB=1),
        helper.make_node("Sigmoid", ["u"], ["Y"]),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((W0, "W0"), (b0, "b0"), (W1, "W1"),
             (b1, "b1"), (np.array([1, 3], dtype=np.int64), "s"))]  # fmt: skip
    g = helper.make_graph(
        nodes, "ts",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [1, 1, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.DOUBLE, [1, 2])], inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    n = network_from_imported(from_onnx(m))
    assert n.layers == ["Linear", "Tanh", "Linear", "Sigmoid"] and n.result.dtype == "float64"
    x = np.array([0.1, -0.2, 0.3])
    want = 1 / (1 + np.exp(-(W1 @ np.tanh(W0 @ x + b0) + b1)))
    np.testing.assert_allclose(n.result.predict(x), want, rtol=1e-12)
    lo, hi = (want - 1e-3).tolist(), (want + 1e-3).tolist()
    box = "".join(f"(assert (<= X_{i} {v + 1e-4!r}))(assert (>= X_{i} {v - 1e-4!r}))"
                  for i, v in enumerate(x.tolist()))  # fmt: skip
    out_of = f"(assert (or (and (<= Y_0 {lo[0]!r})) (and (>= Y_1 {hi[1]!r}))))"
    assert decide(n, parse_vnnlib(_header(3, 2) + box + out_of), 60).status == "unsat"
    inside = f"(assert (and (>= Y_0 {lo[0]!r}) (<= Y_1 {hi[1]!r})))"
    assert decide(n, parse_vnnlib(_header(3, 2) + box + inside), 60).status == "sat"


def test_input_splitting_decides_what_alpha_crown_cannot(ws: Any, net: Any) -> None:
    """Y_0 >= Y_4 on [-0.06, 0.06]^5 is empty, but alpha-CROWN on the whole box does not
    show it (and the region is not top-label): input splitting proves it leaf by leaf."""
    text = _header() + _box(0.06) + "(assert (>= Y_0 Y_4))"
    out = decide(net, parse_vnnlib(text), 60)
    assert out.status == "unsat" and out.proofs[0]["split"]
    assert "split" in out.certificates[0]["tree"]
    for cert in out.certificates:
        assert "certificate holds" in check_certificate(cert)
    assert _sampled_hits(ws, text) == 0


# --------------------------------------------------------------------------- a conv net


def _conv_net() -> tuple[bytes, Any]:
    """1x4x4 input, Conv 2x3x3 (stride 2, pad 1), Relu, Flatten, Gemm 8 -> 3 (binary32)."""
    rng = np.random.default_rng(5)
    Wc, bc = rng.standard_normal((2, 1, 3, 3)), rng.standard_normal(2)
    W, b = rng.standard_normal((3, 8)), rng.standard_normal(3)
    ps = [a.astype(np.float32) for a in (Wc, bc, W, b)]
    nodes = [
        helper.make_node("Conv", ["X", "Wc", "bc"], ["c"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Flatten", ["r"], ["f"]),
        helper.make_node("Gemm", ["f", "W", "b"], ["Y"], transB=1),
    ]
    g = helper.make_graph(
        nodes, "conv",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(a, n) for a, n in zip(ps, ("Wc", "bc", "W", "b"), strict=True)],
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString(), ps


def _conv64(ps: Any, x: np.ndarray) -> np.ndarray:
    """Independent NumPy float64 forward of `_conv_net` (x: rows of 16 values)."""
    Wc, bc, W, b = (a.astype(np.float64) for a in ps)
    xp = np.pad(np.asarray(x, dtype=np.float64).reshape(-1, 4, 4), ((0, 0), (1, 1), (1, 1)))
    out = np.empty((xp.shape[0], 2, 2, 2))
    for o, i, j in itertools.product(range(2), range(2), range(2)):
        out[:, o, i, j] = (xp[:, 2 * i : 2 * i + 3, 2 * j : 2 * j + 3] * Wc[o, 0]).sum((1, 2))
    h = np.maximum(out + bc[None, :, None, None], 0).reshape(-1, 8)
    return h @ W.T + b


def test_conv_net(tmp_path: Path) -> None:
    m, ps = _conv_net()
    n = network_from_imported(from_onnx(m))
    assert n.layers == ["Conv2d", "ReLU", "Flatten", "Linear"] and n.in_shape == (1, 4, 4)
    x = np.random.default_rng(6).uniform(0, 1, 16).astype(np.float32).astype(np.float64)
    y = _conv64(ps, x[None])[0]
    np.testing.assert_allclose(n.result.predict(x.reshape(1, 4, 4)), y, rtol=1e-5, atol=1e-5)
    k = int(np.argmax(y))

    def prop(r: float) -> str:
        box = "".join(f"(assert (<= X_{i} {v + r!r}))(assert (>= X_{i} {v - r!r}))\n"
                      for i, v in enumerate(x.tolist()))  # fmt: skip
        ors = " ".join(f"(and (>= Y_{j} Y_{k}))" for j in range(3) if j != k)
        return _header(16, 3) + box + f"(assert (or {ors}))"

    small = parse_vnnlib(prop(0.05))
    assert decide(n, small, 60).status == "unsat"
    lo, hi = np.array(small.lower, dtype=float), np.array(small.upper, dtype=float)
    pts = lo + np.random.default_rng(7).random((4000, 16)) * (hi - lo)
    ys = _conv64(ps, pts.astype(np.float32))
    assert (ys[:, k] > np.delete(ys, k, axis=1).max(axis=1)).all()
    out = decide(n, parse_vnnlib(prop(0.3)), 60)
    assert out.status == "sat" and out.x is not None
    y2 = _conv64(ps, np.array([out.x], dtype=np.float32))[0]
    assert max(y2[j] - y2[k] for j in range(3) if j != k) >= 0
