"""Branch and bound on ReLU splits for ("top_label", k) properties (`algorithm="bab"`).

Invariants:
- A branch is a path of splits (s, j, sign): the input of ReLU neuron j of stage s is >= 0
  (sign +1) or <= 0 (sign -1) — at level 1 the real value, at level 2 the runtime's own
  value, which the level's intervals enclose. Splitting one neuron both ways covers its
  parent branch (every value is >= 0 or <= 0), so the leaves of a complete split tree cover
  the box. A branch is bounded by alpha-CROWN with the split neurons' intervals clamped
  (`crown.Crown(splits=...)`); a branch whose intervals cross (lower > upper) contains no
  input and is closed as infeasible.
- The margins certified with a complete tree are, per output j, max(the root's margin,
  min over feasible leaves of the leaf's margin): each leaf's margin bounds out_k - out_j on
  its part of the box, and the parts cover it. When the budget (branches, seconds) runs out
  before the tree closes, the tree is dropped and the root's alpha-CROWN margins stand.
- Splits are chosen BaBSR-style from the level-1 pass (the intercept the relaxation loses
  per unstable neuron, weighted by the unproved rows' coefficients; binary64, untrusted).
- A counterexample is an input of the exact box (a binary64 vector) at which `predict`,
  run in the result's dtype with the `ordered` kernels, returns some out_j >= out_k
  (j != k); candidates are the box's center and, per open branch, the box vertex minimising
  each unproved row's linear bound. Finding one ends the search: the property fails at
  the runtime level.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpq

from .alpha import float_slopes
from .arithmetic import Arith
from .core import VerificationError, frac, q
from .crown import Crown, Fmt, slopes_json
from .network import Stage

__all__ = ["MAX_BRANCHES", "TIMEOUT", "Level", "Outcome", "search"]

MAX_BRANCHES = 256
TIMEOUT = 60.0

Path = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class Level:
    """One soundness level's arithmetic, box and root (alpha-CROWN) margins."""

    name: str
    H: Arith
    A: Arith
    f: Fmt | None
    box: list[Any]
    margins: tuple[Fraction | None, ...]


@dataclass
class Outcome:
    """The search's result: per level the new margins and the leaves' certificate entries
    (None when the tree did not close), a counterexample or None, and the branch count."""

    margins: dict[str, tuple[Fraction | None, ...]]
    leaves: dict[str, list[dict[str, Any]]] | None
    counterexample: dict[str, Any] | None
    branches: int
    complete: bool


def _down(H: Arith, v: Any) -> Any:
    w = H.cv(H.dn, v)
    if not gmpy2.is_finite(w):
        raise VerificationError("verification failed: a branch bound is beyond the exponent range")
    return q(w)


def _splits(path: Path) -> dict[int, dict[int, int]]:
    out: dict[int, dict[int, int]] = {}
    for s, j, sign in path:
        out.setdefault(s, {})[j] = sign
    return out


def _leaf(
    lv: Level, stages: list[Stage], path: Path, rows: list[list[Any]], top: int
) -> tuple[dict[str, Any], list[Any] | None, Crown, Any]:
    """A branch at one level: its certificate entry, its margins (None: infeasible), the
    CROWN object and its final slopes."""
    cr = Crown(lv.H, lv.A, lv.f, stages, lv.box, optimise=True, splits=_splits(path))
    entry: dict[str, Any] = {"splits": [list(p) for p in path], "witness": cr.witness()}
    if cr.empty is not None:
        entry["infeasible"] = True
        return entry, None, cr, None
    T = len(stages)
    sl = cr.slopes(rows, T)
    if sl is not None:
        entry["alpha"] = {"margins": slopes_json(sl)}
    got = iter(_down(lv.H, v) for v in cr.backward(rows, T, sl))
    last = cr.ivs[-1]
    m = len(last)
    margins = [
        None if j == top else max(q(last[top][0]) - q(last[j][1]), next(got)) for j in range(m)
    ]
    return entry, margins, cr, sl


def _pick(cr: Crown, rows: np.ndarray, sl: Any) -> tuple[int, int] | None:
    """The unstable ReLU neuron whose relaxation costs the unproved rows most (BaBSR-style:
    the upper line's intercept where a row's coefficient is negative, the lower line's gap
    at the lower end where it is positive)."""
    ch = cr.chain
    ch.sync(len(cr.stages))
    alpha = float_slopes(cr.chain, sl)
    _, seen, _ = ch.trace(rows, len(cr.stages), alpha)
    best: tuple[float, int, int] | None = None
    for s, lam in seen:
        if s not in ch.free or ch.kind[s] != "relu" or not ch.free[s].any():
            continue
        lo = ch.box(cr.stages[s - 1].srcs(s)[0])[0]
        aL = alpha[s] if s in alpha else ch.rl[s][None, :, 0]
        cU = ch.rl[s][:, 3]
        score = (np.maximum(-lam, 0) * cU + np.maximum(lam, 0) * aL * (-lo)).sum(axis=0)
        score = np.where(ch.free[s], score, -1.0)
        j = int(np.argmax(score))
        if score[j] >= 0 and (best is None or score[j] > best[0]):
            best = (float(score[j]), s, j)
    return None if best is None else (best[1], best[2])


def _inside(lo: Fraction, hi: Fraction, x: float) -> float:
    """x moved into [lo, hi] (a binary64 value of the exact interval)."""
    y = min(max(x, float(lo)), float(hi))
    while Fraction(y) < lo:
        y = float(np.nextafter(y, np.inf))
    while Fraction(y) > hi:
        y = float(np.nextafter(y, -np.inf))
    return y


def _vertices(cr: Crown, rows: np.ndarray, sl: Any, box: tuple[list[Any], list[Any]]) -> Any:
    """Per row, the box vertex minimising the row's linear lower bound (binary64, inside)."""
    _, _, bottoms = cr.chain.trace(rows, len(cr.stages), float_slopes(cr.chain, sl))
    if [v for v, _ in bottoms] != [0]:  # the pass stops at a LayerNorm: no input vertex
        return []
    lam = bottoms[0][1]
    lo, hi = box
    return [[_inside(a, b, float(a) if v >= 0 else float(b))
             for v, a, b in zip(r, lo, hi, strict=True)] for r in lam]  # fmt: skip


def _attack(
    ordered: Any, top: int, pts: list[list[float]], shape: tuple[int, ...]
) -> dict[str, Any] | None:
    """The first point at which the ordered-kernel runtime does not put `top` strictly on
    top, with its outputs; None if there is none (points are flat, inputs of `shape`)."""
    if not pts:
        return None
    xs = np.asarray(pts, dtype=np.float64).reshape(len(pts), *shape)
    out = np.asarray(ordered.predict(xs, batch=True), dtype=np.float64)
    for x, y in zip(pts, out, strict=True):
        if any(y[j] >= y[top] for j in range(len(y)) if j != top):
            return {"input": [float(v) for v in x], "output": [float(v) for v in y]}
    return None


def search(
    result: Any,
    stages: list[Stage],
    levels: list[Level],
    box: tuple[list[Fraction], list[Fraction], tuple[int, ...]],
    top: int,
    budget: tuple[int, float],
) -> Outcome:
    """Branch and bound until every leaf proves the property at every level, a runtime
    counterexample is found, or the budget (branches, seconds) is spent."""
    m = len(levels[0].margins)
    rows = [[mpq(int(i == top) - int(i == j)) for i in range(m)] for j in range(m) if j != top]
    ordered = dataclasses.replace(result, kernels="ordered")
    lo, hi, shape = box
    center = [_inside(a, b, float((a + b) / 2)) for a, b in zip(lo, hi, strict=True)]
    cex = _attack(ordered, top, [center], shape)
    roots = {lv.name: lv.margins for lv in levels}
    if cex is not None or all(all(x is None or x > 0 for x in lv.margins) for lv in levels):
        return Outcome(roots, None, cex, 0, cex is None)
    queue: deque[Path] = deque([()])
    done: list[tuple[Path, dict[str, Any]]] = []
    start, n = time.monotonic(), 0
    while queue:
        if n >= budget[0] or time.monotonic() - start > budget[1]:
            return Outcome(roots, None, None, n, False)
        path = queue.popleft()
        n += 1
        got = {lv.name: _leaf(lv, stages, path, rows, top) for lv in levels}
        js = [j for j in range(m) if j != top]  # row r bounds out_top - out_js[r]
        open_rows = [r for r, j in enumerate(js)
                     if any(g[1] is not None and g[1][j] <= 0 for g in got.values())]  # fmt: skip
        if not open_rows:
            done.append((path, got))
            continue
        _, _, cr, sl = next(g for g in got.values() if g[1] is not None)
        fr = np.array([[float(v) for v in rows[r]] for r in open_rows])
        sl_open = None if sl is None else {s: [v[r] for r in open_rows] for s, v in sl.items()}
        cex = _attack(ordered, top, _vertices(cr, fr, sl_open, (lo, hi)), shape)
        if cex is not None:
            return Outcome(roots, None, cex, n, False)
        pick = _pick(cr, fr, sl_open)
        if pick is None:  # nothing left to split and not proved: give up
            return Outcome(roots, None, None, n, False)
        queue.append((*path, (pick[0], pick[1], 1)))
        queue.append((*path, (pick[0], pick[1], -1)))
    return _closed(levels, done, n)


def _closed(levels: list[Level], done: list[tuple[Path, dict[str, Any]]], n: int) -> Outcome:
    """A complete tree: per level, max(root, min over feasible leaves) and the entries."""
    margins: dict[str, tuple[Fraction | None, ...]] = {}
    leaves: dict[str, list[dict[str, Any]]] = {}
    for lv in levels:
        feas = [g[lv.name][1] for _, g in done if g[lv.name][1] is not None]
        new: list[Fraction | None] = []
        for j, root in enumerate(lv.margins):
            if root is None:
                new.append(None)
                continue
            leaf_min = min((frac(f[j]) for f in feas), default=root)
            new.append(max(root, leaf_min))
        margins[lv.name] = tuple(new)
        leaves[lv.name] = [g[lv.name][0] for _, g in done]
    return Outcome(margins, leaves, None, n, True)
