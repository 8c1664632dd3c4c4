"""The engine adapter shape and the exact value conversions every adapter shares.

Invariants:
- An engine adapter is a subclass of `Engine` with a class attribute
  `ops: dict[str, Callable]` mapping an op name of the table (`spec.ops.OPS`) to a function
  on the engine's arrays, called as `ops[name](*arrays, **attrs)` with the op table's
  attribute names and values (rationals as `fractions.Fraction`, shapes as tuples). An op
  missing from `ops` is *not covered*; nothing here substitutes another engine's code.
- The engine's own autograd computes every VJP (`vjp`) and, where the engine has forward
  mode (`has_jvp`), every JVP (`jvp`). The adapter only moves bits in and out.
- Values cross the boundary bit for bit: a spec value of an IEEE domain becomes the
  engine's array element with the same bit pattern (`to_numpy`/`from_numpy` through
  unsigned-integer views), and back. No conversion rounds.
- Constructing an adapter whose package is missing raises `EngineUnavailable`, whose
  message names the package to `pip install`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

from runtime.backends import DTYPE_DOMAIN
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.tensor import Tensor

__all__ = [
    "NP_DTYPE",
    "UINT_OF",
    "Engine",
    "EngineUnavailable",
    "from_numpy",
    "ieee_domain",
    "to_numpy",
]

NP_DTYPE: dict[str, Any] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
}
UINT_OF: dict[str, Any] = {
    "float64": np.uint64,
    "float32": np.uint32,
    "bfloat16": np.uint16,
    "float16": np.uint16,
}


class EngineUnavailable(TorchLeanError):
    """An engine's package (or device) is not available here; the message says what to
    install."""


def ieee_domain(dtype: str) -> IEEEDomain:
    D = DTYPE_DOMAIN[dtype]
    if not isinstance(D, IEEEDomain):
        raise TorchLeanError(f"engines: dtype {dtype!r} is not an IEEE format")
    return D


def to_numpy(t: Tensor, dtype: str) -> np.ndarray:
    """A spec tensor of `dtype`'s domain as a NumPy array of that dtype, bit for bit."""
    D = ieee_domain(dtype)
    bits = np.array([D.to_bits(v) for v in t.data], dtype=UINT_OF[dtype])
    return bits.view(NP_DTYPE[dtype]).reshape(t.shape)


def from_numpy(a: np.ndarray, dtype: str) -> Tensor:
    """A NumPy array of `dtype` as a spec tensor, bit for bit (refuses another dtype)."""
    a = np.asarray(a)
    if a.dtype != NP_DTYPE[dtype]:
        raise TorchLeanError(f"engines: expected a {dtype} array, got {a.dtype}")
    D = ieee_domain(dtype)
    bits = np.ascontiguousarray(a).view(UINT_OF[dtype]).reshape(-1)
    return Tensor(tuple(int(s) for s in a.shape), tuple(D.from_bits(int(b)) for b in bits))


class Engine(ABC):
    """The adapter shape (see the module docstring). Subclasses set the class attributes
    and implement the four array methods; `vjp`/`jvp` call the engine's own autograd."""

    name: ClassVar[str] = "engine"
    package: ClassVar[str] = ""  # the pip name, for the "not installed" message
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32", "bfloat16", "float16")
    ops: ClassVar[dict[str, Callable[..., Any]]] = {}
    has_jvp: ClassVar[bool] = False

    def __init__(self) -> None:
        self.check_available()

    # -- availability
    @classmethod
    def check_available(cls) -> None:
        """Raise `EngineUnavailable` naming the package when the engine cannot run (the
        default: always available)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Version and device, for the report."""
        return {"engine": self.name}

    # -- arrays (bit-exact)
    @abstractmethod
    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        """`a` as the engine's array of `dtype`, bit for bit."""

    @abstractmethod
    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        """The engine's array as NumPy of `dtype`, bit for bit."""

    # -- the engine's own autograd
    @abstractmethod
    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        """(fn(*arrays), the engine's cotangent of every array given `cotangent`)."""

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        """(fn(*arrays), the engine's forward-mode tangent of the output)."""
        raise TorchLeanError(f"engine {self.name!r} has no forward mode (has_jvp is False)")
