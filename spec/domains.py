"""Scalar domains: exact rationals, bit-exact IEEE emulations (MPFR via gmpy2), symbolic.

Invariants:
- Every IEEE primitive (+ - * / sqrt pow, every math function of `spec.mathfns` and every
  conversion) is computed exactly by MPFR and rounded **once** to nearest-even in the
  target format, with gradual underflow (subnormals), overflow to +-inf, and IEEE signed
  zeros. Transcendentals are therefore correctly rounded. pow and the math functions are
  not abstract: a domain that lacks them raises `DomainError` naming the function.
- The math functions (exp, log, tanh, sin, cos, erf, log1p, expm1 and any record added
  later) are methods derived from their `MathFn` record by `add_math_function`: MPFR's
  function of the record's `mpfr` name in the IEEE domains, its `sympy` spelling in
  `SYMBOLIC`, its `exact` points in `RATIONAL` (elsewhere `DomainError`), and a refusal
  naming the function in any other `Domain` that does not define it itself.
- pow(a, b) follows C99 Annex F / IEEE 754 pow (MPFR's mpfr_pow): pow(x, ±0) = 1 and
  pow(1, y) = 1 even for NaN, a finite negative base to a finite non-integer is NaN,
  pow(±0, y < 0) is ±inf (the sign kept for odd integers). `RATIONAL` is exact for integer
  exponents (0**0 = 1; 0 to a negative power raises) and for exact roots.
- NaN policy: NaN is one class. Any operation with a NaN operand, and every invalid
  operation (0/0, inf-inf, 0*inf, sqrt(x<0), log(x<0)), yields NaN; its bit pattern is the
  canonical quiet NaN of the format (sign 0, top mantissa bit set). `same(a, b)` treats all
  NaNs as equal and distinguishes +0 from -0.
- Comparisons are IEEE comparisons: false whenever a NaN is involved; -0 == +0.
- `RATIONAL` is exact: division by zero, irrational square roots and transcendental
  functions raise `DomainError`.
- `SYMBOLIC` builds sympy expressions; a comparison sympy cannot decide raises
  `DomainError`.
Domain values are plain Python objects (`Fraction`, `gmpy2.mpfr`, sympy `Expr`); a domain is
stateless and shared freely.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import gmpy2
import sympy

from .errors import DomainError
from .mathfns import BUILTIN, MATH_FNS, MathFn

__all__ = [
    "BFLOAT16",
    "BINARY32",
    "DOMAINS",
    "FLOAT16",
    "FLOAT64",
    "RATIONAL",
    "SYMBOLIC",
    "Domain",
    "IEEEDomain",
    "RationalDomain",
    "SymbolicDomain",
    "add_math_function",
    "domain_by_name",
    "round_rational_to_format",
]


class Domain(ABC):
    """A scalar domain: the arithmetic that `spec` evaluates every op in."""

    name: str
    exact: bool = False

    @abstractmethod
    def zero(self) -> Any: ...
    @abstractmethod
    def one(self) -> Any: ...
    @abstractmethod
    def add(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def sub(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def mul(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def div(self, a: Any, b: Any) -> Any: ...
    @abstractmethod
    def neg(self, a: Any) -> Any: ...
    @abstractmethod
    def sqrt(self, a: Any) -> Any: ...
    @abstractmethod
    def abs(self, a: Any) -> Any: ...
    @abstractmethod
    def lt(self, a: Any, b: Any) -> bool: ...
    @abstractmethod
    def eq(self, a: Any, b: Any) -> bool:
        """Numeric equality (IEEE: -0 == +0, NaN != NaN)."""

    @abstractmethod
    def is_nan(self, a: Any) -> bool: ...
    @abstractmethod
    def from_rational(self, q: Fraction | int) -> Any:
        """The exact rational rounded once into the domain."""

    @abstractmethod
    def from_float(self, f: float) -> Any:
        """The binary64 value `f` (exactly) rounded once into the domain."""

    @abstractmethod
    def same(self, a: Any, b: Any) -> bool:
        """Identity of values: bitwise for IEEE (all NaNs equal, +0 != -0)."""

    @abstractmethod
    def encode(self, a: Any) -> str:
        """A lossless JSON string for a value (IEEE: hex bit pattern; rationals: p/q)."""

    @abstractmethod
    def decode(self, s: str) -> Any: ...

    @abstractmethod
    def default_epsilon(self) -> Any:
        """The domain's default epsilon (clamps log arguments, e.g. in `rng.normal`)."""

    if TYPE_CHECKING:
        # the math functions of `spec.mathfns` (exp, log, ...) are installed per class by
        # `add_math_function`: `D.<name>(a)` for every record
        def __getattr__(self, name: str) -> Callable[..., Any]: ...

    # pow is not abstract: a domain without it (the fast profile's ball model) refuses it
    def pow(self, a: Any, b: Any) -> Any:
        raise DomainError(f"{self.name}: pow is not defined in this domain")

    def gt(self, a: Any, b: Any) -> bool:
        return self.lt(b, a)

    def le(self, a: Any, b: Any) -> bool:
        return self.lt(a, b) or self.eq(a, b)

    def ge(self, a: Any, b: Any) -> bool:
        return self.le(b, a)

    def is_zero(self, a: Any) -> bool:
        return self.eq(a, self.zero())

    def __repr__(self) -> str:
        return f"<domain {self.name}>"


# --------------------------------------------------------------------------- rationals


class RationalDomain(Domain):
    """Exact rationals (`fractions.Fraction`)."""

    name = "rational"
    exact = True

    def zero(self) -> Fraction:
        return Fraction(0)

    def one(self) -> Fraction:
        return Fraction(1)

    def add(self, a: Fraction, b: Fraction) -> Fraction:
        return a + b

    def sub(self, a: Fraction, b: Fraction) -> Fraction:
        return a - b

    def mul(self, a: Fraction, b: Fraction) -> Fraction:
        return a * b

    def div(self, a: Fraction, b: Fraction) -> Fraction:
        if b == 0:
            raise DomainError(f"rational: division by zero ({a} / 0)")
        return a / b

    def neg(self, a: Fraction) -> Fraction:
        return -a

    def abs(self, a: Fraction) -> Fraction:
        return abs(a)

    def sqrt(self, a: Fraction) -> Fraction:
        if a < 0:
            raise DomainError(f"rational: sqrt of a negative number ({a})")
        n, d = math.isqrt(a.numerator), math.isqrt(a.denominator)
        if n * n != a.numerator or d * d != a.denominator:
            raise DomainError(f"rational: sqrt({a}) is irrational")
        return Fraction(n, d)

    def pow(self, a: Fraction, b: Fraction) -> Fraction:
        """a**b exactly: integer b (0**0 = 1), or an exact root of a >= 0."""
        if b.denominator == 1:
            if a == 0 and b < 0:
                raise DomainError(f"rational: pow({a}, {b}) divides by zero")
            return a ** int(b)
        if a == 0 and b > 0:
            return Fraction(0)
        if a > 0:
            d = b.denominator
            n, ok_n = gmpy2.iroot(gmpy2.mpz(a.numerator), d)
            m, ok_m = gmpy2.iroot(gmpy2.mpz(a.denominator), d)
            if ok_n and ok_m:
                return Fraction(int(n), int(m)) ** b.numerator
        raise DomainError(f"rational: pow({a}, {b}) is not exact; use an IEEE or symbolic domain")

    def lt(self, a: Fraction, b: Fraction) -> bool:
        return a < b

    def eq(self, a: Fraction, b: Fraction) -> bool:
        return a == b

    def is_nan(self, a: Fraction) -> bool:
        return False

    def from_rational(self, q: Fraction | int) -> Fraction:
        return Fraction(q)

    def from_float(self, f: float) -> Fraction:
        if not math.isfinite(f):
            raise DomainError(f"rational: cannot represent {f!r}")
        return Fraction(f)

    def same(self, a: Fraction, b: Fraction) -> bool:
        return bool(a == b)

    def encode(self, a: Fraction) -> str:
        return f"{a.numerator}/{a.denominator}"

    def decode(self, s: str) -> Fraction:
        return Fraction(s)

    def default_epsilon(self) -> Fraction:
        return Fraction(1, 2**52)


# --------------------------------------------------------------------------- IEEE formats


def round_rational_to_format(q: Fraction, precision: int, emin: int, emax: int) -> Fraction | float:
    """Round an exact rational to nearest-even in a binary format, in integer arithmetic.

    `emin`/`emax` use MPFR's convention (x = m * 2**e with 0.5 <= m < 1). Returns the exact
    rounded value as a Fraction, or +-inf as a float on overflow. Independent of MPFR: the
    test-suite uses it as an oracle for conversions.
    """
    if q == 0:
        return Fraction(0)
    sign = -1 if q < 0 else 1
    a = abs(q)
    # e such that 2**(e-1) <= a < 2**e
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e <= a:
        e += 1
    elif Fraction(2) ** (e - 1) > a:
        e -= 1
    # quantum: ulp = 2**(e - precision), but never below the subnormal quantum 2**(emin-1)
    q_exp = max(e - precision, emin - 1)
    scaled = a / (Fraction(2) ** q_exp)
    n = scaled.numerator // scaled.denominator
    rem = scaled - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1):
        n += 1
    result = Fraction(n) * Fraction(2) ** q_exp
    if result >= Fraction(2) ** emax:
        return sign * math.inf
    return sign * result


class IEEEDomain(Domain):
    """A binary floating-point format emulated exactly with MPFR (values are `gmpy2.mpfr`).

    `precision` counts the implicit bit; `ebits` is the exponent field width of the bit
    encoding. `emin`/`emax` follow MPFR's convention.
    """

    def __init__(self, name: str, precision: int, ebits: int) -> None:
        self.name = name
        self.precision = precision
        self.ebits = ebits
        self.mbits = precision - 1
        self.bias = 2 ** (ebits - 1) - 1
        self.emax = 2 ** (ebits - 1)
        self.emin = (1 - self.bias) - self.mbits + 1
        self.width = 1 + ebits + self.mbits
        self.ctx = gmpy2.context(
            precision=precision,
            emin=self.emin,
            emax=self.emax,
            subnormalize=True,
            round=gmpy2.RoundToNearest,
        )
        self._zero = self._round(0)
        self._one = self._round(1)
        self._nan = gmpy2.nan()
        self.canonical_nan_bits = ((2**ebits - 1) << self.mbits) | (1 << (self.mbits - 1))

    def round_value(self, x: Any) -> gmpy2.mpfr:
        """`x` (an MPFR value, an int, a Fraction-like mpq) rounded once into this format;
        a value already in the format (±0, ±inf, NaN included) is kept exactly."""
        with gmpy2.context(self.ctx):
            return gmpy2.mpfr(x)

    _round = round_value

    # -- arithmetic: each call is one MPFR operation rounded once in the format's context
    def zero(self) -> gmpy2.mpfr:
        return self._zero

    def one(self) -> gmpy2.mpfr:
        return self._one

    def add(self, a: Any, b: Any) -> Any:
        return self.ctx.add(a, b)

    def sub(self, a: Any, b: Any) -> Any:
        return self.ctx.sub(a, b)

    def mul(self, a: Any, b: Any) -> Any:
        return self.ctx.mul(a, b)

    def div(self, a: Any, b: Any) -> Any:
        return self.ctx.div(a, b)

    def neg(self, a: Any) -> Any:
        return self.ctx.minus(a)

    def abs(self, a: Any) -> Any:
        return self.ctx.abs(a)

    def sqrt(self, a: Any) -> Any:
        return self.ctx.sqrt(a)

    def pow(self, a: Any, b: Any) -> Any:
        return self.ctx.pow(a, b)

    def lt(self, a: Any, b: Any) -> bool:
        return bool(a < b)

    def eq(self, a: Any, b: Any) -> bool:
        return bool(a == b)

    def is_nan(self, a: Any) -> bool:
        return bool(gmpy2.is_nan(a))

    def from_rational(self, q: Fraction | int) -> gmpy2.mpfr:
        q = Fraction(q)
        return self._round(gmpy2.mpq(q.numerator, q.denominator))

    def from_float(self, f: float) -> gmpy2.mpfr:
        if math.isnan(f):
            return self._nan
        # mpfr(f, 53) is exact for every binary64 (subnormals included); then round once.
        with gmpy2.context(gmpy2.ieee(128)):
            exact = gmpy2.mpfr(f, 53)
        return self._round(exact)

    def to_rational(self, a: Any) -> Fraction:
        """The exact value of a finite element."""
        if not gmpy2.is_finite(a):
            raise DomainError(f"{self.name}: {a} has no rational value")
        n, d = a.as_integer_ratio()
        return Fraction(int(n), int(d))

    # -- bit patterns
    def to_bits(self, a: Any) -> int:
        if gmpy2.is_nan(a):
            return self.canonical_nan_bits
        sign = 1 if gmpy2.is_signed(a) else 0
        top = sign << (self.width - 1)
        if gmpy2.is_infinite(a):
            return top | ((2**self.ebits - 1) << self.mbits)
        if gmpy2.is_zero(a):
            return top
        q = abs(self.to_rational(a))
        m, e = q.numerator, q.denominator  # value = m / e with e a power of two
        exp2 = m.bit_length() - e.bit_length()  # floor(log2(q)) since e is a power of 2
        min_normal_exp = 1 - self.bias
        if exp2 >= min_normal_exp:
            frac = q / Fraction(2) ** exp2 - 1
            mant = frac * 2**self.mbits
            return top | ((exp2 + self.bias) << self.mbits) | int(mant)
        mant = q / Fraction(2) ** (min_normal_exp - self.mbits)
        return top | int(mant)

    def from_bits(self, bits: int) -> gmpy2.mpfr:
        if not 0 <= bits < 2**self.width:
            raise DomainError(f"{self.name}: bit pattern {bits:#x} out of range")
        sign = -1 if bits >> (self.width - 1) else 1
        e = (bits >> self.mbits) & (2**self.ebits - 1)
        mant = bits & (2**self.mbits - 1)
        if e == 2**self.ebits - 1:
            if mant:
                return self._nan
            return self._round(sign * gmpy2.inf())
        if e == 0:
            value = Fraction(mant, 2 ** (self.bias - 1 + self.mbits))
        else:
            value = Fraction(2**self.mbits + mant, 2**self.mbits) * Fraction(2) ** (e - self.bias)
        if value == 0:
            return self._round(gmpy2.mpfr("-0") if sign < 0 else 0)
        return self.from_rational(sign * value)

    def same(self, a: Any, b: Any) -> bool:
        return self.to_bits(a) == self.to_bits(b)

    def encode(self, a: Any) -> str:
        return f"0x{self.to_bits(a):0{self.width // 4}x}"

    def decode(self, s: str) -> gmpy2.mpfr:
        return self.from_bits(int(s, 16))

    def default_epsilon(self) -> gmpy2.mpfr:
        """Machine epsilon 2**-(precision-1)."""
        return self.from_rational(Fraction(1, 2 ** (self.precision - 1)))


# --------------------------------------------------------------------------- symbolic


class SymbolicDomain(Domain):
    """sympy expressions (used by `proofs/`)."""

    name = "symbolic"
    exact = True

    def zero(self) -> sympy.Expr:
        return sympy.Integer(0)

    def one(self) -> sympy.Expr:
        return sympy.Integer(1)

    def add(self, a: Any, b: Any) -> Any:
        return a + b

    def sub(self, a: Any, b: Any) -> Any:
        return a - b

    def mul(self, a: Any, b: Any) -> Any:
        return a * b

    def div(self, a: Any, b: Any) -> Any:
        if b == 0:
            raise DomainError("symbolic: division by zero")
        return a / b

    def neg(self, a: Any) -> Any:
        return -a

    def abs(self, a: Any) -> Any:
        return sympy.Abs(a)

    def sqrt(self, a: Any) -> Any:
        return sympy.sqrt(a)

    def pow(self, a: Any, b: Any) -> Any:
        return sympy.Pow(a, b)

    def _decide(self, rel: Any, text: str) -> bool:
        if rel is sympy.true or rel is True:
            return True
        if rel is sympy.false or rel is False:
            return False
        raise DomainError(f"symbolic: cannot decide {text}; add assumptions to the symbols")

    def lt(self, a: Any, b: Any) -> bool:
        return self._decide(sympy.Lt(a, b), f"{a} < {b}")

    def eq(self, a: Any, b: Any) -> bool:
        d = sympy.simplify(a - b)
        if d == 0:
            return True
        if d.is_nonzero:
            return False
        raise DomainError(f"symbolic: cannot decide {a} == {b}")

    def is_nan(self, a: Any) -> bool:
        return a is sympy.nan

    def from_rational(self, q: Fraction | int) -> Any:
        q = Fraction(q)
        return sympy.Rational(q.numerator, q.denominator)

    def from_float(self, f: float) -> Any:
        return self.from_rational(Fraction(f))

    def same(self, a: Any, b: Any) -> bool:
        return bool(sympy.simplify(sympy.expand(a - b)) == 0)

    def encode(self, a: Any) -> str:
        return sympy.srepr(a)

    def decode(self, s: str) -> Any:
        return sympy.sympify(s)

    def default_epsilon(self) -> Any:
        return sympy.Rational(1, 2**52)


RATIONAL = RationalDomain()
FLOAT64 = IEEEDomain("float64", 53, 11)
BINARY32 = IEEEDomain("binary32", 24, 8)
BFLOAT16 = IEEEDomain("bfloat16", 8, 8)
FLOAT16 = IEEEDomain("float16", 11, 5)
SYMBOLIC = SymbolicDomain()

DOMAINS: dict[str, Domain] = {
    d.name: d for d in (RATIONAL, FLOAT64, BINARY32, BFLOAT16, FLOAT16, SYMBOLIC)
}
_ALIASES = {"float32": "binary32", "binary64": "float64", "fraction": "rational"}


def domain_by_name(name: str) -> Domain:
    key = _ALIASES.get(name, name)
    try:
        return DOMAINS[key]
    except KeyError:
        raise DomainError(f"unknown domain {name!r}; known: {sorted(DOMAINS)}") from None


def _refused(name: str) -> Callable[[Domain, Any], Any]:
    def method(self: Domain, a: Any) -> Any:
        raise DomainError(f"{self.name}: {name} is not defined in this domain")

    return method


def _rational(fn: MathFn) -> Callable[[RationalDomain, Fraction], Fraction]:
    def method(self: RationalDomain, a: Fraction) -> Fraction:
        hit = fn.exact.get(a)
        if hit is None:
            raise DomainError(
                f"rational: {fn.name}({a}) is not exact; use an IEEE or symbolic domain"
            )
        return hit

    return method


def _ieee(fn: MathFn) -> Callable[[IEEEDomain, Any], Any]:
    def method(self: IEEEDomain, a: Any) -> Any:
        return getattr(self.ctx, fn.mpfr)(a)

    return method


def _symbolic(fn: MathFn) -> Callable[[SymbolicDomain, Any], Any]:
    def method(self: SymbolicDomain, a: Any) -> Any:
        return fn.sympy(a)

    return method


def add_math_function(fn: MathFn) -> MathFn:
    """Add a math-function record to `spec.mathfns.MATH_FNS` and derive its domain methods
    (`D.<name>(a)`); a name added twice, or one that is already a domain method, raises."""
    if fn.name in MATH_FNS:
        raise DomainError(f"math function {fn.name!r} added twice")
    if hasattr(Domain, fn.name):
        raise DomainError(f"math function {fn.name!r}: a Domain method of that name exists")
    MATH_FNS[fn.name] = fn
    setattr(Domain, fn.name, _refused(fn.name))
    setattr(RationalDomain, fn.name, _rational(fn))
    setattr(IEEEDomain, fn.name, _ieee(fn))
    setattr(SymbolicDomain, fn.name, _symbolic(fn))
    return fn


for _fn in BUILTIN:
    add_math_function(_fn)
