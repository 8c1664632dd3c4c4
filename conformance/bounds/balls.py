"""Ball arithmetic: a running error bound of a spec rule, derived from its own operations.

`BallDomain(dtype, budget)` is a scalar domain (`spec.domains.Domain`) whose values bound
what the `fast` runtime can compute. Running a spec rule (a VJP, a JVP, a forward) over it
on exact inputs (the runtime's own values) gives, per output element, a *ball*: a center
(the rule's result, in the 256-bit `HP` arithmetic) and a radius that bounds the distance of
the runtime's result from it. The bound is derived mechanically from the rule's operation
sequence; no op has a hand-written backward bound.

The model of the `fast` runtime, per primitive (u = 2**-p the dtype's unit roundoff, η its
smallest subnormal; a, b balls (cₐ, rₐ), (c_b, r_b); M a bound on the operation's exact
result on the runtime's operands):

- `+ − × ÷ sqrt` are correctly rounded in the dtype: the result is within
  |op(â, b̂) − op(cₐ, c_b)| + u·M (+ η/2 for × ÷ sqrt, which can underflow) of the center;
  on exact operands (r = 0) it *is* RN(op(cₐ, c_b)) (radius 0), bit for bit up to the sign
  of a zero. Products: |âb̂ − cₐc_b| ≤ |cₐ|r_b + |c_b|rₐ + rₐr_b; quotients:
  (|cₐ|r_b + |c_b|rₐ)/(|c_b|(|c_b| − r_b)) when |c_b| > r_b (else unbounded);
  sqrt: rₐ/(√cₐ + √(cₐ − rₐ)) when cₐ ≥ rₐ (else unbounded).
- Sums are *order-free*: `add`/`sub` do not round at once but collect their addends into a
  pending `Sum`; when the sum is used, its radius is Σrᵢ + γ_{n−1}·Σ(|cᵢ| + rᵢ) for n
  addends (γ_k = k·u/(1 − k·u)): Higham's bound for *any* summation order (left fold,
  pairwise, blocked BLAS, a wider accumulator rounded once). Two exact addends give
  RN(a + b) exactly. A product entering a sum counts its own rounding error as radius
  (`fd`), since BLAS may fuse it (FMA) or accumulate products unrounded (bfloat16).
- `exp log tanh sin cos` (vendor libm) are within K ulp of the exact function of their
  operand, K the dtype's budget (`core.ULP_BUDGET`, the forward bounds' data); the
  operand's radius propagates through the derivative's bound on the ball: exp(c + r),
  1/(c − r) for log (c > r), 1 for tanh, sin and cos.
- `pow` (vendor pow, budget K of "pow"): within K ulp of the exact pow of its operands;
  radii propagate through the extremes of pow over the operands' box, taken at its
  corners (monotone in each operand where the base's ball excludes 0 and is positive, or
  the exponent is a certain integer); otherwise the value is wild. Certain operands give
  C99's special values exactly.
- Comparisons, `abs`, `neg`, and picks (relu, maximum, reduce_max, clamp) are exact; a
  comparison (or NaN test) the radii cannot decide raises `Undecided` instead of guessing.
  `all_branches` runs a rule once per path through such questions, answering each both
  ways (`BallDomain.fork`), so the runtime's branch is one of the paths and a value is
  checked against the union of the paths' balls (`contains_any`); a rule with more than
  64 paths is left undecided (the caller counts it).
- Overflow: where a result's bound M reaches the dtype's overflow threshold the runtime
  may give ±inf or NaN, so the value becomes *wild* (anything goes; counted, never
  compared); past it for sure, it is ±inf. ±inf and NaN centers are certain values (radius
  0) and follow IEEE rules; an operation whose special result depends on an uncertain
  operand (inf·b̂ with b's ball containing 0, x/b̂ with b's ball containing 0) is wild.
- Signs of zeros are not modelled (a BLAS may start its accumulator at +0): `contains`
  compares magnitudes, so a fast-profile check never fails on a zero's sign alone.

Radii are computed in `HP` (256 bits, round to nearest) and inflated by 2**-60 relative
plus 2**-200·(|c| + r) absolute when compared (`contains`): far above their own rounding.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, TypeVar

import gmpy2

from spec.domains import Domain, IEEEDomain
from spec.errors import DomainError, TorchLeanError

from .core import HP

__all__ = ["Ball", "BallDomain", "Sum", "Undecided", "all_branches", "contains", "contains_any"]

T = TypeVar("T")

_C = HP.ctx
_ZERO = HP.zero()
_ONE = HP.one()
_NAN = gmpy2.nan()
_PINF = HP.from_float(float("inf"))
_NINF = HP.from_float(float("-inf"))
_INFLATE = _C.add(_ONE, _C.div(_ONE, gmpy2.mpz(2) ** 60))
_SLACK = _C.div(_ONE, gmpy2.mpz(2) ** 200)


class Undecided(TorchLeanError):
    """A comparison (or NaN test) whose outcome the balls' radii leave open."""


class Ball:
    """A settled value: the runtime's result lies within `r` of `c`.

    `c` is ±inf or NaN only as a certain value (then `r` is 0). `wild`: unconstrained.
    `fd`: for a product of exact operands (radius 0, `c` = RN(exact product)), exact
    product − c: a fused multiply-add (or an unrounded accumulation) that sums this value
    uses the exact product, so a `Sum` takes the exact product ± |fd| (0 otherwise)."""

    __slots__ = ("c", "fd", "r", "wild")

    def __init__(self, c: Any, r: Any = _ZERO, wild: bool = False, fd: Any = _ZERO) -> None:
        self.c, self.r, self.wild, self.fd = c, r, wild, fd

    def __repr__(self) -> str:
        return "Ball(wild)" if self.wild else f"Ball({float(self.c)!r} ± {float(self.r):.3g})"


WILD = Ball(_NAN, _ZERO, True)
NAN = Ball(_NAN)
PINF = Ball(_PINF)
NINF = Ball(_NINF)


class Sum:
    """A pending sum of n >= 2 addends (see the module docstring); settled when used."""

    __slots__ = ("c", "mag", "n", "nan", "ninf", "pinf", "rin", "settled", "wild")

    def __init__(self) -> None:
        self.c, self.rin, self.mag, self.n = _ZERO, _ZERO, _ZERO, 0
        self.pinf = self.ninf = self.nan = self.wild = False
        self.settled: Ball | None = None

    def take(self, x: Ball | Sum, negate: bool) -> None:
        if isinstance(x, Sum):
            self.c = _C.sub(self.c, x.c) if negate else _C.add(self.c, x.c)
            self.rin = _C.add(self.rin, x.rin)
            self.mag = _C.add(self.mag, x.mag)
            self.n += x.n
            self.pinf |= x.ninf if negate else x.pinf
            self.ninf |= x.pinf if negate else x.ninf
            self.nan |= x.nan
            self.wild |= x.wild
            return
        if x.wild:
            self.wild = True
        elif gmpy2.is_nan(x.c):
            self.nan = True
        elif gmpy2.is_infinite(x.c):
            if (x.c > 0) != negate:
                self.pinf = True
            else:
                self.ninf = True
        else:
            c = _C.add(x.c, x.fd)  # the exact product of a fusable term (fd = 0 otherwise)
            self.c = _C.sub(self.c, c) if negate else _C.add(self.c, c)
            r = _C.add(x.r, abs(x.fd))
            self.rin = _C.add(self.rin, r)
            self.mag = _C.add(self.mag, _C.add(abs(c), r))
            self.n += 1

    def __repr__(self) -> str:
        return f"Sum(n={self.n}, c={float(self.c)!r})"


Value = Ball | Sum


class BallDomain(Domain):
    """Balls for the `fast` runtime in `dtype` (an IEEE domain), libm budget `budget`
    (function name -> K ulp). Stateless apart from its constants; one per (dtype, budget)."""

    exact = False

    def __init__(self, dtype: str, fmt_domain: IEEEDomain, budget: dict[str, float]) -> None:
        self.name = f"ball:{dtype}"
        self.dtype = dtype
        self.F = fmt_domain
        p, emin, emax = fmt_domain.precision, fmt_domain.emin, fmt_domain.emax
        self.u = _C.div(_ONE, gmpy2.mpz(2) ** p)
        self.eta = _C.div(_ONE, gmpy2.mpz(2) ** (1 - emin))
        self.half_eta = _C.div(self.eta, 2)
        top = gmpy2.mpz(2) ** emax
        # RN(z) overflows iff |z| >= max finite + half an ulp of it
        self.threshold = _C.sub(top, _C.div(top, gmpy2.mpz(2) ** (p + 1)))
        self.budget = {k: _C.mul(gmpy2.mpfr(v), 1) for k, v in budget.items()}
        self._zero = Ball(_ZERO)
        self._one = Ball(_ONE)
        self._script: list[bool] = []  # see `fork`
        self._pos = 0

    # ------------------------------------------------------------------ construction
    def exact_ball(self, v: Any) -> Ball:
        """A value the runtime holds exactly (a dtype value as MPFR): radius 0."""
        return Ball(_C.plus(v))

    def settle(self, x: Value) -> Ball:
        if isinstance(x, Ball):
            return x
        if x.settled is None:
            x.settled = self._settle_sum(x)
        return x.settled

    def _gamma(self, k: int) -> Any:
        ku = _C.mul(self.u, k)
        return _C.div(ku, _C.sub(_ONE, ku)) if ku < 1 else _PINF

    def _settle_sum(self, s: Sum) -> Ball:
        if s.nan or (s.pinf and s.ninf):
            return NAN
        if s.wild:
            return WILD
        g = self._gamma(max(s.n - 1, 0))
        if _C.mul(s.mag, _C.add(_ONE, g)) >= self.threshold:
            return WILD  # a partial sum may overflow
        if s.pinf:
            return PINF
        if s.ninf:
            return NINF
        if s.n <= 1:
            return Ball(s.c, s.rin)
        if s.n == 2:
            if s.rin == 0:
                return Ball(self.F.ctx.plus(s.c))  # one correctly rounded add, exact operands
            return Ball(s.c, _C.add(s.rin, _C.mul(self.u, _C.add(abs(s.c), s.rin))))
        return Ball(s.c, _C.add(s.rin, _C.mul(g, s.mag)))

    def _rounded(self, c: Any, ein: Any, M: Any, underflow: bool, product: bool = False) -> Ball:
        """The ball of a correctly rounded result: `c` the exact result on the centers,
        `ein` a bound on |op(runtime operands) − c|, `M` a bound on |op(runtime operands)|."""
        if gmpy2.is_nan(c):
            return NAN if ein == 0 else WILD
        if M >= self.threshold or gmpy2.is_infinite(c):
            if gmpy2.is_infinite(c) or _C.sub(abs(c), ein) >= self.threshold:
                return PINF if c > 0 else NINF
            return WILD
        if ein == 0:
            cr = self.F.ctx.plus(c)  # the runtime computes exactly RN(c)
            return Ball(cr, _ZERO, False, _C.sub(c, cr) if product else _ZERO)
        r = _C.add(ein, _C.mul(self.u, M))
        if underflow:
            r = _C.add(r, self.half_eta)
        return Ball(c, r)

    # ------------------------------------------------------------------ Domain interface
    def zero(self) -> Ball:
        return self._zero

    def one(self) -> Ball:
        return self._one

    def from_rational(self, q: Fraction | int) -> Ball:
        return Ball(_C.plus(self.F.from_rational(q)))

    def from_float(self, f: float) -> Ball:
        return Ball(_C.plus(self.F.from_float(f)))

    def default_epsilon(self) -> Ball:
        return Ball(_C.plus(self.F.default_epsilon()))

    def add(self, a: Value, b: Value) -> Sum:
        s = Sum()
        s.take(a, False)
        s.take(b, False)
        return s

    def sub(self, a: Value, b: Value) -> Sum:
        s = Sum()
        s.take(a, False)
        s.take(b, True)
        return s

    def neg(self, a: Value) -> Value:
        if isinstance(a, Sum):
            s = Sum()
            s.take(a, True)
            return s
        if a.wild:
            return a
        return Ball(_C.minus(a.c), a.r, False, _C.minus(a.fd))

    def abs(self, a: Value) -> Ball:
        a = self.settle(a)
        return a if a.wild else Ball(abs(a.c), a.r)

    def _special(self, a: Ball, b: Ball) -> Ball | None:
        """NaN and wild operands (None: both finite or certain infinities follow)."""
        if (not a.wild and gmpy2.is_nan(a.c)) or (not b.wild and gmpy2.is_nan(b.c)):
            return NAN
        if a.wild or b.wild:
            return WILD
        return None

    def mul(self, a: Value, b: Value) -> Ball:
        a, b = self.settle(a), self.settle(b)
        sp = self._special(a, b)
        if sp is not None:
            return sp
        ia, ib = gmpy2.is_infinite(a.c), gmpy2.is_infinite(b.c)
        if ia or ib:
            if (ia or a.r == 0) and (ib or b.r == 0):
                return Ball(_C.mul(a.c, b.c))  # IEEE on certain values (inf·0 = NaN)
            o = b if ia else a
            return Ball(_C.mul(a.c, b.c)) if abs(o.c) > o.r else WILD
        ca, cb = abs(a.c), abs(b.c)
        ein = _C.add(_C.add(_C.mul(ca, b.r), _C.mul(cb, a.r)), _C.mul(a.r, b.r))
        c = _C.mul(a.c, b.c)
        return self._rounded(c, ein, _C.add(abs(c), ein), True, product=True)

    def div(self, a: Value, b: Value) -> Ball:
        a, b = self.settle(a), self.settle(b)
        sp = self._special(a, b)
        if sp is not None:
            return sp
        ia, ib = gmpy2.is_infinite(a.c), gmpy2.is_infinite(b.c)
        if ib:
            if ia:
                return NAN
            return Ball(_ZERO, self.half_eta)  # a zero whose sign is not modelled
        if b.r >= abs(b.c):  # the divisor's ball holds 0
            if b.r == 0 and (ia or a.r == 0) and a.c == 0:
                return NAN  # 0/0
            return WILD  # ±inf of an uncertain sign, or an unbounded quotient
        if ia:
            return Ball(_C.div(a.c, b.c))
        cb = abs(b.c)
        d = _C.sub(cb, b.r)
        if d <= _C.mul(cb, _SLACK):
            return WILD
        c = _C.div(a.c, b.c)
        if a.r == 0 and b.r == 0:
            return self._rounded(c, _ZERO, abs(c), True)
        num = _C.add(_C.mul(abs(a.c), b.r), _C.mul(cb, a.r))
        ein = _C.div(num, _C.mul(cb, d))
        return self._rounded(c, ein, _C.div(_C.add(abs(a.c), a.r), d), True)

    def sqrt(self, a: Value) -> Ball:
        a = self.settle(a)
        if a.wild:
            return a
        if not gmpy2.is_finite(a.c) or a.r == 0:
            c = _C.sqrt(a.c)
            return Ball(c) if not gmpy2.is_finite(c) else self._rounded(c, _ZERO, abs(c), True)
        lo = _C.sub(a.c, a.r)
        if lo < 0:
            return WILD  # the operand may be negative: NaN
        c = _C.sqrt(a.c)
        ein = _C.div(a.r, _C.add(c, _C.sqrt(lo)))
        return self._rounded(c, ein, _C.sqrt(_C.add(a.c, a.r)), True)

    def _libm(self, fn: str, a: Value) -> Ball:
        """exp/log/tanh/sin/cos: the vendor function, within K ulp of the exact one."""
        a = self.settle(a)
        if a.wild:
            return a
        f = getattr(_C, fn)
        if not gmpy2.is_finite(a.c):
            return Ball(f(a.c))  # exp(±inf), tanh(±inf), log(+inf): exact; else NaN
        K = self.budget.get(fn, _ZERO)
        c = f(a.c)
        if fn == "exp":
            hi = _C.exp(_C.add(a.c, a.r))
            ein = _C.sub(hi, c)
            M = hi
        elif fn == "log":
            lo = _C.sub(a.c, a.r)
            if a.r == 0:
                if a.c <= 0:
                    return Ball(c)  # log(±0) = -inf, log(x < 0) = NaN
                ein = _ZERO
            elif lo <= 0:
                return WILD
            else:
                ein = _C.div(a.r, lo)
            M = _C.add(abs(c), ein)
        else:  # tanh, sin, cos: Lipschitz 1, |f| <= 1
            ein = min(a.r, _C.mul(_ONE, 2))
            M = _C.add(abs(c), ein)
        # K ulp of the result: ulp(y) <= 2u|y| for normal y, η for subnormal y
        err = _C.add(ein, _C.mul(K, _C.add(_C.mul(_C.mul(self.u, 2), M), self.eta)))
        if _C.mul(M, _C.add(_ONE, _C.mul(_C.mul(self.u, 2), K))) >= self.threshold:
            if (
                fn == "exp"
                and a.r == 0
                and _C.mul(c, _C.sub(_ONE, _C.mul(self.u, 4 * K))) > (self.threshold)
            ):
                return PINF
            return WILD
        return Ball(c, err)

    def exp(self, a: Value) -> Ball:
        return self._libm("exp", a)

    def log(self, a: Value) -> Ball:
        return self._libm("log", a)

    def tanh(self, a: Value) -> Ball:
        return self._libm("tanh", a)

    def sin(self, a: Value) -> Ball:
        return self._libm("sin", a)

    def cos(self, a: Value) -> Ball:
        return self._libm("cos", a)

    def pow(self, a: Value, b: Value) -> Ball:
        """The vendor pow, within K ulp of the exact pow of its (ball) operands."""
        a, b = self.settle(a), self.settle(b)
        if a.wild or b.wild:
            return WILD
        c = _C.pow(a.c, b.c)
        if a.r == 0 and b.r == 0:
            if not (gmpy2.is_finite(a.c) and gmpy2.is_finite(b.c) and gmpy2.is_finite(c)):
                return Ball(c)  # C99 special values (and overflow of certain operands)
            lo = hi = c
        else:
            if not (gmpy2.is_finite(a.c) and gmpy2.is_finite(b.c) and gmpy2.is_finite(c)):
                return WILD
            a_lo, a_hi = _C.sub(a.c, a.r), _C.add(a.c, a.r)
            whole = b.r == 0 and gmpy2.is_integer(b.c)
            if not (a_lo > 0 or (whole and a_hi < 0)):
                return WILD
            ends = [
                _C.pow(p, q) for p in (a_lo, a_hi) for q in (_C.sub(b.c, b.r), _C.add(b.c, b.r))
            ]
            lo, hi = min(ends), max(ends)
        K = self.budget.get("pow", _ZERO)
        ein = max(_C.sub(hi, c), _C.sub(c, lo))
        M = max(abs(lo), abs(hi))
        if (
            not gmpy2.is_finite(M)
            or _C.mul(M, _C.add(_ONE, _C.mul(self.u, 2 * K))) >= self.threshold
        ):
            return WILD
        return Ball(c, _C.add(ein, _C.mul(K, _C.add(_C.mul(_C.mul(self.u, 2), M), self.eta))))

    # ------------------------------------------------------------------ decisions
    def fork(self, script: Sequence[bool]) -> BallDomain:
        """This domain, answering its first len(script) undecided questions from `script`
        (the runtime's branch on one path of `all_branches`)."""
        f = copy.copy(self)
        f._script, f._pos = list(script), 0
        return f

    def _decide(self, question: str) -> bool:
        if self._pos < len(self._script):
            self._pos += 1
            return self._script[self._pos - 1]
        raise Undecided(question)

    def is_nan(self, a: Value) -> bool:
        a = self.settle(a)
        if a.wild:
            return self._decide(f"{self.name}: NaN test of an unconstrained value")
        return bool(gmpy2.is_nan(a.c))

    def lt(self, a: Value, b: Value) -> bool:
        return self._compare(a, b, "<")

    def eq(self, a: Value, b: Value) -> bool:
        return self._compare(a, b, "==")

    def _compare(self, a: Value, b: Value, op: str) -> bool:
        """IEEE `<` or `==` of the runtime's values: false with a NaN, exact on exact
        values, decided by disjoint balls, else an open question (`_decide`)."""
        a, b = self.settle(a), self.settle(b)
        if a.wild or b.wild:
            return self._decide(f"{self.name}: comparison with an unconstrained value")
        if gmpy2.is_nan(a.c) or gmpy2.is_nan(b.c):
            return False
        if a.r == 0 and b.r == 0:
            return bool(a.c < b.c) if op == "<" else bool(a.c == b.c)
        if op == "<":
            if _C.add(a.c, a.r) < _C.sub(b.c, b.r):
                return True
            if _C.sub(a.c, a.r) >= _C.add(b.c, b.r):
                return False
        elif abs(_C.sub(a.c, b.c)) > _C.add(a.r, b.r):
            return False
        return self._decide(f"{self.name}: {a} {op} {b} is not decided by the radii")

    def same(self, a: Value, b: Value) -> bool:
        a, b = self.settle(a), self.settle(b)
        if a.wild or b.wild or a.r or b.r:
            return self._decide(f"{self.name}: identity of values with radii")
        return HP.same(a.c, b.c)

    def encode(self, a: Value) -> str:
        a = self.settle(a)
        return "wild" if a.wild else f"{float(a.c)!r}±{float(a.r):.3g}"

    def decode(self, s: str) -> Any:
        raise DomainError(f"{self.name}: balls have no serialised form")


def all_branches(rule: Callable[[BallDomain], T], D: BallDomain, limit: int = 64) -> list[T] | None:
    """`rule(domain)` on every path through the questions (comparisons, NaN tests) the balls
    leave open: each open question is answered both ways, so every branch the runtime can
    take is one of the paths. None when more than `limit` paths would be needed."""
    out: list[T] = []
    todo: list[tuple[bool, ...]] = [()]
    while todo:
        script = todo.pop()
        try:
            out.append(rule(D.fork(script)))
        except Undecided:
            if len(out) + len(todo) + 2 > limit:
                return None
            todo += [(*script, True), (*script, False)]
    return out


def contains_any(D: BallDomain, xs: Sequence[Value], v: Any) -> tuple[bool | None, Any, Any]:
    """`contains` over the paths of `all_branches`: None when a path leaves the element
    unconstrained; ok when some path's ball holds v (its error and bound); else the path
    whose bound comes nearest (error/bound smallest)."""
    best: tuple[bool | None, Any, Any] | None = None
    for x in xs:
        ok, err, bound = contains(D, x, v)
        if ok is None:
            return ok, err, bound
        if ok:
            return ok, err, bound
        if best is None or (bound and err / bound < best[1] / best[2]) or not best[2]:
            best = (ok, err, bound)
    assert best is not None
    return best


def contains(D: BallDomain, x: Value, v: Any) -> tuple[bool | None, Any, Any]:
    """Whether the runtime value v (an MPFR value of the dtype) lies in the ball x:
    (ok, |v − c|, bound), ok None for a wild ball (not compared). Magnitudes only: the
    sign of a zero is not compared (see the module docstring)."""
    b = D.settle(x)
    if b.wild:
        return None, _ZERO, _ZERO
    if gmpy2.is_nan(b.c) or gmpy2.is_nan(v):
        ok = bool(gmpy2.is_nan(b.c) and gmpy2.is_nan(v))
        return ok, _ZERO if ok else _PINF, _ZERO
    if gmpy2.is_infinite(b.c) or gmpy2.is_infinite(v):
        ok = bool(b.c == v)
        return ok, _ZERO if ok else _PINF, _ZERO
    err = abs(_C.sub(v, b.c))
    bound = _C.add(_C.mul(b.r, _INFLATE), _C.mul(_SLACK, _C.add(abs(b.c), b.r)))
    return bool(err <= bound), err, bound
