"""A live probe of the process's floating-point environment.

Invariants:
- `check_float_environment()` raises `FloatEnvironmentError` when the process flushes
  subnormal results to zero (FTZ) or reads subnormal operands as zero (DAZ), for Python
  floats and for NumPy float64 / float32 arithmetic. A library built with fast-math (or
  `torch.set_flush_denormal(True)`) can switch this on for the whole process at any time,
  so the probe is *live*: it runs each time it is called, and its operands are read at call
  time from module-level containers (a list and NumPy arrays), never written as literals in
  an expression the compiler could fold. Results are compared by bit pattern, so the
  comparison itself does no float arithmetic.
- It is cheap (a few microseconds: two NumPy multiplies and two Python ones), so it runs
  when every IEEE-dtype `Session` starts (`ordered` or `fast`: the fast profile's error
  bounds assume gradual underflow too), hence when a trainer opens, and when a conformance
  run starts; and once at `import spec`.
- MPFR (the spec domains) is immune; NumPy kernels and Python floats are not, and the
  runtime's bit-equality contract assumes gradual underflow.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import TorchLeanError

__all__ = ["FloatEnvironmentError", "check_float_environment", "check_subnormals"]


class FloatEnvironmentError(TorchLeanError):
    """The process's floating-point environment breaks IEEE gradual underflow."""


Multiply = Callable[[Any, Any], Any]

# Operands (read at call time). Lane 0 is the FTZ check: the smallest normal times 0.5 must
# give a subnormal. Lane 1 is the DAZ check: the smallest subnormal times 2**60 must give a
# normal (nonzero) number, which only an environment treating the operand as zero breaks.
_F64_A = np.array([2.0**-1022, 2.0**-1074], dtype=np.float64)
_F64_B = np.array([0.5, 2.0**60], dtype=np.float64)
_F32_A = np.array([2.0**-126, 2.0**-149], dtype=np.float32)
_F32_B = np.array([0.5, 2.0**60], dtype=np.float32)
_PY_OPERANDS = [float.fromhex("0x1p-1022"), 0.5, float.fromhex("0x0.0000000000001p-1022"), 2.0**60]
# Expected results as bit patterns (integers: no float arithmetic in the comparison).
_F64_WANT = (0x0008000000000000, (1023 + 60 - 1074) << 52)
_F32_WANT = (0x00400000, (127 + 60 - 149) << 23)


def _bits64(x: float) -> int:
    """The binary64 bit pattern of `x` (a memory copy: no float arithmetic)."""
    return int(struct.unpack("<Q", struct.pack("<d", x))[0])


Lane = tuple[str, int, int]  # (name, got bits, expected bits)


def _python_lanes(multiply: Multiply | None = None) -> list[Lane]:
    """The Python-float lanes, computed now, as bit patterns."""
    mul = multiply or _py_mul
    a, half, tiny, big = _PY_OPERANDS
    return [
        ("python float 2**-1022 * 0.5 (FTZ)", _bits64(float(mul(a, half))), _F64_WANT[0]),
        ("python float 2**-1074 * 2**60 (DAZ)", _bits64(float(mul(tiny, big))), _F64_WANT[1]),
    ]


def _numpy_lanes(multiply: Multiply | None = None) -> list[Lane]:
    """The NumPy float64 / float32 lanes, computed now, as bit patterns (read through an
    unsigned view: converting a float32 subnormal to a Python float would itself be
    flushed under DAZ)."""
    mul = multiply or np.multiply
    out: list[Lane] = []
    for label, a, b, want, udt in (
        ("numpy float64", _F64_A, _F64_B, _F64_WANT, np.uint64),
        ("numpy float32", _F32_A, _F32_B, _F32_WANT, np.uint32),
    ):
        got = np.asarray(mul(a, b), dtype=a.dtype).view(udt)
        for lane, kind in ((0, "min normal * 0.5 (FTZ)"), (1, "min subnormal * 2**60 (DAZ)")):
            out.append((f"{label} {kind}", int(got[lane]), want[lane]))
    return out


def _py_mul(x: float, y: float) -> float:
    return x * y


def check_float_environment(multiply: Multiply | None = None) -> None:
    """Raise `FloatEnvironmentError` if the process flushes or ignores subnormals now.

    `multiply` (tests only) replaces the multiplication used by every lane, e.g. with a
    stand-in that flushes like FTZ hardware; None uses Python's `*` and `np.multiply`."""
    bad = [
        f"{n}: got bits {g:#x}, expected {w:#x}"
        for n, g, w in _python_lanes(multiply) + _numpy_lanes(multiply)
        if g != w
    ]
    if bad:
        _raise(bad)


def _raise(bad: list[str]) -> None:
    raise FloatEnvironmentError(
        "this process flushes subnormals to zero (FTZ/DAZ, e.g. a library built with "
        "-ffast-math, or torch.set_flush_denormal(True)); torchlean's bit-exact semantics "
        f"cannot hold: {'; '.join(bad)}"
    )


def check_subnormals(
    probes: Callable[[], list[tuple[str, float, float]]] | None = None,
) -> None:
    """Raise `FloatEnvironmentError` if any probe's result differs from its expected value
    (`probes` None: the live probes of `check_float_environment`)."""
    if probes is None:
        check_float_environment()
        return
    bad = [
        f"{name}: got {got!r}, expected {want!r}"
        for name, got, want in probes()
        if _bits64(got) != _bits64(want)
    ]
    if bad:
        _raise(bad)
