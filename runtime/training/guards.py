"""Guards of the trainer's boundary: training data must be finite.

Invariants: each check only reads its argument and either returns or raises the error
class named here (a `TorchLeanError`); nothing is converted or changed.
"""

from __future__ import annotations

import numpy as np

from spec.errors import TorchLeanError

__all__ = ["DataError", "check_finite"]


class DataError(TorchLeanError, ValueError):
    """Training or evaluation data that cannot be used (non-finite values, no samples)."""


def check_finite(a: np.ndarray, what: str) -> None:
    if a.dtype == object or a.dtype.kind != "f":
        return
    flat = a.reshape(-1)
    bad = np.flatnonzero(~np.isfinite(flat))
    if bad.size:
        i = int(bad[0])
        raise DataError(
            f"{what}: element {i} is {float(flat[i])!r}; training data must be finite "
            "(a NaN or infinite value would make every parameter NaN)"
        )
