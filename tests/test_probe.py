"""spec.probe: the start-up check that the process keeps IEEE gradual underflow."""

from __future__ import annotations

import numpy as np
import pytest

from spec.errors import TorchLeanError
from spec.probe import FloatEnvironmentError, check_subnormals

TINY64 = 2.0**-1074
TINY32 = 2.0**-149


def test_check_subnormals_passes_in_this_process():
    check_subnormals()  # raises if this process flushes subnormals
    # independent evidence that gradual underflow holds here (else the probe is meaningless)
    assert 2.0**-1073 * 0.5 == TINY64 != 0.0
    assert float(np.float32(TINY32) * np.float32(1.0)) == TINY32
    assert float(np.float32(TINY32) + np.float32(TINY32)) == 2 * TINY32


def test_good_fake_probes_pass():
    check_subnormals(probes=lambda: [])
    check_subnormals(probes=lambda: [("ok", TINY64, TINY64), ("also ok", 1.5, 1.5)])


def test_flushed_result_raises_ftz():
    def flushed():
        return [("fine", 1.0, 1.0), ("fake 2**-1073 * 0.5", 0.0, TINY64)]

    with pytest.raises(FloatEnvironmentError) as info:
        check_subnormals(probes=flushed)
    msg = str(info.value)
    assert "FTZ" in msg
    assert "fake 2**-1073 * 0.5" in msg  # names the failing probe
    assert "fine:" not in msg  # only failing probes are listed
    assert isinstance(info.value, TorchLeanError)


def test_daz_style_failure_raises():
    # a denormals-are-zero environment reads tiny + tiny as 0 + 0
    with pytest.raises(FloatEnvironmentError, match="FTZ"):
        check_subnormals(probes=lambda: [("numpy float32 tiny+tiny", 0.0, 2 * TINY32)])


def test_probe_is_called_each_time():
    calls = []

    def probe():
        calls.append(1)
        return [("x", 0.0, TINY64)] if len(calls) > 1 else []

    check_subnormals(probes=probe)
    with pytest.raises(FloatEnvironmentError):
        check_subnormals(probes=probe)
    assert len(calls) == 2


def test_default_probes_are_used(monkeypatch):
    import spec.probe as probe

    monkeypatch.setattr(
        probe, "_python_products", lambda: [("python float 2.0**-1073 * 0.5", 0.0, TINY64)]
    )
    with pytest.raises(FloatEnvironmentError, match="python float"):
        probe.check_subnormals()
    monkeypatch.undo()
    monkeypatch.setattr(
        probe, "_numpy_products", lambda: [("numpy float32 4*tiny*0.5", 0.0, 2 * TINY32)]
    )
    with pytest.raises(FloatEnvironmentError, match="numpy float32"):
        probe.check_subnormals()
