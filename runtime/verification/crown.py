"""CROWN (backward linear relaxation) at one level, with level-2 rounding-error terms.

Invariants:
- The backward pass works in exact rational arithmetic (gmpy2.mpq): objective rows are
  pushed back through every stage exactly, so no rounding enters it. How a stage is
  crossed is dispatched by op name: `FORWARD` builds the stage's data on the way forward
  (error bounds of a linear stage, relaxations of an elementwise one), `BACKWARD` pushes
  the rows back through it; layer_norm is opaque (the pass stops there and concretises
  over LayerNorm's output interval, so CROWN gains nothing across it). max_pool2d is
  crossed with max >= x_k (k: the window's input with the largest lower end) and
  max <= u (the window's largest upper end), or max = x_k when x_k dominates the window
  (its lower end >= every other input's upper end); max is exact in every format.
  conv2d / avg_pool2d rows are pushed back window by window (the transposed convolution,
  `Windowed.back`, skipping zero coefficients), never through a dense matrix. A conv2d /
  avg_pool2d stage that reads the box itself is not tightened: its backward pass from the
  unit rows is b - err + sum over the window of min(w l, w u), which is exactly its IBP
  interval (the same exact sum, rounded outward alike), so the certificate is unchanged.
  alpha-CROWN may replace max <= u by max <= sum lam_i x_i + c(lam) (`pool_lines`).
- DAG networks (residual adds): the backward pass crosses stages in decreasing order,
  splitting a stage's rows over its inputs per value read and summing the rows that reach
  a value from several readers (the fan-out point of a residual block gets the body's
  rows and the skip's, each once); an opaque stage's rows and the input's are concretised
  over their value's interval. An "add" stage y = a + b sends each row unchanged to a and
  to b; its interval is tightened like an affine stage's.
- Every pre-activation interval is the intersection of its IBP and CROWN bounds (rounded
  outward to A's numbers), so CROWN is never wider than IBP.
- At level 2 the runtime is the real network plus bounded per-neuron errors, extra bounded
  inputs of the backward pass (u = 2^-p, gamma_k = k u / (1 - k u), eta = 2^(emin-1)):
  a linear layer with n inputs adds |delta_i| <= gamma_{n+1} * (sum_j |w_ij| max|x_j| +
  |b_i|) + n*eta*(1 + gamma_{n+1}) (eta covers underflow of a product; additions are exact
  in the subnormal range); tanh adds u*max|tanh| + eta (correctly rounded); sigmoid's
  three roundings add max(sigmoid) * ((1 + u) / ((1 - u)(1 - u - eta)) - 1) + eta +
  2^(1-emax) (the last term covers exp overflowing, where the runtime returns 0); a
  residual add adds u * max|a + b| (one rounding to nearest, exact in the subnormal range;
  an overflow raises in IBP); ReLU is exact. The input box is the format-rounded box.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from gmpy2 import mpfr, mpq

from spec.domains import IEEEDomain

from .alpha import Chain, optimise
from .arithmetic import Arith
from .core import Iv, frac_str, q
from .intervals import elem, exact_windowed, inputs_of, layer, window_err
from .network import AFFINE, Stage, Windowed
from .pool_lines import intercept
from .relaxations import RELAXATIONS, SMOOTH, gelu_line, relax, smooth_line

__all__ = ["BACKWARD", "FORWARD", "Crown", "Fmt", "Slopes", "fmt", "slopes_json"]


@dataclass(frozen=True)
class Fmt:
    u: Any  # 2^-p
    eta: Any  # 2^(emin-1)
    tiny: Any  # 2^(1-emax)


def fmt(D: IEEEDomain) -> Fmt:
    return Fmt(mpq(1, 2**D.precision), mpq(1, 2 ** (1 - D.emin)), mpq(1, 2 ** (D.emax - 1)))


def _gamma(f: Fmt, k: int) -> Any:
    return k * f.u / (1 - k * f.u)


def _lin_err(f: Fmt, st: Stage, xs: list[Iv]) -> list[Any]:
    n = len(xs)
    g = _gamma(f, n + 1)
    X = [max(abs(q(x[0])), abs(q(x[1]))) for x in xs]
    out = []
    for row, b in zip(st.weight, st.bias, strict=True):
        s = sum((abs(mpq(w)) * xm for w, xm in zip(row, X, strict=True)), mpq(0))
        out.append(g * (s + abs(mpq(b))) + n * f.eta * (1 + g))
    return out


def _act_err(H: Arith, f: Fmt | None, kind: str, x: Iv) -> Any:
    if f is None or kind not in ("tanh", "sigmoid"):
        return mpq(0)
    dummy = Stage(kind)
    ends = [elem(H, dummy, 0, (v, v)) for v in x]
    M = max(max(abs(q(e[0])), abs(q(e[1]))) for e in ends)
    if kind == "tanh":
        return f.u * M + f.eta
    u = f.u
    return M * ((1 + u) / ((1 - u) * (1 - u - f.eta)) - 1) + f.eta + f.tiny


# --------------------------------------------------------------------------- forward steps


def _fwd_linear(cr: Crown, t: int, st: Stage, prev: list[Iv]) -> list[Iv]:
    A, f = cr.A, cr.f
    if st.op != "linear":  # conv2d / avg_pool2d: any summation order
        cr.err[t] = window_err(A, st, prev)
        if st.srcs(t) == (0,):  # on the box: the backward pass gives IBP's bounds exactly
            return layer(A, st, prev)
    else:
        cr.err[t] = _lin_err(f, st, prev) if f is not None else [mpq(0)] * len(st.bias)
    return _tighten(cr, t, layer(A, st, prev))


def _fwd_add(cr: Crown, t: int, st: Stage, prev: list[Iv]) -> list[Iv]:
    """A residual add (prev: its two inputs' intervals, concatenated): at level 2 one
    rounded addition per element, |RN(a + b) - (a + b)| <= u |a + b| (exact in the
    subnormal range; overflow raises in `layer`), so the error bound is u max|a + b|."""
    n = len(prev) // 2
    if cr.f is None:
        cr.err[t] = [mpq(0)] * n
    else:
        u = cr.f.u
        cr.err[t] = [u * max(abs(q(a[0]) + q(b[0])), abs(q(a[1]) + q(b[1])))
                     for a, b in zip(prev[:n], prev[n:], strict=True)]  # fmt: skip
    return _tighten(cr, t, layer(cr.A, st, prev))


def _tighten(cr: Crown, t: int, out: list[Iv]) -> list[Iv]:
    """An intermediate affine / add stage's IBP intervals intersected with the backward
    pass's bounds (and, for alpha-CROWN, with CROWN's own); the last stage is left to the
    caller's final objectives."""
    A = cr.A
    if t < len(cr.stages):
        n = len(out)
        eye = [[mpq(int(i == j)) for j in range(n)] for i in range(n)]
        neg = [[-v for v in r] for r in eye]
        sl, sh = cr.slopes(eye, t), cr.slopes(neg, t)
        if sl is not None or sh is not None:
            cr.alpha[t] = {k: v for k, v in (("lower", sl), ("upper", sh)) if v is not None}
        lows = cr.backward(eye, t, sl)
        highs = [-v for v in cr.backward(neg, t, sh)]
        out = [
            (max(o[0], A.cv(A.dn, lq)), min(o[1], A.cv(A.up, hq)))
            for o, lq, hq in zip(out, lows, highs, strict=True)
        ]
        if cr.prior is not None:  # alpha-CROWN: also within CROWN's own (sound) interval
            out = [(max(o[0], p[0]), min(o[1], p[1]))
                   for o, p in zip(out, cr.prior.ivs[t], strict=True)]  # fmt: skip
    return out


def _fwd_max_pool(cr: Crown, t: int, st: Stage, prev: list[Iv]) -> list[Iv]:
    """Per output: the window's input k with the largest lower end (max >= x_k: the lower
    line), whether it dominates (its lower end >= every other upper end: max = x_k), and
    the window's largest upper end (max <= u: the upper line)."""
    pool = []
    for w in st.windows:
        k = max(w, key=lambda i: prev[i][0])
        dom = all(prev[k][0] >= prev[i][1] for i in w if i != k)
        pool.append((k, dom, q(max(prev[i][1] for i in w))))
    cr.pool[t] = pool
    return layer(cr.A, st, prev)


def _fwd_opaque(cr: Crown, t: int, st: Stage, prev: list[Iv]) -> list[Iv]:
    return layer(cr.A, st, prev)  # opaque: the backward pass stops here


def _fwd_relaxed(cr: Crown, t: int, st: Stage, prev: list[Iv]) -> list[Iv]:
    H, A, f = cr.H, cr.A, cr.f
    cr.act[t] = [_act_err(H, f, st.op, x) for x in prev]
    cr.relax[t] = [relax(H, A, st, j, x, cr.act[t][j]) for j, x in enumerate(prev)]
    return layer(A, st, prev)


ForwardStep = Callable[["Crown", int, Stage, list[Iv]], list[Iv]]
FORWARD: dict[str, ForwardStep] = {
    **{op: _fwd_linear for op in AFFINE},
    "add": _fwd_add,
    "layer_norm": _fwd_opaque,
    "max_pool2d": _fwd_max_pool,
    **{op: _fwd_relaxed for op in RELAXATIONS},
}


# --------------------------------------------------------------------------- backward steps

# A backward step maps (crown, s, stage, rows, constants, slopes) to the new rows, or to
# None when the pass stops at stage s (and concretises over its output interval). `slopes`
# (alpha-CROWN) maps a stage to per row, per neuron: a ReLU lower-line slope replacing the
# relaxation's aL, or for tanh / sigmoid a whole relaxation (aL, cL, aU, cU) replacing it.
Slopes = dict[int, list[list[Any]]]
BackwardStep = Callable[
    ["Crown", int, Stage, list[list[Any]], list[Any], "Slopes | None"], "list[list[Any]] | None"
]


def _back_linear(
    cr: Crown, s: int, st: Stage, lam: list[list[Any]], c: list[Any], sl: Slopes | None
) -> Any:
    W, e = cr.W[s], cr.err[s]
    if not lam:
        return []
    if isinstance(W, Windowed):  # the transposed convolution of each row (sparse rows)
        bq = [mpq(v) for v in st.bias]
        for r, row in enumerate(lam):
            c[r] += sum((lv * bq[j] - abs(lv) * e[j] for j, lv in enumerate(row) if lv), mpq(0))
        return [W.back(row, mpq(0)) for row in lam]
    if s not in cr.Wobj:  # numpy's object loops: the same exact sums, without the interpreter
        nz = sum(1 for r in W for v in r if v)
        cr.Wobj[s] = np.array(W, dtype=object) if 2 * nz >= len(W) * len(W[0]) else None
    L = np.array(lam, dtype=object)
    b = np.array([mpq(v) for v in st.bias], dtype=object)
    add = L.dot(b) - np.abs(L).dot(np.array(e, dtype=object))
    for r in range(len(lam)):
        c[r] += add[r]
    if cr.Wobj[s] is not None:
        return L.dot(cr.Wobj[s]).tolist()
    m = len(W[0])
    return [
        [sum((row[i] * W[i][j] for i in range(len(W)) if row[i]), mpq(0))
         for j in range(m)]
        for row in lam
    ]  # fmt: skip


def _back_add(
    cr: Crown, s: int, st: Stage, lam: list[list[Any]], c: list[Any], sl: Slopes | None
) -> Any:
    """y = a + b + delta (|delta| <= err): each row goes, unchanged, to both inputs (the
    caller splits the concatenated row and sums it into each input's rows)."""
    e = cr.err[s]
    for r, row in enumerate(lam):
        c[r] -= sum((abs(lv) * ev for lv, ev in zip(row, e, strict=True)), mpq(0))
    return [row + row for row in lam]


def _back_opaque(
    cr: Crown, s: int, st: Stage, lam: list[list[Any]], c: list[Any], sl: Slopes | None
) -> Any:
    return None


def _back_relaxed(
    cr: Crown, s: int, st: Stage, lam: list[list[Any]], c: list[Any], sl: Slopes | None
) -> Any:
    rl = cr.relax[s]
    own = sl.get(s) if sl is not None else None
    for r, row in enumerate(lam):
        for j, lv in enumerate(row):
            if not lv:
                continue  # a zero coefficient stays zero and adds nothing
            aL, cL, aU, cU = rl[j]
            if own is not None:
                e = own[r][j]
                if isinstance(e, tuple):  # tanh / sigmoid: the row's own relaxation
                    aL, cL, aU, cU = e
                else:  # ReLU: the row's own lower slope
                    aL = e
            if lv >= 0:
                row[j], c[r] = lv * aL, c[r] + lv * cL
            else:
                row[j], c[r] = lv * aU, c[r] + lv * cU
    return lam


def _back_max_pool(
    cr: Crown, s: int, st: Stage, lam: list[list[Any]], c: list[Any], sl: Slopes | None
) -> Any:
    ivs = cr.ivs[st.srcs(s)[0]]
    n = len(ivs)
    own = sl.get(s) if sl is not None else None  # alpha-CROWN: per row, per output, lam
    out = []
    for r, row in enumerate(lam):
        new = [mpq(0)] * n
        for o, ((k, dom, u), lv) in enumerate(zip(cr.pool[s], row, strict=True)):
            if lv >= 0 or dom:
                new[k] += lv
            elif own is not None and any(own[r][o]):  # max <= sum lam_i x_i + c(lam)
                w = st.windows[o]
                lo, hi = [q(ivs[i][0]) for i in w], [q(ivs[i][1]) for i in w]
                for i, a in zip(w, own[r][o], strict=True):
                    new[i] += lv * a
                c[r] += lv * intercept(own[r][o], lo, hi)
            else:
                c[r] += lv * u
        out.append(new)
    return out


BACKWARD: dict[str, BackwardStep] = {
    **{op: _back_linear for op in AFFINE},
    "add": _back_add,
    "layer_norm": _back_opaque,
    "max_pool2d": _back_max_pool,
    **{op: _back_relaxed for op in RELAXATIONS},
}


class Crown:
    """CROWN at one level. `ivs[t]` encloses the values after stage t (t = 0: the box);
    `relax[t]` holds stage t's relaxations (elementwise stages), `err[t]` its level-2
    error bounds (linear stages). With `prior` (a finished CROWN object at the same level)
    this is alpha-CROWN: every backward pass uses per-row ReLU slopes from `alpha.optimise`
    (kept in `alpha[t]` for stage t's intermediate bounds), and every linear stage's
    interval is also intersected with `prior`'s, so it is never wider than CROWN's."""

    def __init__(
        self,
        H: Arith,
        A: Arith,
        f: Fmt | None,
        stages: list[Stage],
        box: list[Iv],
        prior: Crown | None = None,
        optimise: bool = False,
        splits: dict[int, dict[int, int]] | None = None,
    ) -> None:
        self.H, self.A, self.f, self.stages = H, A, f, stages
        self.prior = prior
        self.optimise = optimise or prior is not None
        self.splits = splits or {}
        self.empty: int | None = None  # the stage where a split branch proved infeasible
        self.ivs: list[list[Iv]] = [box]
        self.relax: dict[int, list[Any]] = {}
        self.err: dict[int, list[Any]] = {}
        self.act: dict[int, list[Any]] = {}  # level-2 error bound per tanh/sigmoid neuron
        self.pool: dict[int, list[tuple[int, bool, Any]]] = {}  # max_pool2d: (k, dom, u)
        self.lines: dict[tuple[int, int, str, float], Any] = {}  # smooth_lines, memoised
        self.alpha: dict[int, dict[str, Slopes]] = {}
        self.Wobj: dict[int, Any] = {}  # dense affine weights as numpy object arrays
        self.chain = Chain(self)
        self.W: dict[int, Any] = {
            t: exact_windowed(st) if st.windowed is not None else [[mpq(w) for w in r]
                                                                  for r in st.weight]
            for t, st in enumerate(stages, 1)
            if st.op in AFFINE
        }  # fmt: skip
        for t, st in enumerate(stages, 1):
            out = self._clamp(t, FORWARD[st.op](self, t, st, inputs_of(self.ivs, st, t)))
            self.ivs.append(out)
            if any(a > b for a, b in out):
                self.empty = t  # no input of the box lies in this branch: stop here
                break

    def _clamp(self, t: int, out: list[Iv]) -> list[Iv]:
        """Branch and bound: value t restricted to the split's sign (+1: >= 0, -1: <= 0) for
        the neurons split in this branch at the ReLU stages that read it."""
        sp: dict[int, int] = {}
        for s, d in self.splits.items():
            if self.stages[s - 1].srcs(s)[0] == t:
                sp.update(d)
        if not sp:
            return out
        z = mpfr(0)
        return [
            x if j not in sp else ((max(x[0], z), x[1]) if sp[j] > 0 else (x[0], min(x[1], z)))
            for j, x in enumerate(out)
        ]

    def slopes(self, C: list[list[Any]], t: int) -> Slopes | None:
        """alpha-CROWN's per-row ReLU slopes for the objectives C @ z_t (None for CROWN, or
        when no ReLU neuron below t is unstable)."""
        sl = optimise(self, C, t) if self.optimise else None
        if sl is None:
            return None
        for s, rows in sl.items():
            if self.stages[s - 1].op in (*SMOOTH, "gelu"):
                sl[s] = [[self._line(s, j, e) for j, e in enumerate(row)] for row in rows]
        return sl

    def _line(self, s: int, j: int, e: tuple[str, float] | None) -> Any:
        """Neuron j of tanh / sigmoid stage s with the optimiser's new lower ("L") or upper
        ("U") slope, its intercept enclosed rigorously; the other line is CROWN's."""
        base = tuple(self.relax[s][j])
        if e is None:
            return base
        side, a = e
        if a == float(base[0 if side == "L" else 2]):
            return base
        key = (s, j, side, a)
        if key not in self.lines:
            st = self.stages[s - 1]
            x, err = self.ivs[st.srcs(s)[0]][j], self.act[s][j]
            new = (gelu_line(self.A, st, j, x, a, side == "L") if st.op == "gelu" else
                   smooth_line(self.H, st.op, x, err, a, side == "L"))  # fmt: skip
            self.lines[key] = (*new, *base[2:]) if side == "L" else (*base[:2], *new)
        return self.lines[key]

    def backward(self, C: list[list[Any]], t: int, sl: Slopes | None = None) -> list[Any]:
        """Exact lower bounds of C @ z_t over the box (rows of C are objectives), with the
        ReLU lower slopes `sl` (per stage, per row, per neuron) where given. Stages are
        crossed in decreasing order; a stage's rows over its inputs are split per input
        value and summed into that value's rows (a fan-out point collects every branch's
        rows, each once); an opaque stage's rows, and the input's, are concretised over
        their value's interval."""
        pending: dict[int, list[list[Any]]] = {t: [list(r) for r in C]}
        c = [mpq(0)] * len(C)
        for s in range(t, 0, -1):
            lam = pending.pop(s, None)
            if lam is None:
                continue  # stage s does not feed z_t
            st = self.stages[s - 1]
            nxt = BACKWARD[st.op](self, s, st, lam, c, sl)
            if nxt is None:
                _concretise(lam, self.ivs[s], c)  # over the stage's output interval
                continue
            off = 0
            for i in st.srcs(s):
                n = len(self.ivs[i])
                part = [row[off : off + n] for row in nxt]
                off += n
                old = pending.get(i)
                if old is not None:  # a fan-out point: the rows of every reader, summed
                    part = [[a + b for a, b in zip(ra, rb, strict=True)]
                            for ra, rb in zip(old, part, strict=True)]  # fmt: skip
                pending[i] = part
        if 0 in pending:
            _concretise(pending[0], self.ivs[0], c)
        return c

    def witness(self) -> list[dict[str, Any]]:
        """Per stage: the pre-activation intervals and relaxations used (p/q strings)."""
        out = []
        for t, st in zip(range(1, len(self.ivs)), self.stages, strict=False):
            e: dict[str, Any] = {
                "op": st.label,
                "out": [[frac_str(a), frac_str(b)] for a, b in self.ivs[t]],
            }
            if t in self.relax:
                e["relax"] = [[frac_str(v) for v in r] for r in self.relax[t]]
            if t in self.pool:
                e["pool"] = [[k, int(d), frac_str(u)] for k, d, u in self.pool[t]]
            if t in self.alpha:
                e["alpha"] = {k: slopes_json(v) for k, v in self.alpha[t].items()}
            out.append(e)
        return out


def _concretise(lam: list[list[Any]], box: list[Iv], c: list[Any]) -> None:
    """Add each row's lower bound over the intervals `box` to its constant."""
    ends = [(q(x[0]), q(x[1])) for x in box] if len(lam) > 1 else box
    for r, row in enumerate(lam):
        for lv, x in zip(row, ends, strict=True):
            if lv:
                c[r] += lv * (q(x[0]) if lv >= 0 else q(x[1]))


def slopes_json(sl: Slopes) -> dict[str, list[list[Any]]]:
    """Per-row slopes as certificate JSON: stage number (1-based, a string) -> rows of p/q
    (ReLU: one slope per neuron; tanh / sigmoid: the relaxation [aL, cL, aU, cU] of each
    neuron as four p/q)."""
    return {
        str(s): [[[frac_str(x) for x in v] if isinstance(v, tuple) else frac_str(v) for v in row]
                 for row in rows]
        for s, rows in sl.items()
    }  # fmt: skip
