"""Rigorous vectorised bounds of chain networks of dense `linear` and `relu` stages, in
numpy binary64, for batches of leaves (sub-boxes with optional ReLU sign constraints).

Invariants:
- `SoundNet.build` accepts only a chain (no stage reads anything but the previous
  output) of alternating `linear` and `relu` stages ending with `linear`, in float32 or
  float64; anything else gives None (the caller keeps the exact path).
- Every interval computed here encloses both the real network's value (level 1) and the
  runtime's value in the dtype (level 2, any summation order, FMA or not) at every point
  of the leaf: a linear stage's runtime output is W x + b + delta with |delta_i| <= E_i =
  gamma_{n+1} (sum_j |W_ij| m_j + |b_i|) + n eta (1 + gamma_{n+1}) (m_j = max |x_j| over
  the input interval, u = 2^-p, gamma_k = k u / (1 - k u), eta = 2^(emin - 1)); delta is a
  bounded extra input in [-E, E], so delta = 0 (the real network) is included. ReLU is
  exact at level 2.
- The float64 arithmetic is made rigorous by a-priori error terms: an elementwise + - * /
  result r encloses the exact one in [nextafter(r, -inf), nextafter(r, +inf)]; a product
  of matrices with inner dimension n is within 2 (n + 2) 2^-53 R + (2 n + 4) 2^-1074 of the
  exact one (R the computed product of the absolute values); coefficients of a
  back-substitution are the computed products, and their distance to the exact ones times
  the largest magnitude of the variable they multiply is charged to the constant.
- `lower` follows the algorithm of the split-bounds certificate: per hidden linear stage,
  IBP intersected with CROWN (adaptive lower slope: 1 if u >= -l else 0) down to the box,
  then the leaf's sign constraints (S = +1: l := max(l, 0); S = -1: u := min(u, 0)); a leaf
  with some l > u has an empty region (its bound is +inf). The rows are back-substituted
  with the same relaxations, except for the leaf's own lower slopes `alpha` where given.
  A leaf where some linear output could exceed the dtype's largest finite value (the
  runtime could overflow), or where a bound or a back-substituted coefficient is not
  finite, gets -inf: `_up` / `_dn` turn a non-finite computed value into NaN (never into
  the largest finite number), so an overflowed computation proves nothing.
- The rows' final bounds give up SHARE (2^-36) of the sum of the absolute values of their
  pieces: still lower bounds, and ones an independent recomputation with looser sound
  rounding terms (the checker's) still reaches; intermediate bounds are not lowered (a
  lower one would change the adaptive slope choices the checker recomputes).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .core import VerificationError
from .network import stages

__all__ = [
    "CHUNK_ELEMENTS",
    "FORMATS",
    "SCHEMES",
    "SHARE",
    "SoundNet",
    "enclose",
    "gamma",
    "mm_err",
    "scheme_alpha",
]

FORMATS = {"float32": (24, -126), "float64": (53, -1022)}  # (precision p, emin)
_MAXF = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
_U = 2.0**-53
_TINY = 2.0**-1074
CHUNK_ELEMENTS = 1 << 23  # leaves per chunk x hidden rows x hidden width, at most
SHARE = 2.0**-36  # of a row bound's absolute pieces given up so that the checker agrees

Arr = np.ndarray


def _kernel() -> Any:
    """The numba loop when numba is installed (TORCHLEAN_COMPILED=0 turns it off)."""
    if os.environ.get("TORCHLEAN_COMPILED") == "0":
        return None
    try:
        from .rigorous_kernels import relax_rows
    except ImportError:
        return None
    return relax_rows


_KERNEL: dict[str, Any] = {"relax_rows": _kernel()}


def _up(x: Any) -> Any:
    """The next binary64 up of each computed value; a non-finite one (an overflowed or
    undefined computation, standing for no known exact value: nextafter would turn +-inf
    into a finite number) becomes NaN, which no bound passes."""
    return np.where(np.isfinite(x), np.nextafter(x, np.inf), np.nan)


def _dn(x: Any) -> Any:
    """The next binary64 down of each computed value; non-finite ones become NaN (see
    `_up`)."""
    return np.where(np.isfinite(x), np.nextafter(x, -np.inf), np.nan)


def gamma(dtype: str, k: int) -> float:
    """An upper bound (binary64) of gamma_k = k u / (1 - k u) for the dtype's u = 2^-p."""
    u = 2.0 ** -FORMATS[dtype][0]
    return float(_up((k * u) / _dn(1.0 - k * u)))


def mm_err(R: Arr, n: int) -> Arr:
    """Bound on |fl(A @ B) - A B| given R = the computed |A| @ |B| (inner dimension n)."""
    return _up(_up((2.0 * (n + 2) * _U) * R) + (2 * n + 4) * _TINY)


def _lo(A: Arr, B: Arr) -> Arr:
    """A rigorous lower bound of the exact A @ B."""
    P = np.matmul(A, B)
    return _dn(P - mm_err(np.matmul(np.abs(A), np.abs(B)), A.shape[-1]))


def _hi_pos(A: Arr, B: Arr) -> Arr:
    """A rigorous upper bound of the exact A @ B for A, B >= 0."""
    P = np.matmul(A, B)
    return _up(P + mm_err(P, A.shape[-1]))


def enclose(box: tuple[Any, Any]) -> tuple[Arr, Arr]:
    """Binary64 enclosure of an exact box: lower ends rounded down, upper ends up."""
    lo = np.array([float(v) for v in box[0]])
    hi = np.array([float(v) for v in box[1]])
    for i, (a, b) in enumerate(zip(box[0], box[1], strict=True)):
        if Fraction(lo[i]) > Fraction(a):
            lo[i] = _dn(lo[i])
        if Fraction(hi[i]) < Fraction(b):
            hi[i] = _up(hi[i])
    return lo, hi


SCHEMES = ("adaptive", "parallel", "zero", "one")
"""Lower-slope schemes `bound_tries` tries for the final rows: the adaptive rule, the
upper line's slope u / (u - l), 0, 1 (on unstable neurons; any value in [0, 1] is sound)."""


def scheme_alpha(c: int, pre: tuple[Arr, Arr]) -> Arr:
    """The lower slopes (B, n) of scheme c on relu bounds pre = (l, u): values in [0, 1]."""
    l, u = pre
    if c == 1:
        unst = (l < 0) & (u > 0)
        return np.where(unst, np.clip(u / np.where(unst, u - l, 1.0), 0.0, 1.0), 0.0)
    if c == 0:
        return np.where(u >= -l, 1.0, 0.0)
    return np.full(l.shape, 1.0 if c == 3 else 0.0)


@dataclass
class _Leaves:
    """The per-leaf state of one `SoundNet.bound` call."""

    lo: Arr
    hi: Arr
    E: list[Arr]  # per linear stage: rounding-error bounds (B, n_out)
    mx: list[Arr]  # per linear stage: max |input| (B, n_in)
    pre: list[tuple[Arr, Arr]]  # per relu stage: (l, u) (B, n)
    bad: Arr  # (B,) not computable
    empty: Arr  # (B,) region proved empty


@dataclass
class SoundNet:
    """The chain network in binary64 (exact copies of the dtype's weights)."""

    dtype: str
    Ws: list[Arr]
    bs: list[Arr]
    relu_stages: tuple[int, ...]
    widths: tuple[int, ...]  # the input width, then each linear stage's output width
    absW: list[Arr] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.absW = [np.abs(W) for W in self.Ws]

    @property
    def n_in(self) -> int:
        return self.widths[0]

    @property
    def n_out(self) -> int:
        return self.widths[-1]

    @staticmethod
    def build(net: Any) -> SoundNet | None:
        """The SoundNet of a `from_graph.Network`, or None if it is not such a chain."""
        dtype = net.result.dtype
        if dtype not in FORMATS:
            return None
        try:
            sts = stages(net.result, net.in_shape)
        except VerificationError:
            return None
        ops = [st.op for st in sts]
        want = ["linear" if i % 2 == 0 else "relu" for i in range(len(sts))]
        if ops != want or len(sts) % 2 == 0 or any(st.inputs for st in sts):
            return None
        lin = sts[0::2]
        Ws = [np.array([[float(w) for w in r] for r in st.weight]) for st in lin]
        bs = [np.array([float(v) for v in st.bias]) for st in lin]
        widths = (Ws[0].shape[1], *(W.shape[0] for W in Ws))
        return SoundNet(dtype, Ws, bs, tuple(range(1, len(sts), 2)), widths)

    def lower(
        self, lo: Arr, hi: Arr, A: Arr, splits: Any = None, alpha: Any = None
    ) -> tuple[Arr, list[tuple[Arr, Arr]]]:
        """(B, m) rigorous lower bounds of A . Y on each leaf and the (l, u) used per relu
        stage (see the module docstring)."""
        low, pre, _ = self.bound(lo, hi, A, splits, alpha)
        return low, pre

    def bound(
        self, lo: Arr, hi: Arr, A: Arr, splits: Any = None, alpha: Any = None
    ) -> tuple[Arr, list[tuple[Arr, Arr]], Arr]:
        """`lower`, plus the rows' input coefficients (B, m, n_in) (search heuristics)."""
        low, pre, coef, _ = self.bound_tries(lo, hi, A, None, splits, alpha)
        return low, pre, coef

    def bound_tries(
        self, lo: Arr, hi: Arr, A: Arr, thr: Arr | None, splits: Any = None, alpha: Any = None
    ) -> tuple[Arr, list[tuple[Arr, Arr]], Arr, Arr]:
        """`bound`; with `thr` (m,), the final rows are also bounded with each lower-slope
        scheme of SCHEMES (intermediate bounds shared) and each leaf gets the scheme whose
        best row clears thr by most: its bounds and its index (0: the adaptive rule; the
        slopes are `scheme_alpha(k, pre)`). Large batches are computed in chunks of at
        most CHUNK_ELEMENTS / (2 n^2) leaves."""
        lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)
        if alpha is not None and not all(((a >= 0) & (a <= 1)).all() for a in alpha):
            raise VerificationError("SoundNet.lower: every lower slope alpha must be in [0, 1]")
        step = max(1, CHUNK_ELEMENTS // (2 * max(self.widths[1:-1] or (1,)) ** 2))
        parts = []
        for i in range(0, lo.shape[0], step):
            sl = slice(i, i + step)
            sp = None if splits is None else [s[sl] for s in splits]
            al = None if alpha is None else [a[sl] for a in alpha]
            parts.append(self._bound(lo[sl], hi[sl], A, sp, al, thr))
        if len(parts) == 1:
            return parts[0]
        pre = [
            (
                np.concatenate([p[1][j][0] for p in parts]),
                np.concatenate([p[1][j][1] for p in parts]),
            )
            for j in range(len(parts[0][1]))
        ]
        low = np.concatenate([p[0] for p in parts])
        return (
            low,
            pre,
            np.concatenate([p[2] for p in parts]),
            np.concatenate([p[3] for p in parts]),
        )

    def _bound(
        self, lo: Arr, hi: Arr, A: Arr, splits: Any, alpha: Any, thr: Arr | None
    ) -> tuple[Arr, list[tuple[Arr, Arr]], Arr, Arr]:
        B = lo.shape[0]
        st = _Leaves(lo, hi, [], [np.maximum(np.abs(lo), np.abs(hi))], [],
                     np.zeros(B, bool), np.zeros(B, bool))  # fmt: skip
        K = len(self.Ws)
        xl, xu = lo, hi
        for k in range(K):
            st.E.append(self._err(k, st.mx[k], st))
            zl, zu = self._ibp(k, xl, xu, st.E[k])
            if k == K - 1:
                break
            l, u = self._crown_box(k, st, zl, zu)
            if splits is not None:
                S = splits[k]
                l = np.where(S > 0, np.maximum(l, 0.0), l)
                u = np.where(S < 0, np.minimum(u, 0.0), u)
            st.bad |= ~(np.isfinite(l).all(1) & np.isfinite(u).all(1))
            st.empty |= (l > u).any(1)
            st.pre.append((l, u))
            xl, xu = np.maximum(l, 0.0), np.maximum(u, 0.0)
            st.mx.append(np.maximum(xl, xu))
        Am = np.broadcast_to(np.asarray(A, np.float64), (B, *np.shape(A)))
        low, coef = self._final(K - 1, Am, st, alpha)
        choice = np.zeros(B, np.int64)
        if thr is not None:
            best = (low - thr).max(axis=1)
            for c in range(1, len(SCHEMES)):
                m = Am.shape[1]
                al = [np.broadcast_to(scheme_alpha(c, p)[:, None, :], (B, m, p[0].shape[1]))
                      for p in st.pre]  # fmt: skip
                lc, _ = self._final(K - 1, Am, st, al)
                gc = (lc - thr).max(axis=1)
                better = gc > best
                low[better], best[better], choice[better] = lc[better], gc[better], c
        st.bad |= ~np.isfinite(low).all(1)
        low = np.where(st.bad[:, None], -np.inf, np.where(st.empty[:, None], np.inf, low))
        return low, st.pre, coef, choice

    def _err(self, k: int, mx: Arr, st: _Leaves) -> Arr:
        """E of linear stage k (B, n_out); marks leaves that could overflow the dtype."""
        W, b = self.Ws[k], self.bs[k]
        n = W.shape[1]
        g = gamma(self.dtype, n + 1)
        eta = 2.0 ** (FORMATS[self.dtype][1] - 1)
        S = _up(_hi_pos(mx, np.abs(W).T) + np.abs(b))
        E = _up(_up(g * S) + _up(_up(n * eta) * _up(1.0 + g)))
        st.bad |= ~(_up(S + E) <= _MAXF[self.dtype]).all(1)
        return E

    def _ibp(self, k: int, xl: Arr, xu: Arr, E: Arr) -> tuple[Arr, Arr]:
        W, b = self.Ws[k], self.bs[k]
        Wp, Wn = np.maximum(W, 0.0).T, np.minimum(W, 0.0).T
        zl = _dn(_dn(_dn(_lo(xl, Wp) + _lo(xu, Wn)) + b) - E)
        zu = _up(_up(_up(-_lo(-xu, Wp) - _lo(-xl, Wn)) + b) + E)
        return zl, zu

    def _crown_box(self, k: int, st: _Leaves, zl: Arr, zu: Arr) -> tuple[Arr, Arr]:
        """IBP [zl, zu] of linear stage k intersected with CROWN's bounds (adaptive slopes)
        of every output (a stable output's bounds still matter: they enter the rounding
        terms and the next stage's IBP, so the checker's recomputation needs them all).
        The rows are +-identity: their first step is exact (coefficients +-W, constant
        +-b, error +-E)."""
        n = zl.shape[1]
        W, b, E = self.Ws[k], self.bs[k], st.E[k]
        G = np.broadcast_to(np.concatenate([W, -W]), (zl.shape[0], 2 * n, W.shape[1]))
        const = np.concatenate([_dn(b - E), _dn(-b - E)], axis=1)
        low, _, _ = self._back(k, G, st, None, const)
        return np.maximum(zl, low[:, :n]), np.minimum(zu, -low[:, n:])

    def _final(self, k: int, Lam: Arr, st: _Leaves, alpha: Any) -> tuple[Arr, Arr]:
        """The rows' bounds as `_back`, each lowered by SHARE times the sum of the absolute
        values of its pieces: still a lower bound, and one that an independent
        recomputation with looser (but sound) rounding terms still reaches, since those
        terms are multiples of the same magnitudes."""
        low, G, mag = self._back(k, Lam, st, alpha)
        return _dn(low - _up(SHARE * mag)), G

    def _back(
        self, k: int, Lam: Arr, st: _Leaves, alpha: Any, const: Arr | None = None
    ) -> tuple[Arr, Arr, Arr]:
        """Rigorous lower bounds of Lam . z_k (Lam: (B, r, n_k)) by back-substitution to
        the box, the final input coefficients, and the sum of the absolute values of the
        pieces summed (computed, for `_final`). With `const`, Lam is already the
        coefficients on stage k's input and `const` a lower bound of the rest."""
        B, r = Lam.shape[:2]
        G = None if const is None else Lam
        const = np.zeros((B, r)) if const is None else const
        mag = np.abs(const)
        t = k
        aL = np.abs(Lam)
        while True:
            if G is None:
                const, G, m = self._step(t, Lam, aL, const, st)
                mag = mag + m
            if t == 0:
                x, m = _concretise(G, st.lo, st.hi)
                return _dn(const + x), G, mag + m
            a = None if alpha is None else alpha[t - 1]
            Lam, aL, c4 = _relax(G, st.pre[t - 1], a)
            const = _dn(const + c4)
            mag = mag + np.abs(c4)
            G, t = None, t - 1

    def _step(self, t: int, Lam: Arr, aL: Arr, const: Arr, st: _Leaves) -> tuple[Arr, Arr, Arr]:
        """Lam . z_t >= G . x_t + const': G = fl(Lam W_t), const' = const + Lam b - |Lam| E
        less the rounding of G times max |x_t| (rounded down); and the pieces' magnitude
        |Lam| (|b| + E + |W| max |x_t|). A leaf with a non-finite G (an overflowed
        coefficient, no longer near the exact one) is marked not computable."""
        B, r = Lam.shape[:2]
        W, b = self.Ws[t], self.bs[t]
        n = W.shape[0]
        v = _hi_pos(st.mx[t], self.absW[t].T)  # |W| mx
        vecs = np.stack([np.broadcast_to(np.abs(b), st.E[t].shape), st.E[t], v], axis=-1)
        R = aL @ vecs  # (B, r, 3): |Lam| |b|, |Lam| E, |Lam| |W| mx
        c1 = _dn(Lam @ b - mm_err(R[..., 0], n))
        c2 = _up(R[..., 1] + mm_err(R[..., 1], n))
        c3 = _gemm_err(_up(R[..., 2] + mm_err(R[..., 2], n)), n, st.mx[t])
        const = _dn(_dn(_dn(const + c1) - c2) - c3)
        G = (np.reshape(Lam, (B * r, n)) @ W).reshape(B, r, W.shape[1])
        st.bad |= ~np.isfinite(G).all(axis=(1, 2))
        return const, G, R.sum(axis=-1)


def _gemm_err(w: Arr, n: int, mx: Arr) -> Arr:
    """An upper bound of |fl(Lam W) - Lam W| . mx per (leaf, row), given w >= |Lam| (|W|
    mx): the product's error is at most c (|Lam| |W|) + tau elementwise (c = 2 (n + 2)
    2^-53, tau = (2 n + 4) 2^-1074, n = W's row count), and (|Lam| |W|) mx = |Lam| (|W| mx)."""
    smx = _hi_pos(mx, np.ones(mx.shape[1]))
    tail = _up(((2 * n + 4) * _TINY) * smx)
    return _up(_up((2.0 * (n + 2) * _U) * w) + tail[:, None])


def _lines(pre: tuple[Arr, Arr]) -> tuple[Arr, ...]:
    """Per neuron (B, 1, n): live, dead, unstable masks, the upper line's slope and a
    rigorous upper bound of its intercept (the line is above relu at l and at u)."""
    l, u = pre[0][:, None, :], pre[1][:, None, :]
    live, dead = l >= 0, u <= 0
    unst = ~live & ~dead
    s = np.where(unst, u / np.where(unst, u - l, 1.0), 0.0)
    icpt = np.where(unst, np.maximum(-_dn(s * l), _up(u - _dn(s * u))), 0.0)
    return live, dead, unst, s, icpt


def _rows_numpy(G: Arr, slope_lo: Arr, slope_up: Arr, icpt: Arr, zu: Arr) -> tuple[Arr, ...]:
    """`rigorous_kernels.relax_rows` in NumPy (the same values)."""
    Gn = np.minimum(G, 0.0)
    H = np.maximum(G, 0.0) * slope_lo
    H += Gn * slope_up  # one of the two products is 0: H is fl(G x its slope)
    aH = np.abs(H)
    return H, aH, (Gn @ icpt[..., None])[..., 0], (aH @ zu[..., None])[..., 0]


def _rows(G: Arr, slope_lo: Arr, slope_up: Arr, icpt: Arr, zu: Arr) -> tuple[Arr, ...]:
    """H = fl(G x slope), |H|, sum_j min(G, 0) icpt, sum_j |H| zu (computed)."""
    args = [np.ascontiguousarray(x) for x in (G, slope_lo, slope_up, icpt, zu)]
    if _KERNEL["relax_rows"] is None:
        return _rows_numpy(*args)
    return tuple(_KERNEL["relax_rows"](*args))


def _relax(G: Arr, pre: tuple[Arr, Arr], alpha: Arr | None) -> tuple[Arr, Arr, Arr]:
    """G . relu(z) >= H . z + c on z in [l, u]: the new coefficients H (computed), |H|,
    and a rigorous lower bound of c (the upper lines' intercepts on negative
    coefficients, less the rounding of H (one product: at most 2^-52 |H| + 2^-1074)
    times max |z|)."""
    live, dead, unst, s, icpt = _lines(pre)
    l, u = pre[0][:, None, :], pre[1][:, None, :]
    a = np.where(u >= -l, 1.0, 0.0) if alpha is None else alpha
    slope_lo = np.where(live, 1.0, np.where(dead, 0.0, a))
    slope_up = np.where(live, 1.0, s)
    n = G.shape[-1]
    zu = np.where(unst[:, 0, :], np.maximum(np.abs(pre[0]), np.abs(pre[1])), 0.0)
    H, aH, P, w = _rows(G, slope_lo, slope_up, icpt[:, 0, :], zu)
    c = _dn(P - mm_err(-P, n))  # P <= 0: its absolute-value sum is -P
    w = _up(w + mm_err(w, n))
    e = _up(_up(2.0**-52 * w) + _up(_TINY * _hi_pos(zu, np.ones(n)))[:, None])
    return H, aH, _dn(c - e)


def _concretise(G: Arr, lo: Arr, hi: Arr) -> tuple[Arr, Arr]:
    """A rigorous lower bound of min over x in [lo, hi] of G . x, per (leaf, row), as
    G . c - |G| . r over the box [c - r, c + r] that contains [lo, hi] (c the computed
    midpoint, r rounded up): two products of inner dimension n and their difference,
    charged as one product of inner dimension 2 n + 2 against R = |G| (|c| + r) (at least
    each product's absolute-value product; the extra 2 n + 2 absorb the difference's
    rounding and the two products' underflow terms)."""
    n = G.shape[-1]
    c = (lo + hi) / 2
    r = _up(np.maximum(_up(hi - c), _up(c - lo)))
    aG = np.abs(G)
    s = np.matmul(G, c[:, :, None])[..., 0]
    P = np.matmul(aG, np.stack([r, _up(np.abs(c) + r)], axis=-1))
    low = _dn(_dn(s - _up(P[..., 0] + mm_err(P[..., 0], n))) - mm_err(P[..., 1], 2 * n + 2))
    return low, P[..., 1]
