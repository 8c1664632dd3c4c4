"""Rigorous float64 bounds of split-certificate leaves: the checker's own engine.

A chain network (linear, relu, linear, ..., linear) is given by float64 copies of its
dtype weights (exact: every float32 / float64 value is a float64). A leaf is a box (float64
enclosures of its exact rational ends) plus ReLU sign constraints. For each leaf,
`leaf_bounds` returns a float64 number that is at most the minimum of a . Y over the leaf's
region, at level 1 (real arithmetic) and level 2 (the runtime in the dtype, any summation
order, FMA or not), or reports that the region is empty or that the runtime could overflow.

Invariants (what makes every returned number rigorous):
- Every float64 operation is followed by `up` / `dn` (one step towards +-inf) whenever its
  result is used as an upper / lower bound: the exact result of a correctly rounded +, -,
  *, / lies in [dn(r), up(r)] (also on overflow: dn(inf) is the largest float).
- A computed dot product or matrix product of inner dimension n, in any order, BLAS or FMA,
  differs from the exact one by at most `rel(n)` times the exact |A| |B| plus `tiny(n)`
  (Higham Thm 3.5: gamma_n <= 2 (n + 2) 2^-53 while (n + 2) 2^-53 <= 1/100, plus one
  underflow of at most 2^-1074 per product and addition). Those error terms are never
  formed as matrices: they are only ever multiplied by a non-negative vector (the largest
  magnitude of the variable they multiply), so |A| |B| m is bounded by |A| (|B| m), two
  matrix-vector products bounded in turn (`dot_up`).
- One rounded elementwise product r of exact floats errs by at most 2^-52 |r| + 2^-1074.
- A linear stage's runtime output is W x + b + delta with |delta_i| <= E_i = gamma(sum_j
  |W_ij| m_j + |b_i|) + n eta (1 + gamma), gamma = gamma_{n+1} of the dtype (`dtype_gamma`),
  m the largest magnitude of the stage's input; every interval includes [-E, E].
- The runtime cannot overflow when, per linear stage, sum_j |W_ij| m_j + |b_i| + E_i is at
  most the dtype's largest finite value (it bounds every partial sum in any order and the
  IBP bounds); otherwise the leaf is not proved.
- Back-substitution (CROWN) of a row set Lambda through the stages: coefficients are
  floats G = fl(Lambda W); the exact form differs by (Lambda W - G) a, charged to the
  constant with the magnitudes of a. ReLU upper line on an unstable [l, u]: slope
  s = fl(u / (u - l)), intercept max(up(-s l), up(u - dn(s u))) (above ReLU at l and u,
  hence on [l, u]); lower line alpha z with alpha in [0, 1] (below ReLU everywhere).
- NaN or infinity in a bound never proves anything (every comparison with NaN is false,
  and a leaf with a non-finite intermediate bound is not proved).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

__all__ = [
    "DTYPES",
    "ETA",
    "FMAX",
    "ChainNet",
    "LeafBatch",
    "U",
    "dn",
    "dot_up",
    "dtype_gamma",
    "enclose",
    "leaf_bounds",
    "rel",
    "tiny",
    "up",
]

DTYPES = {"float32": (24, -126), "float64": (53, -1022)}
"""(precision p, emin) of each dtype a split certificate may name."""
U = {k: Fraction(1, 2**p) for k, (p, _) in DTYPES.items()}
"""Unit roundoff u = 2^-p of each dtype."""
ETA = {k: Fraction(1, 2 ** (1 - e)) for k, (_, e) in DTYPES.items()}
"""eta = 2^(emin - 1): the underflow term of one rounded product in each dtype."""
FMAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
TINY64 = 2.0**-1074
BUDGET = 2**19  # float64 entries of one back-substitution batch (per array)


def up(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, np.inf)


def dn(x: np.ndarray) -> np.ndarray:
    return np.nextafter(x, -np.inf)


def rel(n: int) -> float:
    """2 (n + 2) 2^-53 (exact in float64): the relative error bound of a length-n dot."""
    return (2 * n + 4) * 2.0**-53


def tiny(n: int) -> float:
    """(2 n + 4) 2^-1074: the underflow error bound of a length-n dot."""
    return (2 * n + 4) * TINY64


def dot_up(s: np.ndarray, n: int) -> np.ndarray:
    """An upper bound of an exact non-negative dot of length n whose computed value is s."""
    return up(up(s + up(s * rel(n))) + tiny(n))


def float_up(q: Fraction) -> float:
    """The least float64 >= q."""
    f = float(q)
    return float(np.nextafter(f, np.inf)) if Fraction(f) < q else f


def enclose(q: Fraction, upward: bool) -> float:
    """q rounded to float64 towards +inf (upward) or -inf; OverflowError when it has none."""
    f = float(q)
    if upward and Fraction(f) < q:
        f = float(np.nextafter(f, np.inf))
    if not upward and Fraction(f) > q:
        f = float(np.nextafter(f, -np.inf))
    if not np.isfinite(f):
        raise OverflowError("outside the float64 range")
    return f


def dtype_gamma(dtype: str, n: int) -> float:
    """An upper float64 bound of gamma_n = n u / (1 - n u) in the dtype."""
    u = U[dtype]
    return float_up(n * u / (1 - n * u))


@dataclass
class ChainNet:
    """The linear stages W[k] (out x in) and b[k] of a chain network, as float64."""

    dtype: str
    W: list[np.ndarray]
    b: list[np.ndarray]
    absW: list[np.ndarray] = field(init=False)
    Wp: list[np.ndarray] = field(init=False)
    Wn: list[np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        self.absW = [np.abs(w) for w in self.W]
        self.Wp = [np.maximum(w, 0.0) for w in self.W]
        self.Wn = [np.minimum(w, 0.0) for w in self.W]

    def width(self, k: int) -> int:
        """The width of linear stage k's input (k = -1 .. K-1: 0 is the box's)."""
        return self.W[0].shape[1] if k < 0 else self.W[k].shape[0]


@dataclass
class LeafBatch:
    """Leaves to bound: float64 box enclosures (N x n0), signs per ReLU layer (N x width,
    -1 / 0 / +1), the objective row per leaf (N x outputs, exact floats) and its
    right-hand side rounded up, and per ReLU layer the lower slopes for the final row
    (NaN: the adaptive rule)."""

    lo: np.ndarray
    hi: np.ndarray
    signs: list[np.ndarray]
    a: np.ndarray
    alpha: list[np.ndarray]


@dataclass
class _State:
    """Per-leaf intermediate data: for linear k, E[k] and V[k] (>= |W| m); for ReLU layer
    k (after linear k), the clamped bounds and relaxation."""

    E: list[np.ndarray] = field(default_factory=list)
    V: list[np.ndarray] = field(default_factory=list)
    l: list[np.ndarray] = field(default_factory=list)
    u: list[np.ndarray] = field(default_factory=list)
    su: list[np.ndarray] = field(default_factory=list)
    beta: list[np.ndarray] = field(default_factory=list)
    al: list[np.ndarray] = field(default_factory=list)
    mz: list[np.ndarray] = field(default_factory=list)
    lo: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    hi: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))


def _linear_ibp(net: ChainNet, k: int, la: np.ndarray, ua: np.ndarray, m: np.ndarray,
                st: _State) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """IBP bounds of linear stage k (with +-E) and its no-overflow flag per leaf; appends
    E[k] and V[k] to the state."""
    n = net.width(k - 1)
    b, ab = net.b[k], np.abs(net.b[k])
    v = dot_up(m @ net.absW[k].T, n)
    gam = dtype_gamma(net.dtype, n + 1)
    eta_n = float_up(n * ETA[net.dtype] * (1 + Fraction(gam)))
    s = up(v + ab)
    E = up(up(gam * s) + eta_n)
    ok = np.all(up(s + E) <= FMAX[net.dtype], axis=1)
    err = up(up(E + up(rel(2 * n) * v)) + tiny(2 * n))
    lo = dn(dn(dn(la @ net.Wp[k].T + ua @ net.Wn[k].T) + b) - err)
    hi = up(up(up(ua @ net.Wp[k].T + la @ net.Wn[k].T) + b) + err)
    st.E.append(E)
    st.V.append(v)
    return lo, hi, ok


def _relax(l: np.ndarray, u: np.ndarray, st: _State) -> None:
    """The ReLU relaxation of clamped finite bounds [l, u] (appended to the state)."""
    act, ina = l >= 0, (u <= 0) & (l < 0)
    uns = ~(act | ina)
    den = np.where(uns, u - l, 1.0)
    s = np.where(uns, np.minimum(u / den, 1.0), act.astype(np.float64))
    beta = np.where(uns, np.maximum(up(-s * l), up(u - dn(s * u))), 0.0)
    st.l.append(l)
    st.u.append(u)
    st.su.append(s)
    st.beta.append(beta)
    st.al.append(np.where(uns, (u >= -l).astype(np.float64), act.astype(np.float64)))
    st.mz.append(np.maximum(np.abs(l), np.abs(u)))


def _bmv(A: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise A[p] @ v[p] for A (P x R x n) and v (P x n)."""
    return np.matmul(A, v[:, :, None])[:, :, 0]


def _sum_up(x: np.ndarray) -> np.ndarray:
    """An upper bound of each row's exact sum of a non-negative P x n array."""
    return dot_up(np.sum(x, axis=1), x.shape[1])


@dataclass
class _Start:
    """Back-substitution from +-identity rows of linear stage k: row r is sign[r] z_k[nr[r]],
    so lam W_k = sign W_k[nr] and lam b_k = sign b_k[nr] exactly and the charge is E_k[nr]."""

    G: np.ndarray
    const: np.ndarray
    nr: np.ndarray


class _Acc:
    """The pieces of a lower bound, summed in plain float64 per row: `const` (computed
    signed pieces), `absc` (their magnitudes), `charge` (computed non-negative dots to
    subtract), `tiny` (per leaf, rigorously rounded up: underflow terms). Each computed
    piece is a dot of length <= n (n the widest stage); the rounding of the pieces and of
    these sums is bounded once in `lower` by 4 rel(n + pieces) (charge + absc)."""

    def __init__(self, const: np.ndarray, charge: np.ndarray, P: int) -> None:
        self.const, self.charge = const, charge
        self.absc = np.abs(const)
        self.tiny = np.zeros(P)
        self.pieces = 2

    def add(self, signed: np.ndarray | None, charge: np.ndarray | None) -> None:
        if signed is not None:
            self.const = self.const + signed
            self.absc = self.absc + np.abs(signed)
            self.pieces += 1
        if charge is not None:
            self.charge = self.charge + charge
            self.pieces += 1

    def lower(self, n: int) -> np.ndarray:
        rho = 4 * rel(n + self.pieces)
        bound = up(up(self.charge * (1 + rho)) + up(self.absc * rho))
        bound = up(bound + up(self.tiny + self.pieces * tiny(n))[:, None])
        return dn(self.const - bound)


def _cvec(net: ChainNet, k: int, st: _State, idx: np.ndarray, rounded: bool) -> np.ndarray:
    """What |lam| is charged with at linear stage k (per leaf, rounded up): E_k, the
    rounding of lam . b_k and of lam W_k (rel(n) |b_k| and rel(n) V_k), the rounding of lam
    itself when its entries were rounded products (2^-52 mz_k), and at stage 0 the
    rounding of the concretisation (rel(2 n0) V_0 bounds rel(2 n0) |lam W_0| max|x|)."""
    nk = net.width(k)
    r = rel(nk) + (rel(2 * net.width(-1)) if k == 0 else 0.0)
    c = up(st.E[k][idx] + up(up(rel(nk) * np.abs(net.b[k])) + up(r * st.V[k][idx])))
    return up(c + up(2.0**-52 * st.mz[k][idx])) if rounded else c


def _first(net: ChainNet, k: int, lam: np.ndarray, st: _State, idx: np.ndarray,
           acc: _Acc, rounded: bool) -> np.ndarray:  # fmt: skip
    """One back-substitution step through linear stage k from float rows lam (P x R x n_k):
    lam . b_k and the charges go to acc; returns G = fl(lam W_k)."""
    P, R, nk = lam.shape
    acc.add(lam @ net.b[k], _bmv(np.abs(lam), _cvec(net, k, st, idx, rounded)))
    mprev = _mag(k - 1, st, idx, st.lo, st.hi)
    under = up(tiny(nk) * up(2.0 + _sum_up(mprev)))
    if rounded:
        under = up(under + up(TINY64 * _sum_up(st.mz[k][idx])))
    acc.tiny = up(acc.tiny + under)
    return (lam.reshape(P * R, nk) @ net.W[k]).reshape(P, R, -1)


def _backsub(net: ChainNet, k: int, lam: np.ndarray | _Start, st: _State, idx: np.ndarray,
             al: list[np.ndarray]) -> np.ndarray:  # fmt: skip
    """A lower bound of each row of lam . z_k over the relaxed region of leaves idx (lam:
    P x R x n_k exact floats, or a `_Start`), with the lower slopes `al` per ReLU layer."""
    P = len(idx)
    if isinstance(lam, _Start):
        G = np.broadcast_to(lam.G, (P, *lam.G.shape))
        charge = st.E[k][idx][:, lam.nr]
        if k == 0:
            charge = up(charge + up(rel(2 * net.width(-1)) * st.V[0][idx][:, lam.nr]))
        acc = _Acc(np.broadcast_to(lam.const, (P, len(lam.nr))).copy(), charge, P)
    else:
        acc = _Acc(np.zeros(lam.shape[:2]), np.zeros(lam.shape[:2]), P)
        G = _first(net, k, lam, st, idx, acc, False)
    for j in range(k, 0, -1):
        mask = G >= 0
        acc.add(_bmv(np.where(mask, 0.0, G), st.beta[j - 1][idx]), None)
        rows = np.where(mask, al[j - 1][idx][:, None, :], st.su[j - 1][idx][:, None, :])
        np.multiply(rows, G, out=rows)
        G = _first(net, j - 1, rows, st, idx, acc, True)
    return _concretise(G, acc, st.lo[idx], st.hi[idx], net)


def _mag(j: int, st: _State, idx: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """The largest magnitude of linear stage j+1's input: the box or ReLU layer j's output."""
    if j < 0:
        return np.maximum(np.abs(lo[idx]), np.abs(hi[idx]))
    return np.maximum(st.u[j][idx], 0.0)


def _concretise(G: np.ndarray, acc: _Acc, lo: np.ndarray, hi: np.ndarray,
                net: ChainNet) -> np.ndarray:  # fmt: skip
    """The lower bound: acc plus min over the box of G x >= G c - |G| r, c any float point
    and r >= |x - c| (rounded up); the rounding of G c and |G| r is charged by `_cvec`
    (|G| <= |lam W_0| up to rel, and |c| + r <= max|x| up to rel: both pieces bounded with
    rel(2 n0) V_0, V_0 >= |W_0| max|x|)."""
    c = lo + (hi - lo) * 0.5
    r = np.maximum(up(hi - c), up(c - lo))
    acc.add(_bmv(G, c), _bmv(np.abs(G), r))
    return acc.lower(max(2 * net.width(-1), *[w.shape[0] for w in net.W]))


def _batches(idx: np.ndarray, per: int) -> list[np.ndarray]:
    step = max(1, BUDGET // max(per, 1))
    return [idx[i : i + step] for i in range(0, len(idx), step)]


def _crown_layer(net: ChainNet, k: int, st: _State, lb: LeafBatch,
                 live: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """CROWN bounds of linear stage k for the live leaves (others: -inf, +inf), computed
    once per distinct (box, signs of the ReLU layers below k)."""
    n = net.width(k)
    nr = np.concatenate([np.arange(n), np.arange(n)])
    sign = np.concatenate([np.ones(n), -np.ones(n)])
    start = _Start(sign[:, None] * net.W[k][nr], sign * net.b[k][nr], nr)
    groups: dict[bytes, list[int]] = {}
    for i in np.flatnonzero(live):
        key = b"".join([lb.lo[i].tobytes(), lb.hi[i].tobytes()] +
                       [lb.signs[j][i].tobytes() for j in range(k)])  # fmt: skip
        groups.setdefault(key, []).append(int(i))
    reps = np.array([g[0] for g in groups.values()], dtype=np.int64)
    lc, uc = np.full((len(lb.lo), n), -np.inf), np.full((len(lb.lo), n), np.inf)
    widest = max(net.width(j) for j in range(-1, k + 1))
    out = np.empty((len(reps), 2 * n))
    pos = 0
    for part in _batches(reps, 2 * n * widest):
        out[pos : pos + len(part)] = _backsub(net, k, start, st, part, st.al)
        pos += len(part)
    for r, g in enumerate(groups.values()):
        lc[g], uc[g] = out[r, :n], -out[r, n:]
    return lc, uc


PROVED, EMPTY, OVERFLOW, NONFINITE = 0, 1, 2, 3
"""Leaf outcomes of `leaf_bounds`: a bound computed, the region empty, the runtime could
overflow at some linear stage, a non-finite intermediate bound."""


def leaf_bounds(net: ChainNet, lb: LeafBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lower, outcome, stage) per leaf: lower <= a . Y on the leaf's region when outcome is
    PROVED (else NaN); the linear stage (index among the linear stages) where an OVERFLOW,
    NONFINITE or EMPTY outcome was found (-1 otherwise)."""
    N, K = len(lb.lo), len(net.W)
    st = _State(lo=lb.lo, hi=lb.hi)
    live = np.ones(N, dtype=bool)
    outcome, where = np.full(N, PROVED), np.full(N, -1)
    la, ua = lb.lo, lb.hi
    m = np.maximum(np.abs(la), np.abs(ua))
    for k in range(K):
        lo, hi, ok = _linear_ibp(net, k, la, ua, m, st)
        _mark(outcome, where, live & ~ok, OVERFLOW, k)
        live &= ok
        st.E[k][~live], st.V[k][~live] = 0.0, 0.0
        if k == K - 1:
            break
        lc, uc = _crown_layer(net, k, st, lb, live)
        l, u = np.maximum(lo, lc), np.minimum(hi, uc)
        s = lb.signs[k]
        l, u = np.where(s > 0, np.maximum(l, 0.0), l), np.where(s < 0, np.minimum(u, 0.0), u)
        fin = np.all(np.isfinite(l) & np.isfinite(u), axis=1)
        _mark(outcome, where, live & ~fin, NONFINITE, k)
        live &= fin
        emp = live & np.any(l > u, axis=1)
        _mark(outcome, where, emp, EMPTY, k)
        live &= ~emp
        l[~live], u[~live] = 0.0, 0.0
        _relax(l, u, st)
        la, ua = np.maximum(l, 0.0), np.maximum(u, 0.0)
        m = ua
    lower = np.full(N, np.nan)
    al = [
        np.where(np.isnan(a) | (st.l[j] >= 0) | (st.u[j] <= 0), st.al[j], a)
        for j, a in enumerate(lb.alpha)
    ]
    widest = max(net.width(j) for j in range(-1, K))
    for part in _batches(np.flatnonzero(live), widest):
        got = _backsub(net, K - 1, lb.a[part][:, None, :], st, part, al)
        lower[part] = got[:, 0]
    return lower, outcome, where


def _mark(outcome: np.ndarray, where: np.ndarray, mask: np.ndarray, code: int, k: int) -> None:
    outcome[mask], where[mask] = code, k
