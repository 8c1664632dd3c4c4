"""Sound linear relaxations aL x + cL <= f(x) <= aU x + cU of one elementwise neuron on an
interval, dispatched by op name (`RELAXATIONS`).

Invariants (the slopes are chosen in binary64, which is sound for any slope; only the
intercepts must be rigorous, and they are exact rationals):
- ReLU: the upper line from exact endpoint values (ReLU minus a line is convex, so a line
  at or above ReLU at both endpoints is above it on the whole interval); the lower line is
  y = x or y = 0 (intercept 0), below ReLU everywhere.
- tanh and sigmoid: the intercepts come from a 160-bit directed-rounding enclosure of
  min/max of f(x) - a*x over the interval (`phi_range`), using that both are convex on
  x <= 0 and concave on x >= 0 (max/min at the endpoints on one side, a supporting tangent
  f(d) + f'(d)(x - d) with d in the piece on the other); they are widened by the level-2
  rounding error `err` and loosened by SLACK * (1 + |c|), so that an independent checker's
  own (slightly different) enclosure still confirms them. Degenerate or non-finite
  intervals get constant bounds.
- GELU and BatchNorm1d: two parallel lines with the chord slope a, whose intercepts come
  from the level's own interval evaluation of f on PIECES sub-intervals (f(x) - a x >=
  lo(f([P, Q])) - max(a P, a Q) on each; for BatchNorm at the real level, where f is
  affine, at the two ends only), or constant bounds (slope 0, the IBP interval at that
  level) when those are tighter. At level 2 that evaluation encloses the runtime's own
  values, so no error term is needed. The same pieces give the intercepts of a line of
  any slope (`gelu_line`: alpha-CROWN's optimised GELU slopes).
- leaky_relu and hardtanh (`PIECEWISE_LINEAR`) are piecewise linear with known kinks (0;
  min_val and max_val), so f minus a line is piecewise linear too and its extremes on
  [lo, hi] are at the ends or at a kink inside: for any slope k, `pl_line` takes the exact
  min (lower line) or max (upper) of f(p) - k p over those points, a sound and tight
  intercept. At level 1 f uses the exact attributes; at level 2 the format's (each
  rounded once, as the kernels cast them). leaky_relu (slope s in [0, 1], convex): upper
  line the chord (slope rounded to binary64), lower line y = x or y = s x (alpha-CROWN
  may take any slope in [s, 1], `leaky_floor`); at level 2 its one rounded product s*x
  (x <= 0) is within `leaky_err` = u s max(0, -lo) + eta, subtracted from the lower line's
  intercept and added to the upper's. hardtanh (exact in every format) with lo < a < hi
  or lo < b < hi (a, b its bounds): the triangle relaxations: the chord over the convex
  (concave) side, and a line through the kink (a, a) ((b, b)) of slope 0 or the largest
  slope that stays below (above) f, whichever encloses less area; both kinks inside: lines
  through (a, a) and (b, b) of slope 0 or at most (b - a) / (hi - a) (below) and
  (b - a) / (b - lo) (above), by the same area rule.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from gmpy2 import mpfr, mpq

from .arithmetic import Arith
from .core import PIECES, SLACK, Iv, Relax, q
from .intervals import elem
from .network import Stage, attr

__all__ = [
    "PIECEWISE_LINEAR",
    "RELAXATIONS",
    "SMOOTH",
    "gelu_line",
    "leaky_err",
    "leaky_floor",
    "leaky_slope",
    "phi_range",
    "pl_line",
    "relax",
    "smooth_line",
    "smooth_lines",
]

SMOOTH = ("tanh", "sigmoid")  # s-shaped: any slopes, intercepts from phi_range

RelaxRule = Callable[[Arith, Arith, Stage, int, Iv, Any], Relax]


def _f(kind: str, x: float) -> float:
    if kind == "tanh":
        return math.tanh(x)
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _df(kind: str, x: float) -> float:
    if kind == "tanh":
        t = math.tanh(x)
        return 1.0 - t * t
    s = _f(kind, x)
    return s * (1.0 - s)


def _tangent_point(kind: str, a: float, p: float, q: float, convex: bool) -> float:
    """A point of [p, q] where f' is about `a` (f' increases on convex pieces, decreases on
    concave ones); any point is sound, this one makes the tangent bound tight."""
    lo, hi = p, q
    fp, fq = _df(kind, p), _df(kind, q)
    if convex:
        if fp >= a:
            return p
        if fq <= a:
            return q
    else:
        if fp <= a:
            return p
        if fq >= a:
            return q
    for _ in range(80):
        m = 0.5 * (lo + hi)
        if (_df(kind, m) < a) == convex:
            lo = m
        else:
            hi = m
    return 0.5 * (lo + hi)


def phi_range(H: Arith, kind: str, a: float, lo: Any, hi: Any) -> Iv:
    """An enclosure [m, M] of min and max of f(x) - a*x over [lo, hi] (f tanh or sigmoid:
    convex for x <= 0, concave for x >= 0)."""
    sl = (mpfr(a), mpfr(a))
    dummy = Stage(kind)

    def phi(x: Any) -> Iv:
        return H.sub(elem(H, dummy, 0, (x, x)), H.mul(sl, (x, x)))

    def dphi(x: Any) -> Iv:
        y = elem(H, dummy, 0, (x, x))
        one = H.const(1)
        d = H.sub(one, H.mul(y, y)) if kind == "tanh" else H.mul(y, H.sub(one, y))
        return H.sub(d, sl)

    zero = mpfr(0)
    pieces = []
    if lo < 0:
        pieces.append((lo, min(hi, zero), True))
    if hi > 0:
        pieces.append((max(lo, zero), hi, False))
    if not pieces:
        pieces.append((lo, hi, True))
    mins, maxs = [], []
    for p, q_, convex in pieces:
        ep, eq = phi(p), phi(q_)
        d = mpfr(_tangent_point(kind, a, float(p), float(q_), convex))
        d = max(p, min(q_, d))
        tan = H.add(phi(d), H.mul(dphi(d), (H.dn.sub(p, d), H.up.sub(q_, d))))
        if convex:
            mins.append(tan[0])
            maxs.append(max(ep[1], eq[1]))
        else:
            mins.append(min(ep[0], eq[0]))
            maxs.append(tan[1])
    return min(mins), max(maxs)


def _constant(A: Arith, st: Stage, j: int, x: Iv) -> Relax:
    """Constant bounds: slope 0, the IBP interval at A's level."""
    y = elem(A, st, j, x)
    return mpq(0), q(y[0]), mpq(0), q(y[1])


def _relu(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    lo, hi = x
    if hi <= 0:
        return mpq(0), mpq(0), mpq(0), mpq(0)
    if lo >= 0:
        return mpq(1), mpq(0), mpq(1), mpq(0)
    ql, qh = q(lo), q(hi)
    a = mpq(float(qh / (qh - ql)))
    cu = max(-a * ql, qh - a * qh)
    return (mpq(1) if qh >= -ql else mpq(0)), mpq(0), a, cu


def smooth_line(H: Arith, kind: str, x: Iv, err: Any, a: float, lower: bool) -> tuple[Any, Any]:
    """tanh / sigmoid on x = [lo, hi], any slope a (binary64): the lower (or upper) line
    (a, c) with c enclosing min (max) of f(x) - a x (`phi_range`), widened by the level-2
    rounding error `err` and loosened by SLACK * (1 + |c|) so that an independent checker's
    own enclosure still confirms it. Every slope gives a sound line."""
    m, M = phi_range(H, kind, a, x[0], x[1])
    c = q(m if lower else M)
    slack = SLACK * (1 + abs(c))
    return mpq(a), (c - err - slack if lower else c + err + slack)


def smooth_lines(H: Arith, kind: str, x: Iv, err: Any, aL: float, aU: float) -> Relax:
    """Both lines of `smooth_line`: a sound relaxation for every pair of slopes."""
    return (*smooth_line(H, kind, x, err, aL, True), *smooth_line(H, kind, x, err, aU, False))


def _smooth(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """tanh / sigmoid: chord and tangent slopes, enclosed intercepts."""
    lo, hi = x
    k = st.op
    fl, fh = float(lo), float(hi)
    if math.isfinite(fl) and math.isfinite(fh) and fh - fl > 1e-9:
        chord = (_f(k, fh) - _f(k, fl)) / (fh - fl)
        mid = _df(k, 0.5 * (fl + fh))
        if fl >= 0:
            aL, aU = chord, mid
        elif fh <= 0:
            aL, aU = mid, chord
        else:
            aL = aU = chord
        return smooth_lines(H, k, x, err, aL, aU)
    return _constant(A, st, j, x)


def _pieces(A: Arith, st: Stage, x: Iv) -> list[tuple[Any, Any]]:
    """[lo, hi] cut into PIECES equal parts (exact), each widened outward to A's numbers;
    the pieces cover [lo, hi]. Returns (P, Q) pairs of mpfr. BatchNorm at the real level
    is affine in x, so is f(x) - a x, whose extremes are then at the ends: the two
    one-point pieces [lo, lo] and [hi, hi] suffice."""
    if st.op == "batch_norm" and A.domain is None:
        return [(x[0], x[0]), (x[1], x[1])]
    lo, hi = q(x[0]), q(x[1])
    cuts = [lo + (hi - lo) * mpq(i, PIECES) for i in range(PIECES + 1)]
    return [(A.cv(A.dn, a), A.cv(A.up, b)) for a, b in itertools.pairwise(cuts)]


def _piece_intercepts(A: Arith, st: Stage, j: int, x: Iv, a: Any) -> tuple[Any, Any]:
    """The intercepts (cL, cU) of the lines of slope a below / above f on x, from A's
    interval evaluation of f on `_pieces`: on a piece [P, Q], f(x) - a x >=
    lo(f([P, Q])) - max(a P, a Q), and likewise above. Sound for every slope."""
    cl: Any = None
    cu: Any = None
    for P, Q in _pieces(A, st, x):
        f = elem(A, st, j, (P, Q))
        ap, aq = a * q(P), a * q(Q)
        lo_i, hi_i = q(f[0]) - max(ap, aq), q(f[1]) - min(ap, aq)
        cl = lo_i if cl is None else min(cl, lo_i)
        cu = hi_i if cu is None else max(cu, hi_i)
    return cl, cu


def gelu_line(A: Arith, st: Stage, j: int, x: Iv, a: float, lower: bool) -> tuple[Any, Any]:
    """GELU on x, any slope a (binary64): the lower (or upper) line (a, c) with c from
    `_piece_intercepts` (alpha-CROWN's optimised slopes; A's evaluation encloses the
    runtime's values at level 2, so no error term)."""
    cl, cu = _piece_intercepts(A, st, j, x, mpq(a))
    return mpq(a), (cl if lower else cu)


def _piecewise_line(A: Arith, st: Stage, j: int, x: Iv) -> Relax | None:
    """Parallel lines a*x + cL <= f(x) <= a*x + cU for GELU / BatchNorm1d on x, with a the
    chord slope and the intercepts from A's interval evaluation of f on PIECES pieces:
    on a piece [P, Q], f(x) - a*x >= lo(f([P, Q])) - max(a P, a Q), and likewise above.
    At level 2 A's evaluation encloses the runtime's own values, so no error term is
    needed."""
    fl, fh = elem(A, st, j, (x[0], x[0])), elem(A, st, j, (x[1], x[1]))
    den = float(x[1]) - float(x[0])
    if not den > 0:
        return None
    a = mpq((float(fh[0]) - float(fl[0])) / den)
    if not math.isfinite(float(a)):
        return None
    cl, cu = _piece_intercepts(A, st, j, x, a)
    return a, cl, a, cu


def _lines_or_constant(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """GELU / BatchNorm1d: parallel lines when tighter than constant bounds."""
    const = _constant(A, st, j, x)
    if x[1] > x[0]:
        line = _piecewise_line(A, st, j, x)
        if line is not None and line[3] - line[1] < const[3] - const[1]:
            return line
    return const


PIECEWISE_LINEAR = ("leaky_relu", "hardtanh")


def _level_const(A: Arith, st: Stage, name: str) -> Any:
    """A stage attribute at A's level: exact at level 1, rounded once into the format at
    level 2 (as the kernels cast it)."""
    v = attr(st, name)
    return mpq(v) if A.domain is None else q(A.const(v)[0])


def leaky_slope(A: Arith, st: Stage) -> Any:
    """leaky_relu's slope at A's level (`_level_const`)."""
    return _level_const(A, st, "negative_slope")


def leaky_err(A: Arith, st: Stage, x: Iv) -> Any:
    """Level 2: a bound on |RN(s x) - s x| for x in [lo, min(hi, 0)]: u s max(0, -lo) + eta
    (u = 2^-p, eta = 2^(emin-1) for an underflowing product); 0 at level 1."""
    D = A.domain
    if D is None or not x[0] < 0:
        return mpq(0)
    u, eta = mpq(1, 2**D.precision), mpq(1, 2 ** (1 - D.emin))
    return u * leaky_slope(A, st) * -q(x[0]) + eta


def leaky_floor(A: Arith, st: Stage) -> float:
    """The least binary64 value >= leaky_relu's slope at A's level: alpha-CROWN's lower
    slopes stay in [this, 1], so every one is a valid lower line."""
    s = leaky_slope(A, st)
    f = float(s)
    return f if mpq(f) >= s else math.nextafter(f, math.inf)


def _pl_points(kinks: list[Any], x: Iv) -> list[Any]:
    lo, hi = q(x[0]), q(x[1])
    return [lo, *(k for k in kinks if lo < k < hi), hi]


def pl_line(f: Callable[[Any], Any], pts: list[Any], k: Any, upper: bool) -> Any:
    """The intercept of the tightest line of slope k above (`upper`) or below f on the
    hull of `pts`, for f piecewise linear with its kinks among `pts`."""
    vals = [f(p) - k * p for p in pts]
    return max(vals) if upper else min(vals)


def _leaky(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """leaky_relu: chord above, y = x or y = s x below (the one enclosing less area),
    intercepts widened by the level-2 error of the rounded product."""
    s, e = leaky_slope(A, st), leaky_err(A, st, x)
    lo, hi = q(x[0]), q(x[1])
    if hi <= 0:
        return s, -e, s, e
    if lo >= 0:
        return mpq(1), mpq(0), mpq(1), mpq(0)

    def f(v: Any) -> Any:
        return v if v > 0 else s * v

    pts = _pl_points([mpq(0)], x)
    aU = mpq(float((hi - s * lo) / (hi - lo)))
    aL = mpq(1) if hi >= -lo else s
    return aL, pl_line(f, pts, aL, False) - e, aU, pl_line(f, pts, aU, True) + e


def _hardtanh_slopes(a: Any, b: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """The (lower, upper) slopes of hardtanh's triangle relaxation on [lo, hi] (at least
    one of a, b strictly inside; every slope gives a valid line with `pl_line`'s intercept,
    these are the tight ones)."""
    if hi <= b:  # lo < a < hi: max(x, a), convex
        chord = (hi - a) / (hi - lo)
        return (mpq(1) if hi - a >= a - lo else mpq(0)), chord
    if lo >= a:  # lo < b < hi: min(x, b), concave
        chord = (b - lo) / (hi - lo)
        return chord, (mpq(1) if b - lo >= hi - b else mpq(0))
    # both kinks inside: the largest slopes through (a, a) below and (b, b) above
    kL, kU = (b - a) / (hi - a), (b - a) / (b - lo)
    return (kL if hi - a > a - lo else mpq(0)), (kU if hi - b < b - lo else mpq(0))


def _hardtanh(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """hardtanh = clamp(x, a, b), exact: constant or identity when no kink is strictly
    inside, else the triangle relaxation (`_hardtanh_slopes`, slopes rounded to binary64,
    exact intercepts from `pl_line`)."""
    a, b = _level_const(A, st, "min_val"), _level_const(A, st, "max_val")
    lo, hi = q(x[0]), q(x[1])

    def f(v: Any) -> Any:
        return a if v < a else (b if b < v else v)

    if not lo < a < hi and not lo < b < hi:  # constant or the identity on [lo, hi]
        k = mpq(1) if a <= lo and hi <= b else mpq(0)
        return k, f(lo) - k * lo, k, f(lo) - k * lo
    kL, kU = (mpq(float(v)) for v in _hardtanh_slopes(a, b, lo, hi))
    pts = _pl_points([a, b], x)
    return kL, pl_line(f, pts, kL, False), kU, pl_line(f, pts, kU, True)


RELAXATIONS: dict[str, RelaxRule] = {
    "relu": _relu,
    "tanh": _smooth,
    "sigmoid": _smooth,
    "gelu": _lines_or_constant,
    "batch_norm": _lines_or_constant,
    "leaky_relu": _leaky,
    "hardtanh": _hardtanh,
}


def relax(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """A sound linear relaxation of neuron j of elementwise stage `st` on the interval x (at
    the level of arithmetic A; `err` widens tanh/sigmoid lines by the level-2 rounding)."""
    return RELAXATIONS[st.op](H, A, st, j, x, err)
