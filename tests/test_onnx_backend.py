"""ONNX's own backend test data (shipped in the onnx wheel) as a test of the importer:
every case passes at ONNX's tolerances or is refused with a listed reason; none is wrong,
none crashes. The `light` models and the slowest cases are opt-in
(TORCHLEAN_ONNX_LIGHT=1 / TORCHLEAN_ONNX_SLOW=1)."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx package")

from runtime.interop import from_onnx  # noqa: E402
from runtime.interop.onnx_backend import (  # noqa: E402
    SUITES,
    cases,
    compare,
    dummy_inputs,
    light_models,
    run_case,
)

# case -> a substring of its refusal (docs/INTEROP.md lists the same table); every other
# case must pass (the 3-D convolutions and pools, sign and pow, once refused, now do).
REFUSED = {
    **{
        f"test_strnorm_model_{s}": "element type STRING"
        for s in (
            "monday_casesensintive_lower",
            "monday_casesensintive_nochangecase",
            "monday_casesensintive_upper",
            "monday_empty_output",
            "monday_insensintive_upper_twodim",
            "nostopwords_nochangecase",
        )
    },
}

# Minutes each in the runtime's gather kernels (a 60x80 window over 1000x1000; a 200-wide
# dilated window over 220000): opt-in.
SLOW = {"test_MaxPool2d_stride_padding_dilation", "test_MaxPool1d_stride_padding_dilation"}

ALL = [c for s in SUITES for c in cases(s)]


def test_the_data_is_the_expected_140_cases() -> None:
    assert len(ALL) == 140


@pytest.mark.parametrize("case", ALL, ids=lambda c: os.path.basename(c))
def test_backend_case(case: str) -> None:
    name = os.path.basename(case)
    if name in SLOW and not os.environ.get("TORCHLEAN_ONNX_SLOW"):
        pytest.skip("minutes in the runtime gather kernel; TORCHLEAN_ONNX_SLOW=1 runs it")
    status, why = run_case(case)
    assert status in ("pass", "refused"), f"{name}: {status}: {why}"
    if status == "refused":
        assert name in REFUSED, f"{name} refused, not listed: {why}"
        assert REFUSED[name] in why, f"{name}: {why}"


@pytest.mark.skipif(not os.environ.get("TORCHLEAN_ONNX_LIGHT"), reason="TORCHLEAN_ONNX_LIGHT=1")
@pytest.mark.parametrize("path", light_models(), ids=lambda p: os.path.basename(p))
def test_light_model(path: str) -> None:
    """The nine `light` models, inputs by the ONNX runner's dummy-data rule."""
    from onnx import numpy_helper

    m = onnx.load(path)
    want = [numpy_helper.to_array(onnx.load_tensor(path[: -len(".onnx")] + "_output_0.pb"))]
    t = time.perf_counter()
    try:
        imp = from_onnx(path, inputs=dummy_inputs(m))
    except Exception as e:  # report which, then fail: refusals are listed in the docs
        pytest.fail(f"{os.path.basename(path)}: {type(e).__name__}: {e}")
    print(f"{os.path.basename(path)}: import {time.perf_counter() - t:.1f}s")
    got, _ = imp.run("float32")
    assert compare([np.asarray(g) for g in got], want) == ""
