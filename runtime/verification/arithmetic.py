"""Outward-rounded interval arithmetic in MPFR (directed rounding), at two levels.

Invariants:
- An `Arith` holds one pair of MPFR contexts, `dn` rounding down and `up` rounding up;
  every operation returns (RD(lower end), RU(upper end)), so the result encloses every value
  of the operation on operands in the argument intervals (each operation here is monotone
  in each argument on the enclosed range, or takes min/max over the corner products).
- Level 1 (`domain` None): 160-bit contexts with the exponent range emin = LEVEL1_EMIN =
  -3000, emax = 3000 (finite magnitudes in [2^-3001, 2^3000)), so every p/q in a
  certificate stays short. Directed rounding stays outward at both ends: a magnitude below
  the range rounds to 0 or to the least positive number, on the outer side; a value above
  it rounds up to +inf and down to the largest finite number, so an overflowed bound is
  still an enclosure. Constants are enclosed.
- Level 2 (`domain` an IEEEDomain): the contexts of the target format itself (precision,
  emin, emax, subnormalize=True). RN(op(a, b)) lies in [RD(op(lo...)), RU(op(hi...))]
  because RN(z) is in [RD(z), RU(z)] and RD, RU are monotone. Constants are rounded to
  nearest once, exactly as the runtime casts them.
- NaN (inf - inf, 0 * inf) never passes silently: `mul`/`div` raise `VerificationError`.
- Negation uses a context method (`-x` would round into gmpy2's global 53-bit context).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import gmpy2
from gmpy2 import mpfr, mpq

from spec.domains import IEEEDomain

from .core import LEVEL1_EMIN, LEVEL1_PRECISION, Iv, VerificationError, show

__all__ = ["Arith", "cube", "fold", "square"]


class Arith:
    """Outward-rounded interval arithmetic in one pair of MPFR contexts. With `domain` (an
    IEEEDomain) the contexts are the format's (level 2) and constants are rounded to
    nearest once, as the runtime casts them; without it, 160-bit contexts (level 1) and
    constants are enclosed."""

    def __init__(self, domain: IEEEDomain | None) -> None:
        self.domain = domain
        if domain is None:
            # a bounded exponent range keeps every p/q in a certificate short; directed
            # rounding stays outward below 2^LEVEL1_EMIN (to 0 or the least positive number)
            kw: dict[str, Any] = {
                "precision": LEVEL1_PRECISION,
                "emin": LEVEL1_EMIN,
                "emax": -LEVEL1_EMIN,
            }
        else:
            kw = {
                "precision": domain.precision,
                "emin": domain.emin,
                "emax": domain.emax,
                "subnormalize": True,
            }
        self.dn = gmpy2.context(round=gmpy2.RoundDown, **kw)
        self.up = gmpy2.context(round=gmpy2.RoundUp, **kw)

    def cv(self, ctx: Any, q: Any) -> Any:
        """q converted to a number of `ctx` (one of `dn`, `up`), rounded the context's way."""
        with gmpy2.context(ctx):
            return gmpy2.mpfr(q)

    def enclose(self, q: Any) -> Iv:
        q = mpq(q)
        return self.cv(self.dn, q), self.cv(self.up, q)

    def const(self, q: Fraction | int) -> Iv:
        if self.domain is None:
            return self.enclose(q)
        v = mpfr(self.domain.from_rational(Fraction(q)))
        return v, v

    def add(self, a: Iv, b: Iv) -> Iv:
        return self.dn.add(a[0], b[0]), self.up.add(a[1], b[1])

    def neg(self, a: Iv) -> Iv:
        # exact; a context method, since `-x` would round into the global 53-bit context
        return self.dn.minus(a[1]), self.up.minus(a[0])

    def sub(self, a: Iv, b: Iv) -> Iv:
        return self.add(a, self.neg(b))

    def mul(self, a: Iv, b: Iv) -> Iv:
        los = [self.dn.mul(x, y) for x in a for y in b]
        his = [self.up.mul(x, y) for x in a for y in b]
        return _min(los), _max(his)

    def div(self, a: Iv, b: Iv) -> Iv:
        if not b[0] > 0:
            raise VerificationError(f"interval division: denominator {show(b)} is not > 0")
        los = [self.dn.div(x, y) for x in a for y in b]
        his = [self.up.div(x, y) for x in a for y in b]
        return _min(los), _max(his)

    def sqrt(self, a: Iv) -> Iv:
        if a[0] < 0:
            raise VerificationError(f"interval sqrt: argument {show(a)} is not >= 0")
        return self.dn.sqrt(a[0]), self.up.sqrt(a[1])

    def exp(self, a: Iv) -> Iv:
        return self.dn.exp(a[0]), self.up.exp(a[1])

    def tanh(self, a: Iv) -> Iv:
        return self.dn.tanh(a[0]), self.up.tanh(a[1])


def _min(xs: Sequence[Any]) -> Any:
    if any(gmpy2.is_nan(x) for x in xs):
        raise VerificationError("interval arithmetic produced NaN (an overflowed bound)")
    return min(xs)


def _max(xs: Sequence[Any]) -> Any:
    if any(gmpy2.is_nan(x) for x in xs):
        raise VerificationError("interval arithmetic produced NaN (an overflowed bound)")
    return max(xs)


def cube(A: Arith, x: Iv) -> Iv:
    """(x * x) * x of one value: x -> RN(RN(x*x)*x) is nondecreasing (RN is monotone and
    odd), so its endpoints bound it; this avoids the spurious 0 * inf corner of a product
    of intervals when x*x overflows."""
    a, b = x
    lo = A.dn.mul(A.dn.mul(a, a) if a >= 0 else A.up.mul(a, a), a)
    hi = A.up.mul(A.up.mul(b, b) if b >= 0 else A.dn.mul(b, b), b)
    return lo, hi


def square(A: Arith, d: Iv) -> Iv:
    """d * d of one value (not of two independent ones): never below 0."""
    if d[0] >= 0:
        return A.mul(d, d)
    if d[1] <= 0:
        return A.mul(A.neg(d), A.neg(d))
    m = max(A.dn.minus(d[0]), d[1])
    return mpfr(0), A.up.mul(m, m)


def fold(A: Arith, xs: list[Iv]) -> Iv:
    """The left fold x0 + x1 + ... (the ordered kernels' summation order)."""
    acc = xs[0]
    for x in xs[1:]:
        acc = A.add(acc, x)
    return acc
