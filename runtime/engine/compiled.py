"""Compiled kernels for the `ordered` profile: the left folds and the k-loop matmul.

Invariants:
- Bit-identical to the NumPy reference path of `KernelContext` (`fold0` via
  `np.add.accumulate`, the k-loop `matmul`), which stays the named reference: for every
  output element the same IEEE operations in the same order, one rounding per step, no
  fused multiply-add (the loops live in `runtime.engine.compiled_kernels`, compiled by
  numba with `fastmath=False`, which emits separate multiply and add instructions;
  `tests/test_compiled.py` checks the machine code and checks on chosen inputs that a
  fused loop would give other bits). NaN is NaN (any payload: the spec's equality for
  IEEE formats); everything else, signed zeros and subnormals included, is bit for bit.
  Payloads: the folds keep the reference's; the matmul can differ from it when two NaNs
  with different payloads meet in one product or sum (LLVM treats + and * as commutative,
  and x86 keeps the first operand's payload), which the spec does not distinguish.
- Scope: NumPy arrays of float64 and float32 only. float16 and bfloat16 keep the NumPy
  path (numba has no CPU arithmetic for them; a loop in float32 that rounds to the format
  after every step would also be exact, because float32's 24 bits are >= 2p + 2 for
  p = 11 and p = 8, so rounding a float32-rounded sum or product of two p-bit values to p
  bits equals rounding the exact value once; it is not built here). `exact`, symbolic
  and other backends (CuPy has its own device kernels) keep their own paths.
- Optional at run time: without numba, or with the environment variable
  `TORCHLEAN_COMPILED=0`, the context runs the reference path. Small problems (fewer than
  `MIN_WORK` multiply-adds or additions) also take the reference path by default: there
  the NumPy call is as fast as the compiled call's dispatch, and a process that only sees
  small arrays (the conformance suite's cases) never imports numba. `TORCHLEAN_COMPILED=
  force` (or `KernelContext(..., compiled=True)`) sends every size through the compiled
  loops, e.g. to run the conformance suite over them. The switch is read when a
  `KernelContext` is built. The functions below return None for what they do not serve.
- numba is imported on the first `ordered` call that can use it, not at import of the
  runtime (it costs about half a second).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import Any

import numpy as np

__all__ = ["ENV_SWITCH", "MIN_WORK", "available", "enabled", "fold_axis", "matmul", "mode"]

ENV_SWITCH = "TORCHLEAN_COMPILED"
MIN_WORK = 4096  # below this many element operations the reference path runs (unless forced)
_DTYPES = (np.dtype(np.float64), np.dtype(np.float32))
_state: dict[str, Any] = {}


def available() -> bool:
    """Whether numba is installed (looked up once, without importing it)."""
    if "ok" not in _state:
        _state["ok"] = importlib.util.find_spec("numba") is not None
    return bool(_state["ok"])


def mode() -> str:
    """The environment switch: "off" (0/false/off/no), "force", or "auto" (default)."""
    v = os.environ.get(ENV_SWITCH, "").strip().lower()
    if v in ("0", "false", "off", "no"):
        return "off"
    return "force" if v == "force" else "auto"


def enabled(dtype: Any) -> bool:
    """Whether the compiled path can serve this NumPy dtype (numba present, switch on)."""
    if mode() == "off":
        return False
    return np.dtype(dtype) in _DTYPES and available()


def _k() -> Any:
    mod = _state.get("mod")
    if mod is None:
        mod = _state["mod"] = importlib.import_module("runtime.engine.compiled_kernels")
    return mod


def fold_axis(x: Any, axis: int, min_work: int = 0) -> Any:
    """The left fold of x over `axis` (index order, one rounding per step), or None when
    x is not a NumPy float64/float32 array with at least one element along `axis`, or
    has fewer than `min_work` elements."""
    if type(x) is not np.ndarray or x.dtype not in _DTYPES or x.size < min_work:
        return None
    shape = x.shape
    k = shape[axis]
    if k == 0:
        return None
    pre = 1
    for d in shape[:axis]:
        pre *= d
    post = 1
    for d in shape[axis + 1 :]:
        post *= d
    out = np.empty((pre, post), dtype=x.dtype)
    _k().fold_mid(np.reshape(x, (pre, k, post)), out)
    return np.reshape(out, shape[:axis] + shape[axis + 1 :])


def matmul(a: Any, b: Any, min_work: int = 0) -> Any:
    """a (..., m, k) @ b (..., k, n) by the k-loop, or None when the operands are not
    NumPy arrays of one float64/float32 dtype with equal batch prefixes and k >= 1, or
    the product has fewer than `min_work` multiply-adds."""
    if (
        type(a) is not np.ndarray
        or type(b) is not np.ndarray
        or a.dtype not in _DTYPES
        or b.dtype != a.dtype
        or a.ndim < 2
        or a.ndim != b.ndim
        or a.shape[:-2] != b.shape[:-2]
        or a.shape[-1] != b.shape[-2]
        or a.shape[-1] == 0
    ):
        return None
    batch = a.shape[:-2]
    m, k = a.shape[-2:]
    n = b.shape[-1]
    nb = 1
    for d in batch:
        nb *= d
    if nb * m * k * n < min_work:
        return None
    a3 = np.ascontiguousarray(np.reshape(a, (nb, m, k)))
    b3 = np.ascontiguousarray(np.reshape(b, (nb, k, n)))
    out = np.empty((nb, m, n), dtype=a.dtype)
    _k().matmul3(a3, b3, out)
    return np.reshape(out, (*batch, m, n))
