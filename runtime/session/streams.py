"""Random streams: SplitMix64 keys, uniform tensors, Bernoulli masks and dropout.

Invariants:
- A session owns its RNG counter (`Session.rng`, held by its `RandomStreams`); an explicit
  `Rng` stream advances only itself. Each draw uses `key_of(seed, counter)` and advances
  the counter once, after its arguments are validated (a failed call does not move the RNG).
- Random tensors come from `runtime.engine.rng` (vectorised SplitMix64, the same bits as
  `spec.rng` on every backend); object dtypes use `spec.rng` directly.
- `fresh_seed` is the only entropy source: 64 bits from the operating system.
- `RngState` (TorchLean's name) and `Rng` are one class.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from spec import rng as srng
from spec.errors import DomainError
from spec.shape import as_shape, size
from spec.tensor import Tensor

from ..backends.base import DTYPE_DOMAIN, OBJECT_DTYPES, from_spec
from ..engine.context import KernelContext
from ..engine.rng import keep_mask, uniform01

__all__ = ["RandomStreams", "Rng", "RngState"]


@dataclass
class Rng:
    """A SplitMix64 stream: each draw uses key_of(seed, counter) and advances the counter."""

    seed: int
    counter: int = 0

    def next_key(self) -> int:
        k = srng.key_of(self.seed, self.counter)
        self.counter += 1
        return k


RngState = Rng
"""TorchLean's name for the RNG state (seed and counter): the same class as `Rng`."""


class RandomStreams:
    """A session's random streams: its own `rng` and the values of random tensors."""

    def __init__(self, seed: int, dtype: str, ctx: KernelContext) -> None:
        self.rng = Rng(int(seed))
        self._dtype = dtype
        self._ctx = ctx

    def init_rng(self, seed: int) -> Rng:
        return Rng(int(seed))

    def fresh_seed(self) -> int:
        """The only entropy source: 64 bits from the operating system."""
        return int.from_bytes(os.urandom(8), "little")

    def split_rng(self, rng: Rng) -> tuple[Rng, Rng]:
        a, b = srng.split(rng.next_key())
        return Rng(a), Rng(b)

    def _key(self, rng: Rng | None) -> int:
        return (rng or self.rng).next_key()

    def probability(self, p: Any, what: str) -> Fraction:
        """p as an exact rational in [0, 1] (a float is its exact binary64 value)."""
        try:
            q = Fraction(p)
        except (TypeError, ValueError, OverflowError):
            raise DomainError(f"{what}: p must be a number in [0, 1], got {p!r}") from None
        if not 0 <= q <= 1:
            raise DomainError(f"{what}: p must be in [0, 1], got {p!r}")
        return q

    def uniform(self, shape: Sequence[int], rng: Rng | None = None) -> Any:
        """u_i = spec.rng.uniform(D, key, i) in row-major order, one RNG advance (after
        the shape is validated: a failed call does not move the RNG)."""
        shape = as_shape(shape, "rand_uniform")
        D = DTYPE_DOMAIN[self._dtype]
        key = self._key(rng)
        n = size(shape)
        if self._dtype in OBJECT_DTYPES:
            t = Tensor(tuple(shape), tuple(srng.uniform(D, key, i) for i in range(n)))
            return from_spec(t, self._dtype)
        u = uniform01(self._ctx.backend, key, n, self._dtype)
        return self._ctx.xp.reshape(u, tuple(shape))

    def mask(self, shape: Sequence[int], p: float | Fraction, rng: Rng | None = None) -> Any:
        """1 where kept (u >= p), 0 where dropped (shape and p are validated before the RNG
        advances)."""
        shape = as_shape(shape, "bernoulli_mask")
        q = self.probability(p, "bernoulli_mask")
        key = self._key(rng)
        n = size(shape)
        if self._dtype in OBJECT_DTYPES:
            D = DTYPE_DOMAIN[self._dtype]
            t = Tensor(
                tuple(shape), tuple(D.one() if srng.mask(key, i, q) else D.zero() for i in range(n))
            )
            return from_spec(t, self._dtype)
        xp = self._ctx.xp
        keep = xp.reshape(keep_mask(self._ctx.backend, key, n, q), tuple(shape))
        return xp.where(keep, self._ctx.const(1), self._ctx.const(0))

    def scalar(self, q: Fraction) -> Any:
        """The rational q as a 0-d array of the dtype (rounded once)."""
        return from_spec(Tensor((), (DTYPE_DOMAIN[self._dtype].from_rational(q),)), self._dtype)
