"""The core of the per-op laws: the law record, its registration, regions and helpers.

Invariants:
- `LAWS` maps an op name to its one `OpLaw`; `law(op=..., cases=..., ...)` (keyword
  arguments only) writes it and refuses a second law for the same op. The family modules
  of `proofs.laws` (one per op family) call `law` when they are imported; importing
  `proofs.laws` imports every family, so `LAWS` is complete once `proofs.laws` is loaded.
  `LAWS` is the lookup used by the checks and the catalogue (`proofs.laws.checks`) and by
  `proofs.kernel_laws`.
- A law has representative `Case`s: argument shapes, attributes, an env and a *region*
  that builds the symbolic inputs. A region returns a `Point`: the input values (sympy
  symbols with sign assumptions, or expressions such as `c + p` with `p > 0`, or concrete
  kink points), the coordinate symbols `X` (plain real symbols of the same shapes) and a
  map ψ from the region's base symbols to expressions in `X` with φ(ψ(X)) = X, where φ
  builds the values. Every comparison the spec makes on a region's values is decided by
  sympy from the assumptions. A region's docstring is its label in the theorem's scope.
- A case is *smooth* when ψ exists (an open region) and *convention* otherwise (kinks,
  ties, stated conventions), unless the case states its kind.
- The sympy helpers here (`arr`, `ufunc`, `rat`, `vmax`, `vmin`, `vlog`, `rowwise`,
  `softmax_row`, `log_softmax_row`, `zeros`, `pair`, `first_max`) are written
  independently of `spec`: NumPy object arrays and sympy only. Nothing here imports a
  family module or the checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import sympy

from spec.shape import Shape, size
from spec.tensor import Tensor

from ..decide import lt, symbols
from ..records import ProofError

__all__ = [
    "ALL_OBLIGATIONS",
    "BINARY_SHAPES",
    "LAWS",
    "OBLIGATIONS",
    "SMALL_SHAPES",
    "UNARY_SHAPES",
    "Arr",
    "Case",
    "Definition",
    "OpLaw",
    "Point",
    "Region",
    "arr",
    "binary_free",
    "chain",
    "compare",
    "first_max",
    "fixed",
    "free",
    "kinked_unary",
    "law",
    "log_softmax_row",
    "pair",
    "pattern",
    "rat",
    "rows",
    "rowwise",
    "softmax_row",
    "ufunc",
    "unary_free",
    "vlog",
    "vmax",
    "vmin",
    "zeros",
]

OBLIGATIONS = ("adjoint", "derivative", "forward")
ALL_OBLIGATIONS = frozenset(OBLIGATIONS)
"""For a law's `numeric` field: every obligation may use the numeric fallback."""

Arr = np.ndarray


Definition = Callable[[list[Arr], Mapping[str, Any], tuple[int, ...]], Arr]


# --------------------------------------------------------------------------- regions


@dataclass
class Point:
    values: list[Tensor]
    coords: list[Tensor]
    psi: dict[sympy.Symbol, Any] | None
    direct: bool = False


Region = Callable[[tuple[Shape, ...]], Point]


def free(*assume: Mapping[str, Any]) -> Region:
    """Every argument a tensor of fresh real symbols (per-argument extra assumptions)."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        xs = [
            symbols(f"x{i}", s, **(assume[i] if i < len(assume) else {}))
            for i, s in enumerate(shapes)
        ]
        return Point(xs, xs, {}, direct=True)

    make.__doc__ = "free"
    return make


def _elem(pat: Any, X: sympy.Symbol, i: int, k: int) -> tuple[Any, dict | None]:
    p = sympy.Symbol(f"p{i}_{k}", positive=True)
    if pat == "free":
        return X, {}
    if pat == "pos":
        return p, {p: X}
    if pat == "neg":
        return -p, {p: -X}
    kind, *qs = pat
    q = [sympy.Rational(Fraction(v).numerator, Fraction(v).denominator) for v in qs]
    if kind == "above":
        return q[0] + p, {p: X - q[0]}
    if kind == "below":
        return q[0] - p, {p: q[0] - X}
    if kind == "between":
        lo, hi = q
        return lo + (hi - lo) / (1 + p), {p: (hi - lo) / (X - lo) - 1}
    if kind == "at":
        return q[0], None
    raise ProofError(f"unknown region pattern {pat!r}")


def pattern(*pats: Any) -> Region:
    """Argument 0's elements follow `pats` cyclically (pos, neg, ("at", q), ("above", q),
    ("below", q), ("between", lo, hi)); other arguments are free."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        values: list[Tensor] = []
        psi: dict | None = {}
        for i, X in enumerate(coords):
            if i > 0:
                values.append(X)
                continue
            data = []
            for k, xk in enumerate(X.data):
                v, m = _elem(pats[k % len(pats)], xk, i, k)
                data.append(v)
                psi = None if (psi is None or m is None) else {**psi, **m}
            values.append(Tensor(X.shape, tuple(data)))
        return Point(values, coords, psi)

    make.__doc__ = "x0 elements: " + ", ".join(_pat_text(p) for p in pats)
    return make


def _pat_text(p: Any) -> str:
    if isinstance(p, str):
        return {"pos": "x>0", "neg": "x<0", "free": "x free"}[p]
    kind, *qs = p
    qs = [str(Fraction(q)) for q in qs]
    return {
        "at": f"x={qs[0]}",
        "above": f"x>{qs[0]}",
        "below": f"x<{qs[0]}",
        "between": f"{qs[0]}<x<{qs[-1]}",
    }[kind]


def compare(*signs: int) -> Region:
    """Binary (a, b): sign +1 makes a > b, -1 a < b, 0 a tie a = b. Equal shapes: per
    element (signs cyclic), a_k = c_k + s·p_k, b_k = c_k - s·q_k. Broadcast shapes: one sign
    and one shared c, which orders every pair that broadcasting compares."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        sa, sb = shapes
        coords = [symbols("x0", sa), symbols("x1", sb)]
        same = sa == sb
        shared = sympy.Symbol("c", real=True)
        psi: dict | None = {}
        av, bv = [], []
        for which, X in enumerate(coords):
            data = []
            for k, xk in enumerate(X.data):
                s = signs[k % len(signs)] if same else signs[0]
                c = sympy.Symbol(f"c_{k}", real=True) if same else shared
                if s == 0:
                    data.append(c)
                    psi = None
                    continue
                p = sympy.Symbol(f"p{which}_{k}", positive=True)
                data.append(c + s * p if which == 0 else c - s * p)
                if psi is not None:
                    psi[p] = s * (xk - c) if which == 0 else s * (c - xk)
            (av if which == 0 else bv).append(data)
        values = [Tensor(sa, tuple(av[0])), Tensor(sb, tuple(bv[0]))]
        return Point(values, coords, psi)

    make.__doc__ = "a vs b: " + ", ".join({1: "a>b", -1: "a<b", 0: "a=b"}[s] for s in signs)
    return make


def rows(*orders: str) -> Region:
    """Argument 0 along its last axis, rows following `orders` cyclically: "inc" (strictly
    increasing), "dec", "mid" (the middle element is the strict maximum), "tie" (the first
    two elements tie for the maximum). Other arguments are free."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        X = coords[0]
        n = X.shape[-1]
        data: list[Any] = []
        psi: dict | None = {}
        for r in range(size(X.shape[:-1])):
            order = orders[r % len(orders)]
            xr = X.data[r * n : (r + 1) * n]
            c = sympy.Symbol(f"c_{r}", real=True)
            ps = [sympy.Symbol(f"p0_{r}_{j}", positive=True) for j in range(n)]
            row: list[Any] = []
            if order in ("inc", "dec"):
                s = 1 if order == "inc" else -1
                row.append(c)
                if psi is not None:
                    psi[c] = xr[0]
                for j in range(1, n):
                    row.append(row[-1] + s * ps[j])
                    if psi is not None:
                        psi[ps[j]] = s * (xr[j] - xr[j - 1])
            elif order == "mid":
                m = n // 2
                row = [c if j == m else c - ps[j] for j in range(n)]
                if psi is not None:
                    psi[c] = xr[m]
                    psi.update({ps[j]: xr[m] - xr[j] for j in range(n) if j != m})
            elif order == "tie":
                for j in range(n):
                    row.append(c if j < 2 else c - ps[j])
                psi = None if n >= 2 else psi
                if psi is not None:
                    psi[c] = xr[0]
            else:
                raise ProofError(f"unknown row order {order!r}")
            data.extend(row)
        values = [Tensor(X.shape, tuple(data)), *coords[1:]]
        return Point(values, coords, psi)

    make.__doc__ = "rows of x0: " + ", ".join(orders)
    return make


def fixed(values: Mapping[int, Sequence[Any]]) -> Any:
    """Arguments named in `values` at those exact rational points, the others free."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        vals = [
            Tensor(s, tuple(rat(v) for v in values[i])) if i in values else coords[i]
            for i, s in enumerate(shapes)
        ]
        return Point(vals, coords, None)

    make.__doc__ = "args " + ",".join(str(i) for i in sorted(values)) + " at rational points"
    return make


def chain(*ranks: int) -> Any:
    """Argument 0's element k is the ranks[k]-th smallest of a strict chain: value
    c + p_1 + ... + p_r for rank r (p > 0), so every pair is ordered; other args free."""

    def make(shapes: tuple[Shape, ...]) -> Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        X = coords[0]
        n = len(X.data)
        assert sorted(ranks[:n]) == list(range(n)), "ranks must be a permutation"
        c = sympy.Symbol("c", real=True)
        ps = [sympy.Symbol(f"p0_{r}", positive=True) for r in range(n)]
        by_rank = {r: k for k, r in enumerate(ranks[:n])}
        data = tuple(c + sympy.Add(*ps[1 : ranks[k] + 1]) for k in range(n))
        psi: dict[Any, Any] = {c: X.data[by_rank[0]]}
        psi.update({ps[r]: X.data[by_rank[r]] - X.data[by_rank[r - 1]] for r in range(1, n)})
        return Point([Tensor(X.shape, data), *coords[1:]], coords, psi)

    make.__doc__ = "x0 element ranks " + ",".join(str(r) for r in ranks)
    return make


# --------------------------------------------------------------------------- laws


@dataclass(frozen=True)
class Case:
    shapes: tuple[Shape, ...]
    region: Region
    attrs: Mapping[str, Any] = field(default_factory=dict)
    env: tuple[int, ...] = ()
    kind: str | None = None  # None: smooth if the region has ψ, else convention
    forward: bool = True

    def label(self) -> str:
        shp = ", ".join(str(s) for s in self.shapes) or "no args"
        attrs = "".join(f" {k}={_fmt(v)}" for k, v in self.attrs.items())
        env = f" env={list(self.env)}" if self.env else ""
        return f"({shp}){attrs}{env} [{self.region.__doc__}]"


def _fmt(v: Any) -> str:
    if isinstance(v, Fraction):
        return str(v)
    if isinstance(v, tuple):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


@dataclass(frozen=True)
class OpLaw:
    """The written law of one op.

    `definition(values, attrs, env)` is the independent forward definition (object array);
    `characterize(values, coords, out, attrs)` alternatively returns expressions that must
    be zero (and `True` flags that must hold). `conv_jvp(values, tangents, attrs, env)` and
    `conv_vjp(values, g, attrs, env)` state the convention on non-smooth cases; the string
    "definition" means: the derivative of `definition` along the tangent. `numeric` lists
    the obligations allowed to fall back to exact-rational-point evaluation."""

    op: str
    cases: tuple[Case, ...]
    definition_text: str
    derivative_text: str
    definition: Definition | None = None
    characterize: Callable[..., list[Any]] | None = None
    conv_jvp: Callable[..., Arr] | str | None = None
    conv_vjp: Callable[..., list[Arr]] | None = None
    numeric: frozenset[str] = frozenset()


LAWS: dict[str, OpLaw] = {}


def law(
    *,
    op: str,
    cases: Sequence[Case],
    definition_text: str,
    derivative_text: str,
    definition: Definition | None = None,
    characterize: Callable[..., list[Any]] | None = None,
    conv_jvp: Callable[..., Arr] | str | None = None,
    conv_vjp: Callable[..., list[Arr]] | None = None,
    numeric: frozenset[str] = frozenset(),
) -> None:
    """Write the law of `op` into `LAWS` (once per op; see `OpLaw` for the fields)."""
    if op in LAWS:
        raise ProofError(f"law for {op!r} written twice")
    LAWS[op] = OpLaw(
        op=op,
        cases=tuple(cases),
        definition_text=definition_text,
        derivative_text=derivative_text,
        definition=definition,
        characterize=characterize,
        conv_jvp=conv_jvp,
        conv_vjp=conv_vjp,
        numeric=numeric,
    )


# --------------------------------------------------------------------------- sympy helpers


def arr(x: Any) -> Arr:
    """x as an object array (frompyfunc returns bare scalars for 0-d inputs)."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        return x
    out = np.empty(np.shape(x), dtype=object)
    if out.ndim == 0:
        out[()] = x if not isinstance(x, np.ndarray) else x[()]
    else:
        out[...] = x
    return out


def ufunc(fn: Callable[..., Any], nin: int) -> Callable[..., Arr]:
    u = np.frompyfunc(fn, nin, 1)
    return lambda *a: arr(u(*a))


def rat(q: Any) -> sympy.Rational:
    f = Fraction(q)
    return sympy.Rational(f.numerator, f.denominator)


vmax = ufunc(lambda a, b: (a + b + sympy.Abs(a - b)) / 2, 2)

vmin = ufunc(lambda a, b: (a + b - sympy.Abs(a - b)) / 2, 2)

vlog = ufunc(sympy.log, 1)


def rowwise(x: Arr, fn: Callable[[list[Any]], list[Any]]) -> Arr:
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    out = np.empty(flat.shape, dtype=object)
    for r in range(flat.shape[0]):
        out[r, :] = fn(list(flat[r]))
    return out.reshape(x.shape)


def softmax_row(row: list[Any]) -> list[Any]:
    s = sympy.Add(*[sympy.exp(v) for v in row])
    return [sympy.exp(v) / s for v in row]


def log_softmax_row(row: list[Any]) -> list[Any]:
    s = sympy.log(sympy.Add(*[sympy.exp(v) for v in row]))
    return [v - s for v in row]


# ---------------------------------------------------------------- shape sets, case builders

UNARY_SHAPES: tuple[Shape, ...] = ((), (3,), (2, 2), (2, 1, 2))

SMALL_SHAPES: tuple[Shape, ...] = ((), (2,), (2, 2))

BINARY_SHAPES: tuple[tuple[Shape, Shape], ...] = (
    ((), ()),
    ((3,), (3,)),
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((2, 1), (1, 3)),
    ((), (2, 2)),
    ((2, 1, 2), (3, 1)),
)


def unary_free(shapes: Sequence[Shape] = UNARY_SHAPES, **assume: Any) -> list[Case]:
    return [Case((s,), free(assume)) for s in shapes]


def binary_free(*assume: Mapping[str, Any]) -> list[Case]:
    return [Case(s, free(*assume)) for s in BINARY_SHAPES]


def kinked_unary(
    pats_smooth: Sequence[Any],
    kinks: Sequence[Any],
    mixed: Sequence[Any],
    shapes: Sequence[Shape] = SMALL_SHAPES,
    attrs: Mapping[str, Any] | None = None,
) -> list[Case]:
    a = dict(attrs or {})
    cases = [Case((s,), pattern(p), a) for p in pats_smooth for s in shapes]
    cases += [Case(((),), pattern(k), a) for k in kinks]
    if mixed:
        cases.append(Case(((len(mixed),),), pattern(*mixed), a))
    return cases


def zeros(shape: Shape) -> Arr:
    return arr(np.full(shape, sympy.Integer(0), dtype=object))


def pair(a: Mapping[str, Any], key: str, default: tuple[int, int]) -> tuple[int, int]:
    v = a.get(key)
    return default if v is None else (int(v[0]), int(v[1]))


def first_max(lane: Sequence[Any]) -> int:
    best = 0
    for k in range(1, len(lane)):
        if lt(lane[best], lane[k]):
            best = k
    return best
