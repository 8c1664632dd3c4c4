"""Deciding sympy identities, and the symbol factories the obligations use.

Invariants:
- `decide_zero(e)` returns the name of the first method that reduced `e` to 0, or None.
  The symbolic methods, tried in order, are: "structural" (e is 0 as built), "expand",
  "rewrite-exp" (expand after rewriting trigonometric and hyperbolic functions as
  exponentials and splitting exp(a + b) = exp(a)·exp(b)), "cancel" (that form is 0 as a
  rational function of its remaining atoms: symbols, exponentials, logarithms),
  "simplify", "rewrite-exp" again with simplify, "exp-injective" (e is real by sympy's
  assumptions and exp(e) simplifies to 1; exp is injective on the reals) and
  "coefficients" (e is a polynomial in the symbols that occur outside every function
  application, e.g. tangents, and each coefficient is shown 0 by one of the methods
  above). Each is a sympy identity transformation (or an argument stated here), so a
  decision proves `e == 0` for every real value of its symbols that satisfies their
  assumptions (where e is defined).
- The numeric fallback ("numeric") is used only when the caller passes `numeric=True`: the
  expression is evaluated with 60 significant digits at `NUMERIC_POINTS` exact rational
  points (drawn deterministically from `key`, respecting each symbol's sign assumptions);
  every |value| must be below 1e-40. This is evidence, not proof, and the result says so.
- Refutation: when structural, expand, rewrite-exp and cancel fail, `e` is evaluated (30 digits) at
  `REFUTE_POINTS` exact rational points respecting the symbols' assumptions; a value
  of magnitude above 1e-10 at one of them shows `e` is not identically 0, and the decision
  is None at once, without the expensive methods (simplify on a non-identity can run for
  minutes). An undefined value decides nothing. Refutation can only fail an obligation,
  never pass one.
- Nothing here depends on the global random state, dicts of unordered sets or hash
  randomisation: the same expression and key always give the same decision.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Iterable
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from spec.shape import Shape, size
from spec.tensor import Tensor

from .records import ProofError

__all__ = [
    "NUMERIC_POINTS",
    "SYMBOLIC_METHODS",
    "as_array",
    "decide_zero",
    "lt",
    "rational_points",
    "refuted",
    "symbols",
]

SYMBOLIC_METHODS = (
    "structural",
    "expand",
    "rewrite-exp",
    "cancel",
    "simplify",
    "exp-injective",
    "coefficients",
)
NUMERIC_POINTS = 5
REFUTE_POINTS = 2
_REFUTE_TOL = sympy.Float("1e-10")
_NUMERIC_DIGITS = 60
_NUMERIC_TOL = sympy.Rational(1, 10**40)


def symbols(prefix: str, shape: Shape, **assumptions: Any) -> Tensor:
    """A tensor of fresh real symbols `<prefix>_<k>` (row-major k)."""
    assumptions.setdefault("real", True)
    return Tensor(
        shape, tuple(sympy.Symbol(f"{prefix}_{k}", **assumptions) for k in range(size(shape)))
    )


def as_array(t: Tensor) -> np.ndarray:
    """A spec tensor as a NumPy object array of the same shape."""
    out = np.empty(len(t.data), dtype=object)
    for i, v in enumerate(t.data):
        out[i] = v
    return out.reshape(t.shape)


def lt(a: Any, b: Any) -> bool:
    """a < b for sympy values, decided from the symbols' assumptions; `ProofError` if
    sympy cannot decide (the law's region is then not what it claims)."""
    r = sympy.Lt(a, b)
    if r is sympy.true:
        return True
    if r is sympy.false:
        return False
    raise ProofError(f"cannot decide {a} < {b} from the symbols' assumptions")


def _seed(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def _draw(rng: random.Random, sym: sympy.Symbol) -> sympy.Rational:
    while True:
        q = Fraction(rng.randint(1, 40), rng.randint(1, 9))
        if sym.is_positive or sym.is_nonnegative:
            return sympy.Rational(q.numerator, q.denominator)
        if sym.is_negative or sym.is_nonpositive:
            return -sympy.Rational(q.numerator, q.denominator)
        v = q if rng.random() < 0.5 else -q
        if v != 0:
            return sympy.Rational(v.numerator, v.denominator)


def rational_points(
    syms: Iterable[sympy.Symbol], key: str, n: int = NUMERIC_POINTS
) -> list[dict[sympy.Symbol, sympy.Rational]]:
    """`n` deterministic exact rational points for the given symbols (sorted by name),
    respecting their sign assumptions; nonzero rationals in [-40, 40]."""
    ordered = sorted(set(syms), key=lambda s: s.name)
    rng = random.Random(_seed(key))
    return [{s: _draw(rng, s) for s in ordered} for _ in range(n)]


def _is_zero(e: Any) -> bool:
    return e == 0 or e is sympy.S.Zero


def refuted(e: Any, key: str = "refute") -> bool:
    """True when `e` is shown nonzero at an exact rational point (module invariants)."""
    syms = e.free_symbols
    for pt in rational_points(syms, f"{key}/refute", REFUTE_POINTS):
        try:
            v = e.evalf(30, subs=pt)
        except (ValueError, TypeError, ZeroDivisionError, ArithmeticError):
            continue
        if v.is_number and not v.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo):
            if abs(v) > _REFUTE_TOL:  # complex intermediates (Euler forms) included
                return True
    return False


def _symbolic(e: Any) -> str | None:
    if _is_zero(e):
        return "structural"
    x = sympy.expand(e)
    if _is_zero(x):
        return "expand"
    fns = e.has(sympy.tanh, sympy.sin, sympy.cos, sympy.log, sympy.exp)
    if fns:
        r = sympy.expand(e.rewrite(sympy.exp), power_exp=True)
        if _is_zero(r):
            return "rewrite-exp"
        if _is_zero(sympy.cancel(r)):
            return "cancel"
    if refuted(x):
        return None
    if _is_zero(sympy.simplify(x)):
        return "simplify"
    if fns and _is_zero(sympy.simplify(sympy.expand(e.rewrite(sympy.exp)))):
        return "rewrite-exp"
    if fns and e.is_real is True and _is_zero(sympy.simplify(sympy.exp(e) - 1)):
        return "exp-injective"
    return None


def _coefficients(e: Any) -> list[Any] | None:
    """e's coefficients as a polynomial in the symbols that occur outside every function
    application (e.g. tangents and targets), or None when there are none or e is not such a
    polynomial."""
    inner: set[Any] = set()
    for f in e.atoms(sympy.Function):
        inner |= f.free_symbols
    gens = sorted((s for s in e.free_symbols if s not in inner), key=lambda s: s.name)
    if not gens:
        return None
    try:
        poly = sympy.Poly(sympy.expand(e), *gens)
    except sympy.PolynomialError:
        return None
    coeffs = poly.coeffs()
    return coeffs if len(coeffs) > 1 or poly.total_degree() > 0 else None


def decide_zero(e: Any, *, numeric: bool = False, key: str = "") -> str | None:
    """The first method that shows `e == 0` (see the module invariants), or None."""
    e = sympy.sympify(e)
    m = _symbolic(e)
    if m is not None:
        return m
    coeffs = _coefficients(e)
    if coeffs is not None and all(_symbolic(c) is not None for c in coeffs):
        return "coefficients"
    if numeric:
        for pt in rational_points(e.free_symbols, key):
            v = sympy.N(e.subs(pt), _NUMERIC_DIGITS)
            if not v.is_number or v.has(sympy.nan, sympy.zoo) or abs(v) >= _NUMERIC_TOL:
                return None
        return "numeric"
    return None
