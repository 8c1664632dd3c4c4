"""Verification of residual (DAG) networks: `Residual(body, shortcut)` runs in the Session
(both kernel profiles) and is verified at both levels by IBP, CROWN, alpha-CROWN and
branch and bound, the backward pass summing the rows of both branches at the fan-out
point; a hand-worked golden case; sampled soundness (vertices included) at the runtime
level; the certificate records each DAG stage's inputs, chain certificates are unchanged,
and the checker refuses forged DAG certificates; an ONNX residual model goes through
`python -m runtime.verification`.
"""

from __future__ import annotations

import copy
import itertools
import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.bounds_certificate_check import CertificateError, check_certificate
from runtime.backends import get_backend
from runtime.nn import Conv2d, Flatten, Linear, ReLU, Residual, Sequential, Tanh
from runtime.trainer import Result
from runtime.verification import verify
from runtime.verification.network import network_json
from tests.cert_forge import resign


def _result(model: Sequential, state: list[Any], dtype: str, kernels: str = "ordered") -> Result:
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", kernels, False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


def _golden() -> Result:
    # out = y1 + y2, y = relu(W x + b) + x, W = [[1, 1], [1, -1]], b = [1, -1]
    model = Sequential(Residual([Linear(2, 2), ReLU()]), Linear(2, 1))
    W, b = [[1.0, 1.0], [1.0, -1.0]], [1.0, -1.0]
    return _result(model, [W, b, [[1.0, 1.0]], [0.0]], "float64")


def _refused(cert: dict[str, Any], match: str) -> None:
    with pytest.raises(CertificateError, match=match):
        check_certificate(resign(cert, network=True))


def test_residual_runs_in_the_session_in_both_profiles() -> None:
    res = _golden()
    for k in ("ordered", "fast"):
        r = _result(res.model, [np.asarray(a) for a in res.state()], "float64", k)
        for x in ([1.0, 1.0], [0.5, -1.0], [-1.0, -1.0]):
            s, d = x[0] + x[1] + 1, x[0] - x[1] - 1
            want = max(s, 0) + max(d, 0) + x[0] + x[1]
            assert float(np.asarray(r.predict(np.array(x)))[0]) == want


@pytest.mark.parametrize(("dtype", "kernels"), [("exact", "ordered"), ("float64", "fast")])
def test_residual_trains_both_branches(dtype: str, kernels: str) -> None:
    # y = (W1 x + b1) + (W2 x + b2): dL/dW1 = dL/dW2 = dL/dy x^T, so one SGD step changes
    # both branches' weights by the same amount (exactly, in dtype "exact"; to rounding of
    # the update w - lr g in float64)
    from runtime.optim import SGD
    from runtime.trainer import Trainer

    model = Sequential(Residual([Linear(2, 2)], [Linear(2, 2)]))
    tr = Trainer(model, "mse", SGD(0.125), dtype=dtype, kernels=kernels, seed=3)
    run = tr.open()
    before = [np.array(a) for a in run.state()]
    run.step(([0.5, -1.0], [1.0, 2.0]))
    after = [np.array(a) for a in run.state()]
    d = [a - b for a, b in zip(after, before, strict=True)]
    assert np.any(d[0] != 0) and np.any(d[1] != 0)
    if dtype == "exact":
        assert np.array_equal(d[0], d[2]) and np.array_equal(d[1], d[3])
    else:
        np.testing.assert_allclose(d[0], d[2], rtol=1e-14, atol=1e-15)
        np.testing.assert_allclose(d[1], d[3], rtol=1e-14, atol=1e-15)


def test_golden_by_hand() -> None:
    # box [-1, 1]^2: h1 = x1 + x2 + 1 in [-1, 3], h2 = x1 - x2 - 1 in [-3, 1].
    # IBP: r1 in [0, 3], r2 in [0, 1]; y = r + x: y1 in [-1, 4], y2 in [-1, 2]; out [-2, 6].
    # CROWN (rows [1, 1] reach r AND x, summed at the fan-out point x): upper lines
    # r1 <= 3/4 h1 + 3/4, r2 <= 1/4 h2 + 3/4, so out <= 3/4(x1+x2+1) + 3/4 + 1/4(x1-x2-1)
    # + 3/4 + x1 + x2 = 2 x1 + 3/2 x2 + 2 <= 11/2; lower lines r1 >= h1 (3 >= 1), r2 >= 0:
    # out >= 2 x1 + 2 x2 + 1 >= -3, intersected with IBP: -2. (Without the skip's rows the
    # upper bound would be 7/2, below the true maximum 5 at x = (1, 1); counted twice, 15/2.)
    res = _golden()
    ibp = verify(res, [0.0, 0.0], 1.0, algorithm="ibp")
    assert (ibp.real.lower, ibp.real.upper) == ((Fraction(-2),), (Fraction(6),))
    for alg in ("crown", "alpha-crown"):
        v = verify(res, [0.0, 0.0], 1.0, algorithm=alg)
        assert (v.real.lower, v.real.upper) == ((Fraction(-2),), (Fraction(11, 2),))
        # float64 runtime: the real bounds widened by the rounding terms only
        assert v.runtime.lower[0] <= -2 and v.runtime.upper[0] >= Fraction(11, 2)
        assert v.runtime.upper[0] - Fraction(11, 2) < Fraction(1, 2**40)
        assert "certificate holds" in check_certificate(v.certificate())
    stages = ibp.network["stages"]
    assert [s["op"] for s in stages] == ["linear", "relu", "add", "linear"]
    assert stages[2]["inputs"] == [2, 0] and all("inputs" not in s for s in stages[:2])


def test_chain_network_json_is_unchanged() -> None:
    # a chain: no "inputs" keys, the same JSON as a network without any Residual
    model = Sequential(Linear(3, 4), ReLU(), Linear(4, 2))
    st_ = [np.full((4, 3), 0.5), np.zeros(4), np.full((2, 4), 0.25), np.ones(2)]
    net = network_json(_result(model, st_, "float32"))
    assert all(set(s) <= {"op", "weight", "bias"} for s in net["stages"])
    text = json.dumps(net, sort_keys=True, separators=(",", ":"))
    assert text.startswith('{"dtype":"float32","stages":[{"bias":["0x00000000"')


def _mlp(draw: Any) -> tuple[Sequential, list[Any], int]:
    n, h, m = draw(st.integers(2, 3)), draw(st.integers(2, 4)), draw(st.integers(2, 3))
    act = draw(st.sampled_from([ReLU, Tanh]))
    short = [Linear(h, h)] if draw(st.booleans()) else []
    model = Sequential(Linear(n, h), Residual([act(), Linear(h, h)], short), ReLU(),
                       Linear(h, m))  # fmt: skip
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    state = [rng.normal(size=sp.shape) / 1.5 for sp in model.state_specs()]
    return model, state, n


@st.composite
def _cases(draw: Any) -> tuple[Result, np.ndarray, float]:
    model, state, n = _mlp(draw)
    dtype = draw(st.sampled_from(["float32", "float16"]))
    c = np.array(draw(st.lists(st.floats(-1, 1, width=16), min_size=n, max_size=n)))
    return _result(model, state, dtype), c, draw(st.sampled_from([0.0, 0.05, 0.4]))


def _points(c: np.ndarray, r: float, seed: int) -> np.ndarray:
    vs = np.array(list(itertools.product(*[(a - r, a + r) for a in c])))
    rng = np.random.default_rng(seed)
    return np.vstack([vs, c + rng.uniform(-r, r, (30, len(c))), c[None]])


def _inside(res: Result, v: Any, pts: np.ndarray) -> None:
    for x in pts:
        y = np.asarray(res.predict(x), dtype=np.float64)
        for j, t in enumerate(y):
            assert v.runtime.lower[j] <= Fraction(float(t)) <= v.runtime.upper[j], (x, j)


@settings(max_examples=6, deadline=None)
@given(_cases())
def test_residual_mlp_sound_and_never_wider(case: tuple[Result, np.ndarray, float]) -> None:
    res, c, r = case
    got = {a: verify(res, c, r, algorithm=a) for a in ("ibp", "crown", "alpha-crown")}
    pts = _points(c, r, 0)
    for v in got.values():
        _inside(res, v, pts)
    for lvl in ("real", "runtime"):
        w = {a: getattr(v, lvl).widths() for a, v in got.items()}
        for j in range(len(w["ibp"])):
            assert w["alpha-crown"][j] <= w["crown"][j] <= w["ibp"][j]
    for v in got.values():
        assert "certificate holds" in check_certificate(v.certificate())


def test_conv_residual_block_sound_and_checked() -> None:
    model = Sequential(Conv2d(1, 2, 3, padding=1), Residual([ReLU(), Conv2d(2, 2, 3, padding=1)]),
                       ReLU(), Flatten(), Linear(18, 2))  # fmt: skip
    rng = np.random.default_rng(5)
    res = _result(model, [rng.normal(size=sp.shape) / 2 for sp in model.state_specs()], "float32")
    c = rng.uniform(-1, 1, (1, 3, 3))
    ibp = verify(res, c, 0.05, algorithm="ibp")
    v = verify(res, c, 0.05, algorithm="crown")
    assert sum(v.runtime.widths()) < sum(ibp.runtime.widths())
    flat = c.reshape(-1)
    pts = np.vstack([flat + rng.choice([-0.05, 0.05], (40, 9)), flat[None]])
    for x in pts:
        y = np.asarray(res.predict(x.reshape(1, 3, 3)), dtype=np.float64).reshape(-1)
        assert all(v.runtime.lower[j] <= Fraction(float(t)) <= v.runtime.upper[j]
                   for j, t in enumerate(y))  # fmt: skip
    assert "certificate holds" in check_certificate(v.certificate())


def test_forged_dag_certificates_are_refused() -> None:
    good = verify(_golden(), [0.0, 0.0], 1.0, algorithm="crown").certificate()
    check_certificate(good)
    c = copy.deepcopy(good)  # the skip of y = r + x moved: r + r (out up to 8 > 11/2)
    c["network"]["stages"][2]["inputs"] = [2, 2]
    _refused(c, r"witness\[2\]\.out\[0\]: \[-1, 4\] is not sound")  # r1 + r1 reaches 6
    c = copy.deepcopy(good)  # a reference to a later value
    c["network"]["stages"][2]["inputs"] = [2, 3]
    _refused(c, r"network stage 2\.inputs")
    c = copy.deepcopy(good)  # an add without its inputs
    del c["network"]["stages"][2]["inputs"]
    _refused(c, r"network stage 2\.inputs")
    c = copy.deepcopy(good)  # an altered bound
    c["levels"]["runtime"]["upper"] = ["5/1"]
    _refused(c, "does not contain the recomputed enclosure")
    c = copy.deepcopy(good)  # an altered witness interval of the add stage
    c["levels"]["real"]["witness"][2]["out"][0] = ["0/1", "3/1"]
    _refused(c, r"witness\[2\]\.out\[0\]: .* is not sound")


def test_forged_dag_slope_is_refused() -> None:
    model = Sequential(Linear(2, 3), Residual([ReLU(), Linear(3, 3)]), ReLU(), Linear(3, 2))
    rng = np.random.default_rng(11)
    res = _result(model, [rng.normal(size=sp.shape) for sp in model.state_specs()], "float32")
    good = verify(res, [0.1, -0.2], 0.5, algorithm="alpha-crown").certificate()
    check_certificate(good)
    slopes = good["levels"]["real"]["alpha"]["lower"]
    s = next(iter(slopes))
    c = copy.deepcopy(good)
    c["levels"]["real"]["alpha"]["lower"][s][0] = ["2/1"] * len(slopes[s][0])
    _refused(c, "not valid")


def test_bab_on_a_residual_network() -> None:
    model = Sequential(Linear(2, 6), Residual([ReLU(), Linear(6, 6)]), ReLU(), Linear(6, 3))
    rng = np.random.default_rng(2)
    res = _result(model, [rng.normal(size=sp.shape) for sp in model.state_specs()], "float32")
    c = np.array([0.3, -0.4])
    k = int(np.argmax(np.asarray(res.predict(c))))
    found = None
    for r in (0.3, 0.2, 0.15, 0.1):
        a = verify(res, c, r, property=("top_label", k), algorithm="alpha-crown")
        if a.holds:
            continue
        v = verify(res, c, r, property=("top_label", k), algorithm="bab", max_branches=40)
        found = v
        if v.branches:
            break
    assert found is not None and found.branches > 0
    assert "certificate holds" in check_certificate(found.certificate())
    if found.holds:
        _inside(res, found, _points(c, r, 1))


# --------------------------------------------------------------------------- ONNX import


def _onnx_residual(rng: np.random.Generator) -> tuple[bytes, list[np.ndarray]]:
    onnx = pytest.importorskip("onnx", reason="needs the onnx package")
    from onnx import TensorProto, helper, numpy_helper

    W1, b1 = rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=4).astype(np.float32)
    W2 = (rng.normal(size=(4, 3)) / 2).astype(np.float32)
    W3 = rng.normal(size=(3, 2)).astype(np.float32)
    nodes = [  # Y = (relu(X W1 + b1) W2 + X) W3: X feeds the body and the skip
        helper.make_node("MatMul", ["X", "W1"], ["m1"]),
        helper.make_node("Add", ["m1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("MatMul", ["r1", "W2"], ["m2"]),
        helper.make_node("Add", ["X", "m2"], ["s"]),
        helper.make_node("MatMul", ["s", "W3"], ["Y"]),
    ]
    inits = [numpy_helper.from_array(a, n) for a, n in ((W1, "W1"), (b1, "b1"), (W2, "W2"),
                                                         (W3, "W3"))]  # fmt: skip
    g = helper.make_graph(nodes, "res",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 2])],
                          inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    return m.SerializeToString(), [W1, b1, W2, W3]


def _np_forward(ws: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    W1, b1, W2, W3 = (w.astype(np.float64) for w in ws)
    return (np.maximum(x @ W1 + b1, 0) @ W2 + x) @ W3


def test_onnx_residual_import_and_vnnlib(tmp_path: Path, capsys: Any) -> None:
    from runtime.interop import from_onnx
    from runtime.verification.__main__ import main
    from runtime.verification.from_graph import network_from_imported

    model, ws = _onnx_residual(np.random.default_rng(4))
    net = network_from_imported(from_onnx(model))
    assert net.layers == ["Residual", "Linear"]
    xs = np.random.default_rng(1).uniform(-1, 1, (10, 3)).astype(np.float32)
    got = np.asarray(net.result.predict(xs.astype(np.float64), batch=True), dtype=np.float64)
    np.testing.assert_allclose(got, _np_forward(ws, xs), rtol=1e-5, atol=1e-6)
    path = tmp_path / "res.onnx"
    path.write_bytes(model)
    c = np.zeros(3)
    y0 = _np_forward(ws, c[None])[0]
    k = int(np.argmax(y0))
    head = "".join(f"(declare-const X_{i} Real)\n" for i in range(3))
    head += "".join(f"(declare-const Y_{j} Real)\n" for j in range(2))

    def prop(r: float, name: str) -> Path:
        box = "".join(f"(assert (<= X_{i} {r}))\n(assert (>= X_{i} (- {r})))\n" for i in range(3))
        p = tmp_path / name
        p.write_text(head + box + f"(assert (>= Y_{1 - k} Y_{k}))\n")
        return p

    assert main([str(path), str(prop(0.001, "small.vnnlib")), "--timeout", "60",
                 "--certificate", str(tmp_path / "c")]) == 0  # fmt: skip
    assert capsys.readouterr().out == "unsat\n"
    for cert in sorted(tmp_path.glob("c.*.json")):
        assert "certificate holds" in check_certificate(json.loads(cert.read_text()))
    assert main([str(path), str(prop(3.0, "big.vnnlib")), "--timeout", "60"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("sat\n")


def test_onnx_refuses_an_add_off_the_residual_form() -> None:
    onnx = pytest.importorskip("onnx", reason="needs the onnx package")
    from onnx import TensorProto, helper

    from runtime.interop import from_onnx
    from runtime.verification import VerificationError
    from runtime.verification.from_graph import network_from_imported

    nodes = [helper.make_node("Relu", ["X"], ["r"]), helper.make_node("Add", ["r", "r"], ["Y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3]) for n in "XY"]
    g = helper.make_graph(nodes, "m", io[:1], io[1:])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(m)
    with pytest.raises(VerificationError, match=r"node 1 \(add\): add of a value to itself"):
        network_from_imported(from_onnx(m.SerializeToString()))
