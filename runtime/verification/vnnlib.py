"""A VNN-LIB property (the VNN-COMP subset) read into an input box and an unsafe region.

Invariants:
- Accepted: comments (`;` to end of line); `(declare-const X_i Real)` and
  `(declare-const Y_j Real)` with indices 0..n-1 each declared once; `(assert F)` where F
  is an atom `(<= t u)` / `(>= t u)`, `(and F ...)` or `(or F ...)`; terms t are numbers
  (decimal or scientific, read exactly as Fractions), variables, `(+ t ...)`,
  `(- t)`, `(- t u ...)` and `(* c t)` / `(* t c)` with one numeric factor (so every term
  is linear). Anything else raises `VNNLibError` naming the line.
- Input constraints are bounds `X_i <= c` / `X_i >= c` on one variable (coefficient 1) in
  top-level asserts or top-level `and`s; every X_i needs both bounds (the box
  `lower <= X <= upper`, exact). An atom mixing X and Y, or an input constraint inside an
  `or`, is refused.
- `parse_vnnlib_cases` also takes input bounds inside an `or` (an input disjunction, as
  ACAS Xu property 6): the conjunction of all asserts in disjunctive normal form, each
  conjunction's X bounds making its box (every X_i bounded both ways; an empty box drops
  the conjunction) and its Y atoms its rows; one `Property` per distinct box, whose region
  is the disjunction of that box's row conjunctions. The unsafe set is the union of the
  cases' unsafe sets. A file `parse_vnnlib` reads gives `[parse_vnnlib(text)]`; one that
  neither reads raises `parse_vnnlib`'s error.
- Output constraints are normalised to `a . Y <= d` (exact `a`, `d`); the property is the
  conjunction of all asserts, brought to disjunctive normal form: `disjuncts` is a list of
  conjunctions of such rows. It describes the unsafe (counterexample) region: the network
  is safe on the box iff no input of the box lands in any conjunction.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from .core import VerificationError

__all__ = [
    "Property",
    "Row",
    "VNNLibError",
    "parse_vnnlib",
    "parse_vnnlib_cases",
    "read_vnnlib",
    "read_vnnlib_cases",
]

Row = tuple[tuple[Fraction, ...], Fraction]  # a . Y <= d
Linear = tuple[dict[str, Fraction], Fraction]  # variable -> coefficient, constant
MAX_DISJUNCTS = 4096

_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_VAR = re.compile(r"^([XY])_(\d+)$")
_NUM = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


class VNNLibError(VerificationError):
    """A VNN-LIB file outside the supported subset (the message names the line)."""


@dataclass(frozen=True)
class Property:
    """The input box (exact) and the unsafe region: a disjunction of conjunctions of rows."""

    lower: tuple[Fraction, ...]
    upper: tuple[Fraction, ...]
    n_out: int
    disjuncts: tuple[tuple[Row, ...], ...]


@dataclass
class _Sexp:
    items: list[Any]
    line: int


def _parse_sexps(text: str) -> list[Any]:
    stack: list[_Sexp] = [_Sexp([], 0)]
    for ln, raw in enumerate(text.splitlines(), start=1):
        for tok in _TOKEN.findall(raw.split(";", 1)[0]):
            if tok == "(":
                stack.append(_Sexp([], ln))
            elif tok == ")":
                if len(stack) == 1:
                    raise VNNLibError(f"line {ln}: unbalanced ')'")
                done = stack.pop()
                stack[-1].items.append(done)
            else:
                stack[-1].items.append((tok, ln))
    if len(stack) > 1:
        raise VNNLibError(f"line {stack[-1].line}: '(' is never closed")
    return stack[0].items


def _line(e: Any) -> int:
    return e.line if isinstance(e, _Sexp) else e[1]


def _head(e: Any) -> str:
    if isinstance(e, _Sexp) and e.items and isinstance(e.items[0], tuple):
        return str(e.items[0][0])
    return ""


def _term(e: Any) -> Linear:
    ln = _line(e)
    if isinstance(e, tuple):
        tok = e[0]
        if _VAR.match(tok):
            return {tok: Fraction(1)}, Fraction(0)
        if _NUM.match(tok):
            return {}, Fraction(tok)
        raise VNNLibError(f"line {ln}: unknown term {tok!r}")
    op, args = _head(e), [_term(a) for a in e.items[1:]]
    if op == "+" and args:
        return _sum(args, [1] * len(args))
    if op == "-" and args:
        return _sum(args, [-1] if len(args) == 1 else [1] + [-1] * (len(args) - 1))
    if op == "*" and len(args) == 2:
        (va, ca), (vb, cb) = args
        if not va or not vb:
            k, (v, c) = (ca, args[1]) if not va else (cb, args[0])
            return {x: k * a for x, a in v.items()}, k * c
        raise VNNLibError(f"line {ln}: nonlinear product")
    raise VNNLibError(f"line {ln}: unsupported term ({op} ...)")


def _sum(args: list[Linear], signs: list[int]) -> Linear:
    out: dict[str, Fraction] = {}
    const = Fraction(0)
    for (v, c), s in zip(args, signs, strict=True):
        const += s * c
        for x, a in v.items():
            out[x] = out.get(x, Fraction(0)) + s * a
    return {x: a for x, a in out.items() if a != 0}, const


def _atom(e: Any) -> Linear:
    """An atom as `lhs - rhs <= 0` (a linear form that must be <= 0)."""
    op = _head(e)
    if op not in ("<=", ">=") or len(e.items) != 3:
        raise VNNLibError(f"line {_line(e)}: unsupported formula ({op or '?'} ...): expected"
                          " (<= t u), (>= t u), and, or")  # fmt: skip
    (va, ca), (vb, cb) = _term(e.items[1]), _term(e.items[2])
    if op == ">=":
        (va, ca), (vb, cb) = (vb, cb), (va, ca)
    return _sum([(va, ca), (vb, cb)], [1, -1])


DNF = list[list[tuple[Linear, int]]]  # conjunctions of (atom, line)


def _dnf(e: Any) -> DNF:
    op = _head(e)
    parts = [_dnf(a) for a in e.items[1:]] if op in ("and", "or") else None
    if parts is None:
        return [[(_atom(e), _line(e))]]
    if op == "or":
        return [c for p in parts for c in p]
    out: DNF = [[]]
    for p in parts:
        out = [a + b for a, b in itertools.product(out, p)]
        if len(out) > MAX_DISJUNCTS:
            raise VNNLibError(f"line {_line(e)}: more than {MAX_DISJUNCTS} disjuncts")
    return out


def _declare(e: Any, seen: dict[str, set[int]]) -> None:
    it = e.items
    ok = len(it) == 3 and all(isinstance(x, tuple) for x in it) and it[2][0] == "Real"
    m = _VAR.match(it[1][0]) if ok else None
    if m is None:
        raise VNNLibError(f"line {e.line}: expected (declare-const X_i Real) or Y_j")
    idx = int(m.group(2))
    if idx in seen[m.group(1)]:
        raise VNNLibError(f"line {e.line}: {it[1][0]} declared twice")
    seen[m.group(1)].add(idx)


def _bound(atom: Linear, ln: int, box: list[dict[int, Fraction]]) -> None:
    v, c = atom  # sum a x + c <= 0 with one X of coefficient +-1
    (name, a), = v.items()  # fmt: skip
    i = int(name[2:])
    if a == 1:
        box[1][i] = min(box[1].get(i, -c), -c)
    elif a == -1:
        box[0][i] = max(box[0].get(i, c), c)
    else:
        raise VNNLibError(f"line {ln}: an input bound needs coefficient 1, got {a}")


def _split(conj: list[tuple[Linear, int]], box: list[dict[int, Fraction]], top: bool) -> list:
    rows = []
    for atom, ln in conj:
        names = {x[0] for x in atom[0]}
        if names == {"X"} and len(atom[0]) == 1 and top:
            _bound(atom, ln, box)
        elif names == {"Y"}:
            rows.append((atom, ln))
        else:
            raise VNNLibError(f"line {ln}: unsupported constraint: expected a bound on one X_i "
                              "(outside any 'or') or a linear constraint on Y only")  # fmt: skip
    return rows


def _check_indices(seen: dict[str, set[int]]) -> tuple[int, int]:
    for k in "XY":
        if seen[k] != set(range(len(seen[k]))) or not seen[k]:
            raise VNNLibError(f"the {k} variables must be declared as {k}_0 .. {k}_(n-1)")
    return len(seen["X"]), len(seen["Y"])


def parse_vnnlib(text: str) -> Property:
    """The property in `text` (see the module docstring), or `VNNLibError`."""
    seen: dict[str, set[int]] = {"X": set(), "Y": set()}
    box: list[dict[int, Fraction]] = [{}, {}]
    out: DNF = [[]]
    for e in _parse_sexps(text):
        head = _head(e)
        if head == "declare-const":
            _declare(e, seen)
        elif head == "assert" and len(e.items) == 2:
            d = _dnf(e.items[1])
            if len(d) == 1:  # a plain conjunction: its input bounds shape the box
                d = [_split(d[0], box, True)]
            out = [a + b for a, b in itertools.product(out, d)]
        else:
            raise VNNLibError(f"line {_line(e)}: expected declare-const or assert")
        if len(out) > MAX_DISJUNCTS:
            raise VNNLibError(f"line {_line(e)}: more than {MAX_DISJUNCTS} disjuncts")
    n_in, n_out = _check_indices(seen)
    for k, v in (("X", n_in), ("Y", n_out)):
        for conj in out:
            for atom, ln in conj:
                if any(x[0] == k and int(x[2:]) >= v for x in atom[0]):
                    raise VNNLibError(f"line {ln}: undeclared variable")
    extra = sorted(i for b in box for i in b if i >= n_in)
    if extra:
        raise VNNLibError(f"input X_{extra[0]} is not declared")
    missing = [i for i in range(n_in) if i not in box[0] or i not in box[1]]
    if missing:
        raise VNNLibError(f"input X_{missing[0]} needs a lower and an upper bound")
    lo, hi = tuple(box[0][i] for i in range(n_in)), tuple(box[1][i] for i in range(n_in))
    bad = [i for i in range(n_in) if lo[i] > hi[i]]
    if bad:
        raise VNNLibError(f"input X_{bad[0]}: empty range [{lo[bad[0]]}, {hi[bad[0]]}]")
    return Property(lo, hi, n_out, tuple(_rows(c, n_out) for c in out))


def _rows(conj: list[tuple[Linear, int]], n_out: int) -> tuple[Row, ...]:
    rows = []
    for (v, c), _ in _split(conj, [{}, {}], False):
        a = [Fraction(0)] * n_out
        for x, k in v.items():
            a[int(x[2:])] = k
        rows.append((tuple(a), -c))
    return tuple(rows)


def read_vnnlib(path: str) -> Property:
    """`parse_vnnlib` of a file's text (UTF-8)."""
    with open(path, encoding="utf-8") as f:
        return parse_vnnlib(f.read())


def parse_vnnlib_cases(text: str) -> list[Property]:
    """The property as one `Property` per input box (see the module docstring)."""
    try:
        return [parse_vnnlib(text)]
    except VNNLibError as e:
        try:
            return _cases(text)
        except VNNLibError:
            raise e from None


def _cases(text: str) -> list[Property]:
    seen: dict[str, set[int]] = {"X": set(), "Y": set()}
    out: DNF = [[]]
    for e in _parse_sexps(text):
        if _head(e) == "declare-const":
            _declare(e, seen)
            continue
        out = [a + b for a, b in itertools.product(out, _dnf(e.items[1]))]
        if len(out) > MAX_DISJUNCTS:
            raise VNNLibError(f"line {_line(e)}: more than {MAX_DISJUNCTS} disjuncts")
    n_in, n_out = _check_indices(seen)
    cases: dict[tuple[Any, Any], list[tuple[Row, ...]]] = {}
    for conj in out:
        for (v, _), ln in conj:
            if any(int(x[2:]) >= (n_in if x[0] == "X" else n_out) for x in v):
                raise VNNLibError(f"line {ln}: undeclared variable")
        box: list[dict[int, Fraction]] = [{}, {}]
        rows = _split(conj, box, True)
        if any(i not in box[0] or i not in box[1] for i in range(n_in)):
            raise VNNLibError(f"line {conj[0][1]}: a case leaves an input without both bounds")
        lo, hi = tuple(box[0][i] for i in range(n_in)), tuple(box[1][i] for i in range(n_in))
        if all(a <= b for a, b in zip(lo, hi, strict=True)):
            cases.setdefault((lo, hi), []).append(_rows(rows, n_out))
    return [Property(lo, hi, n_out, tuple(cs)) for (lo, hi), cs in cases.items()]


def read_vnnlib_cases(path: str) -> list[Property]:
    """`parse_vnnlib_cases` of a file's text (UTF-8)."""
    with open(path, encoding="utf-8") as f:
        return parse_vnnlib_cases(f.read())
