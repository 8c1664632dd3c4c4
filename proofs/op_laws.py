"""Per-op laws: `op.<name>.adjoint`, `op.<name>.derivative`, `op.<name>.forward` for every
op of `spec.ops.OPS`, checked as sympy identities over `spec.domains.SYMBOLIC`.

Invariants:
- `register_all` iterates the op table: every op gets its three obligations. An op without
  an entry in `LAWS` gets obligations with status "missing" whose checks fail, so a new op
  cannot slip through unlawed. The checks fetch the op from `OPS` when they run.
- Each law has representative *cases*: argument shapes, attributes, an env and a *region*
  that builds the symbolic inputs. A region returns the input values (sympy symbols with
  sign assumptions, or expressions such as `c + p` with `p > 0`, or concrete kink points),
  the coordinate symbols `X` (plain real symbols of the same shapes) and a map ψ from the
  region's base symbols to expressions in `X` with φ(ψ(X)) = X, where φ builds the values
  (checked as an identity in every derivative check). Every comparison the spec makes on
  a region's values is decided by sympy from the assumptions, so on the (open) region
  the spec's branch choices are constant and its forward is one analytic expression.
- A case is *smooth* when ψ exists (an open region) and *convention* otherwise (kinks,
  ties, and the stated conventions such as sqrt' = 0 for x <= 0, or detach's zero JVP).
- adjoint: ⟨jvp(x, dx), δ⟩ = Σ_i ⟨dx_i, vjp(x, δ)_i⟩ (spec.tensor.dot, left folds) on every
  case, with symbolic dx and δ.
- derivative: on smooth cases, jvp(x, dx) = d/dt forward(x + t·dx)|_{t=0} (sympy diff).
  On free regions (no comparisons) the spec forward is evaluated at x + t·dx itself; on
  constrained regions the region's forward expression is rewritten in coordinates via ψ
  and differentiated along dx. On convention cases the JVP (and, where stated, the VJP) is
  compared with the law's stated convention, written independently of the spec.
- forward: the spec forward equals the law's independent definition (NumPy object-array
  broadcasting, |.| written as sqrt(x²), max as (a+b+|a-b|)/2, Euler forms for sin/cos,
  ...) or satisfies its characterisation (exp: y' = y, y(0) = 1; sqrt: y² = x, y >= 0;
  log: exp(y) = x).
- Identities are decided by `proofs.decide.decide_zero`; the numeric fallback is enabled
  only for the obligations listed in a law's `numeric` field, and results count how each
  identity was decided.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy

from spec.domains import SYMBOLIC
from spec.errors import TorchLeanError
from spec.ops import OPS
from spec.shape import Shape, size
from spec.tensor import Tensor, dot, fold_add

from .decide import as_array, decide_zero, lt, symbols
from .registry import CheckContext, CheckResult, ProofError, Scope, Theorem, register

__all__ = ["LAWS", "OBLIGATIONS", "OpLaw", "check_obligation", "register_all"]

OBLIGATIONS = ("adjoint", "derivative", "forward")
S = SYMBOLIC
_T = sympy.Symbol("t", real=True)
_HALF = sympy.Rational(1, 2)

Arr = np.ndarray
Definition = Callable[[list[Arr], Mapping[str, Any], tuple[int, ...]], Arr]


# --------------------------------------------------------------------------- regions


@dataclass
class _Point:
    values: list[Tensor]
    coords: list[Tensor]
    psi: dict[sympy.Symbol, Any] | None
    direct: bool = False


Region = Callable[[tuple[Shape, ...]], _Point]


def _free(*assume: Mapping[str, Any]) -> Region:
    """Every argument a tensor of fresh real symbols (per-argument extra assumptions)."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
        xs = [
            symbols(f"x{i}", s, **(assume[i] if i < len(assume) else {}))
            for i, s in enumerate(shapes)
        ]
        return _Point(xs, xs, {}, direct=True)

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


def _pat(*pats: Any) -> Region:
    """Argument 0's elements follow `pats` cyclically (pos, neg, ("at", q), ("above", q),
    ("below", q), ("between", lo, hi)); other arguments are free."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
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
        return _Point(values, coords, psi)

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


def _cmp(*signs: int) -> Region:
    """Binary (a, b): sign +1 makes a > b, -1 a < b, 0 a tie a = b. Equal shapes: per
    element (signs cyclic), a_k = c_k + s·p_k, b_k = c_k - s·q_k. Broadcast shapes: one sign
    and one shared c, which orders every pair that broadcasting compares."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
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
        return _Point(values, coords, psi)

    make.__doc__ = "a vs b: " + ", ".join({1: "a>b", -1: "a<b", 0: "a=b"}[s] for s in signs)
    return make


def _rows(*orders: str) -> Region:
    """Argument 0 along its last axis, rows following `orders` cyclically: "inc" (strictly
    increasing), "dec", "mid" (the middle element is the strict maximum), "tie" (the first
    two elements tie for the maximum). Other arguments are free."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
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
        return _Point(values, coords, psi)

    make.__doc__ = "rows of x0: " + ", ".join(orders)
    return make


# --------------------------------------------------------------------------- laws


@dataclass(frozen=True)
class _Case:
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
    cases: tuple[_Case, ...]
    definition_text: str
    derivative_text: str
    definition: Definition | None = None
    characterize: Callable[..., list[Any]] | None = None
    conv_jvp: Callable[..., Arr] | str | None = None
    conv_vjp: Callable[..., list[Arr]] | None = None
    numeric: frozenset[str] = frozenset()


LAWS: dict[str, OpLaw] = {}


def _law(
    op: str, cases: Sequence[_Case], definition_text: str, derivative_text: str, **kw: Any
) -> None:
    if op in LAWS:
        raise ProofError(f"law for {op!r} written twice")
    LAWS[op] = OpLaw(op, tuple(cases), definition_text, derivative_text, **kw)


def _arr(x: Any) -> Arr:
    """x as an object array (frompyfunc returns bare scalars for 0-d inputs)."""
    if isinstance(x, np.ndarray) and x.dtype == object:
        return x
    out = np.empty(np.shape(x), dtype=object)
    if out.ndim == 0:
        out[()] = x if not isinstance(x, np.ndarray) else x[()]
    else:
        out[...] = x
    return out


def _ufunc(fn: Callable[..., Any], nin: int) -> Callable[..., Arr]:
    u = np.frompyfunc(fn, nin, 1)
    return lambda *a: _arr(u(*a))


def _rat(q: Any) -> sympy.Rational:
    f = Fraction(q)
    return sympy.Rational(f.numerator, f.denominator)


_vmax = _ufunc(lambda a, b: (a + b + sympy.Abs(a - b)) / 2, 2)
_vmin = _ufunc(lambda a, b: (a + b - sympy.Abs(a - b)) / 2, 2)
_vexp = _ufunc(sympy.exp, 1)
_vlog = _ufunc(sympy.log, 1)
_vtanh_def = _ufunc(lambda v: (sympy.exp(v) - sympy.exp(-v)) / (sympy.exp(v) + sympy.exp(-v)), 1)


def _reduce_to(G: Arr, shape: Shape) -> Arr:
    """Sum a broadcast-shaped array back to `shape` (NumPy sums; independent of spec)."""
    lead = G.ndim - len(shape)
    G = G.sum(axis=tuple(range(lead))) if lead else G
    axes = tuple(i for i, d in enumerate(shape) if d == 1 and G.shape[i] != 1)
    return _arr(G.sum(axis=axes, keepdims=True) if axes else G)


def _rowwise(x: Arr, fn: Callable[[list[Any]], list[Any]]) -> Arr:
    n = x.shape[-1]
    flat = x.reshape(-1, n)
    out = np.empty(flat.shape, dtype=object)
    for r in range(flat.shape[0]):
        out[r, :] = fn(list(flat[r]))
    return out.reshape(x.shape)


def _softmax_def(row: list[Any]) -> list[Any]:
    s = sympy.Add(*[sympy.exp(v) for v in row])
    return [sympy.exp(v) / s for v in row]


def _log_softmax_def(row: list[Any]) -> list[Any]:
    s = sympy.log(sympy.Add(*[sympy.exp(v) for v in row]))
    return [v - s for v in row]


# Shape sets ---------------------------------------------------------------------------

_UNARY_SHAPES: tuple[Shape, ...] = ((), (3,), (2, 2), (2, 1, 2))
_SMALL_SHAPES: tuple[Shape, ...] = ((), (2,), (2, 2))
_BINARY_SHAPES: tuple[tuple[Shape, Shape], ...] = (
    ((), ()),
    ((3,), (3,)),
    ((2, 3), (2, 3)),
    ((2, 3), (3,)),
    ((2, 1), (1, 3)),
    ((), (2, 2)),
    ((2, 1, 2), (3, 1)),
)


def _unary_free(shapes: Sequence[Shape] = _UNARY_SHAPES, **assume: Any) -> list[_Case]:
    return [_Case((s,), _free(assume)) for s in shapes]


def _binary_free(*assume: Mapping[str, Any]) -> list[_Case]:
    return [_Case(s, _free(*assume)) for s in _BINARY_SHAPES]


# --------------------------------------------------------------------------- elementwise

_law(
    "add",
    _binary_free(),
    "a + b with NumPy broadcasting",
    "jvp = da + db (linear)",
    definition=lambda v, a, e: _arr(v[0] + v[1]),
)
_law(
    "sub",
    _binary_free(),
    "a - b with NumPy broadcasting",
    "jvp = da - db (linear)",
    definition=lambda v, a, e: _arr(v[0] - v[1]),
)
_law(
    "mul",
    _binary_free(),
    "a * b with NumPy broadcasting",
    "jvp = da·b + a·db",
    definition=lambda v, a, e: _arr(v[0] * v[1]),
)
_law(
    "div",
    _binary_free({}, {"nonzero": True}),
    "a / b with NumPy broadcasting, b != 0",
    "jvp = da/b - db·a/b² (b != 0)",
    definition=lambda v, a, e: _arr(v[0] / v[1]),
)


def _max_cases() -> list[_Case]:
    cases = []
    for shapes in _BINARY_SHAPES:
        for s in (1, -1, 0):
            cases.append(_Case(shapes, _cmp(s)))
    cases.append(_Case(((3,), (3,)), _cmp(1, -1, 0)))
    return cases


def _max_conv(larger: bool) -> tuple[Callable[..., Arr], Callable[..., list[Arr]]]:
    def win(a: Any, b: Any) -> int:
        if lt(b, a):
            return 1 if larger else -1
        if lt(a, b):
            return -1 if larger else 1
        return 0

    def jvp(v: list[Arr], d: list[Arr], attrs: Any, env: Any) -> Arr:
        f = _ufunc(lambda a, b, da, db: {1: da, -1: db, 0: (da + db) * _HALF}[win(a, b)], 4)
        return f(*v, *d)

    def vjp(v: list[Arr], g: Arr, attrs: Any, env: Any) -> list[Arr]:
        A, B = np.broadcast_arrays(v[0], v[1])
        ga = _ufunc(lambda a, b, gg: {1: gg, -1: 0, 0: gg * _HALF}[win(a, b)], 3)(A, B, g)
        gb = _ufunc(lambda a, b, gg: {1: 0, -1: gg, 0: gg * _HALF}[win(a, b)], 3)(A, B, g)
        return [_reduce_to(ga, v[0].shape), _reduce_to(gb, v[1].shape)]

    return jvp, vjp


for _name, _larger, _sym in (("maximum", True, "+"), ("minimum", False, "-")):
    _j, _v = _max_conv(_larger)
    _law(
        _name,
        _max_cases(),
        f"(a + b {_sym} |a - b|)/2 elementwise with NumPy broadcasting",
        f"jvp = da where a is the strict {'larger' if _larger else 'smaller'}, db where b "
        "is, and (da + db)/2 at a tie; at a tie the VJP gives g/2 to each side (the stated "
        "subgradient), each reduced over broadcast axes",
        definition=(lambda v, a, e, L=_larger: _vmax(v[0], v[1]) if L else _vmin(v[0], v[1])),
        conv_jvp=_j,
        conv_vjp=_v,
    )

_law("neg", _unary_free(), "-x", "jvp = -dx", definition=lambda v, a, e: _arr(-v[0]))
_law(
    "scale",
    [_Case((s,), _free(), {"c": Fraction(-3, 2)}) for s in _UNARY_SHAPES]
    + [_Case(((2,),), _free(), {"c": Fraction(0)}), _Case(((),), _free(), {"c": Fraction(7)})],
    "c·x with c the exact rational attribute",
    "jvp = c·dx",
    definition=lambda v, a, e: _arr(_rat(a["c"]) * v[0]),
)


def _kinked_unary(
    pats_smooth: Sequence[Any],
    kinks: Sequence[Any],
    mixed: Sequence[Any],
    shapes: Sequence[Shape] = _SMALL_SHAPES,
    attrs: Mapping[str, Any] | None = None,
) -> list[_Case]:
    a = dict(attrs or {})
    cases = [_Case((s,), _pat(p), a) for p in pats_smooth for s in shapes]
    cases += [_Case(((),), _pat(k), a) for k in kinks]
    if mixed:
        cases.append(_Case(((len(mixed),),), _pat(*mixed), a))
    return cases


_law(
    "relu",
    _kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    "(x + |x|)/2",
    "jvp = dx for x > 0, 0 for x < 0; at the kink relu'(0) = 0",
    definition=lambda v, a, e: _vmax(v[0], 0),
    conv_jvp=lambda v, d, a, e: _ufunc(lambda x, dx: dx if lt(0, x) else 0, 2)(v[0], d[0]),
)
_law(
    "abs",
    _kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    "sqrt(x²)",
    "jvp = sign(x)·dx; at the kink abs'(0) = 0",
    definition=lambda v, a, e: _ufunc(lambda x: sympy.sqrt(x**2), 1)(v[0]),
    conv_jvp=lambda v, d, a, e: _ufunc(
        lambda x, dx: dx if lt(0, x) else (-dx if lt(x, 0) else 0), 2
    )(v[0], d[0]),
)

_LO, _HI = Fraction(-1), Fraction(2)


def _clamp_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    lo, hi = _rat(a["lo"]), _rat(a["hi"])
    return _ufunc(lambda x, dx: dx if (lt(lo, x) and lt(x, hi)) else 0, 2)(v[0], d[0])


_CLAMP_SMOOTH = [("below", _LO), ("between", _LO, _HI), ("above", _HI)]
_CLAMP_KINKS = [("at", _LO), ("at", _HI)]
_CLAMP_DEGENERATE = _Case(
    ((3,),), _pat(("below", 1), ("at", 1), ("above", 1)), {"lo": Fraction(1), "hi": Fraction(1)}
)
_law(
    "clamp",
    [
        *_kinked_unary(
            _CLAMP_SMOOTH, _CLAMP_KINKS, _CLAMP_SMOOTH + _CLAMP_KINKS, attrs={"lo": _LO, "hi": _HI}
        ),
        _CLAMP_DEGENERATE,
    ],
    "min(max(x, lo), hi) with max/min as (a + b ± |a - b|)/2",
    "jvp = dx for lo < x < hi, 0 for x < lo or x > hi; at the bounds clamp' = 0",
    definition=lambda v, a, e: _vmin(_vmax(v[0], _rat(a["lo"])), _rat(a["hi"])),
    conv_jvp=_clamp_conv,
)


def _sqrt_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    for x, y in zip(v[0].data, out.data, strict=True):
        res += [y**2 - x, bool(y.is_nonnegative)]
    return res


_law(
    "sqrt",
    [_Case((s,), _pat("pos")) for s in _SMALL_SHAPES]
    + [
        _Case(((),), _pat(("at", 0))),
        _Case(((2,),), _pat("neg"), kind="convention", forward=False),
        _Case(((3,),), _pat("pos", ("at", 0), "neg"), forward=False),
    ],
    "the non-negative square root: y² = x and y >= 0 (x >= 0; x < 0 is outside the real "
    "forward's scope)",
    "jvp = dx/(2·sqrt x) for x > 0; by convention sqrt' = 0 for x <= 0",
    characterize=_sqrt_char,
    conv_jvp=lambda v, d, a, e: _ufunc(
        lambda x, dx: dx / (2 * sympy.sqrt(x)) if lt(0, x) else 0, 2
    )(v[0], d[0]),
)


def _exp_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    X = c[0].data
    for k, y in enumerate(out.data):
        res += [sympy.diff(y, X[k]) - y, y.subs(X[k], 0) - 1]
        res += [sympy.diff(y, X[j]) for j in range(len(X)) if j != k]
    return res


_law(
    "exp",
    _unary_free(),
    "the solution of y' = y, y(0) = 1, elementwise",
    "jvp = exp(x)·dx",
    characterize=_exp_char,
)


def _log_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Any) -> list[Any]:
    res: list[Any] = []
    for x, y in zip(v[0].data, out.data, strict=True):
        res += [sympy.exp(y) - x, bool(y.is_real)]
    return res


_law(
    "log",
    [_Case((s,), _pat("pos")) for s in _UNARY_SHAPES],
    "the real inverse of exp: exp(y) = x with y real, for x > 0 (the op's precondition)",
    "jvp = dx/x for x > 0",
    characterize=_log_char,
)
_law(
    "tanh",
    _unary_free(),
    "(e^x - e^-x)/(e^x + e^-x)",
    "jvp = (1 - tanh²x)·dx",
    definition=lambda v, a, e: _vtanh_def(v[0]),
)
_law(
    "sin",
    _unary_free(),
    "(e^{ix} - e^{-ix})/(2i)",
    "jvp = cos(x)·dx",
    definition=lambda v, a, e: _ufunc(
        lambda x: (sympy.exp(sympy.I * x) - sympy.exp(-sympy.I * x)) / (2 * sympy.I), 1
    )(v[0]),
)
_law(
    "cos",
    _unary_free(),
    "(e^{ix} + e^{-ix})/2",
    "jvp = -sin(x)·dx",
    definition=lambda v, a, e: _ufunc(
        lambda x: (sympy.exp(sympy.I * x) + sympy.exp(-sympy.I * x)) / 2, 1
    )(v[0]),
)
_law(
    "detach",
    [_Case((s,), _free(), kind="convention") for s in _UNARY_SHAPES],
    "the identity x",
    "non-differentiable by declaration (stop-gradient): jvp = 0 and vjp = 0, which is "
    "not the derivative of the identity forward",
    definition=lambda v, a, e: _arr(v[0]),
    conv_jvp=lambda v, d, a, e: _arr(np.zeros(v[0].shape, dtype=object) * 0),
    conv_vjp=lambda v, g, a, e: [_arr(np.zeros(v[0].shape, dtype=object) * 0)],
)


def _const_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    out = np.empty(len(a["values"]), dtype=object)
    for i, q in enumerate(a["values"]):
        out[i] = _rat(q)
    return out.reshape(a["shape"])


_law(
    "const",
    [
        _Case((), _free(), {"shape": (), "values": (Fraction(1, 3),)}),
        _Case((), _free(), {"shape": (3,), "values": (Fraction(1, 2), Fraction(-3), Fraction(0))}),
        _Case((), _free(), {"shape": (2, 2), "values": tuple(Fraction(k, 7) for k in range(4))}),
        _Case((), _free(), {"shape": (0,), "values": ()}),
    ],
    "the exact rational values, cast into the domain, in row-major order",
    "no arguments: jvp = 0 (the derivative of a constant) and the VJP is the empty list",
    definition=_const_def,
)

# --------------------------------------------------------------------------- reductions

_law(
    "sum",
    _unary_free(((), (3,), (2, 3), (2, 2, 2), (0,))),
    "Σ of all elements (0 for an empty tensor)",
    "jvp = Σ dx (linear)",
    definition=lambda v, a, e: _arr(sympy.Add(*v[0].reshape(-1))),
)
_law(
    "reduce_sum",
    [
        _Case(((2, 3),), _free(), {"axis": 0}),
        _Case(((2, 3),), _free(), {"axis": 1}),
        _Case(((2, 3, 2),), _free(), {"axis": 1}),
        _Case(((3,),), _free(), {"axis": 0}),
        _Case(((2, 0),), _free(), {"axis": 1}),
    ],
    "NumPy sum over the axis",
    "jvp = reduce_sum(dx) (linear)",
    definition=lambda v, a, e: (
        _arr(v[0].sum(axis=a["axis"]))
        if v[0].size
        else _arr(np.zeros(v[0].shape[: a["axis"]] + v[0].shape[a["axis"] + 1 :], dtype=object) * 0)
    ),
)


def _np_matmul(v: list[Arr], a: Any, e: Any) -> Arr:
    A, B = v
    if A.shape[-1] == 0:
        shape = (*np.broadcast_shapes(A.shape[:-2], B.shape[:-2]), A.shape[-2], B.shape[-1])
        return _arr(np.full(shape, sympy.Integer(0), dtype=object))
    return _arr(np.matmul(A, B))


_law(
    "matmul",
    [
        _Case(((2, 3), (3, 2)), _free()),
        _Case(((3, 3), (3, 1)), _free()),
        _Case(((1, 1), (1, 1)), _free()),
        _Case(((2, 2, 3), (2, 3, 2)), _free()),
        _Case(((1, 2, 2), (3, 2, 2)), _free()),
        _Case(((2, 2, 3), (3, 2)), _free()),
        _Case(((2, 0), (0, 2)), _free()),
    ],
    "NumPy matmul (batch prefixes broadcast)",
    "jvp = dA@B + A@dB",
    definition=_np_matmul,
)


def _linear_def(v: list[Arr], a: Any, e: Any) -> Arr:
    x, w, b = v
    return _arr(np.matmul(x, w.T) + b)


_law(
    "linear",
    [
        _Case(((3,), (2, 3), (2,)), _free()),
        _Case(((4, 3), (2, 3), (2,)), _free()),
        _Case(((1,), (1, 1), (1,)), _free()),
        _Case(((2, 2), (3, 2), (3,)), _free()),
    ],
    "x @ wᵀ + b (NumPy)",
    "jvp = dx@wᵀ + x@dwᵀ + db",
    definition=_linear_def,
)

# --------------------------------------------------------------------------- structure

_law(
    "reshape",
    [
        _Case(((2, 3),), _free(), {"shape": (3, 2)}),
        _Case(((6,),), _free(), {"shape": (2, 1, 3)}),
        _Case(((),), _free(), {"shape": (1, 1)}),
        _Case(((2, 2),), _free(), {"shape": (4,)}),
    ],
    "NumPy reshape (row-major)",
    "jvp = reshape(dx) (linear)",
    definition=lambda v, a, e: _arr(v[0].reshape(a["shape"])),
)
_law(
    "swap_adjacent",
    [
        _Case(((2, 3),), _free(), {"axis": 0}),
        _Case(((2, 3, 2),), _free(), {"axis": 1}),
        _Case(((2, 3, 2),), _free(), {"axis": 0}),
    ],
    "NumPy swapaxes(axis, axis + 1)",
    "jvp = swap(dx) (linear)",
    definition=lambda v, a, e: _arr(np.swapaxes(v[0], a["axis"], a["axis"] + 1)),
)
_law(
    "broadcast_to",
    [
        _Case(((),), _free(), {"shape": (2, 3)}),
        _Case(((3,),), _free(), {"shape": (2, 3)}),
        _Case(((2, 1),), _free(), {"shape": (2, 3)}),
        _Case(((2, 3),), _free(), {"shape": (2, 3)}),
        _Case(((1, 3),), _free(), {"shape": (2, 2, 3)}),
    ],
    "NumPy broadcast_to",
    "jvp = broadcast_to(dx) (linear)",
    definition=lambda v, a, e: _arr(np.broadcast_to(v[0], a["shape"]).copy()),
)
_law(
    "concat",
    [
        _Case(((2,),), _free()),
        _Case(((2,), (3,)), _free()),
        _Case(((1, 2), (2, 2), (1, 2)), _free()),
        _Case(((0, 2), (2, 2)), _free()),
    ],
    "NumPy concatenate on axis 0",
    "jvp = concat(dx_i) (linear)",
    definition=lambda v, a, e: _arr(np.concatenate(v, axis=0)),
)
_law(
    "slice",
    [
        _Case(((4,),), _free(), {"start": 1, "stop": 3}),
        _Case(((3, 2),), _free(), {"start": 0, "stop": 3}),
        _Case(((3, 2),), _free(), {"start": 2, "stop": 2}),
        _Case(((4, 2),), _free(), {"start": 3, "stop": 4}),
    ],
    "x[start:stop] on the leading axis",
    "jvp = dx[start:stop] (linear)",
    definition=lambda v, a, e: _arr(v[0][a["start"] : a["stop"]]),
)


def _select_def(v: list[Arr], a: Mapping[str, Any], e: tuple[int, ...]) -> Arr:
    i = a["index"] if a.get("index") is not None else e[a["env_slot"]]
    return _arr(v[0][i])


_law(
    "select",
    [
        _Case(((3,),), _free(), {"index": 1}),
        _Case(((3, 2),), _free(), {"index": 2}),
        _Case(((2, 2, 2),), _free(), {"index": 0}),
        _Case(((3, 2),), _free(), {"env_slot": 0}, env=(1,)),
    ],
    "x[i] on the leading axis, i = index or env[env_slot]",
    "jvp = dx[i] (linear)",
    definition=_select_def,
)
_law(
    "index_select",
    [
        _Case(((3,),), _free(), {"indices": (2, 0, 2)}),
        _Case(((3, 2),), _free(), {"indices": (1,)}),
        _Case(((3, 2),), _free(), {"indices": (0, 0, 1, 2)}),
        _Case(((2, 2),), _free(), {"indices": ()}),
    ],
    "NumPy x[indices] (rows, repeats allowed)",
    "jvp = dx[indices] (linear)",
    definition=lambda v, a, e: (
        _arr(v[0][list(a["indices"])])
        if a["indices"]
        else _arr(np.zeros((0, *v[0].shape[1:]), dtype=object))
    ),
)


def _scatter_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = v[0]
    out = np.full((a["size"], *x.shape[1:]), sympy.Integer(0), dtype=object)
    for k, j in enumerate(a["indices"]):
        out[j] = out[j] + x[k]
    return _arr(out)


_law(
    "scatter_add",
    [
        _Case(((3,),), _free(), {"indices": (1, 0, 1), "size": 2}),
        _Case(((2, 2),), _free(), {"indices": (0, 0), "size": 3}),
        _Case(((0,),), _free(), {"indices": (), "size": 2}),
    ],
    "out[j] = Σ_{k: indices[k] = j} x[k], zero rows elsewhere",
    "jvp = scatter_add(dx) (linear)",
    definition=_scatter_def,
)

# --------------------------------------------------------------------------- softmax family

_ROW_CASES = (
    ((3,), ("inc",)),
    ((3,), ("dec",)),
    ((3,), ("mid",)),
    ((3,), ("tie",)),
    ((1,), ("inc",)),
    ((2, 3), ("inc", "mid")),
    ((2, 1, 2), ("dec", "tie")),
)
_law(
    "softmax",
    [_Case((s,), _rows(*o)) for s, o in _ROW_CASES],
    "exp(x_j)/Σ_k exp(x_k) along the last axis (no max-shift)",
    "jvp_j = y_j·(dx_j - Σ_k y_k·dx_k); at ties of the row maximum (where the max-shift's "
    "argmax is not locally constant) the JVP is compared with the derivative of the "
    "independent definition, softmax being smooth",
    definition=lambda v, a, e: _rowwise(v[0], _softmax_def),
    conv_jvp="definition",
)
_law(
    "log_softmax",
    [_Case((s,), _rows(*o)) for s, o in _ROW_CASES],
    "x_j - log Σ_k exp(x_k) along the last axis (no max-shift)",
    "jvp_j = dx_j - Σ_k p_k·dx_k with p = softmax(x); at ties compared with the derivative "
    "of the independent definition",
    definition=lambda v, a, e: _rowwise(v[0], _log_softmax_def),
    conv_jvp="definition",
)

# --------------------------------------------------------------------------- composites

_law(
    "inv",
    [_Case((s,), _free({"nonzero": True})) for s in _SMALL_SHAPES] + [_Case(((2,),), _pat("neg"))],
    "1/x (x != 0)",
    "jvp = -dx/x²",
    definition=lambda v, a, e: _arr(1 / v[0]),
)
_law(
    "mean",
    _unary_free(((), (3,), (2, 3), (2, 1, 2))),
    "Σ x / size(x)",
    "jvp = mean(dx) (linear)",
    definition=lambda v, a, e: _arr(sympy.Add(*v[0].reshape(-1)) / v[0].size),
)
_law(
    "reduce_mean",
    [
        _Case(((2, 3),), _free(), {"axis": 0}),
        _Case(((2, 3),), _free(), {"axis": 1}),
        _Case(((2, 2, 2),), _free(), {"axis": 2}),
        _Case(((3,),), _free(), {"axis": 0}),
    ],
    "NumPy sum over the axis divided by the axis length",
    "jvp = reduce_mean(dx) (linear)",
    definition=lambda v, a, e: _arr(v[0].sum(axis=a["axis"]) / v[0].shape[a["axis"]]),
)
_law(
    "transpose",
    [_Case((s,), _free()) for s in ((2, 3), (2, 2, 3), (1, 3))],
    "NumPy swapaxes(-1, -2)",
    "jvp = transpose(dx) (linear)",
    definition=lambda v, a, e: _arr(np.swapaxes(v[0], -1, -2)),
)
_law(
    "sigmoid",
    _unary_free(_SMALL_SHAPES),
    "1/(1 + exp(-x))",
    "jvp = σ(x)(1 - σ(x))·dx",
    definition=lambda v, a, e: _ufunc(lambda x: 1 / (1 + sympy.exp(-x)), 1)(v[0]),
)
_law(
    "softplus",
    _kinked_unary(["pos", "neg"], [("at", 0)], ["pos", "neg", ("at", 0)]),
    "log(1 + exp(x)) (the spec computes max(x, 0) + log(1 + exp(-|x|)))",
    "jvp = σ(x)·dx everywhere; at x = 0 the composed subgradient (maximum's tie 1/2 "
    "plus abs'(0) = 0) gives σ(0) = 1/2, the true derivative, compared with the derivative "
    "of the independent definition",
    definition=lambda v, a, e: _ufunc(lambda x: sympy.log(1 + sympy.exp(x)), 1)(v[0]),
    conv_jvp="definition",
)


def _gelu_c() -> sympy.Rational:
    """The binary64 nearest to sqrt(2/pi), computed here with mpmath (not taken from spec)."""
    with mpmath.workdps(50):
        f = float(mpmath.sqrt(2 / mpmath.pi))
    return _rat(Fraction(f))


_GELU_K = sympy.Rational(44715, 10**6)
_law(
    "gelu",
    _unary_free(_SMALL_SHAPES),
    "x/2·(1 + tanh(c·(x + k·x³))) with c = the binary64 nearest sqrt(2/π) "
    "(0.7978845608028654, as an exact rational) and k = 0.044715",
    "jvp = d/dx of the tanh form (smooth)",
    definition=lambda v, a, e: _ufunc(
        lambda x: x / 2 * (1 + sympy.tanh(_gelu_c() * (x + _GELU_K * x**3))), 1
    )(v[0]),
)
_law(
    "silu",
    _unary_free(_SMALL_SHAPES),
    "x/(1 + exp(-x))",
    "jvp = (σ(x) + x·σ'(x))·dx",
    definition=lambda v, a, e: _ufunc(lambda x: x / (1 + sympy.exp(-x)), 1)(v[0]),
)

_EPS = Fraction(1, 2**24)


def _safe_log_conv(v: list[Arr], d: list[Arr], a: Any, e: Any) -> Arr:
    eps = _rat(_EPS)

    def f(x: Any, dx: Any) -> Any:
        if lt(eps, x):
            return dx / x
        if lt(x, eps):
            return sympy.Integer(0)
        return dx / (2 * eps)

    return _ufunc(f, 2)(v[0], d[0])


_law(
    "safe_log",
    _kinked_unary(
        [("above", _EPS), ("below", _EPS)],
        [("at", _EPS)],
        [("above", _EPS), ("below", _EPS), ("at", _EPS)],
        shapes=((), (3,)),
    ),
    "log(max(x, 2⁻²⁴)) with max as (a + b + |a - b|)/2",
    "jvp = dx/x for x > 2⁻²⁴, 0 for x < 2⁻²⁴; at x = 2⁻²⁴ maximum's tie gives dx/(2·2⁻²⁴)",
    definition=lambda v, a, e: _vlog(_vmax(v[0], _rat(_EPS))),
    conv_jvp=_safe_log_conv,
)
_law(
    "mse_loss",
    [_Case((s, s), _free()) for s in ((), (3,), (2, 2))],
    "Σ (y - t)² / size(y)",
    "jvp = (2/N)·Σ (y - t)(dy - dt)",
    definition=lambda v, a, e: _arr(sympy.Add(*_arr((v[0] - v[1]) ** 2).reshape(-1)) / v[0].size),
)


def _ce_def(v: list[Arr], a: Any, e: Any) -> Arr:
    x, t = v
    ls = _rowwise(x, _log_softmax_def)
    total = -sympy.Add(*(t * ls).reshape(-1))
    return _arr(total / x.shape[0] if x.ndim == 2 else total)


_law(
    "cross_entropy",
    [_Case(((3,), (3,)), _rows(o)) for o in ("inc", "dec", "mid", "tie")]
    + [_Case(((2, 3), (2, 3)), _rows("inc", "mid")), _Case(((1, 2), (1, 2)), _rows("tie"))],
    "-Σ_j t_j·(x_j - log Σ_k exp x_k), divided by B for (B, C) logits",
    "jvp = -Σ (dt·log_softmax(x) + t·(dx - Σ p·dx)) (/B); at ties of the row maximum "
    "compared with the derivative of the independent definition",
    definition=_ce_def,
    conv_jvp="definition",
)


# --------------------------------------------------------------------------- the checks


class _Tally:
    def __init__(self, numeric: bool, key: str) -> None:
        self.numeric = numeric
        self.key = key
        self.n = 0
        self.methods: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []

    def zero(self, e: Any, what: str) -> None:
        self.n += 1
        m = decide_zero(e, numeric=self.numeric, key=f"{self.key}/{self.n}")
        if m is None:
            self.failures.append(f"{what}: not shown to be 0: {sympy.sstr(e)[:300]}")
        else:
            self.methods[m] += 1

    def flag(self, ok: bool, what: str) -> None:
        self.n += 1
        if ok:
            self.methods["assumption"] += 1
        else:
            self.failures.append(f"{what}: does not hold")

    def same(self, got: Tensor, want: Any, what: str) -> None:
        want = _arr(want)
        if got.shape != tuple(want.shape):
            self.n += 1
            self.failures.append(f"{what}: shape {got.shape}, expected {tuple(want.shape)}")
            return
        for k, (p, q) in enumerate(zip(got.data, want.reshape(-1), strict=True)):
            self.zero(sympy.sympify(p) - sympy.sympify(q), f"{what}[{k}]")


def _tangents(prefix: str, shapes: Sequence[Shape]) -> list[Tensor]:
    return [symbols(f"{prefix}{i}", s) for i, s in enumerate(shapes)]


def _subs(t: Tensor, m: Mapping[Any, Any]) -> Tensor:
    return Tensor(t.shape, tuple(sympy.sympify(v).subs(m, simultaneous=True) for v in t.data))


def _case_kind(case: _Case, pt: _Point) -> str:
    if case.kind is not None:
        return case.kind
    return "smooth" if pt.psi is not None else "convention"


def _check_adjoint(op: Any, law: OpLaw, case: _Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    out_shape = op.shape(list(case.shapes), attrs)
    dxs = _tangents("d", case.shapes)
    g = symbols("g", out_shape)
    jv = op.jvp(S, pt.values, dxs, attrs, case.env)
    vj = op.vjp(S, pt.values, g, attrs, case.env)
    if (
        jv.shape != out_shape
        or len(vj) != len(case.shapes)
        or any(v.shape != s for v, s in zip(vj, case.shapes, strict=True))
    ):
        tally.flag(False, f"jvp/vjp shapes {jv.shape}/{[v.shape for v in vj]}")
        return
    lhs = dot(S, jv, g)
    rhs = fold_add(S, (dot(S, d, v) for d, v in zip(dxs, vj, strict=True)))
    tally.zero(lhs - rhs, "<jvp, g> - <dx, vjp>")


def _directional(F: Tensor, coords: list[Tensor], dxs: list[Tensor]) -> list[Any]:
    m = {
        x: x + _T * d
        for X, D in zip(coords, dxs, strict=True)
        for x, d in zip(X.data, D.data, strict=True)
    }
    return [sympy.diff(sympy.sympify(f).subs(m, simultaneous=True), _T).subs(_T, 0) for f in F.data]


def _check_derivative(op: Any, law: OpLaw, case: _Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    dxs = _tangents("d", case.shapes)
    kind = _case_kind(case, pt)
    jv = op.jvp(S, pt.values, dxs, attrs, case.env)
    if kind == "smooth" and pt.direct:
        shifted = [
            Tensor(X.shape, tuple(x + _T * d for x, d in zip(X.data, D.data, strict=True)))
            for X, D in zip(pt.coords, dxs, strict=True)
        ]
        F = op.forward(S, shifted, attrs, case.env)
        want = [sympy.diff(f, _T).subs(_T, 0) for f in F.data]
        tally.same(
            jv,
            np.array(want, dtype=object).reshape(jv.shape)
            if want
            else np.empty(jv.shape, dtype=object),
            "jvp - d/dt forward(x + t dx)",
        )
        return
    if kind == "smooth":
        assert pt.psi is not None
        for V, X in zip(pt.values, pt.coords, strict=True):  # φ(ψ(X)) = X
            for v, x in zip(V.data, X.data, strict=True):
                tally.zero(sympy.sympify(v).subs(pt.psi, simultaneous=True) - x, "φ(ψ(X)) - X")
        F = _subs(op.forward(S, pt.values, attrs, case.env), pt.psi)
        want = _directional(F, pt.coords, dxs)
        tally.same(
            _subs(jv, pt.psi),
            np.array(want, dtype=object).reshape(jv.shape),
            "jvp - d/dt forward(x + t dx) [region]",
        )
        return
    vals = [as_array(v) for v in pt.values]
    dvals = [as_array(d) for d in dxs]
    if law.conv_jvp is None:
        tally.flag(False, "no convention stated for a non-smooth case")
        return
    if law.conv_jvp == "definition":
        assert law.definition is not None
        shifted_vals = [_arr(v + _T * d) for v, d in zip(vals, dvals, strict=True)]
        E = law.definition(shifted_vals, attrs, case.env)
        want = _arr(
            np.array(
                [sympy.diff(sympy.sympify(e), _T).subs(_T, 0) for e in E.reshape(-1)], dtype=object
            ).reshape(E.shape)
        )
    else:
        want = law.conv_jvp(vals, dvals, attrs, case.env)
    tally.same(jv, want, "jvp - stated convention")
    if law.conv_vjp is not None:
        g = symbols("g", jv.shape)
        vj = op.vjp(S, pt.values, g, attrs, case.env)
        for i, (v, w) in enumerate(
            zip(vj, law.conv_vjp(vals, as_array(g), attrs, case.env), strict=True)
        ):
            tally.same(v, w, f"vjp[{i}] - stated convention")


def _check_forward(op: Any, law: OpLaw, case: _Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    out = op.forward(S, pt.values, attrs, case.env)
    want_shape = op.shape(list(case.shapes), attrs)
    if out.shape != want_shape:
        tally.flag(False, f"forward shape {out.shape}, shape rule {want_shape}")
        return
    if law.definition is not None:
        tally.same(
            out,
            law.definition([as_array(v) for v in pt.values], attrs, case.env),
            "forward - definition",
        )
    if law.characterize is not None:
        for k, e in enumerate(law.characterize(pt.values, pt.coords, out, attrs)):
            if isinstance(e, bool):
                tally.flag(e, f"characterisation[{k}]")
            else:
                tally.zero(e, f"characterisation[{k}]")


_CHECKS = {"adjoint": _check_adjoint, "derivative": _check_derivative, "forward": _check_forward}


def check_obligation(op_name: str, obligation: str, ctx: CheckContext) -> CheckResult:
    """Run `op.<op_name>.<obligation>` over every case of the op's law (the per-op
    obligations are the same in quick and full mode)."""
    law = LAWS.get(op_name)
    if law is None:
        return CheckResult(False, {"cases": 0}, {"error": f"no law written for op {op_name!r}"})
    if op_name not in OPS:
        return CheckResult(False, {"cases": 0}, {"error": f"op {op_name!r} not in the op table"})
    op = OPS[op_name]
    cases = [c for c in law.cases if obligation != "forward" or c.forward]
    numeric = obligation in law.numeric
    rows: list[dict[str, Any]] = []
    total = collections.Counter[str]()
    identities = failed = 0
    for i, case in enumerate(cases):
        tally = _Tally(numeric, f"op.{op_name}.{obligation}/{case.label()}")
        try:
            _CHECKS[obligation](op, law, case, tally)
        except (TorchLeanError, TypeError, ValueError, ZeroDivisionError) as e:
            tally.failures.append(f"raised {type(e).__name__}: {e}")
        ok = not tally.failures
        failed += not ok
        identities += tally.n
        total.update(tally.methods)
        row: dict[str, Any] = {
            "case": case.label(),
            "ok": ok,
            "identities": tally.n,
            "methods": dict(sorted(tally.methods.items())),
        }
        if obligation == "derivative":
            row["kind"] = _case_kind(case, case.region(case.shapes))
        if not ok:
            row["failures"] = tally.failures[:3]
        rows.append(row)
        ctx.report(f"op.{op_name}.{obligation}", i + 1, len(cases))
    counts = {
        "cases": len(cases),
        "cases_passed": len(cases) - failed,
        "cases_failed": failed,
        "identities": identities,
    }
    counts.update({f"decided_by_{k}": v for k, v in sorted(total.items())})
    details = {"cases": rows, "numeric_fallback_allowed": numeric}
    return CheckResult(failed == 0 and len(cases) > 0, counts, details)


# --------------------------------------------------------------------------- registration

_STATEMENTS = {
    "adjoint": (
        "The spec JVP and VJP of {op} are adjoint on every representative case "
        "(each region of a piecewise op, and its kinks): ⟨jvp(x, dx), δ⟩ = "
        "Σ_i ⟨dx_i, vjp(x, δ)_i⟩ as a sympy identity in symbolic x, dx and δ.",
        "⟨J_x·dx, δ⟩ = Σ_i ⟨dx_i, (J_xᵀ·δ)_i⟩",
    ),
    "derivative": (
        "On each smooth region the spec JVP of {op} is the directional derivative "
        "of its spec forward, d/dt forward(x + t·dx) at t = 0 (sympy diff); on "
        "kinks and ties it equals the stated convention. Stated derivative: {deriv}.",
        "jvp(x, dx) = d/dt|₀ forward(x + t·dx)  (smooth regions)",
    ),
    "forward": (
        "The spec forward of {op} over SYMBOLIC equals the independent definition: {defn}.",
        "forward(x) = {defn}",
    ),
}


def _scope(law: OpLaw | None, op: str, obligation: str) -> Scope:
    if law is None:
        return Scope((op,), ("symbolic",), "none (no law written)")
    labels = [c.label() for c in law.cases if obligation != "forward" or c.forward]
    return Scope((op,), ("symbolic",), f"{len(labels)} cases: " + "; ".join(labels))


def register_all() -> None:
    """Register the three obligations of every op in the op table."""
    for name in OPS:
        law = LAWS.get(name)
        for ob in OBLIGATIONS:
            words, formula = _STATEMENTS[ob]
            if law is None:
                words = f"MISSING: no law is written for op {name!r}. " + words
            fmt = {
                "op": name,
                "deriv": law.derivative_text if law else "?",
                "defn": law.definition_text if law else "?",
            }
            evidence = ("symbolic identity",)
            if law is not None and ob in law.numeric:
                words += (
                    " Identities sympy cannot decide are checked at exact rational "
                    "points with 60-digit evaluation (numeric fallback)."
                )
            register(
                Theorem(
                    name=f"op.{name}.{ob}",
                    statement=words.format(**fmt),
                    formula=formula.format(**fmt),
                    scope=_scope(law, name, ob),
                    evidence=evidence,
                    check=_OpCheck(name, ob),
                    status="checked" if law is not None else "missing",
                    sources=("spec", "proofs"),
                    isolated=True,
                )
            )


@dataclass(frozen=True)
class _OpCheck:
    """A picklable check callable for one per-op obligation."""

    op: str
    obligation: str

    def __call__(self, ctx: CheckContext) -> CheckResult:
        return check_obligation(self.op, self.obligation, ctx)


# The laws of the model-scale ops (conv, pooling, norms, attention, embeddings).
from . import op_laws_model as _op_laws_model  # noqa: E402,F401
