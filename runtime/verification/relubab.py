"""Branch and bound on ReLU splits with optimised lower slopes (alpha) for a disjunction
of conjunctions of output rows over one input box of a dense ReLU chain (networks with
many inputs, where input splitting does not pay: mnistfc).

Invariants:
- A domain is a box plus a sign per split neuron (its pre-activation <= 0 or >= 0). The
  two children of a split neuron cover their parent (every value is <= 0 or >= 0), as do
  the two halves of an input split (the widest coordinate at its exact midpoint, used only
  when no neuron is left to split), so the leaves of a complete tree cover the box.
- All conjunctions share the domains (a domain's pre-activation intervals do not depend on
  the rows; each row has its own slopes); each conjunction has its own tree in the
  `torchlean_split_bounds_v1` form (splitcert.md): {"relu": [stage, neuron], "children":
  [negative, positive]}, {"split": j, "children": [low, high]} and {"leaf": k}, its k-th
  leaf {"row": i, "alpha": {stage: [hex]}}. A conjunction's tree ends at the first domain
  on each path where it is proved; a domain stays open while some conjunction is not.
- A conjunction is proved on a domain only by the rigorous engine (`rigorous.SoundNet
  .lower`, the domain's box, splits and slopes): some row's lower bound above its d by
  MARGIN (1 + |d|), or +inf (the split signs leave no input). Nothing computed in plain
  floats closes anything.
- The plain-float image (`floatnet.FloatNet`) proposes everything else: the lower slopes
  (projected Adam ascent on the float alpha-CROWN bound, analytic gradient, warm-started
  from the parent's slopes, on the parent's or the domain's own pre-activation intervals),
  the neuron to split (BaBSR-style scores: the upper relaxation's intercept weighted by
  the coefficient of each open conjunction's best row, plus a share of the lower
  relaxation's gap; of the FSB_TOP best, the one whose worse child has the best float
  bound), and attack points (per open domain and row, the box vertex minimising the
  bound's linear form; points whose float outputs meet every row of some conjunction go to
  the caller's exact `attack`, as do the projected-gradient search's before the search).
- The clock is read between batches; when the next batch (as long as the last one) would
  end past the deadline, or with more than MAX_DOMAINS open domains, or a branch MAX_DEPTH
  splits deep, the search answers ("unknown", reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .core import VerificationError, sha
from .floatnet import FloatNet, ascend_slopes, relax
from .rigorous import SoundNet, enclose
from .splitcert import leaf_indices, split_certificate

__all__ = [
    "BATCH",
    "FSB_TOP",
    "MARGIN",
    "MAX_DEPTH",
    "MAX_DOMAINS",
    "STEPS",
    "decide_conjunctions",
    "decide_property",
    "optimise",
    "search",
    "search_all",
]

MARGIN = 1e-9  # a row is proved when its rigorous lower bound exceeds d + MARGIN (1 + |d|)
BATCH = 48  # domains split per batch (twice as many children bounded)
STEPS = 12  # Adam steps on the slopes per bounding
MAX_DOMAINS = 100_000
MAX_DEPTH = 60  # the certificate allows 64
FSB_TOP = 8  # candidates per domain whose children the float bound compares
PGD_RESTARTS = 32
PGD_STEPS = 60
REFINE_STEPS = 10  # gradient steps from each attack vertex
_LR = 0.25

Pre = list[tuple[np.ndarray, np.ndarray]]


@dataclass
class _Dom:
    """One open domain: per ReLU stage its split signs (n_k,) int8, the pre-activation
    intervals known for it (its own or its parent's, clamped), the slopes (m, n_k), the
    tree node of each conjunction still open on it, its box (exact, and the binary64
    enclosure) and its depth."""

    splits: list[np.ndarray]
    pre: list[tuple[np.ndarray, np.ndarray]]
    alpha: list[np.ndarray]
    nodes: dict[int, dict[str, Any]]
    box: tuple[Any, Any]
    lo: np.ndarray
    hi: np.ndarray
    depth: int = 0


@dataclass
class _Ctx:
    """The rows of every conjunction stacked (A (m, n_out), d (m,)); conjunction g owns
    rows first[g] .. first[g + 1] - 1; its tree and leaves."""

    sn: Any
    fn: FloatNet
    A: np.ndarray
    d: np.ndarray
    first: np.ndarray
    attack: Callable[[list[np.ndarray]], Any] | None
    trees: list[dict[str, Any]] = field(default_factory=list)
    leaves: list[list[dict[str, Any]]] = field(default_factory=list)

    def need(self) -> np.ndarray:
        return self.d + MARGIN * (1 + np.abs(self.d))

    def by_group(self, rows: np.ndarray) -> np.ndarray:
        """(B, m) per row -> (B, G) the best (largest) per conjunction."""
        return np.maximum.reduceat(rows, self.first[:-1], axis=1)

    def open_mask(self, doms: list[_Dom]) -> np.ndarray:
        mask = np.zeros((len(doms), len(self.first) - 1), bool)
        for b, dom in enumerate(doms):
            mask[b, list(dom.nodes)] = True
        return mask


def _stack(doms: list[_Dom]) -> tuple[list[np.ndarray], Pre, list[np.ndarray]]:
    K = len(doms[0].splits)
    splits = [np.stack([x.splits[k] for x in doms]) for k in range(K)]
    pre = [
        (np.stack([x.pre[k][0] for x in doms]), np.stack([x.pre[k][1] for x in doms]))
        for k in range(K)
    ]
    alpha = [np.stack([x.alpha[k] for x in doms]) for k in range(K)]
    return splits, pre, alpha


def _boxes(doms: list[_Dom]) -> tuple[np.ndarray, np.ndarray]:
    return np.stack([x.lo for x in doms]), np.stack([x.hi for x in doms])


def _clamp(pre: Pre, splits: list[np.ndarray]) -> Pre:
    return [
        (np.where(s > 0, np.maximum(l, 0), l), np.where(s < 0, np.minimum(u, 0), u))
        for (l, u), s in zip(pre, splits, strict=True)
    ]


def optimise(
    fn: FloatNet,
    lo: np.ndarray,
    hi: np.ndarray,
    A: np.ndarray,
    pre: Pre,
    alpha: list[np.ndarray],
    steps: int = STEPS,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Slopes in [0, 1] maximising the float alpha-CROWN bound of each row (projected
    Adam), best seen per (domain, row), with that bound."""
    return ascend_slopes(fn, lo, hi, A, pre, alpha, steps, _LR, 0.95)


def _close(ctx: _Ctx, dom: _Dom, g: int, r: int) -> None:
    """Conjunction g proved on the domain by its row r (a global row index)."""
    node = dom.nodes.pop(g)
    node["leaf"] = len(ctx.leaves[g])
    hexes = {str(t): [float(v).hex() for v in dom.alpha[k][r]]
             for k, t in enumerate(ctx.sn.relu_stages)}  # fmt: skip
    ctx.leaves[g].append({"row": int(r - ctx.first[g]), "alpha": hexes})


def _rigorous(ctx: _Ctx, doms: list[_Dom], alpha: list[np.ndarray]) -> list[int]:
    """Bound the domains rigorously with the slopes; close the conjunctions proved on
    each. Returns the indices of the domains left open (their pre and alpha updated)."""
    splits, _, _ = _stack(doms)
    lo, hi = _boxes(doms)
    lower, pre = ctx.sn.lower(lo, hi, ctx.A, splits, alpha)
    gap = lower - ctx.need()
    open_ = []
    for b, dom in enumerate(doms):
        dom.alpha = [x[b] for x in alpha]
        for g in list(dom.nodes):
            r = int(ctx.first[g] + np.argmax(gap[b, ctx.first[g] : ctx.first[g + 1]]))
            if gap[b, r] > 0:
                _close(ctx, dom, g, r)
        if dom.nodes:
            dom.pre = [(pl[b], pu[b]) for pl, pu in pre]
            open_.append(b)
    return open_


def _bound(ctx: _Ctx, doms: list[_Dom]) -> list[_Dom]:
    """Optimise the slopes on the known intervals, bound rigorously; for the open ones
    optimise again on their own (rigorous) intervals and re-bound those where the float
    bound now predicts some open conjunction proved. Returns the domains still open."""
    splits, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    alpha, _ = optimise(ctx.fn, lo, hi, ctx.A, _clamp(pre, splits), alpha)
    left = [doms[b] for b in _rigorous(ctx, doms, alpha)]
    if not left:
        return left
    splits, pre, alpha = _stack(left)
    lo, hi = _boxes(left)
    alpha, fb = optimise(ctx.fn, lo, hi, ctx.A, pre, alpha)
    hope = (ctx.by_group(fb - ctx.need()) > 0) & ctx.open_mask(left)
    retry = [int(b) for b in np.nonzero(hope.any(axis=1))[0]]
    for b, dom in enumerate(left):
        dom.alpha = [x[b] for x in alpha]
    if retry:
        again = [left[b] for b in retry]
        keep = {retry[b] for b in _rigorous(ctx, again, [x[retry] for x in alpha])}
        left = [x for b, x in enumerate(left) if b not in retry or b in keep]
    return left


def _scores(ctx: _Ctx, doms: list[_Dom]) -> tuple[np.ndarray, list[int]]:
    """BaBSR-style scores (B, all hidden neurons; -1 where not splittable): per open
    conjunction, its best row's, summed; and the offset of each ReLU stage."""
    splits, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    bound, _, coef, _ = ctx.fn.alpha_crown(lo, hi, ctx.A, pre, alpha)
    gap, mask = bound - ctx.d, ctx.open_mask(doms)
    w = np.zeros_like(gap)
    for g in range(len(ctx.first) - 1):
        a, b = ctx.first[g], ctx.first[g + 1]
        best = a + np.argmax(gap[:, a:b], axis=1)
        w[np.arange(len(doms)), best] = mask[:, g]
    parts, offs = [], [0]
    for k, (l, u) in enumerate(pre):
        _, unst, _, icpt = relax(l, u)
        lam = coef[k]
        per = (
            -np.minimum(lam, 0) * icpt[:, None]
            + 0.2 * np.maximum(lam, 0) * np.minimum(u, -l)[:, None]
        )
        score = np.einsum("bm,bmn->bn", w, per)
        parts.append(np.where(unst & (splits[k] == 0), score + 1e-30, -1.0))
        offs.append(offs[-1] + l.shape[1])
    return np.concatenate(parts, axis=1), offs


def _choose(ctx: _Ctx, doms: list[_Dom]) -> list[tuple[int, int] | None]:
    """Per domain the (ReLU index, neuron) to split, or None when none is unstable: of the
    FSB_TOP best-scored neurons, the one whose worse child has the best float bound (the
    worst open conjunction's best row; the children's intervals: the parent's, clamped;
    the parent's slopes)."""
    sc, offs = _scores(ctx, doms)
    B, T = len(doms), min(FSB_TOP, sc.shape[1])
    top = np.argsort(-sc, axis=1)[:, :T]
    splits, pre, alpha = _stack(doms)
    rep = np.repeat(np.arange(B), 2 * T)
    cand = np.repeat(top, 2, axis=1).reshape(-1)
    sign = np.tile([-1, 1], B * T)
    kids = [s[rep].copy() for s in splits]
    for k in range(len(pre)):
        hit = (cand >= offs[k]) & (cand < offs[k + 1])
        kids[k][np.nonzero(hit)[0], cand[hit] - offs[k]] = sign[hit]
    kpre = _clamp([(l[rep], u[rep]) for l, u in pre], kids)
    lo, hi = _boxes(doms)
    bound, _, _, _ = ctx.fn.alpha_crown(lo[rep], hi[rep], ctx.A, kpre, [a[rep] for a in alpha])
    per = np.where(ctx.open_mask(doms)[rep], ctx.by_group(bound - ctx.d), np.inf)
    value = per.min(axis=1)
    for lk, uk in kpre:
        value = np.where((lk > uk).any(axis=1), np.inf, value)
    value = value.reshape(B, T, 2).min(axis=2)
    value = np.where(np.take_along_axis(sc, top, axis=1) >= 0, value, -np.inf)
    best = top[np.arange(B), np.argmax(value, axis=1)]
    pick: list[tuple[int, int] | None] = []
    for b in range(B):
        k = int(np.searchsorted(offs, best[b], side="right") - 1)
        pick.append(None if sc[b, best[b]] < 0 else (k, int(best[b] - offs[k])))
    return pick


def _children(ctx: _Ctx, dom: _Dom, pick: tuple[int, int] | None) -> list[_Dom]:
    """The two children of a ReLU split (k, neuron), or, where no neuron is left to
    split (None), of the input split of the widest coordinate at its exact midpoint; each
    open conjunction's node gets the split and two children."""
    kids: list[dict[int, dict[str, Any]]] = [{}, {}]
    for g, node in dom.nodes.items():
        node["children"] = [{}, {}]
        if pick is None:
            node["split"] = int(np.argmax(dom.hi - dom.lo))
        else:
            node["relu"] = [int(ctx.sn.relu_stages[pick[0]]), pick[1]]
        kids[0][g], kids[1][g] = node["children"]
    if pick is None:
        j = int(np.argmax(dom.hi - dom.lo))
        mid = (dom.box[0][j] + dom.box[1][j]) / 2
        halves = [(dom.box[0], (*dom.box[1][:j], mid, *dom.box[1][j + 1 :])),
                  ((*dom.box[0][:j], mid, *dom.box[0][j + 1 :]), dom.box[1])]  # fmt: skip
        return [_Dom(dom.splits, dom.pre, dom.alpha, nodes, b, *_enclose1(dom, j, b), dom.depth + 1)
                for nodes, b in zip(kids, halves, strict=True)]  # fmt: skip
    k, i = pick
    out = []
    for sign, nodes in zip((-1, 1), kids, strict=True):
        splits = [s.copy() for s in dom.splits]
        splits[k][i] = sign
        out.append(_Dom(splits, dom.pre, dom.alpha, nodes, dom.box, dom.lo, dom.hi, dom.depth + 1))
    return out


def _enclose1(dom: _Dom, j: int, box: tuple[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The enclosure of a half of the domain's box (coordinate j changed)."""
    lo, hi = dom.lo.copy(), dom.hi.copy()
    lj, hj = enclose(((box[0][j],), (box[1][j],)))
    lo[j], hi[j] = lj[0], hj[0]
    return lo, hi


def _violation(ctx: _Ctx, pts: np.ndarray) -> np.ndarray:
    """Per point, the float image's smallest violation over conjunctions (<= 0: the point
    meets every row of some conjunction)."""
    per = ctx.fn.forward(pts) @ ctx.A.T - ctx.d
    return np.maximum.reduceat(per, ctx.first[:-1], axis=1).min(axis=1)


def _refine(ctx: _Ctx, x: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """A few signed-gradient steps from the points x (rows) in their boxes, lowering the
    smallest float violation of the first conjunction's rows."""
    for k in range(REFINE_STEPS):
        viol = ctx.fn.forward(x) @ ctx.A.T - ctx.d
        rows = ctx.A[np.argmax(viol[:, : ctx.first[1]], axis=1)]
        _, g = ctx.fn.grad(x, rows, leak=0.01)
        x = np.clip(x - np.sign(g) * (0.1 * 0.8**k) * (hi - lo), lo, hi)
    return x


def _attack_points(ctx: _Ctx, doms: list[_Dom]) -> Any:
    """Per open domain and row, the vertex minimising its bound's linear form, refined
    by a few gradient steps; the best four the float image puts inside some conjunction
    go to the exact attack."""
    if ctx.attack is None or not doms:
        return None
    _, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    _, _, _, x = ctx.fn.alpha_crown(lo, hi, ctx.A, pre, alpha)
    m = x.shape[1]
    pts = x.reshape(-1, x.shape[2])
    pts = np.vstack([pts, _refine(ctx, pts, np.repeat(lo, m, axis=0), np.repeat(hi, m, axis=0))])
    viol = _violation(ctx, pts)
    order = np.argsort(viol)
    good = [pts[j] for j in order[:4] if viol[j] <= 1e-6 * (1 + np.abs(ctx.d).max())]
    return ctx.attack(good) if good else None


def _root(ctx: _Ctx, box: tuple[Any, Any]) -> list[_Dom]:
    lo, hi = (np.asarray(v, np.float64) for v in enclose(box))
    zero = [np.zeros((1, w), dtype=np.int8) for w in _widths(ctx.fn)]
    pre = ctx.fn.split_bounds(lo[None], hi[None], zero)
    alpha = [np.broadcast_to((u >= -l)[0].astype(np.float64), (ctx.A.shape[0], l.shape[1])) for
             l, u in pre]  # fmt: skip
    nodes = dict(enumerate(ctx.trees))
    dom = _Dom([z[0] for z in zero], [(l[0], u[0]) for l, u in pre], alpha, nodes, box, lo, hi)
    return _bound(ctx, [dom])


def _widths(fn: FloatNet) -> list[int]:
    return [fn.layers[i][1].shape[0] for i in range(0, len(fn.layers) - 1, 2)]


class _Run:
    """A search over the conjunctions that can be resumed: `step(deadline)` runs until an
    answer or the deadline, keeping the open domains (and the trees) for the next call."""

    def __init__(
        self,
        sn: Any,
        fn: FloatNet,
        box: tuple[Any, Any],
        conjs: list[tuple[np.ndarray, np.ndarray]],
        attack: Callable[[list[np.ndarray]], Any] | None,
        batch: int,
    ) -> None:
        first = np.cumsum([0] + [len(d) for _, d in conjs])
        A = np.vstack([np.asarray(a, np.float64) for a, _ in conjs])
        d = np.concatenate([np.asarray(v, np.float64) for _, v in conjs])
        self.ctx = _Ctx(sn, fn, A, d, first, attack)
        self.ctx.trees = [{} for _ in conjs]
        self.ctx.leaves = [[] for _ in conjs]
        self.box, self.batch = box, batch
        self.stack: list[_Dom] | None = None
        self.took = 0.0  # the last batch's seconds

    def step(self, deadline: float) -> tuple[str, Any]:
        ctx = self.ctx
        if self.stack is None:
            self.stack = _root(ctx, self.box)
        stack = self.stack
        while stack:
            t0 = time.monotonic()
            if t0 + self.took > deadline:
                return "unknown", f"timeout with {len(stack)} open ReLU domains"
            if len(stack) > MAX_DOMAINS:
                return "unknown", f"more than {MAX_DOMAINS} open ReLU domains"
            if max(x.depth for x in stack[-self.batch :]) >= MAX_DEPTH:
                return "unknown", f"a branch {MAX_DEPTH} splits deep is still open"
            doms = [stack.pop() for _ in range(min(self.batch, len(stack)))]
            picks = _choose(ctx, doms)
            kids = [c for dom, p in zip(doms, picks, strict=True) for c in _children(ctx, dom, p)]
            left = _bound(ctx, kids)
            hit = _attack_points(ctx, left)
            if hit is not None:
                return "sat", hit
            stack += left
            self.took = time.monotonic() - t0
        return "unsat", list(zip(ctx.trees, ctx.leaves, strict=True))


def search_all(
    sn: Any,
    fn: FloatNet,
    box: tuple[Any, Any],
    conjs: list[tuple[np.ndarray, np.ndarray]],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None = None,
    batch: int = BATCH,
) -> tuple[str, Any]:
    """("unsat", [(tree, leaves) per conjunction]), ("sat", the attack's hit) or
    ("unknown", reason) for the conjunctions (A, d) (A . Y <= d) over the exact box
    (lower, upper Fractions): every conjunction empty on it, or a hit."""
    return _Run(sn, fn, box, conjs, attack, batch).step(deadline)


def search(
    sn: Any,
    fn: FloatNet,
    box: tuple[Any, Any],
    rows: tuple[np.ndarray, np.ndarray],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None = None,
    batch: int = BATCH,
) -> tuple[str, Any]:
    """`search_all` for one conjunction: ("unsat", (tree, leaves)) or the other answers."""
    status, got = search_all(sn, fn, box, [rows], deadline, attack, batch)
    return (status, got[0]) if status == "unsat" else (status, got)


def _pgd(
    fn: FloatNet, lo: np.ndarray, hi: np.ndarray, A: np.ndarray, d: np.ndarray, deadline: float
) -> tuple[np.ndarray, np.ndarray]:
    """Signed-gradient descent of max_i (a_i . y - d_i) from PGD_RESTARTS points (the
    center, then seeded uniform ones), first steps half the box wide (the image is
    piecewise linear: long steps reach the vertices that its linear pieces favour), then
    shrinking. The best points, best first, with their float values."""
    x = lo + np.random.default_rng(0).random((PGD_RESTARTS, lo.size)) * (hi - lo)
    x[0] = (lo + hi) / 2
    best, best_f = x.copy(), np.full(PGD_RESTARTS, np.inf)
    for k in range(PGD_STEPS + 1):
        viol = fn.forward(x) @ A.T - d
        f = viol.max(axis=1)
        better = f < best_f
        best[better], best_f[better] = x[better], f[better]
        if (best_f <= 0).any() or k == PGD_STEPS or time.monotonic() > deadline:
            break
        _, g = fn.grad(x, A[viol.argmax(axis=1)], leak=0.01)
        x = np.clip(x - np.sign(g) * (0.5 * 0.95**k) * (hi - lo), lo, hi)
    order = np.argsort(best_f)
    return best[order], best_f[order]


def _pgd_first(
    fn: FloatNet,
    box: tuple[Any, Any],
    conjs: list[tuple[np.ndarray, np.ndarray]],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None,
) -> tuple[Any, list[float]]:
    """`_pgd` per conjunction; points the float image puts inside every row go to the
    exact attack. The hit (or None) and each conjunction's best float violation."""
    lo = np.array([float(v) for v in box[0]])
    hi = np.array([float(v) for v in box[1]])
    best = []
    for A, d in conjs:
        pts, f = _pgd(fn, lo, hi, A, d, deadline)
        best.append(float(f[0]))
        good = [x for x, v in zip(pts, f, strict=True) if v <= 1e-6 * (1 + np.abs(d).max())]
        hit = attack(good[:4]) if good and attack is not None else None
        if hit is not None:
            return hit, best
    return None, best


def decide_conjunctions(
    sn: Any,
    fn: FloatNet,
    box: tuple[Any, Any],
    conjs: list[tuple[np.ndarray, np.ndarray]],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None = None,
) -> tuple[str, Any]:
    """A disjunction of conjunctions: the projected-gradient attack, then one search per
    conjunction (its own splits: a shared tree must pick splits that serve all of them,
    and needs more domains), the one the attack came closest to meeting first. A first
    round gives each an equal share of the time left (a hit may hide behind any of them);
    the searches it leaves open by timeout are resumed with all the time left.
    ("unsat", [(tree, leaves) per conjunction in the given order]), a hit, or unknown."""
    hit, close = _pgd_first(fn, box, conjs, deadline, attack)
    if hit is not None:
        return "sat", hit
    got: dict[int, Any] = {}
    todo = sorted(range(len(conjs)), key=lambda j: close[j])
    runs = {i: _Run(sn, fn, box, [conjs[i]], attack, BATCH) for i in todo}
    why = ""
    for last in (False, True):
        again = []
        for n, i in enumerate(todo):
            share = (deadline - time.monotonic()) / (1 if last else len(todo) - n)
            status, out = runs[i].step(time.monotonic() + share)
            if status == "sat":
                return status, out
            if status == "unsat":
                got[i] = out[0]
            elif out.startswith("timeout") and not last:
                again.append(i)
            else:
                why = why or out
        todo = again
    if len(got) < len(conjs):
        return "unknown", why or f"{len(conjs) - len(got)} conjunction(s) left open"
    return "unsat", [got[i] for i in range(len(conjs))]


def _certificates(net: Any, box: tuple[Any, Any], conjs: Any, got: list[Any]) -> list[Any]:
    """One split certificate per conjunction; the network's JSON (the costly part) is
    built once and shared, each certificate's digest recomputed."""
    first = split_certificate(net, box, conjs[0], *got[0])
    out = [first]
    for conj, (tree, leaves) in zip(conjs[1:], got[1:], strict=True):
        if sorted(leaf_indices(tree)) != list(range(len(leaves))):
            raise VerificationError("split certificate: the tree does not name each leaf once")
        cert = {k: v for k, v in first.items() if k != "digest"}
        cert["rows"] = [{"a": [_q(a) for a in r], "d": _q(d)} for r, d in conj]
        cert["tree"], cert["leaves"] = tree, leaves
        cert["digest"] = sha(cert)
        out.append(cert)
    return out


def _q(v: Any) -> str:
    f = Fraction(v)
    return f"{f.numerator}/{f.denominator}"


def _rows(dtype: str, conj: Any) -> tuple[np.ndarray, np.ndarray]:
    """(A, d) in binary64; A must be exact in the network's dtype."""
    dt = np.float32 if dtype == "float32" else np.float64
    A = np.array([[float(a) for a in r] for r, _ in conj])
    if any(Fraction(float(dt(v))) != a for row, (r, _) in zip(A, conj, strict=True)
           for v, a in zip(row, r, strict=True)):  # fmt: skip
        raise VerificationError(f"a property coefficient is not exact in {dtype}")
    return A, np.array([float(d) for _, d in conj])


def decide_property(
    net: Any,
    p: Any,
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any],
) -> Any:
    """A VNN-LIB property (one input box, a disjunction of conjunctions) on a dense ReLU
    chain: None when the network is not one; else ("sat", the attack's hit), ("unknown",
    {"reason": why}) or ("unsat", {"certificates": one split certificate per conjunction,
    "proofs": [{"conjunction": i, "first": i, "split": True}, ...]})."""
    sn = SoundNet.build(net)
    if sn is None:
        return None
    fn = FloatNet.chain(sn.Ws, sn.bs)
    if any(not conj for conj in p.disjuncts):
        return "unknown", {"reason": "an unconstrained output region"}
    conjs = [_rows(net.result.dtype, conj) for conj in p.disjuncts]
    box = (p.lower, p.upper)
    status, got = decide_conjunctions(sn, fn, box, conjs, deadline, attack)
    if status != "unsat":
        return status, got if status == "sat" else {"reason": got}
    certs = _certificates(net, box, p.disjuncts, got)
    proofs = [{"conjunction": i, "first": i, "split": True} for i in range(len(certs))]
    return "unsat", {"certificates": certs, "proofs": proofs}
