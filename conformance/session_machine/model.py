"""The lanes of the Session state machine and the small model it keeps of them.

Invariants:
- Three lanes run one program: "exact" (typed graph over exact rationals), "eager" and
  "graph" (float32, ordered kernels). `MODE` and `DTYPE` say how each lane's Session is made.
- `VALUE` draws small dyadic rationals, exact in float32, so every lane starts from the same
  numbers; `lane_array` turns them into a lane's array (object Fractions or float32).
- `value_key` is an exact, hashable identity of an array (shape, dtype and bytes; Fractions
  for the exact lane): two lanes agree bit for bit iff their keys are equal.
- `Val` and `ParamModel` are plain classes (short reprs in Hypothesis' printed steps).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN
from runtime.session import Session, TensorRef

__all__ = [
    "B32",
    "BINARY",
    "DTYPE",
    "FLOAT_LANES",
    "LANES",
    "MAX_STALE",
    "MODE",
    "RAT",
    "RESHAPES",
    "SHAPES",
    "STALE_CALLS",
    "UNARY",
    "VALUE",
    "ParamModel",
    "Val",
    "bad_hook",
    "broadcast_shape",
    "exact_values",
    "handle_call",
    "lane_array",
    "pattern",
    "size_of",
    "value_key",
]

LANES = ("exact", "eager", "graph")
FLOAT_LANES = ("eager", "graph")
MODE = {"exact": "typed_graph", "eager": "eager", "graph": "typed_graph"}
DTYPE = {"exact": "exact", "eager": "float32", "graph": "float32"}

SHAPES: tuple[tuple[int, ...], ...] = ((), (2,), (2, 2), (2, 3), (3, 2))
RESHAPES: tuple[tuple[int, ...], ...] = (*SHAPES, (1,), (4,), (6,), (1, 2))
UNARY = ("neg", "relu", "tanh", "detach", "sum", "scale", "reshape")
BINARY = ("add", "sub", "mul", "mse_loss")
STALE_CALLS = ("relu", "get_value", "add", "detach", "backward", "scalar_left")
MAX_STALE = 8

RAT = DTYPE_DOMAIN["exact"]
B32 = DTYPE_DOMAIN["float32"]

# Small dyadic rationals: exact in float32, so every lane starts from the same numbers.
VALUE = st.integers(-8, 8).map(lambda n: Fraction(n, 4))


def size_of(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def lane_array(lane: str, vals: list[Fraction], shape: tuple[int, ...]) -> np.ndarray:
    if lane == "exact":
        out = np.empty(len(vals), dtype=object)
        for i, v in enumerate(vals):
            out[i] = Fraction(v)
        return out.reshape(shape)
    return np.array([float(v) for v in vals], dtype=np.float32).reshape(shape)


def value_key(a: Any) -> Any:
    a = np.asarray(a)
    if a.dtype == object:
        return (a.shape, tuple(a.reshape(-1)))
    return (a.shape, str(a.dtype), np.ascontiguousarray(a).tobytes())


def exact_values(a: Any) -> list[Fraction]:
    return [Fraction(v) for v in np.asarray(a).reshape(-1)]


class Val:
    """One value of the program: its handle in each lane that holds it. (A plain class, so
    that Hypothesis prints failing steps with this short repr.)"""

    __slots__ = ("refs", "shape")

    def __init__(self, refs: dict[str, TensorRef], shape: tuple[int, ...]) -> None:
        self.refs = refs
        self.shape = shape

    def __repr__(self) -> str:
        ids = ", ".join(f"{lane}: %{r.id}@g{r.generation}" for lane, r in self.refs.items())
        return f"Val(shape={self.shape}, {{{ids}}})"


class ParamModel:
    """A parameter in every lane, the exact lane's expected value and its leaves."""

    __slots__ = ("leaves", "refs", "requires_grad", "shape", "value")

    def __init__(
        self,
        refs: dict[str, Any],
        shape: tuple[int, ...],
        value: list[Fraction],
        requires_grad: bool,
    ) -> None:
        self.refs = refs
        self.shape = shape
        self.value = value
        self.requires_grad = requires_grad
        self.leaves: dict[str, list[int]] = {}  # lane -> leaf ids on the current tape

    def __repr__(self) -> str:
        name = self.refs["exact"].name
        return f"Param({name!r}, shape={self.shape}, requires_grad={self.requires_grad})"


def pattern(seed: int, n: int) -> list[Fraction]:
    """n small nonzero dyadic rationals determined by seed."""
    return [Fraction((seed + 3 * k) % 7 - 3, 4) or Fraction(1, 2) for k in range(n)]


def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def bad_hook(kind: str, at: int) -> Callable[[int, Any], Any]:
    def hook(i: int, g: Any) -> Any:
        if i != at:
            return g
        if kind == "bad_shape":
            return np.expand_dims(np.asarray(g), -1)
        return np.asarray(g).astype(np.float64 if g.dtype != np.float64 else np.float32)

    return hook


def handle_call(
    s: Session, call: str, bad: TensorRef, other: TensorRef | None
) -> Callable[[], Any]:
    """A call on `s` whose one bad handle is `bad` (`other` is valid, when there is one)."""
    if call == "relu":
        return lambda: s.relu(bad)
    if call == "get_value":
        return lambda: s.get_value(bad)
    if call == "detach":
        return lambda: s.detach(bad)
    if call == "backward":
        return lambda: s.backward_dense_all(bad, np.asarray(0))
    if call == "scalar_left":
        return lambda: s.add(2, bad)
    if other is not None:
        return lambda: s.add(other, bad)
    return lambda: s.add(bad, bad)
