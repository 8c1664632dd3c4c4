"""Branch and bound on ReLU splits with optimised lower slopes (alpha), for one conjunction
of output rows over one input box of a dense ReLU chain (networks with many inputs, where
input splitting does not pay: mnistfc).

Invariants:
- A domain is the box plus a sign per split neuron (its pre-activation <= 0 or >= 0). The
  two children of a split neuron cover their parent (every value is <= 0 or >= 0), so the
  leaves of a complete tree cover the box. The tree and the leaves are the
  `torchlean_split_bounds_v1` form (splitcert.md): {"relu": [stage, neuron], "children":
  [negative, positive]} and {"leaf": k}, the k-th leaf {"row": i, "alpha": {stage: [hex]}}.
- A domain is closed only by the rigorous engine (`rigorous.SoundNet.lower`, the leaf's
  splits and slopes): some row's lower bound above its d by MARGIN (1 + |d|), or +inf (the
  split signs leave no input). Nothing computed in plain floats closes a domain.
- The plain-float image (`floatnet.FloatNet`) proposes everything else: the lower slopes
  (projected Adam ascent on the float alpha-CROWN bound, analytic gradient, warm-started
  from the parent's slopes, on the parent's or the domain's own pre-activation intervals),
  the neuron to split (BaBSR-style: the upper relaxation's intercept weighted by the best
  row's coefficient, plus a share of the lower relaxation's gap), and attack points (per
  open domain and row, the box vertex minimising the bound's linear form; points whose
  float outputs meet every row go to the caller's exact `attack`).
- The clock is read between batches; past the deadline, or with more than MAX_DOMAINS open
  domains, the search answers ("unknown", reason).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .core import VerificationError, sha
from .floatnet import FloatNet, relax
from .rigorous import SoundNet, enclose
from .splitcert import leaf_indices, split_certificate
from .splitting import pgd

__all__ = [
    "BATCH",
    "FSB_TOP",
    "MARGIN",
    "MAX_DEPTH",
    "MAX_DOMAINS",
    "STEPS",
    "decide_conjunctions",
    "decide_property",
    "search",
]

MARGIN = 1e-9  # a row is proved when its rigorous lower bound exceeds d + MARGIN (1 + |d|)
BATCH = 48  # domains split per batch (twice as many children bounded)
STEPS = 12  # Adam steps on the slopes per bounding
MAX_DOMAINS = 100_000
MAX_DEPTH = 60  # the certificate allows 64
FSB_TOP = 8  # candidates per domain whose children the float bound compares
PGD_RESTARTS = 32
PGD_STEPS = 60
_LR = 0.25

Pre = list[tuple[np.ndarray, np.ndarray]]


@dataclass
class _Dom:
    """One open domain: per ReLU stage its split signs (n_k,) int8, the pre-activation
    intervals known for it (its own or its parent's, clamped), the slopes (m, n_k), its
    node in the tree, its input box and its rigorous lower bounds (m,)."""

    splits: list[np.ndarray]
    pre: list[tuple[np.ndarray, np.ndarray]]
    alpha: list[np.ndarray]
    node: dict[str, Any]
    box: tuple[Any, Any]  # exact (lower, upper)
    lo: np.ndarray  # its binary64 enclosure
    hi: np.ndarray
    depth: int = 0
    lower: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class _Ctx:
    sn: Any
    fn: FloatNet
    A: np.ndarray
    d: np.ndarray
    attack: Callable[[list[np.ndarray]], Any] | None
    leaves: list[dict[str, Any]] = field(default_factory=list)
    hit: Any = None

    def need(self) -> np.ndarray:
        return self.d + MARGIN * (1 + np.abs(self.d))


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
    a = [x.copy() for x in alpha]
    best_a = [x.copy() for x in alpha]
    best = np.full(alpha[0].shape[:2], -np.inf)
    m1 = [np.zeros_like(x) for x in a]
    m2 = [np.zeros_like(x) for x in a]
    for t in range(1, steps + 2):
        bound, grads, _, _ = fn.alpha_crown(lo, hi, A, pre, a)
        better = bound > best
        best = np.where(better, bound, best)
        for k in range(len(a)):
            best_a[k][better] = a[k][better]
        if t > steps:
            break
        for k, g in enumerate(grads):
            m1[k] = 0.9 * m1[k] + 0.1 * g
            m2[k] = 0.999 * m2[k] + 0.001 * g * g
            step = (m1[k] / (1 - 0.9**t)) / (np.sqrt(m2[k] / (1 - 0.999**t)) + 1e-12)
            a[k] = np.clip(a[k] + _LR * 0.95**t * step, 0.0, 1.0)
    return best_a, best


def _close(ctx: _Ctx, dom: _Dom, k_row: int, alpha: list[np.ndarray]) -> None:
    dom.node["leaf"] = len(ctx.leaves)
    stages = ctx.sn.relu_stages
    ctx.leaves.append(
        {
            "row": k_row,
            "alpha": {
                str(t): [float(v).hex() for v in alpha[k][k_row]] for k, t in enumerate(stages)
            },
        }
    )


def _rigorous(ctx: _Ctx, doms: list[_Dom], alpha: list[np.ndarray]) -> list[int]:
    """Bound the domains rigorously with the slopes; close the proved ones. Returns the
    indices of those left open (their pre, alpha and lower updated)."""
    splits, _, _ = _stack(doms)
    lo, hi = _boxes(doms)
    lower, pre = ctx.sn.lower(lo, hi, ctx.A, splits, alpha)
    gap = lower - ctx.need()
    open_ = []
    for b, dom in enumerate(doms):
        r = int(np.argmax(gap[b]))
        dom.alpha = [x[b] for x in alpha]
        if gap[b, r] > 0:
            _close(ctx, dom, r, dom.alpha)
            continue
        dom.pre = [(pl[b], pu[b]) for pl, pu in pre]
        dom.lower = lower[b]
        open_.append(b)
    return open_


def _bound(ctx: _Ctx, doms: list[_Dom]) -> list[_Dom]:
    """Optimise the slopes on the known intervals, bound rigorously; for the open ones
    optimise again on their own (rigorous) intervals and re-bound those the float bound
    now predicts proved. Returns the domains still open."""
    splits, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    alpha, _ = optimise(ctx.fn, lo, hi, ctx.A, _clamp(pre, splits), alpha)
    left = [doms[b] for b in _rigorous(ctx, doms, alpha)]
    if not left:
        return left
    splits, pre, alpha = _stack(left)
    lo, hi = _boxes(left)
    alpha, fb = optimise(ctx.fn, lo, hi, ctx.A, pre, alpha)
    retry = [b for b in range(len(left)) if (fb[b] > ctx.need()).any()]
    if retry:
        again = [left[b] for b in retry]
        keep = set(_rigorous(ctx, again, [x[retry] for x in alpha]))
        closed = {retry[b] for b in range(len(retry)) if b not in keep}
        left = [x for b, x in enumerate(left) if b not in closed]
    return left


def _scores(ctx: _Ctx, doms: list[_Dom]) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """BaBSR-style scores (B, all hidden neurons; -1 where not splittable) for each
    domain's best row, that row, and the offset of each ReLU stage in the score vector."""
    splits, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    bound, _, coef, _ = ctx.fn.alpha_crown(lo, hi, ctx.A, pre, alpha)
    rows = np.argmax(bound - ctx.d, axis=1)
    parts, offs = [], [0]
    for k, (l, u) in enumerate(pre):
        _, unst, _, icpt = relax(l, u)
        lam = coef[k][np.arange(len(doms)), rows]
        score = -np.minimum(lam, 0) * icpt + 0.2 * np.maximum(lam, 0) * np.minimum(u, -l)
        parts.append(np.where(unst & (splits[k] == 0), score + 1e-30, -1.0))
        offs.append(offs[-1] + l.shape[1])
    return np.concatenate(parts, axis=1), rows, offs


def _choose(ctx: _Ctx, doms: list[_Dom]) -> list[tuple[int, int] | None]:
    """Per domain the (ReLU index, neuron) to split, or None when none is unstable: of the
    FSB_TOP best-scored neurons, the one whose worse child has the best float bound (the
    children's intervals: the parent's, clamped; the parent's slopes)."""
    sc, rows, offs = _scores(ctx, doms)
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
    lo, hi = lo[rep], hi[rep]
    bound, _, _, _ = ctx.fn.alpha_crown(lo, hi, ctx.A, kpre, [a[rep] for a in alpha])
    value = bound[np.arange(B * 2 * T), rows[rep]]
    empty = np.zeros(B * 2 * T, bool)
    for lk, uk in kpre:
        empty |= (lk > uk).any(axis=1)
    value = np.where(empty, np.inf, value).reshape(B, T, 2).min(axis=2)
    value = np.where(np.take_along_axis(sc, top, axis=1) >= 0, value, -np.inf)
    best = top[np.arange(B), np.argmax(value, axis=1)]
    pick: list[tuple[int, int] | None] = []
    for b in range(B):
        if sc[b, best[b]] < 0:
            pick.append(None)
            continue
        k = int(np.searchsorted(offs, best[b], side="right") - 1)
        pick.append((k, int(best[b] - offs[k])))
    return pick


def _children(ctx: _Ctx, dom: _Dom, pick: tuple[int, int] | None) -> list[_Dom]:
    """The two children of a ReLU split (k, neuron), or, where no neuron is left to
    split (None), of the input split of the widest coordinate at its exact midpoint."""
    dom.node["children"] = [{}, {}]
    if pick is None:
        j = int(np.argmax(dom.hi - dom.lo))
        dom.node["split"] = j
        mid = (dom.box[0][j] + dom.box[1][j]) / 2
        halves = [(dom.box[0], (*dom.box[1][:j], mid, *dom.box[1][j + 1 :])),
                  ((*dom.box[0][:j], mid, *dom.box[0][j + 1 :]), dom.box[1])]  # fmt: skip
        return [_Dom(dom.splits, dom.pre, dom.alpha, node, b, *_enclose1(dom, j, b), dom.depth + 1)
                for node, b in zip(dom.node["children"], halves, strict=True)]  # fmt: skip
    k, i = pick
    dom.node["relu"] = [int(ctx.sn.relu_stages[k]), i]
    out = []
    for sign, node in zip((-1, 1), dom.node["children"], strict=True):
        splits = [s.copy() for s in dom.splits]
        splits[k][i] = sign
        out.append(_Dom(splits, dom.pre, dom.alpha, node, dom.box, dom.lo, dom.hi, dom.depth + 1))
    return out


def _enclose1(dom: _Dom, j: int, box: tuple[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
    """The enclosure of a half of the domain's box (coordinate j changed)."""
    lo, hi = dom.lo.copy(), dom.hi.copy()
    lj, hj = enclose(((box[0][j],), (box[1][j],)))
    lo[j], hi[j] = lj[0], hj[0]
    return lo, hi


def _attack_points(ctx: _Ctx, doms: list[_Dom]) -> Any:
    """Per open domain and row, the vertex minimising its bound's linear form; those the
    float image puts inside every row go to the exact attack."""
    if ctx.attack is None or not doms:
        return None
    _, pre, alpha = _stack(doms)
    lo, hi = _boxes(doms)
    _, _, _, x = ctx.fn.alpha_crown(lo, hi, ctx.A, pre, alpha)
    pts = x.reshape(-1, x.shape[2])
    viol = (ctx.fn.forward(pts) @ ctx.A.T - ctx.d).max(axis=1)
    order = np.argsort(viol)
    good = [pts[j] for j in order[:4] if viol[j] <= 1e-6 * (1 + np.abs(ctx.d).max())]
    return ctx.attack(good) if good else None


def _root(ctx: _Ctx, node: dict[str, Any], box: tuple[Any, Any]) -> list[_Dom]:
    K = len(ctx.sn.relu_stages)
    lo, hi = (np.asarray(v, np.float64) for v in enclose(box))
    zero = [np.zeros((1, w), dtype=np.int8) for w in _widths(ctx.fn)]
    pre = ctx.fn.split_bounds(lo[None], hi[None], zero)
    alpha = [np.broadcast_to((u >= -l)[0].astype(np.float64), (ctx.A.shape[0], l.shape[1])) for
             l, u in pre]  # fmt: skip
    dom = _Dom([z[0] for z in zero], [(l[0], u[0]) for l, u in pre], alpha, node, box, lo, hi)
    assert len(dom.splits) == K
    return _bound(ctx, [dom])


def _widths(fn: FloatNet) -> list[int]:
    return [fn.layers[i][1].shape[0] for i in range(0, len(fn.layers) - 1, 2)]


def search(
    sn: Any,
    fn: FloatNet,
    box: tuple[Any, Any],
    rows: tuple[np.ndarray, np.ndarray],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None = None,
    batch: int = BATCH,
) -> tuple[str, Any]:
    """("unsat", (tree, leaves)), ("sat", the attack's hit) or ("unknown", reason) for the
    conjunction rows = (A, d) (A . Y <= d) over the exact box (lower, upper Fractions)."""
    ctx = _Ctx(sn, fn, np.asarray(rows[0], np.float64), np.asarray(rows[1], np.float64), attack)
    tree: dict[str, Any] = {}
    stack = _root(ctx, tree, box)
    while stack:
        if time.monotonic() > deadline:
            return "unknown", f"timeout with {len(stack)} open ReLU domains"
        if len(stack) > MAX_DOMAINS:
            return "unknown", f"more than {MAX_DOMAINS} open ReLU domains"
        doms, stack = stack[-batch:], stack[:-batch]
        if max(x.depth for x in doms) >= MAX_DEPTH:
            return "unknown", f"a branch {MAX_DEPTH} splits deep is still open"
        picks = _choose(ctx, doms)
        kids = [c for dom, p in zip(doms, picks, strict=True) for c in _children(ctx, dom, p)]
        left = _bound(ctx, kids)
        hit = _attack_points(ctx, left)
        if hit is not None:
            return "sat", hit
        stack += left
    return "unsat", (tree, ctx.leaves)


def _pgd_first(
    fn: FloatNet,
    box: tuple[Any, Any],
    conjs: list[tuple[np.ndarray, np.ndarray]],
    order: list[int],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None,
) -> Any:
    """Projected-gradient search per conjunction (hardest to prove first); points the
    float image puts inside every row go to the exact attack."""
    if attack is None:
        return None
    lo = np.array([float(v) for v in box[0]])
    hi = np.array([float(v) for v in box[1]])
    for i in order:
        A, d = conjs[i]
        pts, f = pgd(fn, lo, hi, (A, d), deadline, restarts=PGD_RESTARTS, steps=PGD_STEPS)
        good = [x for x, v in zip(pts, f, strict=True) if v <= 1e-6 * (1 + np.abs(d).max())]
        hit = attack(good[:4]) if good else None
        if hit is not None:
            return hit
    return None


def decide_conjunctions(
    sn: Any,
    fn: FloatNet,
    box: tuple[Any, Any],
    conjs: list[tuple[np.ndarray, np.ndarray]],
    deadline: float,
    attack: Callable[[list[np.ndarray]], Any] | None = None,
) -> tuple[str, Any]:
    """A disjunction of conjunctions: first the projected-gradient attack, then every
    conjunction searched in turn, the easiest (largest float CROWN margin at the root)
    first: ("unsat", [(tree, leaves) per conjunction in the given order]), or the first
    non-unsat answer."""
    lo = np.array([float(v) for v in box[0]])
    hi = np.array([float(v) for v in box[1]])
    ease = [float((fn.crown(lo, hi, A)[0] - d).max()) for A, d in conjs]
    order = sorted(range(len(conjs)), key=lambda j: -ease[j])
    hit = _pgd_first(fn, box, conjs, order[::-1], deadline, attack)
    if hit is not None:
        return "sat", hit
    got: dict[int, Any] = {}
    for i in order:
        status, out = search(sn, fn, box, conjs[i], deadline, attack)
        if status != "unsat":
            return status, out
        got[i] = out
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
