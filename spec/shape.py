"""Shapes: tuples of non-negative ints, outermost axis first.

Invariants: `size(()) == 1`; any zero dim gives size 0; broadcasting aligns trailing dims
and only a dim of 1 expands (the relation `broadcasts_to(src, dst)` is asymmetric).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence

from .errors import ShapeError

__all__ = [
    "Shape",
    "as_shape",
    "broadcast_shapes",
    "broadcasts_to",
    "rank",
    "ravel_index",
    "size",
    "sliding_window_out_dim",
    "strides",
    "unravel_index",
]

Shape = tuple[int, ...]


def as_shape(dims: Iterable[int], what: str = "shape") -> Shape:
    """Validate and normalise `dims` into a `Shape` (NumPy integers are accepted)."""
    items = list(dims)
    out = []
    for d in items:
        try:
            v = operator.index(d) if not isinstance(d, bool) else -1
        except TypeError:
            v = -1
        if v < 0:
            raise ShapeError(f"{what}: dims must be non-negative ints (got {tuple(items)!r})")
        out.append(v)
    return tuple(out)


def size(shape: Shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def rank(shape: Shape) -> int:
    return len(shape)


def broadcasts_to(src: Shape, dst: Shape) -> bool:
    """True when `src` expands to `dst`: align trailing dims; a src dim must equal or be 1."""
    if len(src) > len(dst):
        return False
    off = len(dst) - len(src)
    return all(s == dst[off + i] or s == 1 for i, s in enumerate(src))


def broadcast_shapes(a: Shape, b: Shape) -> Shape | None:
    """The common shape both operands broadcast to, or None when there is none."""
    n = max(len(a), len(b))
    pa = (1,) * (n - len(a)) + a
    pb = (1,) * (n - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            return None
    return tuple(out)


def strides(shape: Shape) -> Shape:
    """Row-major strides in elements."""
    out = [1] * len(shape)
    acc = 1
    for i in range(len(shape) - 1, -1, -1):
        out[i] = acc
        acc *= shape[i]
    return tuple(out)


def unravel_index(flat: int, shape: Shape) -> Shape:
    idx = []
    for d in reversed(shape):
        idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return tuple(reversed(idx))


def ravel_index(idx: Sequence[int], shape: Shape) -> int:
    flat = 0
    for i, d in zip(idx, shape, strict=True):
        flat = flat * d + i
    return flat


def sliding_window_out_dim(input: int, kernel: int, stride: int, padding: int) -> int:
    """Output length of a sliding window: 0 when kernel or stride is 0 or the padded input
    is shorter than the kernel, else floor((input + 2*padding - kernel) / stride) + 1."""
    for name, v in (("input", input), ("kernel", kernel), ("stride", stride), ("padding", padding)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ShapeError(
                f"sliding_window_out_dim: {name} must be a non-negative int, got {v!r}"
            )
    padded = input + 2 * padding
    if kernel == 0 or stride == 0 or padded < kernel:
        return 0
    return (padded - kernel) // stride + 1
