"""Guards of the trainer's boundary: training data must be finite, datasets non-empty,
finished sessions are not mutated.

Invariants: each check only reads its argument and either returns or raises the error
class named here (both `TorchLeanError`s); nothing is converted or changed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

__all__ = ["DataError", "FinishedError", "check_finite", "nonempty"]


class DataError(TorchLeanError, ValueError):
    """Training or evaluation data that cannot be used (non-finite values, no samples)."""


class FinishedError(TorchLeanError, RuntimeError):
    """A mutating call (step, load) on a training session after its `finish()`."""


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


def nonempty(data: Iterable[Any], who: str) -> list[Any]:
    items = list(data)
    if not items:
        raise DataError(f"{who}: the dataset is empty (a mean over no samples is undefined)")
    return items
