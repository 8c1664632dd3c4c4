"""alpha-CROWN's slope optimiser: per objective row, the lower-line slopes of unstable ReLU
neurons and both line slopes of tanh / sigmoid neurons, chosen by projected gradient ascent
on CROWN's own lower bound (in binary64).

Invariants:
- Nothing here is trusted. A ReLU neuron whose interval [lo, hi] straddles 0 (lo < 0 < hi)
  is "free": every line y = a x with 0 <= a <= 1 lies below ReLU on the whole real line
  (a leaky_relu neuron of slope s likewise with s <= a <= 1: kind "relu", `floor` s),
  so any slope the optimiser returns in [0, 1] gives a valid relaxation. The returned slopes
  are binary64 values clipped to [0, 1] (so exact dyadic rationals in [0, 1]); the caller
  recomputes the bound with them in exact arithmetic (`crown.Crown.backward`), and the
  certificate checker validates each slope as a relaxation on its neuron's interval.
- tanh / sigmoid neurons with a finite, non-degenerate interval are free too: for any
  slope a, the line a x + min(f(x) - a x) lies below f on the interval and a x + max(...)
  above it (the tangent lines of alpha-CROWN's tangent points are among them). Slopes are
  kept in [0, f'(0)] (1 for tanh, 1/4 for sigmoid); the float objective uses the tight
  intercepts (the minimum over the ends and the point of the convex side where f' = a,
  the maximum likewise on the concave side) minus / plus the level-2 error, and their
  derivative -x* (envelope theorem). Only the line a row actually uses (its coefficient's
  sign in the final float pass) is returned with the new slope; the caller encloses its
  intercept rigorously (`relaxations.smooth_lines`), the other line stays CROWN's.
  GELU neurons likewise (kind "gelu", slopes in GELU_SLOPES; the float intercept from 65
  points, `gelu_tight`; the caller's from its piecewise enclosure, `relaxations.gelu_line`).
- max_pool2d outputs that are not dominated are free too (kind "pool"): their upper line
  max <= sum lam_i x_i + c(lam) holds for every lam in [0, 1]^window with the intercept
  of `pool_lines` (CROWN's constant line is lam = 0, the start); the float objective uses
  its float image and gradient (-u_j* for the maximising j*, -l_i elsewhere), the caller
  recomputes c exactly from the returned binary64 slopes.
- conv2d / avg_pool2d stages' float images are their windows as padded index and weight
  arrays (`network.Windowed.padded`): rows cross them by a scatter-add (bincount) and
  gradients by a gather, never through a dense matrix.
- The objective is the float64 image of the exact backward pass: the same stages, the
  same relaxations (aL, cL, aU, cU) except the free slopes, the same level-2 error terms,
  the same concretisation (over the box, or over a LayerNorm's output interval where the
  pass stops), the same DAG walk (rows summed at fan-out points; the gradient's G of a
  value is the bound's derivative with respect to its summed rows). Only stages whose
  values reach the objective get slopes. Its gradient is written out by hand (reverse
  mode over the recorded rows).
- Optimisation: Adam (LR, ITERS steps — SMOOTH_ITERS when tanh / sigmoid lines are
  optimised, with the decay spread over them —, step decay DECAY) from CROWN's own slopes,
  keeping per row the best slopes seen (by the float bound), so the result is never worse
  than CROWN's start in the float objective; the exact recomputation decides what is
  certified.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gmpy2 import mpq

from spec.ops import GELU_C, GELU_K

from .network import AFFINE
from .pool_lines import Windows, float_lines
from .relaxations import leaky_floor

__all__ = [
    "DECAY",
    "ITERS",
    "LR",
    "SMOOTH_ITERS",
    "SMOOTH_MAX",
    "Chain",
    "float_slopes",
    "optimise",
]

ITERS = 50
LR = 0.3
DECAY = 0.93
SMOOTH_ITERS = 100  # steps when tanh / sigmoid lines are optimised (decay DECAY ** (ITERS / it))
SMOOTH_MAX = {"tanh": 1.0, "sigmoid": 0.25}  # f'(0): tanh / sigmoid slopes lie in [0, this]
GELU_SLOPES = (-0.2, 1.2)  # GELU' lies in [-0.17, 1.13]: its optimised slopes lie in this range


def _fv(kind: str, x: np.ndarray) -> np.ndarray:
    if kind == "tanh":
        return np.tanh(x)
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _crit(kind: str, a: np.ndarray, convex: bool) -> np.ndarray:
    """The point where f' = a on f's convex side (x <= 0) or concave side (x >= 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "tanh":
            x = np.arctanh(np.sqrt(np.clip(1.0 - a, 0.0, 1.0)))
        else:
            r = np.sqrt(np.clip(1.0 - 4.0 * a, 0.0, 1.0))
            x = np.log1p(r) - np.log1p(-r)  # logit((1 + r) / 2)
    x = np.where(np.isnan(x), np.inf, x)
    return -x if convex else x


def tight_line(
    kind: str, a: np.ndarray, lo: np.ndarray, hi: np.ndarray, lower: bool
) -> tuple[np.ndarray, np.ndarray]:
    """min (lower) or max of f(x) - a x over [lo, hi] and the point x* where it is reached
    (float64; the candidates are the ends and the point of the convex / concave side where
    f' = a, clipped into the interval)."""
    c0, c1 = np.broadcast_to(lo, a.shape), np.broadcast_to(hi, a.shape)
    c2 = np.clip(_crit(kind, a, lower), lo, hi)
    p0, p1, p2 = (_fv(kind, c) - a * c for c in (c0, c1, c2))
    take1 = p1 < p0 if lower else p1 > p0
    v, x = np.where(take1, p1, p0), np.where(take1, c1, c0)
    take2 = p2 < v if lower else p2 > v
    return np.where(take2, p2, v), np.where(take2, c2, x)


def gelu_tight(
    kind: str, a: np.ndarray, lo: np.ndarray, hi: np.ndarray, lower: bool
) -> tuple[np.ndarray, np.ndarray]:
    """GELU: about min (lower) or max of f(x) - a x over [lo, hi] and where it is reached,
    over 65 evenly spaced points (float64; the optimiser's image only: CROWN encloses the
    intercept of the slopes it returns on pieces)."""
    t = np.linspace(0.0, 1.0, 65)
    x = lo[..., None] + (hi - lo)[..., None] * t
    x = np.broadcast_to(x, (*a.shape, 65))
    f = 0.5 * x * (1.0 + np.tanh(float(GELU_C) * (x + float(GELU_K) * x**3)))
    v = f - a[..., None] * x
    i = np.argmin(v, axis=-1) if lower else np.argmax(v, axis=-1)
    return (np.take_along_axis(v, i[..., None], axis=-1)[..., 0],
            np.take_along_axis(x, i[..., None], axis=-1)[..., 0])  # fmt: skip


class _Padded:
    """A conv2d / avg_pool2d stage's binary64 image: per output its inputs and weights,
    padded to the widest window (`network.Windowed.padded`)."""

    def __init__(self, op: Any) -> None:
        self.idx, self.w = op.padded()
        self.n_in = op.n_in


def _rows_in(lam: np.ndarray, W: Any) -> np.ndarray:
    """Rows over a stage's outputs times its matrix: rows over its inputs."""
    if not isinstance(W, _Padded):
        return lam @ W
    k = lam.shape[0]
    out = np.empty((k, W.n_in))
    step = max(1, 2**22 // W.w.size)  # rows per chunk: about 4M products at a time
    for a in range(0, k, step):
        part = lam[a : a + step]
        m = part.shape[0]
        flat = (np.arange(m)[:, None, None] * W.n_in + W.idx[None]).ravel()
        vals = (part[:, :, None] * W.w[None]).ravel()
        out[a : a + m] = np.bincount(flat, weights=vals, minlength=m * W.n_in).reshape(m, -1)
    return out


def _rows_out(g: np.ndarray, W: Any) -> np.ndarray:
    """Rows over a stage's inputs times its matrix's transpose: rows over its outputs."""
    if not isinstance(W, _Padded):
        return g @ W.T
    if g.ndim == 1:
        return (g[W.idx] * W.w).sum(axis=-1)
    out = np.empty((g.shape[0], W.w.shape[0]))
    step = max(1, 2**22 // W.w.size)
    for a in range(0, g.shape[0], step):
        out[a : a + step] = (g[a : a + step, W.idx] * W.w).sum(axis=-1)
    return out


class Chain:
    """The float64 image of one CROWN object's backward pass (built once per Crown)."""

    def __init__(self, cr: Any) -> None:
        self.cr = cr
        self.W: dict[int, Any] = {}  # dense binary64 matrices, or `_Padded` windows
        self.b: dict[int, np.ndarray] = {}
        self.e: dict[int, np.ndarray] = {}
        self.rl: dict[int, np.ndarray] = {}
        self.free: dict[int, np.ndarray] = {}
        self.kind: dict[int, str] = {}  # stage -> relu | tanh | sigmoid | pool (free stages)
        self.ends: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # lo, hi, err
        self.floor: dict[int, float] = {}  # leaky_relu stages (kind "relu"): least slope
        self._lines_used: dict[int, tuple[Any, ...]] = {}  # the last trace's lines per stage
        self.pool: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}  # P, dom, u
        self.win: dict[int, Windows] = {}  # max_pool2d: windows (kind "pool")

    def sync(self, t: int) -> None:
        """Float copies of the stages below t (relaxations appear as the forward pass runs)."""
        cr = self.cr
        for s in range(1, t + 1):
            st = cr.stages[s - 1]
            if st.op in AFFINE and s not in self.W and s in cr.err:
                dense = st.windowed is None
                self.W[s] = (np.array([[float(w) for w in r] for r in cr.W[s]]) if dense
                             else _Padded(st.windowed))  # fmt: skip
                self.b[s] = np.array([float(v) for v in st.bias], dtype=np.float64)
                self.e[s] = np.array([float(v) for v in cr.err[s]], dtype=np.float64)
            elif st.op == "add" and s not in self.e and s in cr.err:
                self.e[s] = np.array([float(v) for v in cr.err[s]], dtype=np.float64)
            elif s in cr.pool and s not in self.pool:  # max_pool2d: one-hot P, dom, u
                P = np.zeros((len(cr.pool[s]), len(cr.ivs[st.srcs(s)[0]])))
                for o, (k, _, _) in enumerate(cr.pool[s]):
                    P[o, k] = 1.0
                dom = np.array([d for _, d, _ in cr.pool[s]])
                self.pool[s] = (P, dom, np.array([float(u) for _, _, u in cr.pool[s]]))
                self._sync_pool(s, st, dom)
            elif s in cr.relax and s not in self.rl:
                self.rl[s] = np.array([[float(v) for v in r] for r in cr.relax[s]])
                lo = np.array([float(x[0]) for x in cr.ivs[st.srcs(s)[0]]])
                hi = np.array([float(x[1]) for x in cr.ivs[st.srcs(s)[0]]])
                if st.op == "relu":
                    self.free[s], self.kind[s] = (lo < 0) & (hi > 0), "relu"
                elif st.op in SMOOTH_MAX:
                    r = self.rl[s]
                    ok = np.isfinite(lo) & np.isfinite(hi) & (hi - lo > 1e-9)
                    self.free[s] = ok & ((r[:, 0] != 0) | (r[:, 2] != 0))
                    self.kind[s] = st.op
                    err = np.array([float(v) for v in cr.act[s]])
                    self.ends[s] = (np.where(ok, lo, 0.0), np.where(ok, hi, 0.0), err)
                elif st.op == "gelu":  # any slopes, intercepts from the pieces (crown)
                    ok = np.isfinite(lo) & np.isfinite(hi) & (hi - lo > 1e-9)
                    self.free[s], self.kind[s], self.floor[s] = ok, "gelu", GELU_SLOPES[0]
                    zero = np.zeros(len(lo))
                    self.ends[s] = (np.where(ok, lo, 0.0), np.where(ok, hi, 0.0), zero)
                elif st.op == "leaky_relu":  # lower slopes in [s, 1], like ReLU's in [0, 1]
                    self.free[s], self.kind[s] = (lo < 0) & (hi > 0), "relu"
                    self.floor[s] = leaky_floor(cr.A, st)
                    # every start (and so every returned slope) in [s, 1]: a valid line
                    self.rl[s][:, 0] = np.maximum(self.rl[s][:, 0], self.floor[s])

    def _sync_pool(self, s: int, st: Any, dom: np.ndarray) -> None:
        """max_pool2d: its windows and input ends; every non-dominated output is free (its
        upper line max <= sum lam_i x_i + c(lam), lam in [0, 1]^window, `pool_lines`)."""
        ivs = self.cr.ivs[st.srcs(s)[0]]
        self.win[s] = Windows(st.windows, len(ivs))
        lo, hi = np.array([float(x[0]) for x in ivs]), np.array([float(x[1]) for x in ivs])
        self.ends[s] = (lo, hi, np.zeros(0))
        self.free[s], self.kind[s] = ~dom, "pool"

    def _pool_lines(
        self, s: int, lam: np.ndarray, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, Any]:
        """Rows through max_pool2d stage s: the constants added, the rows over its inputs,
        and (with slopes) what `run` needs: (negative coefficients, c's gradient)."""
        P, dom, u = self.pool[s]
        take = (lam >= 0) | dom
        if s not in alpha:
            return np.where(take, 0.0, lam * u).sum(axis=1), np.where(take, lam, 0.0) @ P, None
        lo, hi, _ = self.ends[s]
        cl, grad = float_lines(self.win[s], alpha[s], lo, hi)
        neg = np.where(take, 0.0, lam)
        rows = np.where(take, lam, 0.0) @ P + self.win[s].scatter(neg[..., None] * alpha[s])
        return (neg * cl).sum(axis=1), rows, (neg, cl, grad)

    def trace(
        self, C: np.ndarray, t: int, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, list[tuple[int, np.ndarray]], list[tuple[int, np.ndarray]]]:
        """The float pass: the lower bounds of C @ z_t, the rows entering every stage crossed
        (stage, rows; decreasing stages), and the rows concretised at the bottom (value,
        rows: the input box, value 0, or a LayerNorm's output interval where the pass
        stops). Rows reaching a value from several stages (a fan-out) are summed."""
        cr = self.cr
        pending: dict[int, np.ndarray] = {t: C}
        c = np.zeros(C.shape[0])
        seen: list[tuple[int, np.ndarray]] = []
        bottoms: list[tuple[int, np.ndarray]] = []
        self._lines_used = {}
        for s in range(t, 0, -1):
            if s not in pending:
                continue
            lam, st = pending.pop(s), cr.stages[s - 1]
            if st.op == "layer_norm":
                bottoms.append((s, lam))
                continue
            seen.append((s, lam))
            c, new = self._cross(s, st.op, lam, c, alpha)
            off = 0
            for i in st.srcs(s):
                n = len(cr.ivs[i])
                part, off = new[:, off : off + n], off + n
                pending[i] = pending[i] + part if i in pending else part
        if 0 in pending:
            bottoms.append((0, pending[0]))
        bound = c
        for v, lam in bottoms:
            lo, hi = self.box(v)
            bound = bound + np.where(lam >= 0, lam * lo, lam * hi).sum(axis=1)
        return bound, seen, bottoms

    def box(self, v: int) -> tuple[np.ndarray, np.ndarray]:
        """Value v's interval in binary64 (lower ends, upper ends)."""
        iv = self.cr.ivs[v]
        return np.array([float(x[0]) for x in iv]), np.array([float(x[1]) for x in iv])

    def _cross(
        self, s: int, op: str, lam: np.ndarray, c: np.ndarray, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows through stage s: the new constants and the rows over its inputs."""
        if op in AFFINE:
            return c + lam @ self.b[s] - np.abs(lam) @ self.e[s], _rows_in(lam, self.W[s])
        if op == "add":
            return c - np.abs(lam) @ self.e[s], np.concatenate([lam, lam], axis=1)
        if op == "max_pool2d":
            dc, new, self._lines_used[s] = self._pool_lines(s, lam, alpha)
            return c + dc, new
        self._lines_used[s] = self._lines(s, alpha)
        aL, cL, aU, cU, _ = self._lines_used[s]
        pos = lam >= 0
        return c + np.where(pos, lam * cL, lam * cU).sum(axis=1), np.where(pos, lam * aL, lam * aU)

    def run(
        self, C: np.ndarray, t: int, alpha: dict[int, np.ndarray]
    ) -> tuple[np.ndarray, dict[int, np.ndarray]]:
        """The float lower bounds of C @ z_t and their gradients with respect to alpha:
        G[v] is the bound's derivative with respect to value v's (summed) rows, built from
        the bottom up (increasing stages)."""
        bound, seen, bottoms = self.trace(C, t, alpha)
        G: dict[int, np.ndarray] = {}
        for v, lam in bottoms:
            lo, hi = self.box(v)
            G[v] = np.where(lam >= 0, lo, hi)
        grads: dict[int, np.ndarray] = {}
        for s, lam_s in reversed(seen):
            st = self.cr.stages[s - 1]
            ins = [G[i] for i in st.srcs(s)]
            if st.op in AFFINE:
                G[s] = self.b[s] - np.sign(lam_s) * self.e[s] + _rows_out(ins[0], self.W[s])
            elif st.op == "add":
                G[s] = ins[0] + ins[1] - np.sign(lam_s) * self.e[s]
            elif st.op == "max_pool2d":
                P, dom, u = self.pool[s]
                used = self._lines_used.get(s)
                if used is None:
                    G[s] = np.where((lam_s >= 0) | dom, ins[0] @ P.T, u)
                else:  # d bound / d lam_i = coefficient * (G of input i + dc / dlam_i)
                    neg, cl, dc = used
                    Gw = self.win[s].gather(ins[0])
                    grads[s] = neg[..., None] * (Gw + dc)
                    own = (alpha[s] * Gw).sum(axis=-1) + cl
                    G[s] = np.where((lam_s >= 0) | dom, ins[0] @ P.T, own)
            else:
                G[s] = self._grad(s, lam_s, ins[0], alpha, grads)
        return bound, grads

    def _grad(
        self,
        s: int,
        lam_s: np.ndarray,
        Gi: np.ndarray,
        alpha: dict[int, np.ndarray],
        grads: dict[int, np.ndarray],
    ) -> np.ndarray:
        """A relaxed stage: the gradient of its free slopes (into `grads`) and its G."""
        aL, cL, aU, cU, xs = self._lines_used[s]
        pos = lam_s >= 0
        if s in alpha and xs is None:  # ReLU: lower slopes
            grads[s] = np.where(pos & self.free[s], lam_s * Gi, 0.0)
        elif s in alpha:  # tanh / sigmoid: d intercept / d slope = -x*
            gl = np.where(pos & self.free[s], lam_s * (Gi - xs[0]), 0.0)
            gu = np.where(~pos & self.free[s], lam_s * (Gi - xs[1]), 0.0)
            grads[s] = np.stack([gl, gu], axis=-1)
        return np.where(pos, aL * Gi + cL, aU * Gi + cU)

    def _lines(self, s: int, alpha: dict[int, np.ndarray]) -> tuple[Any, ...]:
        """Stage s's float lines (aL, cL, aU, cU) under alpha, and for optimised tanh /
        sigmoid stages the points x* of the lower and upper intercepts (else None)."""
        r = self.rl[s]
        if s not in alpha:
            return r[:, 0], r[:, 1], r[:, 2], r[:, 3], None
        if self.kind[s] == "relu":
            return alpha[s], r[:, 1], r[:, 2], r[:, 3], None
        lo, hi, err = self.ends[s]
        aL, aU = alpha[s][..., 0], alpha[s][..., 1]
        tl = gelu_tight if self.kind[s] == "gelu" else tight_line
        mL, xL = tl(self.kind[s], aL, lo, hi, True)
        mU, xU = tl(self.kind[s], aU, lo, hi, False)
        free = self.free[s]
        lines = (aL, mL - err, aU, mU + err)
        return (*(np.where(free, v, r[:, i]) for i, v in enumerate(lines)), (xL, xU))


def _mask(ch: Chain, s: int) -> np.ndarray:
    f = ch.free[s][None, :]
    return f if ch.kind[s] == "relu" else f[..., None]


def float_slopes(ch: Chain, sl: Any) -> dict[int, np.ndarray]:
    """`Slopes` (as `optimise` returns them, after the caller's conversion of tanh / sigmoid
    entries to relaxations (aL, cL, aU, cU)) as the float arrays `trace` takes."""
    if sl is None:
        return {}
    out = {}
    for s, rows in sl.items():
        if ch.kind.get(s, "relu") == "relu":
            out[s] = np.array([[float(v) for v in r] for r in rows])
        elif ch.kind[s] == "pool":
            a = np.zeros((len(rows), *ch.win[s].idx.shape))
            for r, row in enumerate(rows):
                for o, lam in enumerate(row):
                    a[r, o, : len(lam)] = [float(v) for v in lam]
            out[s] = a
        else:
            out[s] = np.array([[[float(e[0]), float(e[2])] for e in r] for r in rows])
    return out


def _result(ch: Chain, best: dict[int, np.ndarray], Cf: np.ndarray, t: int) -> dict[int, Any]:
    """ReLU stages: rows of exact slopes; tanh / sigmoid stages: rows of (side, slope) per
    neuron, side "L" or "U" by the row's coefficient sign in the final float pass (None
    where the neuron is not free or the coefficient is 0: CROWN's relaxation stands)."""
    _, seen, _ = ch.trace(Cf, t, best)
    lams = dict(seen)
    out: dict[int, Any] = {}
    for s, a in best.items():
        if ch.kind[s] == "relu":
            out[s] = [[mpq(float(v)) for v in row] for row in a]
            continue
        if ch.kind[s] == "pool":  # per output, its window's lam (exact binary64 values)
            m = ch.win[s].mask
            out[s] = [[tuple(mpq(float(v)) for v in a[r, o][m[o]]) for o in range(a.shape[1])]
                      for r in range(a.shape[0])]  # fmt: skip
            continue
        free, lam = ch.free[s], lams[s]
        out[s] = [[None if not free[j] or lam[r, j] == 0 else
                   (("L", float(a[r, j, 0])) if lam[r, j] > 0 else ("U", float(a[r, j, 1])))
                   for j in range(a.shape[1])] for r in range(a.shape[0])]  # fmt: skip
    return out


def optimise(cr: Any, C: list[list[Any]], t: int) -> dict[int, Any] | None:
    """Per row of C: slopes for every ReLU / tanh / sigmoid stage below t with a free
    neuron, chosen to raise the row's lower bound of C @ z_t (see `_result` for the form);
    None when no neuron is free."""
    ch: Chain = cr.chain
    ch.sync(t)
    k = len(C)
    if not k:
        return None
    Cf = np.array([[float(v) for v in r] for r in C], dtype=np.float64)
    feeds = {s for s, _ in ch.trace(Cf, t, {})[1]}  # the stages whose values reach z_t
    starts = {}
    for s in ch.free:
        if s < t and s in feeds and ch.free[s].any():
            if ch.kind[s] == "pool":  # CROWN's constant line: lam = 0
                starts[s] = np.zeros((k, *ch.win[s].idx.shape))
                continue
            r = ch.rl[s]
            one = r[:, 0] if ch.kind[s] == "relu" else np.stack([r[:, 0], r[:, 2]], axis=-1)
            starts[s] = np.repeat(one[None], k, axis=0)
    if not starts:
        return None
    alpha = {s: a.copy() for s, a in starts.items()}
    best_b = np.full(k, -np.inf)
    best = {s: a.copy() for s, a in alpha.items()}
    m1 = {s: np.zeros_like(a) for s, a in alpha.items()}
    m2 = {s: np.zeros_like(a) for s, a in alpha.items()}
    top = {s: SMOOTH_MAX.get(ch.kind[s], GELU_SLOPES[1] if ch.kind[s] == "gelu" else 1.0)
           for s in alpha}  # fmt: skip
    low = {s: ch.floor.get(s, 0.0) for s in alpha}
    lr = LR
    iters = SMOOTH_ITERS if any(ch.kind[s] != "relu" for s in alpha) else ITERS
    decay = DECAY ** (ITERS / iters)
    for it in range(iters + 1):  # the bound of the slopes of step it, then step it + 1
        b, g = ch.run(Cf, t, alpha)
        better = np.isfinite(b) & (b > best_b)
        if better.any():
            best_b = np.where(better, b, best_b)
            for s in alpha:
                best[s][better] = alpha[s][better]
        if it == iters:
            break
        for s in alpha:
            m1[s] = 0.9 * m1[s] + 0.1 * g[s]
            m2[s] = 0.999 * m2[s] + 0.001 * g[s] * g[s]
            step = (m1[s] / (1 - 0.9 ** (it + 1))) / (
                np.sqrt(m2[s] / (1 - 0.999 ** (it + 1))) + 1e-12
            )
            upd = np.clip(alpha[s] + lr * top[s] * step, low[s], top[s])
            alpha[s] = np.where(_mask(ch, s), upd, starts[s])
        lr *= decay
    return _result(ch, best, Cf, t)
