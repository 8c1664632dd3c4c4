"""The math-function records (`spec.mathfns`) and what is derived from them: the domain
methods, crmath's evaluation, the bound's budget (a missing one is an error, never 0)."""

from __future__ import annotations

import math
from fractions import Fraction

import gmpy2
import mpmath
import numpy as np
import pytest
import sympy

from conformance.bounds.core import ulp_budget
from runtime.engine.crmath import cr_apply, record
from spec.domains import BINARY32, FLOAT64, RATIONAL, SYMBOLIC, add_math_function
from spec.errors import DomainError, TorchLeanError
from spec.mathfns import BUDGET_DTYPES, MATH_FNS, MathFn, numpy_name, record_gaps
from spec.ops import OPS

X = sympy.Symbol("x", real=True)


@pytest.mark.parametrize("name", list(MATH_FNS))
def test_each_record_states_its_own_derivative(name: str) -> None:
    fn = MATH_FNS[name]
    assert sympy.simplify(sympy.diff(fn.sympy(X), X) - fn.derivative(X)) == 0


@pytest.mark.parametrize("name", list(MATH_FNS))
def test_each_record_is_complete_and_its_spellings_agree(name: str) -> None:
    """No gap; the mpmath, NumPy (or math) and sympy spellings name the same function
    (at 3/4, to a few ulp of binary64)."""
    fn = MATH_FNS[name]
    assert record_gaps(fn) == []
    want = float(fn.sympy(sympy.Rational(3, 4)).evalf(30))
    assert float(getattr(mpmath, fn.mpmath)(mpmath.mpf(0.75))) == pytest.approx(want, rel=1e-15)
    np_name = numpy_name(fn)
    f = getattr(np, np_name) if np_name is not None else getattr(math, str(fn.python))
    assert float(f(0.75)) == pytest.approx(want, rel=1e-15)


@pytest.mark.parametrize("name", list(MATH_FNS))
def test_domain_methods_are_derived_from_the_record(name: str) -> None:
    fn = MATH_FNS[name]
    x = Fraction(3, 4)
    with gmpy2.context(FLOAT64.ctx):
        want = getattr(gmpy2, fn.mpfr)(gmpy2.mpfr(FLOAT64.from_rational(x)))
    # the record's MPFR spelling names the same function as its sympy one
    exact = float(fn.sympy(sympy.Rational(3, 4)).evalf(30))
    assert float(want) == pytest.approx(exact, rel=1e-15)
    assert FLOAT64.same(getattr(FLOAT64, name)(FLOAT64.from_rational(x)), want)
    assert getattr(SYMBOLIC, name)(sympy.Rational(3, 4)) == fn.sympy(sympy.Rational(3, 4))
    for q, v in fn.exact.items():
        assert getattr(RATIONAL, name)(q) == v
    with pytest.raises(DomainError, match=f"{name}\\(3/4\\) is not exact"):
        getattr(RATIONAL, name)(x)


def test_every_math_op_of_the_table_has_its_record() -> None:
    """The table's transcendental primitives of one argument carry their record."""
    math_ops = {n for n, op in OPS.items() if op.math is not None}
    assert math_ops == set(MATH_FNS)
    assert all(OPS[n].math is MATH_FNS[n] for n in math_ops)


def test_numpy_spelling_takes_the_first_present_name() -> None:
    fn = MathFn(
        name="t",
        mpfr="atan",
        sympy=sympy.atan,
        derivative=lambda x: 1 / (1 + x**2),
        mpmath="atan",
        numpy=("no_such_name", "arctan", "atan"),
        array_api="atan",
        ulps={},
    )
    assert numpy_name(fn) == "arctan"  # present in NumPy 1.26 and 2.x
    assert record_gaps(fn) == [f"a ULP budget for {dt}" for dt in BUDGET_DTYPES]


def test_a_missing_budget_or_record_is_an_error_not_zero() -> None:
    with pytest.raises(TorchLeanError, match="no math-function record for 'nope'"):
        ulp_budget("float32", "nope")
    with pytest.raises(TorchLeanError, match="no math-function record for 'nope'"):
        record("nope")
    with pytest.raises(TorchLeanError, match="no math-function record"):
        cr_apply("nope", np.ones(2, np.float32), "float32")
    assert ulp_budget("float32", "exp") == 4.0 and ulp_budget("float16", "pow") == 1.0


def test_a_record_added_twice_or_shadowing_a_method_raises() -> None:
    with pytest.raises(DomainError, match="added twice"):
        add_math_function(MATH_FNS["exp"])
    sqrt = MathFn(
        name="sqrt",
        mpfr="sqrt",
        sympy=sympy.sqrt,
        derivative=lambda x: 1 / (2 * sympy.sqrt(x)),
        mpmath="sqrt",
        numpy=("sqrt",),
        array_api="sqrt",
        ulps={},
    )
    with pytest.raises(DomainError, match="a Domain method of that name exists"):
        add_math_function(sqrt)
    assert "sqrt" not in MATH_FNS


def test_crmath_evaluates_every_record_correctly_rounded() -> None:
    x = np.array([-2.5, -0.25, 0.5, 1.75], dtype=np.float32)
    for name in MATH_FNS:
        got = cr_apply(name, x, "float32")
        for xv, gv in zip(x, got, strict=True):
            want = getattr(BINARY32, name)(BINARY32.from_float(float(xv)))
            assert BINARY32.same(BINARY32.from_float(float(gv)), want), (name, xv)
