"""numba-compiled loops of the `ordered` profile (imported only by `runtime.engine.compiled`).

Invariants:
- Every function here is compiled with `fastmath=False` (no reassociation, no contraction
  of a*b + c into a fused multiply-add, IEEE NaN/inf/signed-zero/subnormal semantics) and
  `cache=True` (the machine code is kept next to this file, or in numba's user cache when
  that is not writable, so a run does not recompile).
- Each loop performs, for every output element, the same sequence of IEEE operations as
  the NumPy reference in `runtime.engine.context`, in the operands' own format (float32
  stays float32: numba types float32 op float32 as float32): one rounding per step, index
  order. Loops are vectorised only *across* independent output elements, never along the
  fold.
- Inputs are trusted: shapes and dtypes are checked by `runtime.engine.compiled`.
"""

from __future__ import annotations

from typing import Any

from numba import njit

__all__ = ["JIT_OPTIONS", "fold_mid", "matmul3"]

JIT_OPTIONS: dict[str, Any] = {"cache": True, "fastmath": False, "nogil": True}
_JIT: Any = njit(**JIT_OPTIONS)


@_JIT
def fold_mid(x: Any, out: Any) -> None:  # pragma: no cover - compiled
    """out[a, b] = (((x[a, 0, b] + x[a, 1, b]) + x[a, 2, b]) + ...): x (pre, k, post)."""
    pre, k, post = x.shape
    for a in range(pre):
        for b in range(post):
            out[a, b] = x[a, 0, b]
        for i in range(1, k):
            for b in range(post):
                out[a, b] = out[a, b] + x[a, i, b]


@_JIT
def matmul3(a: Any, b: Any, out: Any) -> None:  # pragma: no cover - compiled
    """out[q, i, j] = fold over p of a[q, i, p] * b[q, p, j], each product and each sum
    rounded, starting from the first product: a (B, m, k), b (B, k, n), k >= 1."""
    nb, m, k = a.shape
    n = b.shape[2]
    for q in range(nb):
        for i in range(m):
            a0 = a[q, i, 0]
            for j in range(n):
                out[q, i, j] = a0 * b[q, 0, j]
            for p in range(1, k):
                av = a[q, i, p]
                for j in range(n):
                    out[q, i, j] = out[q, i, j] + av * b[q, p, j]
