"""Reference tensors: row-major flat values plus a shape, over a scalar domain.

Invariants: `len(t.data) == size(t.shape)`; tensors are immutable; every reduction here is a
left fold in row-major index order starting from the first element (empty folds give the
domain's zero). `TensorPack` (TorchLean's TList) is a typed list: its shapes are fixed and
every operation checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .domains import Domain
from .errors import ShapeError
from .shape import Shape, as_shape, size

__all__ = ["SomeTensor", "Tensor", "TensorPack", "dot", "dot_list", "fold_add"]


@dataclass(frozen=True)
class Tensor:
    """A shape and its row-major flat values. Carrying its shape at run time, a `Tensor`
    is also TorchLean's shape-erased `SomeTensor`."""

    shape: Shape
    data: tuple[Any, ...]

    def __post_init__(self) -> None:
        if len(self.data) != size(self.shape):
            raise ShapeError(
                f"Tensor: {len(self.data)} values do not fill shape {self.shape} "
                f"(expected {size(self.shape)})"
            )

    @staticmethod
    def of(shape: Iterable[int], data: Iterable[Any]) -> Tensor:
        return Tensor(as_shape(shape), tuple(data))

    @staticmethod
    def full(shape: Shape, value: Any) -> Tensor:
        return Tensor(shape, (value,) * size(shape))

    @staticmethod
    def zeros(domain: Domain, shape: Shape) -> Tensor:
        return Tensor.full(shape, domain.zero())

    def map(self, fn: Callable[[Any], Any]) -> Tensor:
        return Tensor(self.shape, tuple(fn(v) for v in self.data))

    def same(self, domain: Domain, other: Tensor) -> bool:
        """Shape equality and `domain.same` on every element."""
        return self.shape == other.shape and all(
            domain.same(a, b) for a, b in zip(self.data, other.data, strict=True)
        )


SomeTensor = Tensor


def fold_add(domain: Domain, values: Iterable[Any]) -> Any:
    """Left fold of `add` starting from the first value; the empty fold is zero."""
    it = iter(values)
    try:
        acc = next(it)
    except StopIteration:
        return domain.zero()
    for v in it:
        acc = domain.add(acc, v)
    return acc


def dot(domain: Domain, a: Tensor, b: Tensor) -> Any:
    """Σ a_i·b_i as a left fold in row-major order."""
    if a.shape != b.shape:
        raise ShapeError(f"dot: shapes differ (expected {a.shape}, got {b.shape})")
    return fold_add(domain, (domain.mul(x, y) for x, y in zip(a.data, b.data, strict=True)))


def dot_list(domain: Domain, p: TensorPack, q: TensorPack) -> Any:
    """Σ_i dot(p_i, q_i) as a left fold over the pack."""
    if p.shapes != q.shapes:
        raise ShapeError(f"dot_list: pack shapes differ (expected {p.shapes}, got {q.shapes})")
    return fold_add(domain, (dot(domain, a, b) for a, b in zip(p.tensors, q.tensors, strict=True)))


@dataclass(frozen=True)
class TensorPack:
    """A typed list of tensors (TorchLean's TList): `tensors[i].shape == shapes[i]`."""

    shapes: tuple[Shape, ...]
    tensors: tuple[Tensor, ...]

    def __post_init__(self) -> None:
        if len(self.shapes) != len(self.tensors):
            raise ShapeError(
                f"TensorPack: {len(self.tensors)} tensors for {len(self.shapes)} shapes"
            )
        for i, (s, t) in enumerate(zip(self.shapes, self.tensors, strict=True)):
            if t.shape != s:
                raise ShapeError(f"TensorPack: entry {i} (expected shape {s}, got {t.shape})")

    @staticmethod
    def of(tensors: Sequence[Tensor]) -> TensorPack:
        return TensorPack(tuple(t.shape for t in tensors), tuple(tensors))

    @staticmethod
    def zeros(domain: Domain, shapes: Sequence[Shape]) -> TensorPack:
        return TensorPack(tuple(shapes), tuple(Tensor.zeros(domain, s) for s in shapes))

    @staticmethod
    def single(domain: Domain, shapes: Sequence[Shape], i: int, v: Tensor) -> TensorPack:
        """Zeros everywhere except `v` at position `i`."""
        if not 0 <= i < len(shapes):
            raise ShapeError(f"TensorPack.single: index {i} out of range for {len(shapes)}")
        ts = [Tensor.zeros(domain, s) for s in shapes]
        ts[i] = v
        return TensorPack(tuple(shapes), tuple(ts))

    def __len__(self) -> int:
        return len(self.tensors)

    def get(self, i: int) -> Tensor:
        if not 0 <= i < len(self.tensors):
            raise ShapeError(f"TensorPack.get: index {i} out of range for {len(self.tensors)}")
        return self.tensors[i]

    def snoc(self, t: Tensor) -> TensorPack:
        return TensorPack((*self.shapes, t.shape), (*self.tensors, t))

    def unsnoc(self) -> tuple[TensorPack, Tensor]:
        if not self.tensors:
            raise ShapeError("TensorPack.unsnoc: empty pack")
        return TensorPack(self.shapes[:-1], self.tensors[:-1]), self.tensors[-1]

    def add(self, domain: Domain, other: TensorPack) -> TensorPack:
        """Pointwise `self + other` (existing on the left)."""
        if self.shapes != other.shapes:
            raise ShapeError(
                f"TensorPack.add: shapes differ (expected {self.shapes}, got {other.shapes})"
            )
        return TensorPack(
            self.shapes,
            tuple(
                Tensor(
                    a.shape, tuple(domain.add(x, y) for x, y in zip(a.data, b.data, strict=True))
                )
                for a, b in zip(self.tensors, other.tensors, strict=True)
            ),
        )

    def same(self, domain: Domain, other: TensorPack) -> bool:
        return self.shapes == other.shapes and all(
            a.same(domain, b) for a, b in zip(self.tensors, other.tensors, strict=True)
        )
