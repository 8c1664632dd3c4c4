"""Convolutions and pools as windowed operators (no dense matrices) in the verifier and the
certificate checker: equal, exactly, to the dense matrices of the runtime's own layers.

- Hand-worked windows of a small conv and a padded average pooling (rows and the
  transposed convolution of a row).
- Golden: certificates of two conv nets (strides, padding, dilation, groups, BatchNorm2d,
  average and max pooling, a residual block with a 1x1 conv shortcut on the input) are
  byte-identical (same digest) to those the dense-matrix implementation wrote, and check.
- Property (Hypothesis over geometries): every conv2d / avg_pool2d stage's windowed
  operator replaced by the dense matrix read off the runtime's own layer (its outputs on
  the unit vectors; max pooling's windows likewise) gives the same certificate, exact
  bounds and witness included, for IBP and CROWN; the checker with dense matrices
  recomputes the same enclosure (its refusal of an impossible claim names the same exact
  numbers) and accepts the same certificate.
  The binary64 image of each operator (the alpha-CROWN optimiser's and the float
  search's) is the same dense matrix.
- Size: a 96x96 conv box and a 3x32x32 CIFAR-sized conv net verify (IBP and CROWN) and
  check within a stated tracemalloc peak, far below the dense matrices' size.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

import proofs.bounds_certificate_check as checker
import runtime.verification.api as api
from proofs.bounds_certificate_check import CertificateError, check_certificate
from proofs.bounds_certificate_ia import Window
from runtime.backends import get_backend
from runtime.nn import (
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    ReLU,
    Residual,
    Sequential,
)
from runtime.trainer import Result
from runtime.verification import verify
from runtime.verification.network import Windowed, stages
from tests.cert_forge import resign


def _dy(rng: np.random.Generator, shape: Any) -> np.ndarray:
    return rng.integers(-12, 13, size=shape) / 16  # dyadic: exact in every float format


def _result(model: Sequential, dtype: str, seed: int) -> Result:
    rng = np.random.default_rng(seed)
    st: list[Any] = []
    for layer in model.layers:
        if isinstance(layer, BatchNorm2d):
            c = layer.c
            st += [rng.uniform(0.5, 1.5, c), _dy(rng, c), _dy(rng, c), rng.uniform(0.5, 2, c),
                   np.asarray(0.0)]  # fmt: skip
        else:
            st += [_dy(rng, sp.shape) for sp in layer.state_specs()]
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in st])  # fmt: skip


# ----------------------------------------------------------------------------- golden

GOLDEN_NETS = {
    "geom": (lambda: Sequential(
        Conv2d(2, 4, (3, 2), stride=(2, 1), padding=(1, 2), dilation=(1, 2), groups=2),
        BatchNorm2d(4), ReLU(), AvgPool2d(2, stride=1, padding=1), Conv2d(4, 3, 2), ReLU(),
        MaxPool2d(2, padding=1), Flatten(), Linear(30, 3)), (2, 5, 6)),
    "res": (lambda: Sequential(
        Residual([Conv2d(1, 2, 3, padding=1), ReLU(), Conv2d(2, 2, 3, padding=1)],
                 [Conv2d(1, 2, 1)]),
        ReLU(), AvgPool2d(2), Flatten(), Linear(4, 2)), (1, 4, 3)),
}  # fmt: skip
# the digests the dense-matrix implementation wrote for these certificates
GOLDEN = {
    "geom-float32-ibp": "e54eaa6bc001e7e6e19ecb132eb1de7a2033203799c3b55ac3c4c2547cf6f89c",
    "geom-float32-crown": "59d2b56541b166f2084f655dbfd40fdb49b371171d106bca6a7bb4bb6200a849",
    "geom-bfloat16-crown": "7555df6624b23ef2d2de63765d7f67b663e348196bbd7c5a026bff6452a11ea6",
    "res-float32-ibp": "1209dfbf5d0b15b5673cdb1c02ccdc0c13adc4d3f4e9fef7f6d5756f12175f00",
    "res-float32-crown": "1524330f948dec828681ecebf07ba12a25aa86851e468fddb5a13289208f1ea0",
    "res-bfloat16-crown": "7432ef888023cfe90550751c36bfc273e95ae8df5fbf7fb1436c9b4cc208055d",
}


@pytest.mark.parametrize("key", sorted(GOLDEN))
def test_certificates_identical_to_the_dense_implementations(key: str) -> None:
    name, dtype, alg = key.split("-")
    make, shape = GOLDEN_NETS[name]
    res = _result(make(), dtype, 3)
    c = np.random.default_rng(7).integers(-8, 9, size=shape) / 8
    prop = ("top_label", 0) if alg == "crown" else "bounds"
    cert = json.loads(json.dumps(verify(res, c, 0.125, algorithm=alg, property=prop).certificate()))
    assert cert["digest"] == GOLDEN[key]
    assert "certificate holds" in check_certificate(cert)


def test_hand_worked_windows() -> None:
    # Conv2d(1, 1, 2) with kernel [[1, 2], [3, 4]] on a 2x3 image (inputs 0 1 2 / 3 4 5):
    # outputs (0, 0) and (0, 1) read inputs {0, 1, 3, 4} and {1, 2, 4, 5}
    conv = Sequential(Conv2d(1, 1, 2), Flatten())
    res = Result(conv, "mse", "float64", "eager", "ordered", False,
                 [np.array([[[[1.0, 2.0], [3.0, 4.0]]]]), np.array([0.5])])  # fmt: skip
    (st,) = stages(res, (1, 2, 3))
    op = st.windowed
    assert op is not None and (op.n_in, op.n_out) == (6, 2) and st.bias == (Fraction(1, 2),) * 2
    assert op.row(0) == [(0, 1), (1, 2), (3, 3), (4, 4)]
    assert op.row(1) == [(1, 1), (2, 2), (4, 3), (5, 4)]
    assert op.back([Fraction(1), Fraction(-2)], Fraction(0)) == [1, 0, -4, 3, -2, -8]
    # AvgPool2d(2, stride 1, padding 1) on 1x2x2: 3x3 outputs; a corner reads one input,
    # the centre all four, each with weight 1/4 (the padding counts in the divisor)
    pool = Sequential(AvgPool2d(2, stride=1, padding=1), Flatten())
    (st,) = stages(Result(pool, "mse", "float64", "eager", "ordered", False, []), (1, 2, 2))
    op = st.windowed
    assert op is not None and op.n_out == 9
    q = Fraction(1, 4)
    assert op.row(0) == [(0, q)] and op.row(4) == [(0, q), (1, q), (2, q), (3, q)]
    assert op.row(5) == [(1, q), (3, q)]


# ----------------------------------------------------------------------------- dense reference


def _runtime_matrix(layer: Any, state: list[Any], shape: tuple[int, ...]) -> list[list[Fraction]]:
    """The dense matrix of a conv2d / avg_pool2d layer read off the runtime: its float64
    outputs on the unit vectors minus its output at 0 (dyadic weights: exact; an average's
    1/area recovered as the nearest fraction of small denominator)."""
    res = Result(Sequential(layer, Flatten()), "mse", "float64", "eager", "ordered", False,
                 [np.asarray(a, dtype=np.float64) for a in state])  # fmt: skip
    n = int(np.prod(shape))
    basis = np.concatenate([np.zeros((1, n)), np.eye(n)]).reshape(n + 1, *shape)
    out = np.asarray(res.predict(basis, batch=True), dtype=np.float64)
    cols = out[1:] - out[0]
    return [[Fraction(float(cols[i, j])).limit_denominator(4096) for i in range(n)]
            for j in range(out.shape[1])]  # fmt: skip


def _as_windowed(M: list[list[Fraction]]) -> Windowed:
    """A dense matrix in the windowed form: one 'channel' per row, whose single window is
    every input."""
    n = len(M[0])
    return Windowed(n, 1, (tuple((k, k) for k in range(n)),), tuple(tuple(r) for r in M),
                    (0,) * len(M))  # fmt: skip


def _dense_parts(res: Result, shape: tuple[int, ...]) -> list[Any]:
    """Per verification stage of `res` (a chain): the runtime's dense matrix (conv2d /
    avg_pool2d), its max pooling windows, or None."""
    out: list[Any] = []
    states = res.state()
    k = 0
    for layer in res.model.layers:
        n_st = len(layer.state_specs())
        st = states[k : k + n_st]
        k += n_st
        if isinstance(layer, Conv2d | AvgPool2d):
            out.append(_runtime_matrix(layer, st, shape))
        elif isinstance(layer, MaxPool2d):
            # window of output j: the inputs whose unit vector reaches it (inputs are >= 0)
            M = _runtime_matrix(layer, st, shape)
            out.append(tuple(tuple(i for i, v in enumerate(r) if v) for r in M))
        elif not isinstance(layer, Flatten):
            out.append(None)
        shape = tuple(layer.out_shape(shape))
    return out


def _dense_stages(parts: list[Any]) -> Any:
    def build(result: Any, in_shape: Any = None) -> Any:
        sts = stages(result, in_shape)
        if in_shape is None:  # the layer check: no operators yet
            return sts
        assert len(sts) == len(parts)
        out = []
        for st, p in zip(sts, parts, strict=True):
            if st.windowed is not None:
                st = dataclasses.replace(st, windowed=_as_windowed(p))
            elif st.op == "max_pool2d":
                assert st.windows == p  # the windows agree with the runtime's pooling
                st = dataclasses.replace(st, windows=p)
            out.append(st)
        return out

    return build


def _dense_checker_windows(parts: list[Any]) -> Any:
    """`windowed` for the checker: the runtime's dense matrices, in stage order (a max
    pooling's windows as the average pooling of its window entries)."""
    mats = []
    for p in parts:
        if isinstance(p, list):
            mats.append(p)
        elif isinstance(p, tuple):
            n = max(i for w in p for i in w) + 1
            mats.append([[Fraction(int(i in w)) for i in range(n)] for w in p])
    real = checker.windowed
    queue: list[Any] = []

    def windowed(st: dict[str, Any], dt: str, n: int, w: str, decode: Any) -> dict[str, Any]:
        got = real(st, dt, n, w, decode)
        if not queue:
            queue.extend(mats)
        M = queue.pop(0)
        M = [r + [Fraction(0)] * (n - len(r)) for r in M]
        assert len(M) == len(got["bias"])
        got["window"] = Window(n, [[(k, k) for k in range(n)]], M, [0] * len(M))
        return got

    return windowed


def _refusals(cert: dict[str, Any]) -> list[str]:
    """The checker's messages for impossible claims (a lower bound above the upper one):
    each names the exact recomputed enclosure of that output."""
    out = []
    for j in range(len(cert["levels"]["real"]["lower"])):
        c = copy.deepcopy(cert)
        lv = c["levels"]["real"]
        v = Fraction(lv["upper"][j]) + 1
        lv["lower"][j] = f"{v.numerator}/{v.denominator}"
        with pytest.raises(CertificateError) as e:
            check_certificate(resign(c))
        out.append(str(e.value))
    return out


GEOMS = hs.tuples(
    hs.integers(1, 2),  # groups
    hs.integers(1, 2),  # in channels per group
    hs.integers(1, 2),  # out channels per group
    hs.tuples(hs.integers(1, 3), hs.integers(1, 3)),  # kernel
    hs.tuples(hs.integers(1, 2), hs.integers(1, 2)),  # stride
    hs.tuples(hs.integers(0, 1), hs.integers(0, 2)),  # padding
    hs.tuples(hs.integers(1, 2), hs.integers(1, 2)),  # dilation
    hs.sampled_from(["avg", "max"]),
    hs.integers(0, 2**16),
)


@settings(max_examples=8)
@given(GEOMS)
def test_windowed_equals_dense_exactly(g: Any) -> None:
    groups, cg, og, k, s, p, d, pool, seed = g
    H, W = 5, 4
    if any((n + 2 * pi - di * (ki - 1) - 1) // si + 1 < 2
           for n, ki, si, pi, di in zip((H, W), k, s, p, d, strict=True)):  # fmt: skip
        return  # the geometry leaves no 2x2 output for the pooling
    conv = Conv2d(cg * groups, og * groups, k, stride=s, padding=p, dilation=d, groups=groups)
    shape = (cg * groups, H, W)
    pooled = [AvgPool2d(2, stride=1)] if pool == "avg" else [MaxPool2d(2, stride=1, padding=1)]
    model = Sequential(conv, ReLU(), Conv2d(og * groups, 2, 1), ReLU(), *pooled, Flatten())
    out_shape = model.out_shape(shape)
    model = Sequential(*model.layers, Linear(int(np.prod(out_shape)), 2))
    res = _result(model, "float32", seed)
    c = np.random.default_rng(seed).integers(-8, 9, size=shape) / 8
    parts = _dense_parts(res, shape)
    ops = [st.windowed for st in stages(res, shape) if st.windowed is not None]
    mats = [p for p in parts if isinstance(p, list)]
    for op, M in zip(ops, mats, strict=True):  # the binary64 image (search, alpha-CROWN)
        assert np.array_equal(op.float_dense(), np.array(M, dtype=np.float64))
    mp = pytest.MonkeyPatch()
    try:
        for alg in ("ibp", "crown"):
            got = verify(res, c, 0.25, algorithm=alg).certificate()
            mp.setattr(api, "stages", _dense_stages(parts))
            dense = verify(res, c, 0.25, algorithm=alg).certificate()
            mp.undo()
            assert got == dense  # exact bounds, intervals and relaxations alike
        structured_msgs = _refusals(got)
        assert "certificate holds" in check_certificate(copy.deepcopy(got))
        mp.setattr(checker, "windowed", _dense_checker_windows(parts))
        assert "certificate holds" in check_certificate(copy.deepcopy(got))
        assert _refusals(got) == structured_msgs
    finally:
        mp.undo()


# ----------------------------------------------------------------------------- size

_CHILD = r"""
import json, resource, sys
import numpy as np
from fractions import Fraction
from tests.test_verify_structured import _result, SIZE_NETS
from runtime.verification import verify
from proofs.bounds_certificate_check import check_certificate
name, algs = sys.argv[1], sys.argv[2].split(",")
make, shape, r = SIZE_NETS[name]
res = _result(make(), "float32", 1)
rng = np.random.default_rng(2)
c = rng.integers(0, 9, size=shape) / 8
out, bounds = {}, {}
for alg in algs:
    v = verify(res, c, r, algorithm=alg)
    msg = check_certificate(json.loads(json.dumps(v.certificate())))
    bounds[alg] = v.runtime
    out[alg] = ["certificate holds" in msg, float(sum(v.real.widths()))]
# the peak of this process's own memory map: VmHWM (Linux); ru_maxrss would also count the
# pages shared with the parent between fork and exec (the test runner's whole footprint)
try:
    with open("/proc/self/status") as f:
        hwm = [ln for ln in f if ln.startswith("VmHWM:")][0].split()[1]
    out["maxrss_mib"] = int(hwm) / 1024
except (OSError, IndexError):
    out["maxrss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
# sampled points inside the box (after the measurement: the runtime's own forward pass
# is not what is measured)
pts = c + rng.uniform(-r, r, (8, *shape))
ys = np.asarray(res.predict(pts, batch=True), dtype=np.float64)
for alg, b in bounds.items():
    out[alg].append(all(b.lower[j] <= Fraction(float(y)) <= b.upper[j]
                        for row in ys for j, y in enumerate(row)))
print(json.dumps(out))
"""

SIZE_NETS = {
    # the --timeout test's model: conv 3x3 on 96x96, ReLU, average over the whole map
    "96x96": (lambda: Sequential(Conv2d(1, 1, 3), ReLU(), AvgPool2d(94), Flatten()),
              (1, 96, 96), 0.5),
    "cifar": (lambda: Sequential(Conv2d(3, 8, 3, stride=2, padding=1), ReLU(),
                                 Conv2d(8, 4, 3, stride=2, padding=1), ReLU(), MaxPool2d(2),
                                 Flatten(), Linear(64, 10)), (3, 32, 32), 0.01),
}  # fmt: skip
# Peak resident memory allowed to the child process (interpreter and imports included):
# generous. The dense matrices alone were out x in entries: 8836 x 9216 (96x96) and
# 2048 x 3072 + 256 x 2048 (cifar), 8 bytes each as pointers (651 MB; 54 MB) plus their
# rationals; the dense implementation peaked at 1368 MB on the 96x96 IBP run.
MAX_RSS_MIB = 320


@pytest.mark.parametrize(("name", "algs"), [("96x96", "crown"), ("cifar", "ibp,crown")])
def test_large_conv_boxes_verify_and_check_in_small_memory(name: str, algs: str) -> None:
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    got = subprocess.run([sys.executable, "-c", _CHILD, name, algs], capture_output=True,
                         text=True, cwd=root, env=env, timeout=600)  # fmt: skip
    assert got.returncode == 0, got.stderr[-2000:]
    out = json.loads(got.stdout.strip().splitlines()[-1])
    for alg in algs.split(","):
        holds, _, sound = out[alg]
        assert sound and holds
    if "ibp" in out:
        assert out["crown"][1] <= out["ibp"][1]
    assert out["maxrss_mib"] < MAX_RSS_MIB
