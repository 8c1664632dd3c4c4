"""ReLU-split branch and bound (`runtime.verification.relubab`) on the rigorous engine.

The oracle is independent of the search: on one-input networks the real network is
piecewise linear in x, and `_exact_min` finds its minimum exactly (Fractions) by cutting
the interval at every point where some pre-activation crosses zero (found by exact linear
interpolation, layer by layer, so the function is linear between cuts). A planted unsat
sits between plain CROWN's bound and that minimum; a planted sat just above it.
"""

from __future__ import annotations

import itertools
import json
import time
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.split_certificate_check import check_certificate
from runtime.nn import Linear, ReLU, Sequential
from runtime.trainer import Result
from runtime.verification import relubab
from runtime.verification.floatnet import FloatNet
from runtime.verification.from_graph import Network
from runtime.verification.rigorous import SoundNet, enclose
from runtime.verification.splitcert import split_certificate
from runtime.verification.vnn import decide
from runtime.verification.vnnlib import parse_vnnlib_cases

NP = {"float32": np.float32, "float64": np.float64}


def _net(widths: list[int], seed: int, dtype: str = "float64") -> Network:
    rng = np.random.default_rng(seed)
    layers: list[Any] = []
    state: list[np.ndarray] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        if i:
            layers.append(ReLU())
        layers.append(Linear(a, b))
        state += [rng.normal(size=(b, a)).astype(NP[dtype]), rng.normal(size=b).astype(NP[dtype])]
    res = Result(Sequential(*layers), "mse", dtype, "eager", "ordered", False, state)
    return Network(res, widths[0], widths[-1], [], (widths[0],))


def _layers(net: Network) -> list[tuple[list[list[Fraction]], list[Fraction]]]:
    s = net.result.state()
    return [
        ([[Fraction(float(w)) for w in r] for r in s[k]], [Fraction(float(c)) for c in s[k + 1]])
        for k in range(0, len(s), 2)
    ]


def _pres(L: Any, x: list[Fraction]) -> tuple[list[list[Fraction]], list[Fraction]]:
    """Exact pre-activations of each hidden layer and the outputs at x."""
    v, pres = x, []
    for k, (W, b) in enumerate(L):
        if k:
            pres.append(v)
            v = [max(t, Fraction(0)) for t in v]
        v = [sum((w * t for w, t in zip(r, v, strict=True)), c) for r, c in zip(W, b, strict=True)]
    return pres, v


def _exact_min(net: Network, a: list[Fraction], lo: Fraction, hi: Fraction) -> Fraction:
    """min of a . Y(x) over x in [lo, hi] for a one-input network, exactly."""
    L = _layers(net)

    def val(x: Fraction) -> Fraction:
        return sum((c * y for c, y in zip(a, _pres(L, [x])[1], strict=True)), Fraction(0))

    best, todo = min(val(lo), val(hi)), [(lo, hi)]
    while todo:
        p, q = todo.pop()
        zp, zq = _pres(L, [p])[0], _pres(L, [q])[0]
        cut = None
        for lp, lq in zip(zp, zq, strict=True):  # first layer with a sign change: linear there
            cross = [(s, t) for s, t in zip(lp, lq, strict=True) if s * t < 0]
            if cross:
                s, t = cross[0]
                cut = p + (q - p) * s / (s - t)
                break
        if cut is not None:
            best = min(best, val(cut))
            todo += [(p, cut), (cut, q)]
    return best


def _tree_nodes(tree: dict[str, Any]) -> list[dict[str, Any]]:
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        todo += node.get("children", [])
    return out


def _leaf_paths(sn: SoundNet, tree: dict[str, Any], box: Any) -> dict[int, Any]:
    """The box and split signs of every leaf, rebuilt from its path."""
    out: dict[int, Any] = {}
    todo = [(tree, box, [np.zeros(w, np.int8) for w in sn.widths[1:-1]])]
    while todo:
        node, b, sp = todo.pop()
        if "leaf" in node:
            out[node["leaf"]] = (b, sp)
        elif "split" in node:
            j = node["split"]
            mid = (b[0][j] + b[1][j]) / 2
            low = (b[0], (*b[1][:j], mid, *b[1][j + 1 :]))
            high = ((*b[0][:j], mid, *b[0][j + 1 :]), b[1])
            todo += [(c, h, sp) for c, h in zip(node["children"], (low, high), strict=True)]
        else:
            t, i = node["relu"]
            k = sn.relu_stages.index(t)
            for sign, child in zip((-1, 1), node["children"], strict=True):
                c = [s.copy() for s in sp]
                assert c[k][i] == 0  # never the same neuron twice on a path
                c[k][i] = sign
                todo.append((child, b, c))
    return out


def _planted(seed: int) -> tuple[Network, SoundNet, Fraction, Fraction, Fraction, float]:
    net = _net([1, 8, 8, 1], seed)
    sn = SoundNet.build(net)
    assert sn is not None
    lo, hi = Fraction(-2), Fraction(2)
    m = _exact_min(net, [Fraction(1)], lo, hi)
    root, _ = sn.lower(np.array([[-2.0]]), np.array([[2.0]]), np.array([[1.0]]))
    return net, sn, lo, hi, m, float(root[0, 0])


SEED = 3  # a network whose plain CROWN bound is far below the true minimum


def test_planted_unsat_needs_relu_splits() -> None:
    net, sn, lo, hi, m, root = _planted(SEED)
    d = float(m) - 0.05 * (float(m) - root)  # between CROWN's bound and the true minimum
    assert root < d < m
    fn = FloatNet.chain(sn.Ws, sn.bs)
    status, got = relubab.search(sn, fn, ((lo,), (hi,)), (np.array([[1.0]]), np.array([d])),
                                 np.inf)  # fmt: skip
    assert status == "unsat"
    tree, leaves = got
    relus = [n for n in _tree_nodes(tree) if "relu" in n]
    assert relus and all(len(n["children"]) == 2 for n in relus)
    paths = _leaf_paths(sn, tree, ((lo,), (hi,)))
    assert sorted(paths) == list(range(len(leaves)))
    for k, leaf in enumerate(leaves):  # every leaf re-bounded from its own path and slopes
        alpha = [np.array([[[float.fromhex(h) for h in leaf["alpha"][str(t)]]]])
                 for t in sn.relu_stages]  # fmt: skip
        b, sp = paths[k]
        flo, fhi = enclose(b)
        low, _ = sn.lower(flo[None], fhi[None], np.array([[1.0]]), [s[None] for s in sp], alpha)
        assert low[0, 0] > d
    signs = {(tuple(n["relu"]), i) for n in relus for i in (0, 1)}
    assert len(signs) == 2 * len({tuple(n["relu"]) for n in relus})  # both signs of each split
    cert = split_certificate(net, ((lo,), (hi,)), (((Fraction(1),), Fraction(d)),), tree, leaves)
    assert check_certificate(json.loads(json.dumps(cert))).startswith("certificate holds")


def test_shared_search_of_two_conjunctions() -> None:
    """`search_all` on two conjunctions (both empty): one tree each, every leaf re-bounded
    from its own path proves its conjunction's row."""
    _, sn, lo, hi, m, root = _planted(SEED)
    ds = [float(m) - 0.05 * (float(m) - root), float(m) - 0.5 * (float(m) - root)]
    fn = FloatNet.chain(sn.Ws, sn.bs)
    conjs = [(np.array([[1.0]]), np.array([d])) for d in ds]
    status, got = relubab.search_all(sn, fn, ((lo,), (hi,)), conjs, np.inf)
    assert status == "unsat" and len(got) == 2
    for d, (tree, leaves) in zip(ds, got, strict=True):
        paths = _leaf_paths(sn, tree, ((lo,), (hi,)))
        assert sorted(paths) == list(range(len(leaves)))
        for k, leaf in enumerate(leaves):
            alpha = [np.array([[[float.fromhex(h) for h in leaf["alpha"][str(t)]]]])
                     for t in sn.relu_stages]  # fmt: skip
            b, sp = paths[k]
            flo, fhi = enclose(b)
            low, _ = sn.lower(flo[None], fhi[None], np.array([[1.0]]), [s[None] for s in sp], alpha)
            assert leaf["row"] == 0 and low[0, 0] > d


def test_planted_sat_found() -> None:
    net, sn, lo, hi, m, _ = _planted(SEED)
    d = float(m) + 0.01
    L = _layers(net)

    def attack(pts: list[np.ndarray]) -> Any:
        for x in pts:
            y = _pres(L, [Fraction(float(x[0]))])[1][0]
            if Fraction(float(x[0])) >= lo and Fraction(float(x[0])) <= hi and y <= Fraction(d):
                return float(x[0])
        return None

    fn = FloatNet.chain(sn.Ws, sn.bs)
    rows = (np.array([[1.0]]), np.array([d]))
    status, hit = relubab.decide_conjunctions(sn, fn, ((lo,), (hi,)), [rows], np.inf, attack)
    assert status == "sat"
    assert _pres(L, [Fraction(hit)])[1][0] <= Fraction(d)


def test_alpha_gradient_matches_finite_differences() -> None:
    net = _net([3, 6, 5, 2], 7)
    sn = SoundNet.build(net)
    assert sn is not None
    fn = FloatNet.chain(sn.Ws, sn.bs)
    lo, hi = np.full((2, 3), -1.0), np.full((2, 3), 1.0)
    hi[1] = 0.5
    pre = fn.split_bounds(lo, hi, [np.zeros((2, 6), np.int8), np.zeros((2, 5), np.int8)])
    A = np.array([[1.0, -1.0], [0.5, 2.0]])
    rng = np.random.default_rng(1)
    alpha = [rng.uniform(0.1, 0.9, size=(2, 2, w)) for w in (6, 5)]
    bound, grads, _, _ = fn.alpha_crown(lo, hi, A, pre, alpha)
    eps, checked = 1e-6, 0
    for k in range(2):
        for idx in np.ndindex(alpha[k].shape):
            up = [a.copy() for a in alpha]
            dn = [a.copy() for a in alpha]
            up[k][idx] += eps
            dn[k][idx] -= eps
            fd = fn.alpha_crown(lo, hi, A, pre, up)[0] - fn.alpha_crown(lo, hi, A, pre, dn)[0]
            fd = fd[idx[:2]] / (2 * eps)
            assert abs(fd - grads[k][idx]) <= 1e-6 * (1 + abs(fd))
            checked += abs(grads[k][idx]) > 0
    assert checked > 0  # some slope matters to the bound
    assert bound.shape == (2, 2)


@settings(max_examples=8, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    shift=st.floats(-0.3, 0.3),
    dtype=st.sampled_from(["float32", "float64"]),
)
def test_never_unsat_where_a_sampled_point_satisfies(seed: int, shift: float, dtype: str) -> None:
    net = _net([2, 5, 5, 2], seed, dtype)
    sn = SoundNet.build(net)
    assert sn is not None
    fn = FloatNet.chain(sn.Ws, sn.bs)
    lo, hi = (Fraction(-1), Fraction(-1)), (Fraction(1), Fraction(1, 2))
    a = np.array([[1.0, -1.0]])
    rng = np.random.default_rng(seed)
    pts = np.vstack([rng.uniform([-1, -1], [1, 0.5], size=(64, 2)), [[-1, -1], [1, 0.5]]])
    pts = pts.astype(NP[dtype]).astype(np.float64)
    L = _layers(net)
    real = [_pres(L, [Fraction(float(v)) for v in x])[1] for x in pts]
    runtime = np.asarray(net.result.predict(pts.astype(NP[dtype]), batch=True), np.float64)
    vals = [y[0] - y[1] for y in real] + [
        Fraction(float(y[0])) - Fraction(float(y[1])) for y in runtime
    ]
    d = float(min(vals)) + shift * float(max(vals) - min(vals))
    status, _ = relubab.search(sn, fn, (lo, hi), (a, np.array([d])), time.monotonic() + 10)
    if any(v <= Fraction(d) for v in vals):
        assert status != "unsat"
    lo_f, hi_f = enclose((lo, hi))
    assert (lo_f <= pts).all() and (pts <= hi_f).all()


def _top_label_text(n: int, x: np.ndarray, eps: float, k: int, m: int) -> str:
    decl = [f"(declare-const X_{i} Real)" for i in range(n)]
    decl += [f"(declare-const Y_{j} Real)" for j in range(m)]
    box = [f"(assert (<= X_{i} {float(x[i]) + eps!r}))\n(assert (>= X_{i} {float(x[i]) - eps!r}))"
           for i in range(n)]  # fmt: skip
    ors = " ".join(f"(and (>= Y_{j} Y_{k}))" for j in range(m) if j != k)
    return "\n".join([*decl, *box, f"(assert (or {ors}))"]) + "\n"


def test_vnn_decides_wide_networks_with_split_certificates() -> None:
    """Through `vnn.decide` (more inputs than SPLIT_INPUTS): a small box around a point
    is unsat with one checked certificate per conjunction; a wide box is sat at a point
    the runtime confirms."""
    net = _net([20, 8, 8, 3], 11, "float32")
    x = np.random.default_rng(2).uniform(-1, 1, 20).astype(np.float32).astype(np.float64)
    y = np.asarray(net.result.predict(x[None].astype(np.float32), batch=True), np.float64)[0]
    k = int(np.argmax(y))
    got = decide(net, parse_vnnlib_cases(_top_label_text(20, x, 1e-3, k, 3))[0], 60)
    assert got.status == "unsat" and len(got.certificates) == 2
    assert [p["conjunction"] for p in got.proofs] == [0, 1]
    for cert in got.certificates:
        assert check_certificate(json.loads(json.dumps(cert))).startswith("certificate holds")
    hit = decide(net, parse_vnnlib_cases(_top_label_text(20, x, 3.0, k, 3))[0], 60)
    assert hit.status == "sat" and hit.x is not None and hit.y is not None
    ys = np.asarray(net.result.predict(np.array([hit.x], np.float32), batch=True))[0]
    assert list(map(float, ys)) == hit.y and max(np.delete(ys, k)) >= ys[k]
