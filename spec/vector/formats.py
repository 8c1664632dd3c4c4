"""The IEEE formats on whole NumPy arrays: one rounding per primitive, as the spec's MPFR domains.

Invariants:
- A value of a format is a NumPy array whose every element is a number of that format
  (storage: float64 for binary64, float32 for binary32, float64 for bfloat16 and float16).
  NaN is one class (its bits are not compared), signed zeros are kept.
- bfloat16, float16 (and binary32 in `EMULATED`): + − × ÷ sqrt are computed in binary64
  and rounded once to the format. The binary64 result is itself correctly rounded, so this
  is a double rounding, and it is innocuous because binary64 has 53 >= 2p + 2 bits for
  p = 24, 11, 8 (for + − × ÷ and sqrt; Figueroa 1995). The exponent range of binary64
  holds every exact product, quotient and sum of two such operands without overflow or
  underflow (|x| <= 2**277 and >= 2**-298 when nonzero), so the binary64 step loses nothing
  to gradual underflow either.
  Rounding to the format (`round_to`) is to nearest-even with the format's subnormal quantum
  and overflow to ±inf (IEEE 754: overflow when the result rounded with an unbounded
  exponent exceeds the largest finite number).
- binary32 (`FORMATS`): + − × ÷ sqrt are the hardware's binary32 operations, which IEEE
  754 defines as the exact result rounded once, so they equal the binary64-then-round
  evaluation above (the double rounding is innocuous); `EMULATED["binary32"]` computes the
  latter, and the tests check the two equal on random and special operands and graphs. The
  emulation costs two dtype conversions per operation (about 30x the operation itself on
  large arrays), which made a full-size check exceed its time budget.
- binary64: there is no wider hardware format, so the argument above does not apply. The
  spec uses no fused operation, and IEEE 754 requires each binary64 + − × ÷ sqrt to be
  correctly rounded once; NumPy's float64 ufuncs are these operations (gradual underflow is
  checked live by `spec.probe.check_float_environment`, called by `require_ieee`). No
  emulation is needed: the hardware operation is the exact method.
- Floating-point warnings (overflow, invalid, division by zero) are the IEEE results they
  announce: callers evaluate under `quiet()` (`np.errstate(all="ignore")`).
- Comparisons are IEEE (false with a NaN, −0 == +0); `same` is the spec's identity: all NaNs
  equal, +0 distinct from −0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from ..domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, Domain, IEEEDomain
from ..errors import DomainError
from ..probe import check_float_environment
from ..tensor import Tensor

__all__ = [
    "EMULATED",
    "FORMATS",
    "Format",
    "format_of",
    "quiet",
    "require_ieee",
    "round_to",
    "same_arrays",
]


def round_to(x: np.ndarray, precision: int, emin: int, emax: int) -> np.ndarray:
    """binary64 values rounded once to nearest-even in the format (MPFR's emin/emax
    convention, as `IEEEDomain`): quantum 2**max(e - p, emin - 1) with 2**(e-1) <= |x| <
    2**e, overflow to ±inf. Zeros keep their sign; NaN and ±inf pass through."""
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    q = np.maximum(e - precision, emin - 1)
    r = np.ldexp(np.rint(np.ldexp(x, -q)), q)
    return np.where(np.abs(r) >= np.ldexp(1.0, emax), np.copysign(np.inf, x), r)


def _float32_round(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32)


@dataclass(frozen=True)
class Format:
    """One IEEE format on arrays. `rnd` rounds binary64 values once into the format and
    returns an array of the storage dtype."""

    name: str
    domain: IEEEDomain
    storage: Any
    rnd: Callable[[np.ndarray], np.ndarray]
    native: bool = False

    # -- the five rounded primitives (binary64 evaluation, then one rounding)
    def add(self, a: Any, b: Any) -> np.ndarray:
        return self._op(np.add, a, b)

    def sub(self, a: Any, b: Any) -> np.ndarray:
        return self._op(np.subtract, a, b)

    def mul(self, a: Any, b: Any) -> np.ndarray:
        return self._op(np.multiply, a, b)

    def div(self, a: Any, b: Any) -> np.ndarray:
        return self._op(np.divide, a, b)

    def sqrt(self, a: Any) -> np.ndarray:
        if self.native:
            return np.sqrt(a, dtype=self.storage)
        return self.rnd(np.sqrt(a, dtype=np.float64))

    def neg(self, a: Any) -> np.ndarray:
        return np.negative(a).astype(self.storage, copy=False)

    def _op(self, f: Any, a: Any, b: Any) -> np.ndarray:
        if self.native:
            return f(a, b, dtype=self.storage)
        r = f(a, b, dtype=np.float64)
        return r if self.rnd is _identity else self.rnd(r)

    # -- constants and conversions
    def const(self, q: Fraction | int) -> float:
        """The exact rational rounded once into the format (by the spec domain)."""
        return float(self.domain.from_rational(q))

    def zeros(self, shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, dtype=self.storage)

    def array(self, t: Tensor) -> np.ndarray:
        """A spec tensor of this format as an array (exact)."""
        return (
            np.array([float(v) for v in t.data], dtype=np.float64)
            .reshape(t.shape)
            .astype(self.storage)
        )

    def tensor(self, a: np.ndarray) -> Tensor:
        """An array of this format as a spec tensor (exact)."""
        f = self.domain.from_float
        return Tensor(tuple(a.shape), tuple(f(float(v)) for v in np.asarray(a).ravel()))

    def cast(self, a: Any) -> np.ndarray:
        """An array of numbers already in the format, in the storage dtype (exact)."""
        return np.asarray(a).astype(self.storage, copy=False)


def _generic(D: IEEEDomain) -> Callable[[np.ndarray], np.ndarray]:
    def rnd(x: np.ndarray) -> np.ndarray:
        return round_to(np.asarray(x, dtype=np.float64), D.precision, D.emin, D.emax)

    return rnd


def _identity(x: np.ndarray) -> np.ndarray:
    return x


FORMATS: dict[str, Format] = {
    "float64": Format("float64", FLOAT64, np.float64, _identity),
    "binary32": Format("binary32", BINARY32, np.float32, _float32_round, native=True),
    "bfloat16": Format("bfloat16", BFLOAT16, np.float64, _generic(BFLOAT16)),
    "float16": Format("float16", FLOAT16, np.float64, _generic(FLOAT16)),
}
"""The formats by spec domain name."""

EMULATED: dict[str, Format] = {
    **FORMATS,
    "binary32": Format("binary32", BINARY32, np.float32, _float32_round),
}
"""The same formats with binary32 by binary64 evaluation and one rounding (the tests'
cross-check of the hardware binary32 operations)."""


def format_of(D: Domain) -> Format:
    """The array format of an IEEE spec domain (DomainError for any other domain)."""
    try:
        return FORMATS[D.name]
    except KeyError:
        raise DomainError(f"spec.vector: no array format for domain {D.name!r}") from None


def require_ieee() -> None:
    """The live gradual-underflow check the binary64 argument relies on."""
    check_float_environment()


def quiet() -> Any:
    """The NumPy error state of an evaluation: IEEE results, no warnings."""
    return np.errstate(all="ignore")


def same_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise identity of values: equal with equal signs, or both NaN."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    both_nan = np.isnan(a64) & np.isnan(b64)
    with np.errstate(all="ignore"):
        return both_nan | ((a64 == b64) & (np.signbit(a64) == np.signbit(b64)))
