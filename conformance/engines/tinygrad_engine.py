"""tinygrad adapter: `TinygradEngine`.

Invariants: every entry of `ops` is the plain tinygrad `Tensor` method for that op of the
table; VJPs come from `Tensor.gradient(*inputs, gradient=cotangent)` (tinygrad's reverse
mode; it has no forward mode, so no JVP is claimed). The device is tinygrad's default when
it can compile a kernel, else the `PYTHON` device (tinygrad's own UOp interpreter: the CPU
device needs `clang`; the fallback sets tinygrad's process-wide default device); the
report names the device. Ops without an entry are not covered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from .base import Engine, EngineUnavailable

try:
    import tinygrad
    from tinygrad import Tensor as TT
    from tinygrad import dtypes
except ImportError:  # pragma: no cover - exercised where tinygrad is absent
    tinygrad = None
    TT = None
    dtypes = None

__all__ = ["TinygradEngine"]

OPS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: a.maximum(b),
    "minimum": lambda a, b: a.minimum(b),
    "neg": lambda x: -x,
    "scale": lambda x, c: x * float(c),
    "relu": lambda x: x.relu(),
    "abs": lambda x: x.abs(),
    "clamp": lambda x, lo, hi: x.clamp(float(lo), float(hi)),
    "sqrt": lambda x: x.sqrt(),
    "detach": lambda x: x.detach(),
    "inv": lambda x: x.reciprocal(),
    "exp": lambda x: x.exp(),
    "log": lambda x: x.log(),
    "tanh": lambda x: x.tanh(),
    "sin": lambda x: x.sin(),
    "cos": lambda x: x.cos(),
    "sigmoid": lambda x: x.sigmoid(),
    "softplus": lambda x: x.softplus(),
    "gelu": lambda x: x.gelu(),
    "silu": lambda x: x.silu(),
    "sum": lambda x: x.sum(),
    "reduce_sum": lambda x, axis: x.sum(axis),
    "mean": lambda x: x.mean(),
    "reduce_mean": lambda x, axis: x.mean(axis),
    "reduce_max": lambda x, axis: x.max(axis),
    "matmul": lambda a, b: a.matmul(b),
    "reshape": lambda x, shape: x.reshape(shape),
    "swap_adjacent": lambda x, axis: x.transpose(axis, axis + 1),
    "transpose": lambda x: x.transpose(-2, -1),
    "broadcast_to": lambda x, shape: x.expand(shape),
    "concat": lambda *xs: xs[0].cat(*xs[1:], dim=0),
    "slice": lambda x, start, stop: x[start:stop],
    "softmax": lambda x: x.softmax(-1),
    "log_softmax": lambda x: x.log_softmax(-1),
    "mse_loss": lambda y, t: ((y - t) * (y - t)).mean(),
}

_DT = {"float64": "float64", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
_UINT = {"float64": "uint64", "float32": "uint32", "bfloat16": "uint16", "float16": "uint16"}


def _device() -> str:
    """tinygrad's default device, or its PYTHON interpreter where the default CPU device
    has no `clang` to compile with (set process-wide, before tinygrad picks a device)."""
    import os
    import shutil

    from tinygrad import Device
    from tinygrad.helpers import DEV

    if not os.environ.get("DEV") and shutil.which("clang") is None:
        DEV.value = "PYTHON"
    return str(Device.DEFAULT)


class TinygradEngine(Engine):
    """tinygrad (lazy graphs realised per call); VJPs by `Tensor.gradient`."""

    name: ClassVar[str] = "tinygrad"
    package: ClassVar[str] = "tinygrad"
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS
    _dev: ClassVar[str | None] = None

    @classmethod
    def check_available(cls) -> None:
        if tinygrad is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: tinygrad is not installed (pip install {cls.package})"
            )
        if TinygradEngine._dev is None:
            TinygradEngine._dev = _device()

    @property
    def device(self) -> str:
        return TinygradEngine._dev or "PYTHON"

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"engine": self.name, "tinygrad": version("tinygrad"), "device": self.device}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        bits = np.ascontiguousarray(a).view(getattr(np, _UINT[dtype])).copy()
        t = TT(bits.reshape(-1), device=self.device) if bits.size else None
        if t is None:
            return TT.zeros(*a.shape, dtype=getattr(dtypes, _DT[dtype]), device=self.device)
        return t.bitcast(getattr(dtypes, _DT[dtype])).reshape(a.shape)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        from .base import NP_DTYPE

        shape = tuple(x.shape)
        if x.numel() == 0:
            return np.zeros(shape, dtype=NP_DTYPE[dtype])
        bits = x.bitcast(getattr(dtypes, _UINT[dtype])).reshape(-1).numpy()
        return bits.view(NP_DTYPE[dtype]).reshape(shape)

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        xs = [a.detach() for a in arrays]
        out = fn(*xs)
        gs = out.gradient(*xs, gradient=cotangent)
        return out, list(gs)
