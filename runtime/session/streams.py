"""Random streams: SplitMix64 keys, uniform tensors, Bernoulli masks and dropout.

Invariants:
- A session owns its RNG counter (`Session.rng`); an explicit `Rng` stream advances only
  itself. Each draw uses `key_of(seed, counter)` and advances the counter once, after its
  arguments are validated (a failed call does not move the RNG).
- Random tensors come from `runtime.engine.rng` (vectorised SplitMix64, the same bits as
  `spec.rng` on every backend); object dtypes use `spec.rng` directly.
- `fresh_seed` is the only entropy source: 64 bits from the operating system.
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
from ..engine.rng import keep_mask, uniform01
from .handles import TensorRef
from .state import SessionState

__all__ = ["RandomStreams", "Rng"]


@dataclass
class Rng:
    """A SplitMix64 stream: each draw uses key_of(seed, counter) and advances the counter."""

    seed: int
    counter: int = 0

    def next_key(self) -> int:
        k = srng.key_of(self.seed, self.counter)
        self.counter += 1
        return k


class RandomStreams(SessionState):
    """The session part that draws random tensors."""

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

    def _probability(self, p: Any, what: str) -> Fraction:
        """p as an exact rational in [0, 1] (a float is its exact binary64 value)."""
        try:
            q = Fraction(p)
        except (TypeError, ValueError, OverflowError):
            raise DomainError(f"{what}: p must be a number in [0, 1], got {p!r}") from None
        if not 0 <= q <= 1:
            raise DomainError(f"{what}: p must be in [0, 1], got {p!r}")
        return q

    def rand_uniform(self, shape: Sequence[int], rng: Rng | None = None) -> TensorRef:
        """u_i = spec.rng.uniform(D, key, i) in row-major order, one RNG advance (after
        the shape is validated: a failed call does not move the RNG)."""
        shape = as_shape(shape, "rand_uniform")
        D = DTYPE_DOMAIN[self.dtype]
        key = self._key(rng)
        n = size(shape)
        if self.dtype in OBJECT_DTYPES:
            t = Tensor(tuple(shape), tuple(srng.uniform(D, key, i) for i in range(n)))
            return self.const(from_spec(t, self.dtype))
        u = uniform01(self.backend, key, n, self.dtype)
        return self.const(self.ctx.xp.reshape(u, tuple(shape)))

    def bernoulli_mask(
        self, shape: Sequence[int], p: float | Fraction, rng: Rng | None = None
    ) -> TensorRef:
        """1 where kept (u >= p), 0 where dropped, as a frozen constant (shape and p are
        validated before the RNG advances)."""
        shape = as_shape(shape, "bernoulli_mask")
        q = self._probability(p, "bernoulli_mask")
        key = self._key(rng)
        n = size(shape)
        if self.dtype in OBJECT_DTYPES:
            D = DTYPE_DOMAIN[self.dtype]
            t = Tensor(
                tuple(shape), tuple(D.one() if srng.mask(key, i, q) else D.zero() for i in range(n))
            )
            return self.const(from_spec(t, self.dtype))
        xp = self.ctx.xp
        keep = xp.reshape(keep_mask(self.backend, key, n, q), tuple(shape))
        return self.const(xp.where(keep, self.ctx.const(1), self.ctx.const(0)))

    def dropout(
        self, rng: Rng | None, x: TensorRef, p: float | Fraction, train: bool = True
    ) -> TensorRef:
        """p outside [0, 1] raises; not training or p = 0: x itself; p = 1: x scaled by 0;
        else div(mul(x, mask), 1 − p) with one RNG advance."""
        self._check(x, "dropout")
        q = self._probability(p, "dropout")
        if not train or q == 0:
            return x
        if q == 1:
            return self.op("scale", x, c=0)
        m = self.bernoulli_mask(x.shape, q, rng)
        return self.op("div", self.op("mul", x, m), self.const(self._scalar(1 - q)))

    def _scalar(self, q: Fraction) -> Any:
        return from_spec(Tensor((), (DTYPE_DOMAIN[self.dtype].from_rational(q),)), self.dtype)
