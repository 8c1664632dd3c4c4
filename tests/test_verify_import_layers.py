"""The network import's layers beyond Gemm / Conv / Relu: BatchNormalization (eval),
LeakyRelu, MaxPool, AveragePool and Clip of a small conv net built with onnx.helper; the
rebuilt network's `predict` against an independent NumPy float64 forward of the
generator's weights; a VNN-LIB property answered `unsat` (sampled for contradicting
points) and `sat` (the counterexample re-checked with the NumPy forward); Sub / Div input
normalisation and unsupported pooling attributes refused with the node named.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

from runtime.verification import VerificationError
from runtime.verification.from_graph import network_from_imported
from runtime.verification.vnn import decide
from runtime.verification.vnnlib import parse_vnnlib

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from runtime.interop import from_onnx  # noqa: E402

SLOPE, LO, HI, EPS = 0.125, -1.0, 1.5, 0.001


def _params(seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    p = {"Wc": rng.normal(size=(2, 1, 3, 3)) / 2, "bc": rng.normal(size=2) * 0.1,
         "g": rng.uniform(0.5, 1.5, 2), "be": rng.normal(size=2) * 0.1,
         "rm": rng.normal(size=2) * 0.1, "rv": rng.uniform(0.5, 2, 2),
         "lo": np.array(LO), "hi": np.array(HI),
         "W": rng.normal(size=(3, 8)) / 2, "b": rng.normal(size=3) * 0.1}  # fmt: skip
    return {k: v.astype(np.float32) for k, v in p.items()}


def _model(p: dict[str, np.ndarray], head: list[Any] | None = None,
           pool: dict[str, Any] | None = None) -> bytes:  # fmt: skip
    """1x6x6 input: Conv 2x3x3 pad 1, BatchNormalization, LeakyRelu, MaxPool 2 (-> 2x3x3),
    Clip, AveragePool 2 stride 1 (-> 2x2x2), Flatten, Gemm 8 -> 3 (binary32)."""
    mk = helper.make_node
    nodes = [*(head or []),
             mk("Conv", ["X0", "Wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
             mk("BatchNormalization", ["c", "g", "be", "rm", "rv"], ["n"], epsilon=EPS),
             mk("LeakyRelu", ["n"], ["l"], alpha=SLOPE),
             mk("MaxPool", ["l"], ["m"], kernel_shape=[2, 2], strides=[2, 2], **(pool or {})),
             mk("Clip", ["m", "lo", "hi"], ["k"]),
             mk("AveragePool", ["k"], ["a"], kernel_shape=[2, 2], strides=[1, 1]),
             mk("Flatten", ["a"], ["f"]),
             mk("Gemm", ["f", "W", "b"], ["Y"], transB=1)]  # fmt: skip
    if not head:
        nodes[0].input[0] = "X"
    g = helper.make_graph(
        nodes, "convpool",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(v, k) for k, v in p.items()],
    )  # fmt: skip
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def _forward64(p: dict[str, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Independent NumPy float64 forward of `_model` (x: rows of 36 values)."""
    q = {k: v.astype(np.float64) for k, v in p.items()}
    xp = np.pad(np.asarray(x, dtype=np.float64).reshape(-1, 6, 6), ((0, 0), (1, 1), (1, 1)))
    c = np.empty((xp.shape[0], 2, 6, 6))
    for o, i, j in itertools.product(range(2), range(6), range(6)):
        c[:, o, i, j] = (xp[:, i : i + 3, j : j + 3] * q["Wc"][o, 0]).sum((1, 2)) + q["bc"][o]
    ch = (None, slice(None), None, None)
    n = (c - q["rm"][ch]) / np.sqrt(q["rv"][ch] + np.float64(np.float32(EPS)))
    n = n * q["g"][ch] + q["be"][ch]
    lr = np.where(n > 0, n, SLOPE * n)
    m = lr.reshape(-1, 2, 3, 2, 3, 2).max(axis=(3, 5))
    k = np.clip(m, LO, HI)
    a = (k[:, :, :-1, :-1] + k[:, :, 1:, :-1] + k[:, :, :-1, 1:] + k[:, :, 1:, 1:]) / 4
    return a.reshape(-1, 8) @ q["W"].T + q["b"]


def _header(n: int, m: int) -> str:
    return "".join(f"(declare-const X_{i} Real)\n" for i in range(n)) + "".join(
        f"(declare-const Y_{j} Real)\n" for j in range(m)
    )


def test_import_matches_an_independent_forward() -> None:
    p = _params()
    n = network_from_imported(from_onnx(_model(p)))
    assert n.layers == ["Conv2d", "BatchNorm2d", "LeakyReLU", "MaxPool2d", "Hardtanh",
                        "AvgPool2d", "Flatten", "Linear"]  # fmt: skip
    xs = np.random.default_rng(1).uniform(-1, 1, (20, 36)).astype(np.float32)
    want = _forward64(p, xs)
    for x, y in zip(xs, want, strict=True):
        got = n.result.predict(x.astype(np.float64).reshape(1, 6, 6))
        np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5)


def test_vnnlib_on_the_pooled_batchnorm_net() -> None:
    p = _params()
    n = network_from_imported(from_onnx(_model(p)))
    x = np.random.default_rng(2).uniform(0, 1, 36).astype(np.float32).astype(np.float64)
    k = int(np.argmax(_forward64(p, x[None])[0]))

    def prop(r: float, js: list[int]) -> Any:
        box = "".join(f"(assert (<= X_{i} {v + r!r}))(assert (>= X_{i} {v - r!r}))\n"
                      for i, v in enumerate(x.tolist()))  # fmt: skip
        ors = " ".join(f"(and (>= Y_{j} Y_{k}))" for j in js)
        return parse_vnnlib(_header(36, 3) + box + f"(assert (or {ors}))")

    second = int(np.argsort(_forward64(p, x[None])[0])[-2])
    small = prop(0.02, [second])  # one conjunction: the runner-up reaches the top
    assert decide(n, small, 60).status == "unsat"
    lo, hi = np.array(small.lower, dtype=float), np.array(small.upper, dtype=float)
    pts = (lo + np.random.default_rng(4).random((3000, 36)) * (hi - lo)).astype(np.float32)
    ys = _forward64(p, pts)
    assert (ys[:, k] > ys[:, second]).all()
    big = prop(1.0, [j for j in range(3) if j != k])
    out = decide(n, big, 60)
    assert out.status == "sat" and out.x is not None
    cx = np.array([out.x], dtype=np.float64)
    assert (np.array(big.lower) <= cx[0]).all() and (cx[0] <= np.array(big.upper)).all()
    y2 = _forward64(p, cx.astype(np.float32))[0]
    assert max(y2[j] - y2[k] for j in range(3) if j != k) >= 0


def test_one_sided_clip_and_leaky_default() -> None:
    p = _params()
    mk = helper.make_node
    nodes = [mk("Flatten", ["X"], ["f"]), mk("LeakyRelu", ["f"], ["l"]),
             mk("Max", ["l", "lo"], ["m"]),
             mk("Gemm", ["m", "W", "b"], ["Y"], transB=1)]  # fmt: skip
    W = p["W"][:, :4].copy()
    g = helper.make_graph(
        nodes, "clip1",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, 3])],
        [numpy_helper.from_array(v, k) for k, v in (("lo", p["lo"]), ("W", W), ("b", p["b"]))],
    )  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    n = network_from_imported(from_onnx(model.SerializeToString()))
    assert n.layers == ["LeakyReLU", "Hardtanh", "Linear"]
    x = np.array([-200.0, -0.5, 0.25, 3.0e30])
    y = np.maximum(np.where(x > 0, x, 0.01 * x), LO) @ W.astype(np.float64).T + p["b"]
    np.testing.assert_allclose(n.result.predict(x), y, rtol=1e-5)


def test_normalisation_and_pool_attributes_are_refused() -> None:
    p = _params()
    p2 = {**p, "std": np.full((1, 1, 1, 1), 0.0, np.float32)}  # no exact stage divides by 0
    head = [helper.make_node("Div", ["X", "std"], ["X0"])]
    with pytest.raises(VerificationError, match=r"node 0 \(div\): division by a parameter"):
        network_from_imported(from_onnx(_model(p2, head)))
    with pytest.raises(VerificationError, match=r"node 3 \(max_pool2d\): ceil_mode"):
        network_from_imported(from_onnx(_model(p, pool={"ceil_mode": 1})))
