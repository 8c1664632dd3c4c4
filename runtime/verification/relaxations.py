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
  values, so no error term is needed.
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
from .network import Stage

__all__ = ["RELAXATIONS", "SMOOTH", "phi_range", "relax", "smooth_line", "smooth_lines"]

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
    cl: Any = None
    cu: Any = None
    for P, Q in _pieces(A, st, x):
        f = elem(A, st, j, (P, Q))
        ap, aq = a * q(P), a * q(Q)
        lo_i, hi_i = q(f[0]) - max(ap, aq), q(f[1]) - min(ap, aq)
        cl = lo_i if cl is None else min(cl, lo_i)
        cu = hi_i if cu is None else max(cu, hi_i)
    return a, cl, a, cu


def _lines_or_constant(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """GELU / BatchNorm1d: parallel lines when tighter than constant bounds."""
    const = _constant(A, st, j, x)
    if x[1] > x[0]:
        line = _piecewise_line(A, st, j, x)
        if line is not None and line[3] - line[1] < const[3] - const[1]:
            return line
    return const


RELAXATIONS: dict[str, RelaxRule] = {
    "relu": _relu,
    "tanh": _smooth,
    "sigmoid": _smooth,
    "gelu": _lines_or_constant,
    "batch_norm": _lines_or_constant,
}


def relax(H: Arith, A: Arith, st: Stage, j: int, x: Iv, err: Any) -> Relax:
    """A sound linear relaxation of neuron j of elementwise stage `st` on the interval x (at
    the level of arithmetic A; `err` widens tanh/sigmoid lines by the level-2 rounding)."""
    return RELAXATIONS[st.op](H, A, st, j, x, err)
