"""`spec.rng.splitmix64` on whole uint64 arrays of any array namespace (NumPy, CuPy, an
array-API namespace), for the evaluators that draw many samples at once.

Invariant: `splitmix64_array(xp, x)[i] == spec.rng.splitmix64(int(x[i]))` for every uint64
array x: the arithmetic is unsigned 64-bit with wrap-around, which every such namespace's
uint64 arrays do (callers silence NumPy's overflow warning with `np.errstate`).
"""

from __future__ import annotations

from typing import Any

from .rng import GAMMA

__all__ = ["splitmix64_array"]

_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB


def splitmix64_array(xp: Any, x: Any) -> Any:
    """One SplitMix64 step of each element of the uint64 array `x` (namespace `xp`)."""
    u64 = xp.uint64
    z = x + xp.asarray(GAMMA, dtype=u64)
    z = (z ^ (z >> xp.asarray(30, dtype=u64))) * xp.asarray(_M1, dtype=u64)
    z = (z ^ (z >> xp.asarray(27, dtype=u64))) * xp.asarray(_M2, dtype=u64)
    return z ^ (z >> xp.asarray(31, dtype=u64))
