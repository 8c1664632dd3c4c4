"""A VNN-LIB property (the VNN-COMP subset) read into an input box and an unsafe region.

Invariants:
- Accepted: comments (`;` to end of line); `(declare-const X_i Real)` and
  `(declare-const Y_j Real)` with canonical ASCII indices (`0` or `[1-9][0-9]*`),
  0..n-1 each declared once, every name declared before it is used; `(assert F)` where F
  is an atom `(<= t u)` / `(>= t u)`, `(and F ...)` or `(or F ...)` (at least one
  argument each); terms t are numbers (ASCII decimal or scientific, read exactly as
  Fractions), variables, `(+ t ...)`, `(- t)`, `(- t u ...)` and `(* c t)` / `(* t c)` with
  one numeric factor (so every term is linear). Anything else raises `VNNLibError` naming
  the line.
- Names are matched exactly as declared: `Y_00` or `Y_\u0660` next to a declared `Y_0` is an
  undeclared name, never an alias. A variable appearing several times in a sum has its
  coefficients added (`(+ Y_0 Y_0)` is `(* 2 Y_0)`).
- Bounded work, each bound checked before the work it bounds: the text at most
  `MAX_BYTES` bytes of UTF-8 (`read_vnnlib`: a regular file, never a FIFO or device);
  s-expressions read and evaluated without recursion (explicit stacks), nested at most
  `MAX_DEPTH` deep; a number
  literal at most `MAX_NUMBER_CHARS` characters with a decimal exponent of magnitude at
  most `MAX_EXPONENT` (checked before the exact conversion); the disjunctive normal
  form's number of conjunctions (at most `MAX_DISJUNCTS`) and of rows over all of them
  (at most `MAX_ROWS`) computed from the formula before it is expanded; distinct
  rows times outputs at most `MAX_ENTRIES` before the dense rows are built. Each cap is
  raised by the environment variable `TORCHLEAN_VNNLIB_<cap>` (`cap`), read at each use.
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
- `Property.check_dtype(dtype)` (done by `parse_vnnlib`/`read_vnnlib` given a dtype)
  refuses, naming the line, any literal, coefficient or constant whose magnitude exceeds
  the dtype's largest finite value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spec.safe_files import read_text

from .core import VerificationError

__all__ = [
    "CAPS",
    "MAX_BYTES",
    "MAX_DEPTH",
    "MAX_DISJUNCTS",
    "MAX_ENTRIES",
    "MAX_EXPONENT",
    "MAX_NUMBER_CHARS",
    "MAX_ROWS",
    "Property",
    "Row",
    "VNNLibError",
    "cap",
    "parse_vnnlib",
    "parse_vnnlib_cases",
    "read_vnnlib",
    "read_vnnlib_cases",
]

Row = tuple[tuple[Fraction, ...], Fraction]  # a . Y <= d
Linear = tuple[dict[str, Fraction], Fraction]  # variable -> coefficient, constant
MAX_BYTES = 64 * 2**20
MAX_DEPTH = 64
MAX_NUMBER_CHARS = 1000
MAX_EXPONENT = 1000
MAX_DISJUNCTS = 4096
MAX_ROWS = 2**20
MAX_ENTRIES = 2**24
CAPS = ("MAX_BYTES", "MAX_DEPTH", "MAX_NUMBER_CHARS", "MAX_EXPONENT", "MAX_DISJUNCTS",
        "MAX_ROWS", "MAX_ENTRIES")  # fmt: skip
"""The caps; each is raised by the environment variable TORCHLEAN_VNNLIB_<cap>."""
LARGEST = {"float16": 65504.0, "bfloat16": 3.3895313892515355e38,
           "float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}  # fmt: skip
"""The largest finite value of each IEEE dtype a property may be checked against."""

_ZERO, _ONE = Fraction(0), Fraction(1)
_TOKEN = re.compile(r"\(|\)|[^\s()]+")
_VAR = re.compile(r"([XY])_(0|[1-9][0-9]*)", re.ASCII)
_NUM = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?", re.ASCII)


class VNNLibError(VerificationError):
    """A VNN-LIB file outside the supported subset (the message names the line)."""


def cap(name: str) -> int:
    """The cap `name` (one of `CAPS`) in force: the environment variable
    TORCHLEAN_VNNLIB_<name> when set, else the module's default."""
    raw = os.environ.get(f"TORCHLEAN_VNNLIB_{name}")
    if raw is None:
        return int(globals()[name])
    try:
        v = int(raw)
    except ValueError:
        v = 0
    if v < 1:
        raise VNNLibError(f"TORCHLEAN_VNNLIB_{name}={raw!r}: expected an integer >= 1")
    return v


def _how(name: str, sep: str = " (") -> str:
    """How to raise the cap `name`: " (raise with ...)", or "; raise with ..." inside an
    open parenthesis (`sep` ";")."""
    how = f"raise with TORCHLEAN_VNNLIB_{name}"
    return f"; {how}" if sep == ";" else f" ({how})"


@dataclass(frozen=True)
class Property:
    """The input box (exact) and the unsafe region: a disjunction of conjunctions of rows.
    `magnitudes` holds, per source line, the largest magnitude written or derived there."""

    lower: tuple[Fraction, ...]
    upper: tuple[Fraction, ...]
    n_out: int
    disjuncts: tuple[tuple[Row, ...], ...]
    magnitudes: tuple[tuple[int, Fraction], ...] = field(default=(), compare=False)

    def check_dtype(self, dtype: str) -> None:
        """Refuse (naming the line) a value out of the finite range of `dtype`."""
        top = LARGEST.get(dtype)
        if top is None:
            return
        for ln, m in self.magnitudes:
            if m > Fraction(top):
                raise VNNLibError(
                    f"line {ln}: a value of magnitude ~{_approx(m)} is out of the finite range "
                    f"of {dtype} (largest {top:.6g})"
                )


def _approx(m: Fraction) -> str:
    digits = len(str(m.numerator)) - len(str(m.denominator))
    return f"1e{digits}" if abs(digits) > 300 else f"{float(m):.6g}"


@dataclass
class _Sexp:
    items: list[Any]
    line: int


class _Parse:
    """The state of one parse: declared names and the largest magnitude per line."""

    def __init__(self) -> None:
        self.declared: dict[str, int] = {}
        self.mags: dict[int, Fraction] = {}
        self.chars, self.exponent = cap("MAX_NUMBER_CHARS"), cap("MAX_EXPONENT")

    def note(self, ln: int, v: Fraction) -> None:
        # magnitudes below 2**15 are in range of every dtype of LARGEST: skipped cheaply
        if abs(v.numerator) > v.denominator << 15 and abs(v) > self.mags.get(ln, _ZERO):
            self.mags[ln] = abs(v)


def _parse_sexps(text: str) -> list[Any]:
    stack: list[_Sexp] = [_Sexp([], 0)]
    depth = cap("MAX_DEPTH")
    for ln, raw in enumerate(text.splitlines(), start=1):
        for tok in _TOKEN.findall(raw.split(";", 1)[0]):
            if tok == "(":
                if len(stack) > depth:
                    raise VNNLibError(
                        f"line {ln}: nested deeper than {depth} levels{_how('MAX_DEPTH')}"
                    )
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


def _number(tok: str, ln: int, ps: _Parse) -> Fraction | None:
    """The exact value of a number literal (None when `tok` is not one), its size bounded
    before the conversion."""
    m = _NUM.fullmatch(tok)
    if m is None:
        return None
    chars, top = ps.chars, ps.exponent
    if len(tok) > chars:
        raise VNNLibError(f"line {ln}: a number of {len(tok)} characters (at most {chars}"
                          f"{_how('MAX_NUMBER_CHARS', ';')})")  # fmt: skip
    if m.group(2) is not None and abs(int(m.group(2))) > top:
        raise VNNLibError(f"line {ln}: the exponent of {tok[:40]!r} is beyond +-{top}"
                          f"{_how('MAX_EXPONENT')}")  # fmt: skip
    return Fraction(tok)


def _fold(root: Any, children: Callable[[Any], list[Any]],
          combine: Callable[[Any, list[Any]], Any]) -> Any:  # fmt: skip
    """`combine(e, [results of children(e)])` over the tree, post-order, without recursion
    (an explicit stack: any nesting the depth cap admits is safe)."""
    out: list[Any] = []
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        e, ready = stack.pop()
        if ready:
            k = len(children(e))
            args = out[len(out) - k :]
            del out[len(out) - k :]
            out.append(combine(e, args))
        else:
            stack.append((e, True))
            stack.extend((c, False) for c in reversed(children(e)))
    return out[0]


def _term_args(e: Any) -> list[Any]:
    return e.items[1:] if isinstance(e, _Sexp) else []


def _term(root: Any, ps: _Parse) -> Linear:
    return _fold(root, _term_args, lambda e, args: _term_node(e, args, ps))


def _term_node(e: Any, args: list[Linear], ps: _Parse) -> Linear:
    ln = _line(e)
    if isinstance(e, tuple):
        tok = e[0]
        if tok in ps.declared:
            return {tok: _ONE}, _ZERO
        v = _number(tok, ln, ps)
        if v is not None:
            ps.note(ln, v)
            return {}, v
        if _VAR.fullmatch(tok) or tok[:2] in ("X_", "Y_"):
            raise VNNLibError(f"line {ln}: undeclared variable {tok!r}")
        raise VNNLibError(f"line {ln}: unknown term {tok!r}")
    op = _head(e)
    if op not in _TERMS or not args:
        raise VNNLibError(f"line {ln}: unsupported term ({op or '?'} ...)")
    return _TERMS[op](args, ln)


def _plus(args: list[Linear], ln: int) -> Linear:
    return _sum(args, [1] * len(args))


def _minus(args: list[Linear], ln: int) -> Linear:
    return _sum(args, [-1] if len(args) == 1 else [1] + [-1] * (len(args) - 1))


def _times(args: list[Linear], ln: int) -> Linear:
    if len(args) != 2:
        raise VNNLibError(f"line {ln}: (* ...) takes two factors, got {len(args)}")
    (va, ca), (vb, cb) = args
    if va and vb:
        raise VNNLibError(f"line {ln}: nonlinear product")
    k, (v, c) = (ca, args[1]) if not va else (cb, args[0])
    return {x: k * a for x, a in v.items() if k * a != 0}, k * c


_TERMS = {"+": _plus, "-": _minus, "*": _times}


def _sum(args: list[Linear], signs: list[int]) -> Linear:
    out: dict[str, Fraction] = {}
    const = _ZERO
    for (v, c), s in zip(args, signs, strict=True):
        const += s * c
        for x, a in v.items():
            out[x] = out.get(x, _ZERO) + s * a
    return {x: a for x, a in out.items() if a != 0}, const


def _atom(e: Any, ps: _Parse) -> Linear:
    """An atom as `lhs - rhs <= 0` (a linear form that must be <= 0)."""
    op = _head(e)
    if op not in ("<=", ">=") or len(e.items) != 3:
        raise VNNLibError(f"line {_line(e)}: unsupported formula ({op or '?'} ...): expected"
                          " (<= t u), (>= t u), and, or")  # fmt: skip
    (va, ca), (vb, cb) = _term(e.items[1], ps), _term(e.items[2], ps)
    if op == ">=":
        (va, ca), (vb, cb) = (vb, cb), (va, ca)
    out = _sum([(va, ca), (vb, cb)], [1, -1])
    for v in (out[1], *out[0].values()):
        ps.note(_line(e), v)
    return out


def _connective(e: Any) -> str:
    op = _head(e)
    if op in ("and", "or") and len(e.items) < 2:
        raise VNNLibError(f"line {_line(e)}: ({op}) needs at least one argument")
    return op if op in ("and", "or") else ""


def _formula_args(e: Any) -> list[Any]:
    return e.items[1:] if _connective(e) else []


def _size(root: Any) -> tuple[int, int]:
    """(conjunctions, rows over all of them) of the formula's disjunctive normal form,
    computed without expanding it; refused as soon as either passes its cap."""
    return _fold(root, _formula_args, _size_node)


def _size_node(e: Any, parts: list[tuple[int, int]]) -> tuple[int, int]:
    op = _connective(e)
    if not op:
        return 1, 1
    if op == "or":
        d, r = sum(p[0] for p in parts), sum(p[1] for p in parts)
    else:
        d, r = 1, 0
        for pd, pr in parts:  # rows of A x B: rows(A) * |B| + |A| * rows(B)
            d, r = d * pd, r * pd + d * pr
            _check_size(d, r, _line(e))
    _check_size(d, r, _line(e))
    return d, r


def _check_size(d: int, r: int, ln: int) -> None:
    if d > cap("MAX_DISJUNCTS"):
        raise VNNLibError(f"line {ln}: more than {cap('MAX_DISJUNCTS')} disjuncts"
                          f"{_how('MAX_DISJUNCTS')}")  # fmt: skip
    if r > cap("MAX_ROWS"):
        raise VNNLibError(f"line {ln}: more than {cap('MAX_ROWS')} rows in the disjunctive "
                          f"normal form{_how('MAX_ROWS')}")  # fmt: skip


DNF = list[list[tuple[Linear, int]]]  # conjunctions of (atom, line)


def _dnf(root: Any, ps: _Parse) -> DNF:
    return _fold(root, _formula_args, lambda e, parts: _dnf_node(e, parts, ps))


def _dnf_node(e: Any, parts: list[DNF], ps: _Parse) -> DNF:
    op = _connective(e)
    if not op:
        return [[(_atom(e, ps), _line(e))]]
    if op == "or":
        return [c for p in parts for c in p]
    out: DNF = [[]]
    for p in parts:
        out = _conjoin(out, p)
    return out


def _conjoin(out: DNF, p: DNF) -> DNF:
    """`out` AND `p` in disjunctive normal form, in order. A single conjunction extends
    each of out's (distinct, unshared) lists in place: linear in the rows added, where
    re-copying every conjunction per part would be quadratic in a long `and`."""
    if len(p) == 1:
        for c in out:
            c.extend(p[0])
        return out
    return [a + b for a in out for b in p]


def _declare(e: Any, ps: _Parse) -> None:
    it = e.items
    ok = len(it) == 3 and all(isinstance(x, tuple) for x in it) and it[2][0] == "Real"
    m = _VAR.fullmatch(it[1][0]) if ok else None
    if m is None:
        raise VNNLibError(f"line {e.line}: expected (declare-const X_i Real) or Y_j, with i, j "
                          "0 or an ASCII number without leading zeros")  # fmt: skip
    if it[1][0] in ps.declared:
        raise VNNLibError(f"line {e.line}: {it[1][0]} declared twice")
    ps.declared[it[1][0]] = int(m.group(2))


def _bound(atom: Linear, ln: int, box: list[dict[int, Fraction]], ps: _Parse) -> None:
    v, c = atom  # sum a x + c <= 0 with one X of coefficient +-1
    (name, a), = v.items()  # fmt: skip
    i = ps.declared[name]
    if a == 1:
        box[1][i] = min(box[1].get(i, -c), -c)
    elif a == -1:
        box[0][i] = max(box[0].get(i, c), c)
    else:
        raise VNNLibError(f"line {ln}: an input bound needs coefficient 1, got {a}")


def _split(conj: list[tuple[Linear, int]], box: list[dict[int, Fraction]], top: bool,
           ps: _Parse) -> list[tuple[Linear, int]]:  # fmt: skip
    rows = []
    for atom, ln in conj:
        names = {x[0] for x in atom[0]}
        if names == {"X"} and len(atom[0]) == 1 and top:
            _bound(atom, ln, box, ps)
        elif names == {"Y"}:
            rows.append((atom, ln))
        else:
            raise VNNLibError(f"line {ln}: unsupported constraint: expected a bound on one X_i "
                              "(outside any 'or') or a linear constraint on Y only")  # fmt: skip
    return rows


def _counts(ps: _Parse) -> tuple[int, int]:
    for k in "XY":
        idx = {i for name, i in ps.declared.items() if name[0] == k}
        if not idx or idx != set(range(len(idx))):
            raise VNNLibError(f"the {k} variables must be declared as {k}_0 .. {k}_(n-1)")
    n_in = sum(1 for name in ps.declared if name[0] == "X")
    return n_in, len(ps.declared) - n_in


def _statements(text: str, ps: _Parse, box: list[dict[int, Fraction]] | None) -> DNF:
    """Every assert conjoined in disjunctive normal form, its size checked before expansion.
    With a `box`, a plain conjunction's input bounds shape it; with None (input
    disjunctions), input bounds stay atoms and each conjunction makes its own box."""
    out: DNF = [[]]
    total = (1, 0)
    for e in _parse_sexps(text):
        head = _head(e)
        if head == "declare-const":
            _declare(e, ps)
        elif head == "assert" and len(e.items) == 2:
            d, r = _size(e.items[1])
            total = (total[0] * d, total[1] * d + total[0] * r)
            _check_size(*total, _line(e))
            conj = _dnf(e.items[1], ps)
            if box is not None and len(conj) == 1:  # its input bounds shape the box
                conj = [_split(conj[0], box, True, ps)]
            out = _conjoin(out, conj)
        else:
            raise VNNLibError(f"line {_line(e)}: expected declare-const or assert")
    return out


def parse_vnnlib(text: str, dtype: str | None = None) -> Property:
    """The property in `text` (see the module docstring), or `VNNLibError`; with `dtype`,
    also `Property.check_dtype(dtype)`."""
    if not isinstance(text, str):
        raise VNNLibError(f"parse_vnnlib takes the text as a str, got {type(text).__name__}")
    ps = _Parse()
    box: list[dict[int, Fraction]] = [{}, {}]
    out = _statements(text, ps, box)
    n_in, n_out = _counts(ps)
    missing = [i for i in range(n_in) if i not in box[0] or i not in box[1]]
    if missing:
        raise VNNLibError(f"input X_{missing[0]} needs a lower and an upper bound")
    lo, hi = tuple(box[0][i] for i in range(n_in)), tuple(box[1][i] for i in range(n_in))
    bad = [i for i in range(n_in) if lo[i] > hi[i]]
    if bad:
        raise VNNLibError(f"input X_{bad[0]}: empty range [{lo[bad[0]]}, {hi[bad[0]]}]")
    disjuncts = _rows(out, n_out, ps)
    p = Property(lo, hi, n_out, disjuncts, tuple(sorted(ps.mags.items())))
    if dtype is not None:
        p.check_dtype(dtype)
    return p


def _rows(out: DNF, n_out: int, ps: _Parse) -> tuple[tuple[Row, ...], ...]:
    """The dense rows, each distinct atom converted once (conjunctions share them)."""
    split = [_split(conj, [{}, {}], False, ps) for conj in out]
    distinct = {id(atom): atom for conj in split for atom, _ in conj}
    if len(distinct) * n_out > cap("MAX_ENTRIES"):
        raise VNNLibError(f"{len(distinct)} distinct output constraints over {n_out} outputs: "
                          f"more than {cap('MAX_ENTRIES')} coefficients"
                          f"{_how('MAX_ENTRIES')}")  # fmt: skip
    dense: dict[int, Row] = {}
    for key, (v, c) in distinct.items():
        a = [_ZERO] * n_out
        for x, k in v.items():
            a[ps.declared[x]] += k
        dense[key] = (tuple(a), -c)
    return tuple(tuple(dense[id(atom)] for atom, _ in conj) for conj in split)


def _read(path: str) -> str:
    """A regular file of at most `cap("MAX_BYTES")` bytes of UTF-8 (`spec.safe_files`)."""
    top = cap("MAX_BYTES")

    def too_big(size: int) -> VNNLibError:
        return VNNLibError(f"{path}: {size} bytes (at most {top}{_how('MAX_BYTES', ';')})")

    return read_text(path, top, error=VNNLibError, too_big=too_big)


def read_vnnlib(path: str, dtype: str | None = None) -> Property:
    """`parse_vnnlib` of a file's text (see `_read`)."""
    return parse_vnnlib(_read(path), dtype)


def parse_vnnlib_cases(text: str, dtype: str | None = None) -> list[Property]:
    """The property as one `Property` per input box (see the module docstring)."""
    try:
        return [parse_vnnlib(text, dtype)]
    except VNNLibError as e:
        try:
            return _cases(text, dtype)
        except VNNLibError:
            raise e from None


def _cases(text: str, dtype: str | None) -> list[Property]:
    ps = _Parse()
    out = _statements(text, ps, None)
    n_in, n_out = _counts(ps)
    cases: dict[tuple[Any, Any], DNF] = {}
    for conj in out:
        box: list[dict[int, Fraction]] = [{}, {}]
        rows = _split(conj, box, True, ps)
        if any(i not in box[0] or i not in box[1] for i in range(n_in)):
            where = f"line {conj[0][1]}: " if conj else ""
            raise VNNLibError(f"{where}a case leaves an input without both bounds")
        lo, hi = tuple(box[0][i] for i in range(n_in)), tuple(box[1][i] for i in range(n_in))
        if all(a <= b for a, b in zip(lo, hi, strict=True)):
            cases.setdefault((lo, hi), []).append(rows)
    if not cases:
        raise VNNLibError("every case of the input disjunction has an empty box")
    props = []
    for (lo, hi), conjs in cases.items():
        p = Property(lo, hi, n_out, _rows(conjs, n_out, ps), tuple(sorted(ps.mags.items())))
        if dtype is not None:
            p.check_dtype(dtype)
        props.append(p)
    return props


def read_vnnlib_cases(path: str, dtype: str | None = None) -> list[Property]:
    """`parse_vnnlib_cases` of a file's text (see `_read`)."""
    return parse_vnnlib_cases(_read(path), dtype)
