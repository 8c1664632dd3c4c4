"""The alternative rules of the conventions of std,
logsumexp, prelu, pow, the adaptive max pools' forward mode, group_norm: each is an `Alt`
as `conventions` describes it (exact inputs in HP, the cotangent or tangent, the
attributes; None where the convention's condition does not hold), kept here so the
catalogue module stays readable.

Invariants:
- Every value is computed in `HP` (256-bit MPFR) or as an exact Fraction rounded once
  where a rule states an engine's rounding; nothing here reads global state.
- `DTYPE_KEY` is the attribute through which the node checks hand a rule the run's dtype
  name; a rule that needs it explains nothing when it is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np

from spec.domains import BINARY32, FLOAT64, IEEEDomain
from spec.ops import expand, get_op
from spec.shape import broadcast_shapes
from spec.tensor import Tensor

from ..bounds.core import HP

__all__ = [
    "DTYPE_KEY",
    "ZERO",
    "Alt",
    "flat_lane",
    "group_norm_folded",
    "hp",
    "lanes",
    "lse_inf_lane",
    "pow_zero_nan",
    "prelu_pass",
    "std_flat_jvp",
    "std_flat_vjp",
    "window_tie_mean",
]

Alt = Callable[[list[Tensor], Tensor | None, dict[str, Any]], list[Tensor]]
ZERO = gmpy2.mpfr(0)


def hp(v: Any) -> Any:
    """v (a Fraction, int or mpfr) as an HP mpfr."""
    return gmpy2.mpfr(Fraction(v), HP.precision)


def lanes(x: Tensor, d: int) -> list[list[int]]:
    """The flat positions of each lane of x along axis d, in output order."""
    outer = 1
    for k in x.shape[:d]:
        outer *= k
    n = x.shape[d]
    inner = len(x.data) // max(outer * n, 1) if n else 0
    return [[(o * n + k) * inner + i for k in range(n)] for o in range(outer) for i in range(inner)]


def flat_lane(x: Tensor, lane: list[int]) -> bool:
    vals = [x.data[j] for j in lane]
    return bool(vals) and not any(gmpy2.is_nan(v) for v in vals) and min(vals) == max(vals)


def std_flat_vjp(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """std's cotangent on a lane of equal elements: NaN (g/(2·std) with std = 0)."""
    (x,) = xs
    out: list[Any] = [None] * len(x.data)
    for lane in lanes(x, attrs["dim"]):
        if flat_lane(x, lane):
            for j in lane:
                out[j] = gmpy2.nan()
    return [Tensor(x.shape, tuple(out))]


def std_flat_jvp(xs: list[Tensor], t: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    (x,) = xs
    d = attrs["dim"]
    out = [gmpy2.nan() if flat_lane(x, lane) else None for lane in lanes(x, d)]
    return [Tensor(x.shape[:d] + x.shape[d + 1 :], tuple(out))]


def lse_inf_lane(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """logsumexp of a lane whose maximum is ±inf: that infinity (the spec gives NaN)."""
    (x,) = xs
    d = attrs["dim"]
    out: list[Any] = []
    for lane in lanes(x, d):
        vals = [x.data[j] for j in lane]
        m = None if any(gmpy2.is_nan(v) for v in vals) else max(vals)
        out.append(m if m is not None and gmpy2.is_infinite(m) else None)
    return [Tensor(x.shape[:d] + x.shape[d + 1 :], tuple(out))]


def prelu_pass(xs: list[Tensor], t: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """prelu's tangent at x == 0 under where(x >= 0, ...): dx (t holds dx, then dw)."""
    x, td = xs[0], t.data if t is not None else ()
    return [Tensor(x.shape, tuple(td[i] if v == 0 else None for i, v in enumerate(x.data)))]


def pow_zero_nan(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """NaN where a == 0 and b == 0: a's cotangent (where a and b have the result's shape)
    and the tangent (t holds da, then db; wherever the broadcast pair is (0, 0))."""
    a, b = xs
    shape = broadcast_shapes(a.shape, b.shape)
    pairs = zip(expand(a, shape).data, expand(b, shape).data, strict=True)
    hit = tuple(gmpy2.nan() if p == 0 and q == 0 else None for p, q in pairs)
    n = len(g.data) if g is not None else -1
    if a.shape == b.shape == shape or (n == len(a.data) + len(b.data) and n != len(hit)):
        return [Tensor(shape, hit)]
    return [Tensor(a.shape, (None,) * len(a.data))]


def window_tie_mean(op: str) -> Alt:
    """An adaptive max pool with tied maxima in a window, forward mode: the mean of the
    tangents of the window's distinct tied taps (JAX's reduce-max JVP), where the spec takes
    the first maximal tap's; windows read off the spec body's gather, as above."""

    def alt(xs: list[Tensor], t: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
        assert t is not None and get_op(op).body is not None
        (x,) = xs
        gather = next(n for n in get_op(op).body([x.shape], attrs).nodes if n.op == "gather")
        (n_win, k), idx = gather.attrs["shape"], gather.attrs["indices"]
        out_shape = get_op(op).shape([x.shape], attrs)
        rows = int(np.prod(out_shape)) // n_win if n_win else 0
        out: list[Any] = []
        for row, w in ((r, w) for r in range(rows) for w in range(n_win)):
            m = len(x.data) // rows
            taps = list(dict.fromkeys(row * m + j for j in idx[w * k : (w + 1) * k]))
            vals = [x.data[j] for j in taps]
            top = None if any(gmpy2.is_nan(v) for v in vals) else max(vals)
            ties = [j for j in taps if x.data[j] == top]
            out.append(sum((t.data[j] for j in ties), ZERO) / len(ties) if len(ties) > 1 else None)
        return [Tensor(out_shape, tuple(out))]

    return alt


DTYPE_KEY = "__dtype__"  # the run's dtype name, in the attributes handed to `alt` rules


def _rd(D: IEEEDomain, v: Any) -> Fraction:
    """v (a Fraction or a finite mpfr) rounded once (to nearest even) into D."""
    r = Fraction(D.to_rational(D.from_rational(_frac(v))))
    return Fraction(int(r.numerator), int(r.denominator))


def _frac(v: Any) -> Fraction:
    if isinstance(v, type(ZERO)):
        n, d = v.as_integer_ratio()
        return Fraction(int(n), int(d))
    return Fraction(v)


def group_norm_folded(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """group_norm on a group of equal elements (mean = x, variance 0) evaluated as PyTorch's
    CPU kernel folds it: rstd = 1/sqrt(eps) in binary64 (rounded to the opmath type: binary64
    for float64, binary32 otherwise), a = rstd·γ and b = β − mean·a each rounded once in
    the opmath type, y = x·a + b (exact here; the checker allows the budget)."""
    x, gam, bet = xs
    D = {"float64": FLOAT64}.get(attrs.get(DTYPE_KEY) or "", BINARY32)
    if DTYPE_KEY not in attrs or len(x.shape) < 2:
        return [Tensor(x.shape, (None,) * len(x.data))]
    n_, c_, groups = x.shape[0], x.shape[1], int(attrs["num_groups"])
    inner = len(x.data) // max(n_ * c_, 1)
    eps = Fraction(attrs["eps"]) if attrs.get("eps") is not None else Fraction(1, 100000)
    root = _rd(FLOAT64, gmpy2.sqrt(gmpy2.mpfr(eps, HP.precision)))
    rstd = _rd(D, _rd(FLOAT64, 1 / root))
    out: list[Any] = [None] * len(x.data)
    per = c_ // groups
    for n in range(n_):
        for gi in range(groups):
            chans = range(gi * per, (gi + 1) * per)
            idx = [(n * c_ + c) * inner + i for c in chans for i in range(inner)]
            if not flat_lane(x, idx) or gmpy2.is_infinite(x.data[idx[0]]):
                continue
            mean = _frac(x.data[idx[0]])
            for c in chans:
                if not all(gmpy2.is_finite(v) for v in (gam.data[c], bet.data[c])):
                    continue
                a = _rd(D, rstd * _frac(gam.data[c]))
                b = _rd(D, _frac(bet.data[c]) - mean * a)
                for i in range(inner):
                    out[(n * c_ + c) * inner + i] = hp(mean * a + b)
    return [Tensor(x.shape, tuple(out))]
