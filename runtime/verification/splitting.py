"""Search helpers of the VNN-LIB decision: a projected-gradient attack and input-domain
branch and bound for one conjunction of output rows.

Invariants:
- `pgd` works on the untrusted binary64 image (`floatnet.FloatNet`); it only proposes
  points of the box. The caller re-checks each with the runtime (`predict`, ordered
  kernels) and exact Fractions before calling anything `sat`.
- `split_search` bisects the exact input box (midpoints are exact rationals) into a binary
  tree; a leaf is closed only by `prove(lower, upper)`, the caller's exact proof (a
  certificate) that some row a . Y <= d is violated on the whole leaf. The tree's leaves
  cover the box, so when every leaf is closed the conjunction is empty on it. The float
  CROWN bound only decides which boxes are worth an exact proof and which coordinate to
  split (the one whose width times the closest row's input coefficient is largest).
- The tree is returned as nested JSON: {"leaf": i} (the i-th certificate) or
  {"split": j, "children": [lower half, upper half]} (halves of coordinate j at the
  midpoint); `cover_boxes` rebuilds the leaves' boxes from it.
- The clock is read before every box, every exact proof and every attack step; past the
  deadline the search returns ("unknown", ...).
- `sound_split_search` builds the same kind of tree on the rigorous engine
  (`rigorous.SoundNet`): a leaf is closed by the engine's bound itself (some row's lower
  bound above d + 1e-9 (1 + |d|)), so no per-leaf certificate is made; the tree and the
  leaf records ({"row": i[, "alpha": ...]}) go into one split certificate, which the
  independent checker recomputes. Its clock is read between batches of boxes.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .floatnet import FloatNet, ascend_slopes
from .rigorous import SoundNet, enclose, scheme_alpha

__all__ = ["Box", "cover_boxes", "pgd", "sound_split_search", "split_search"]

Box = tuple[tuple[Fraction, ...], tuple[Fraction, ...]]


def pgd(
    fn: FloatNet,
    lo: np.ndarray,
    hi: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray],
    deadline: float,
    restarts: int = 32,
    steps: int = 100,
    seed: int = 0,
) -> tuple[list[np.ndarray], np.ndarray]:
    """Points of [lo, hi] minimising f(x) = max_i (a_i . y(x) - d_i) (signed steps,
    restarts from random points and the center), best first, with their f values."""
    A, d = rows
    rng = np.random.default_rng(seed)
    x = lo + rng.random((restarts, lo.size)) * (hi - lo)
    x[0] = (lo + hi) / 2
    best, best_f = x.copy(), np.full(restarts, np.inf)
    width = hi - lo
    for k in range(steps + 1):
        if time.monotonic() > deadline:
            break
        viol = fn.forward(x) @ A.T - d
        f = viol.max(axis=1)
        better = f < best_f
        best[better], best_f[better] = x[better], f[better]
        if (best_f <= 0).any() or k == steps:
            break
        _, g = fn.grad(x, A[viol.argmax(axis=1)], leak=0.01)
        step = 0.1 * width * (0.95**k)
        x = np.clip(x - np.sign(g) * step, lo, hi)
    order = np.argsort(best_f)
    return [best[i] for i in order], best_f[order]


def _float_box(box: Box) -> tuple[np.ndarray, np.ndarray]:
    return np.array([float(v) for v in box[0]]), np.array([float(v) for v in box[1]])


def _halves(b: Box, j: int) -> tuple[Box, Box]:
    mid = (b[0][j] + b[1][j]) / 2
    return (b[0], (*b[1][:j], mid, *b[1][j + 1 :])), ((*b[0][:j], mid, *b[0][j + 1 :]), b[1])


class _Search:
    """The split tree under construction and the float CROWN screen of a box."""

    def __init__(self, fn: FloatNet, rows: tuple[np.ndarray, np.ndarray]) -> None:
        self.fn, self.rows = fn, rows

    def screen(self, b: Box) -> tuple[float, int]:
        """The float bound's best margin (> 0: some row proved violated on b) and the
        coordinate to split (width times the closest row's input coefficient, largest)."""
        lo, hi = _float_box(b)
        A, d = self.rows
        lb, coef = self.fn.crown(lo, hi, A)
        gap = lb - d
        i = int(np.argmax(gap))
        score = np.abs(coef[i]) * (hi - lo)
        j = int(np.argmax(score)) if score.max() > 0 else int(np.argmax(hi - lo))
        return float(gap[i] - 1e-9 * (1 + abs(d[i]))), j

    def split(self, b: Box, node: dict[str, Any], j: int) -> list[tuple[Box, dict[str, Any]]]:
        left, right = _halves(b, j)
        node["split"], node["children"] = j, [{}, {}]
        return [(left, node["children"][0]), (right, node["children"][1])]


def split_search(
    fn: FloatNet,
    box: Box,
    rows: tuple[np.ndarray, np.ndarray],
    prove: Callable[[Box], dict[str, Any] | None],
    attack: Callable[[list[np.ndarray]], Any],
    deadline: float,
    max_boxes: int = 200000,
) -> tuple[str, Any]:
    """("unsat", (tree, certificates)), ("sat", the attack's hit) or ("unknown", reason).
    First the float screen alone splits until every leaf is screened as proved (attacking
    each box it cannot prove; points whose float violation is at most 0 go to `attack`);
    then each leaf is proved exactly, and a leaf the exact proof refuses is split again."""
    S = _Search(fn, rows)
    root: dict[str, Any] = {}
    heap: list[tuple[float, int, Box, dict[str, Any]]] = [(-np.inf, 0, box, root)]
    pending: list[tuple[Box, dict[str, Any]]] = []
    seen = 0
    while heap:  # the box with the smallest float margin first: the likeliest to hold a hit
        if time.monotonic() > deadline or seen >= max_boxes:
            return "unknown", "timeout" if seen < max_boxes else f"{max_boxes} boxes spent"
        seen += 1
        _, _, b, node = heapq.heappop(heap)
        gap, j = S.screen(b)
        if gap > 0:
            pending.append((b, node))
            continue
        lo, hi = _float_box(b)
        pts, f = pgd(fn, lo, hi, rows, deadline, restarts=8, steps=20, seed=seen)
        tol = 1e-6 * (1 + np.abs(rows[1]).max())
        hit = attack([x for x, v in zip(pts, f, strict=True) if v <= tol][:4])
        if hit is not None:
            return "sat", hit
        for k, (h, sub) in enumerate(S.split(b, node, j)):
            heapq.heappush(heap, (gap, 2 * seen + k, h, sub))
    certs: list[dict[str, Any]] = []
    while pending:
        if time.monotonic() > deadline:
            return "unknown", "timeout"
        b, node = pending.pop()
        cert = prove(b)
        if cert is not None:
            node["leaf"] = len(certs)
            certs.append(cert)
            continue
        pending += S.split(b, node, S.screen(b)[1])[::-1]
    return "unsat", (root, certs)


def cover_boxes(box: Box, tree: dict[str, Any]) -> list[tuple[int, Box]]:
    """The (certificate index, box) of every leaf of a split tree over `box`."""
    if "leaf" in tree:
        return [(int(tree["leaf"]), box)]
    left, right = _halves(box, int(tree["split"]))
    a, b = tree["children"]
    return cover_boxes(left, a) + cover_boxes(right, b)


MAX_DEPTH = 64  # the split certificate's bound on a path's length


def _box_attack(
    fn: FloatNet,
    lo: np.ndarray,
    hi: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray],
    steps: int,
    x: np.ndarray | None = None,
    scale: float = 0.2,
) -> tuple[np.ndarray, np.ndarray]:
    """Signed-gradient descent of max_i (a_i . y - d_i) from each box's center (or from
    the points x), one point per box (rows of lo / hi); the best points and their values."""
    A, d = rows
    x = (lo + hi) / 2 if x is None else x
    best, best_f = x.copy(), np.full(x.shape[0], np.inf)
    for k in range(steps + 1):
        viol = fn.forward(x) @ A.T - d
        f = viol.max(axis=1)
        better = f < best_f
        best[better], best_f[better] = x[better], f[better]
        if k == steps:
            break
        _, g = fn.grad(x, A[viol.argmax(axis=1)], leak=0.01)
        x = np.clip(x - np.sign(g) * (scale * 0.8**k) * (hi - lo), lo, hi)
    return best, best_f


@dataclass
class _Open:
    """A bounded box not closed yet: its exact box, tree node, depth, float enclosure and
    the split score per coordinate (|input coefficient| x width of its best row)."""

    box: Box
    node: dict[str, Any]
    depth: int
    lo: np.ndarray
    hi: np.ndarray
    score: np.ndarray
    pre: list[tuple[np.ndarray, np.ndarray]]  # per relu stage: the rigorous (l, u) (n,)
    alpha: list[np.ndarray] | None = None  # per relu stage: optimised row slopes (m, n)
    gap: float = -np.inf  # the plain bound's best margin (< 0: open)


def _row_pre(
    pre: list[tuple[np.ndarray, np.ndarray]], i: int
) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(lo[i], hi[i]) for lo, hi in pre]


SLOPE_STEPS = 20  # Adam steps on a box's row slopes
SLOPE_LR = 0.2


class _SoundSearch:
    """The tree under construction: bounds batches of boxes, closes the proved ones."""

    def __init__(
        self,
        sn: SoundNet,
        rows: tuple[np.ndarray, np.ndarray],
        root: Box,
        slopes: bool,
        opt: tuple[int, int] = (0, 0),
    ) -> None:
        self.sn, self.rows = sn, rows
        self.steps, self.min_depth = opt  # slope ascent: steps (0: off), from which depth
        self.fc = FloatNet.chain(sn.Ws, sn.bs)
        d = rows[1]
        self.thr = np.nextafter(d + 1e-9 * (1 + np.abs(d)) + np.spacing(np.abs(d)), np.inf)
        self.leaves: list[dict[str, Any]] = []
        self.tries = self.thr if slopes else None  # the leaf slope schemes, or adaptive only
        lo, hi = enclose(root)
        self.scale = np.where(hi > lo, hi - lo, np.inf)  # relative widths for the fallback

    def bound(self, items: list[tuple[Box, dict[str, Any], int]]) -> tuple[list[_Open], Any]:
        """The open ones among the bounded boxes (the proved ones become leaves) and each
        box's best margin (margin > 0: closed)."""
        encl = [enclose(b) for b, _, _ in items]
        lo = np.array([e[0] for e in encl])
        hi = np.array([e[1] for e in encl])
        low, pre, coef, choice = self.sn.bound_tries(lo, hi, self.rows[0], self.tries)
        gap = low - self.thr
        best = np.argmax(gap, axis=1)
        margin = gap[np.arange(len(items)), best]
        out = []
        for i, (b, node, depth) in enumerate(items):
            if margin[i] > 0:
                node["leaf"] = len(self.leaves)
                self.leaves.append(self.record(int(best[i]), int(choice[i]), pre, i))
            else:
                score = np.abs(coef[i, best[i]]) * (hi[i] - lo[i])
                pr = _row_pre(pre, i)
                out.append(_Open(b, node, depth, lo[i], hi[i], score, pr, None, margin[i]))
        return out, margin

    def record(self, row: int, c: int, pre: list[tuple[np.ndarray, np.ndarray]], i: int) -> Any:
        """A closed leaf's record: its row, and the lower slopes of scheme c unless it is
        the adaptive rule (float.hex per neuron, per relu stage index)."""
        if c == 0:
            return {"row": row}
        al = {}
        for t, (lo, hi) in zip(self.sn.relu_stages, pre, strict=True):
            al[str(t)] = [
                float(v).hex() for v in scheme_alpha(c, (lo[i : i + 1], hi[i : i + 1]))[0]
            ]
        return {"row": row, "alpha": al}

    def tighten(self, opens: list[_Open]) -> list[_Open]:
        """The boxes left open after optimising their rows' lower slopes (warm-started from
        the parent's, else the adaptive rule) on the float bound and re-bounding rigorously
        those the float bound clears; a box so proved becomes a leaf with its row's slopes."""
        pick = [o for o in opens if o.depth >= self.min_depth]
        if self.steps <= 0 or not pick:
            return opens
        A = self.rows[0]
        m = A.shape[0]
        lo = np.array([o.lo for o in pick])
        hi = np.array([o.hi for o in pick])
        pre = [(np.array([o.pre[k][0] for o in pick]), np.array([o.pre[k][1] for o in pick]))
               for k in range(len(self.sn.relu_stages))]  # fmt: skip
        alpha = [np.array([_start(o, k, m) for o in pick]) for k in range(len(pre))]
        alpha, fl = ascend_slopes(self.fc, lo, hi, A, pre, alpha, self.steps, SLOPE_LR, 0.92)
        for i, o in enumerate(pick):
            o.alpha = [a[i] for a in alpha]
        cand = np.flatnonzero((fl - self.thr).max(axis=1) > 0)
        closed = set()
        if cand.size:
            low, _ = self.sn.lower(lo[cand], hi[cand], A, alpha=[a[cand] for a in alpha])
            gap = low - self.thr
            for c, i in enumerate(cand.tolist()):
                r = int(np.argmax(gap[c]))
                if gap[c, r] > 0:
                    self.close_with(pick[i], r)
                    closed.add(id(pick[i]))
        return [o for o in opens if id(o) not in closed]

    def close_with(self, o: _Open, r: int) -> None:
        """Box o proved by row r with its optimised slopes: a leaf recording them."""
        assert o.alpha is not None
        al = {
            str(t): [float(v).hex() for v in a[r]]
            for t, a in zip(self.sn.relu_stages, o.alpha, strict=True)
        }
        o.node["leaf"] = len(self.leaves)
        self.leaves.append({"row": r, "alpha": al})

    def candidates(self, o: _Open) -> list[int]:
        """The coordinate of the largest score, and the widest relative to the root box."""
        rel = (o.hi - o.lo) / self.scale
        a = int(np.argmax(o.score)) if o.score.max() > 0 else int(np.argmax(rel))
        b = int(np.argmax(rel))
        return [a] if a == b else [a, b]

    def split(self, opens: list[_Open]) -> list[_Open]:
        """Each open box split on the candidate whose halves' worse margin is larger (all
        candidates' halves bounded in one batch); the halves' nodes get their open or
        leaf records."""
        items: list[tuple[Box, dict[str, Any], int]] = []
        owner: list[tuple[int, int, int]] = []
        for k, o in enumerate(opens):
            for j in self.candidates(o):
                left, right = _halves(o.box, j)
                items += [(left, {}, o.depth + 1), (right, {}, o.depth + 1)]
                owner.append((k, j, len(items) - 2))
        trial = SoundTrial(self, items)
        return trial.choose(opens, owner)


def _start(o: _Open, k: int, m: int) -> np.ndarray:
    """Relu stage k's initial row slopes (m, n) of box o: its parent's, else adaptive."""
    if o.alpha is not None:
        return o.alpha[k]
    l, u = o.pre[k]
    return np.broadcast_to(np.where(u >= -l, 1.0, 0.0), (m, l.size)).copy()


class SoundTrial:
    """The halves of every candidate split, bounded without touching the tree; `choose`
    keeps one candidate per box and records its halves."""

    def __init__(self, S: _SoundSearch, items: list[tuple[Box, dict[str, Any], int]]):
        self.S, self.items = S, items
        encl = [enclose(b) for b, _, _ in items]
        self.lo = np.array([e[0] for e in encl])
        self.hi = np.array([e[1] for e in encl])
        low, self.pre, self.coef, self.choice = S.sn.bound_tries(
            self.lo, self.hi, S.rows[0], S.tries
        )
        gap = low - S.thr
        self.best = np.argmax(gap, axis=1)
        self.margin = gap[np.arange(len(items)), self.best]

    def choose(self, opens: list[_Open], owner: list[tuple[int, int, int]]) -> list[_Open]:
        pick: dict[int, tuple[float, int, int]] = {}
        for k, j, at in owner:
            worse = float(min(self.margin[at], self.margin[at + 1]))
            if k not in pick or worse > pick[k][0]:
                pick[k] = (worse, j, at)
        out = []
        for k, (_, j, at) in pick.items():
            o = opens[k]
            o.node["split"], o.node["children"] = j, [{}, {}]
            for h in range(2):
                i = at + h
                node = o.node["children"][h]
                if self.margin[i] > 0:
                    node["leaf"] = len(self.S.leaves)
                    rec = self.S.record(int(self.best[i]), int(self.choice[i]), self.pre, i)
                    self.S.leaves.append(rec)
                else:
                    score = np.abs(self.coef[i, self.best[i]]) * (self.hi[i] - self.lo[i])
                    pre = _row_pre(self.pre, i)
                    box = self.items[i][0]
                    out.append(_Open(box, node, o.depth + 1, self.lo[i], self.hi[i], score,
                                     pre, o.alpha, self.margin[i]))  # fmt: skip
        return out


ATTACK_SAMPLES = 16384  # random points spread over a batch's open boxes
ATTACK_STARTS = 32  # the best of them, refined by descent in their boxes


def _attack_batch(
    fn: FloatNet,
    opens: list[_Open],
    rows: tuple[np.ndarray, np.ndarray],
    attack: Callable[[list[np.ndarray]], Any],
    rng: np.random.Generator,
) -> Any:
    """A short descent from every box's center, and longer ones from the best of random
    points of the boxes (the open boxes are where a violation can still be: sampling them
    finds narrow regions a descent from few points misses, e.g. a plateau of dead
    neurons); points with float violation <= tol go to `attack` (its answer or None)."""
    A, d = rows
    lo = np.array([o.lo for o in opens])
    hi = np.array([o.hi for o in opens])
    pts, f = _box_attack(fn, lo, hi, rows, steps=8)
    own = rng.integers(0, len(opens), ATTACK_SAMPLES)
    x = lo[own] + rng.random((ATTACK_SAMPLES, lo.shape[1])) * (hi[own] - lo[own])
    fs = (fn.forward(x) @ A.T - d).max(axis=1)
    top = np.argsort(fs)[:ATTACK_STARTS]
    p2, f2 = _box_attack(fn, lo[own[top]], hi[own[top]], rows, steps=20, x=x[top])
    pts, f = np.concatenate([pts, p2]), np.concatenate([f, f2])
    tol = 1e-6 * (1 + np.abs(d).max())
    order = np.argsort(f)
    return attack([pts[i] for i in order if f[i] <= tol][:8])


ROOT_SAMPLES = 1 << 19  # random points of the root box, sampled once when it is open


def _root_attack(
    fn: FloatNet,
    lo: np.ndarray,
    hi: np.ndarray,
    rows: tuple[np.ndarray, np.ndarray],
    attack: Callable[[list[np.ndarray]], Any],
    rng: np.random.Generator,
    deadline: float,
) -> Any:
    """Uniform random points of the box (in chunks, the clock read between them), the
    best refined by a descent with short steps; points with float violation <= tol go to
    `attack`."""
    A, d = rows
    chunk = 1 << 16
    keep_x, keep_f = [], []
    for _ in range(ROOT_SAMPLES // chunk):
        if time.monotonic() > deadline:
            break
        x = lo + rng.random((chunk, lo.size)) * (hi - lo)
        f = (fn.forward(x) @ A.T - d).max(axis=1)
        top = np.argsort(f)[:ATTACK_STARTS]
        keep_x.append(x[top])
        keep_f.append(f[top])
        if f[top[0]] <= 0:
            break
    if not keep_x:
        return None
    x, f = np.concatenate(keep_x), np.concatenate(keep_f)
    top = np.argsort(f)[: 2 * ATTACK_STARTS]
    n = top.size
    rlo, rhi = np.tile(lo, (n, 1)), np.tile(hi, (n, 1))
    p2, f2 = _box_attack(fn, rlo, rhi, rows, steps=30, x=x[top], scale=0.01)
    pts, f = np.concatenate([x[top], p2]), np.concatenate([f[top], f2])
    tol = 1e-6 * (1 + np.abs(d).max())
    order = np.argsort(f)
    return attack([pts[i] for i in order if f[i] <= tol][:8])


def sound_split_search(
    sn: SoundNet,
    fn: FloatNet | None,
    box: Box,
    rows: tuple[np.ndarray, np.ndarray],
    attack: Callable[[list[np.ndarray]], Any],
    deadline: float,
    batch: int = 256,
    slopes: bool = False,
    opt: tuple[int, int] = (SLOPE_STEPS, 0),
) -> tuple[str, Any]:
    """("unsat", (tree, leaves)), ("sat", the attack's hit) or ("unknown", reason): open
    boxes taken in batches (depth first) are attacked (`_attack_batch`; points with float
    violation <= 0 go to `attack`) and split; a box is closed when some row's rigorous
    lower bound exceeds d + 1e-9 (1 + |d|). Two candidate coordinates per box (largest
    |input coefficient| x width of its best row, widest relative to the root box) are both
    tried and the one whose halves' worse margin is larger kept. `opt` = (steps, depth):
    every open box at least that deep gets its rows' lower slopes optimised (`tighten`,
    steps 0: off); with `slopes`, each leaf's final rows are also bounded with the
    lower-slope schemes of `rigorous.SCHEMES`. A leaf closed with slopes records them."""
    S = _SoundSearch(sn, rows, box, slopes, opt)
    rng = np.random.default_rng(0)
    root: dict[str, Any] = {}
    todo = S.tighten(S.bound([(box, root, 0)])[0])
    if todo and fn is not None:
        hit = _root_attack(fn, todo[0].lo, todo[0].hi, rows, attack, rng, deadline)
        if hit is not None:
            return "sat", hit
    while todo:
        if time.monotonic() > deadline:
            return "unknown", "timeout"
        opens = todo[-batch:]
        del todo[-batch:]
        if fn is not None:
            hit = _attack_batch(fn, opens, rows, attack, rng)
            if hit is not None:
                return "sat", hit
        if any(o.depth >= MAX_DEPTH for o in opens):
            return "unknown", f"a box needs more than {MAX_DEPTH} splits"
        todo += S.tighten(S.split(opens))
    return "unsat", (root, S.leaves)
