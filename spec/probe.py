"""Start-up probe of the process's floating-point environment.

Invariant: importing `spec` fails loudly (`FloatEnvironmentError`) when the process flushes
subnormals to zero or treats them as zero (a library built with fast-math can switch this on
for the whole process). MPFR is immune, but NumPy kernels and Python floats are not, and the
runtime's bit-equality contract assumes gradual underflow.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .errors import TorchLeanError

__all__ = ["FloatEnvironmentError", "check_subnormals"]


class FloatEnvironmentError(TorchLeanError):
    """The process's floating-point environment breaks IEEE gradual underflow."""


def _numpy_products() -> list[tuple[str, float, float]]:
    out: list[tuple[str, float, float]] = []
    for dt, tiny in ((np.float64, 2.0**-1074), (np.float32, 2.0**-149)):
        t: Any = np.array([tiny * 4], dtype=dt)
        half: Any = np.array([0.5], dtype=dt)
        out.append((f"numpy {np.dtype(dt).name} 4*tiny*0.5", float((t * half)[0]), tiny * 2))
        # DAZ check: a subnormal operand must not be read as zero
        out.append(
            (
                f"numpy {np.dtype(dt).name} tiny+tiny",
                float((np.array([tiny], dtype=dt) + np.array([tiny], dtype=dt))[0]),
                tiny * 2,
            )
        )
    return out


def _python_products() -> list[tuple[str, float, float]]:
    tiny = 2.0**-1074
    return [("python float 2.0**-1073 * 0.5", (2.0**-1073) * 0.5, tiny)]


def check_subnormals(
    probes: Callable[[], list[tuple[str, float, float]]] | None = None,
) -> None:
    """Raise `FloatEnvironmentError` if any probe's result differs from its expected value."""
    results = probes() if probes is not None else _python_products() + _numpy_products()
    bad = [(name, got, want) for name, got, want in results if got != want]
    if bad:
        detail = "; ".join(f"{n}: got {g!r}, expected {w!r}" for n, g, w in bad)
        raise FloatEnvironmentError(
            "this process flushes subnormals to zero (FTZ/DAZ, e.g. a library built with "
            f"-ffast-math); torchlean's bit-exact semantics cannot hold: {detail}"
        )
