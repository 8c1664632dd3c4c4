"""`torch-compile`'s program modes: `joint` (default: forward, VJP and JVP in one compiled
program per signature) and `split` (`--engine torch-compile@split`: AOTAutograd's
forward/backward pair and a separate JVP program); a signature whose joint program fails
falls back to the split programs. The fallback test compiles two programs, so it is
opt-in (TORCHLEAN_COMPILE_TESTS=1); the mode checks compile nothing."""

from __future__ import annotations

import os
from typing import Any

import pytest

torch = pytest.importorskip("torch", reason="pip install torch")

from conformance.engines import EngineUnavailable, load_engine  # noqa: E402
from conformance.engines.local import check_node  # noqa: E402
from conformance.engines.torch_compile_engine import TorchCompileEngine  # noqa: E402
from spec.domains import BINARY32  # noqa: E402
from spec.tensor import Tensor  # noqa: E402


def _load(name: str) -> Any:
    try:
        return load_engine(name)
    except EngineUnavailable as e:
        if "programs must be" in str(e):
            raise
        pytest.skip(str(e))


def test_modes_by_option() -> None:
    assert _load("torch-compile").programs == "joint"
    split = _load("torch-compile@split")
    assert split.programs == "split" and split.describe()["programs"] == "split"
    with pytest.raises(EngineUnavailable, match="programs must be one of joint, split"):
        _load("torch-compile@fused")


@pytest.mark.skipif(
    os.environ.get("TORCHLEAN_COMPILE_TESTS") != "1", reason="compiles: TORCHLEAN_COMPILE_TESTS=1"
)
def test_a_failing_joint_program_falls_back_to_split(monkeypatch: pytest.MonkeyPatch) -> None:
    from conformance.engines import torch_compile_engine as tce

    def failing(fn: Any, n: int, backend: str) -> Any:
        def program(*args: Any) -> Any:
            raise RuntimeError("joint program refused (stand-in for no forward-mode AD)")

        return program

    monkeypatch.setattr(tce, "_compile_joint", failing)
    try:
        eng = TorchCompileEngine()
    except EngineUnavailable as e:
        pytest.skip(str(e))
    x = Tensor((2,), (BINARY32.from_float(1.5), BINARY32.from_float(-0.25)))
    res = check_node(eng, "float32", "neg", {}, [x], x, [x])
    # the split programs ran both directions, exactly (neg is exact)
    assert res.refused is None and res.jvp_refused is None and res.wrong is None
    assert res.max_ulp == {"forward": 0.0, "vjp": 0.0, "jvp": 0.0}
    assert eng.describe()["compile_cache"]["split_fallbacks"] == 1
