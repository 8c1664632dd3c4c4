"""spec.probe: the start-up check that the process keeps IEEE gradual underflow."""

from __future__ import annotations

import numpy as np
import pytest

from spec.errors import TorchLeanError
from spec.probe import FloatEnvironmentError, check_float_environment, check_subnormals

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


def _flushing(ftz: bool, daz: bool):
    """A stand-in multiply that behaves like FTZ and/or DAZ hardware (exact product via
    Fractions, then flushed), for Python floats and NumPy arrays alike."""
    from fractions import Fraction

    def tiny(dt):
        return Fraction(float(np.finfo(dt).tiny)) if dt is not None else Fraction(2.0**-1022)

    def one(x, y, dt):
        lim = tiny(dt)
        fx, fy = Fraction(float(x)), Fraction(float(y))
        if daz:
            fx = fx if abs(fx) >= lim or fx == 0 else Fraction(0)
            fy = fy if abs(fy) >= lim or fy == 0 else Fraction(0)
        p = fx * fy
        if ftz and p != 0 and abs(p) < lim:
            p = Fraction(0)
        return float(p)

    def mul(a, b):
        if isinstance(a, np.ndarray):
            return np.array([one(x, y, a.dtype) for x, y in zip(a, b, strict=True)], dtype=a.dtype)
        return one(a, b, None)

    return mul


def test_live_probe_passes_here():
    check_float_environment()
    # an honest multiply through the stand-in path (no flushing) passes too
    check_float_environment(multiply=_flushing(ftz=False, daz=False))


@pytest.mark.parametrize(("ftz", "daz", "lane"), [(True, False, "FTZ"), (False, True, "DAZ")])
def test_simulated_flushed_environment_is_refused(ftz, daz, lane):
    with pytest.raises(FloatEnvironmentError) as info:
        check_float_environment(multiply=_flushing(ftz=ftz, daz=daz))
    msg = str(info.value)
    for name in ("python float", "numpy float64", "numpy float32"):
        assert f"{name}" in msg and f"({lane})" in msg
    other = "DAZ" if lane == "FTZ" else "FTZ"
    assert f"({other})" not in msg  # only the lanes the environment breaks are listed


def test_probe_operands_are_read_at_call_time(monkeypatch):
    import spec.probe as probe

    # a wrong operand (not the smallest normal) must make the FTZ lane fail: the lanes read
    # the module's containers when called, nothing is folded at import
    monkeypatch.setattr(probe, "_F32_A", np.array([2.0**-125, 2.0**-149], dtype=np.float32))
    with pytest.raises(FloatEnvironmentError, match="numpy float32 min normal"):
        probe.check_float_environment()
    monkeypatch.undo()
    probe._PY_OPERANDS[2] = 0.0  # simulate the DAZ lane reading zero
    try:
        with pytest.raises(FloatEnvironmentError, match=r"python float 2\*\*-1074 .*DAZ"):
            probe.check_float_environment()
    finally:
        probe._PY_OPERANDS[2] = float.fromhex("0x0.0000000000001p-1022")
    probe.check_float_environment()


_FTZ_SCRIPT = """
import sys, numpy as np
import spec
from spec.probe import FloatEnvironmentError
from runtime.session import Session
import torch
if not torch.set_flush_denormal(True):
    print("unsupported"); sys.exit(0)
try:
    Session(dtype="float32", kernels="ordered")
except FloatEnvironmentError as e:
    print("refused:", e)
    sys.exit(0)
print("accepted")
"""


def test_real_ftz_after_import_is_caught_when_a_session_starts():
    """A library (here torch.set_flush_denormal, x86 SSE3) enables FTZ/DAZ *after* `import
    spec`: the next ordered session refuses to start. Runs in a subprocess."""
    import platform
    import subprocess
    import sys

    pytest.importorskip("torch", reason="needs torch (set_flush_denormal) for a real FTZ")
    if platform.machine().lower() not in ("x86_64", "amd64"):
        pytest.skip("real FTZ/DAZ via torch.set_flush_denormal is tested on x86 only")
    out = subprocess.run(
        [sys.executable, "-c", _FTZ_SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    if out.stdout.strip() == "unsupported":
        pytest.skip("this CPU does not support flushing denormals")
    assert out.stdout.startswith("refused:"), out.stdout
    assert "FTZ" in out.stdout and "numpy float32" in out.stdout
