"""Independent checker of split-bound certificates (`torchlean_split_bounds_v1`).

A certificate claims that one conjunction of rows a_i . Y <= d_i has no solution Y = f(x)
for x in a box, for a chain network f of dense `linear` and `relu` stages, at level 1 (the
real-valued network) and level 2 (the runtime in the network's dtype, any summation
order). It carries a tree of input splits (at exact midpoints) and ReLU sign splits whose
leaves cover the box; each leaf names the row it violates and optional lower ReLU slopes.
This module re-validates it without importing `runtime`: its own decoder of the weights'
bit patterns, its own tree walk and its own rigorous float64 bounds
(`proofs.split_certificate_bounds`).

Invariants (what `check_certificate` establishes before it accepts):
- the certificate has exactly the keys of the format; the `digest` is the sha256 of the
  canonical JSON of the certificate without it; `model_hash` that of the network;
- the network is a chain linear, relu, ..., linear in float32 or float64, every tensor of
  the shape the previous stage implies, every weight a finite bit pattern of the dtype;
- the box has rational ends with lower <= upper, one per network input; every row's `a`
  has one entry per output, each exactly representable in the dtype;
- the tree: each node is exactly a leaf {"leaf": k}, an input split {"split": j,
  "children": [low, high]} (coordinate j halved at the exact midpoint of the node's box,
  both halves closed) or a ReLU split {"relu": [t, i], "children": [neg, pos]} (stage t a
  relu stage, neuron i of it, never split twice on one path); depth at most
  MAX_TREE_DEPTH, at most MAX_NODES nodes; every leaf index appears exactly once; so the
  leaves' regions cover the box (a ReLU split covers z <= 0 and z >= 0);
- each leaf names a row in range; its `alpha` maps relu stage indices (decimal) to one
  finite float (float.hex) in [0, 1] per neuron;
- for every leaf, this checker's own bound of its row's a . Y over the leaf's region is
  > d (compared exactly), or the leaf's region is empty; a leaf where the runtime could
  overflow (or a bound is not finite) is not proved. Hence no x in the box satisfies the
  conjunction at either level.
- The file is parsed by `parse`: files over MAX_BYTES, integers longer than MAX_INT_DIGITS
  and NaN / Infinity are refused; nesting too deep for the JSON reader is refused.
- `check_work` (what check-cert runs first) estimates the float64 work from sizes only
  (`flops`: leaves times back-substitution size) and refuses, with
  `proofs.cert_work.CertificateWorkError`, more than MAX_FLOPS or a value wider than the
  width cap, before anything is decoded.
A rejected certificate raises `CertificateError` with one line naming the first failed
check (the field, or the leaf and its node path in the tree).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from .bounds_certificate_check import MAX_BYTES, MAX_INT_DIGITS, canonical_sha, read_certificate
from .bounds_certificate_check import parse as parse_json
from .bounds_certificate_ia import CertificateError, jlist, rat, rejecting, short
from .cert_work import CertificateWorkError, caps
from .split_certificate_bounds import (
    DTYPES,
    EMPTY,
    ETA,
    FMAX,
    NONFINITE,
    OVERFLOW,
    PROVED,
    ChainNet,
    LeafBatch,
    U,
    enclose,
    leaf_bounds,
)

__all__ = [
    "CHUNK",
    "DTYPES",
    "ENV_FLOPS",
    "ETA",
    "FORMAT",
    "KEYS",
    "MAX_BYTES",
    "MAX_FLOPS",
    "MAX_INT_DIGITS",
    "MAX_NODES",
    "MAX_TREE_DEPTH",
    "CertificateError",
    "U",
    "check_certificate",
    "check_file",
    "check_work",
    "flops",
    "parse",
]

FORMAT = "torchlean_split_bounds_v1"
KEYS = frozenset({"format", "network", "model_hash", "box", "rows", "tree", "leaves", "digest"})
MAX_TREE_DEPTH = 64
MAX_NODES = 2_000_000
MAX_FLOPS = 10**13
"""The most float64 multiply-adds (`flops`) a certificate may demand of this checker."""
ENV_FLOPS = "TORCHLEAN_MAX_CERT_FLOPS"
CHUNK = 2**20
"""Leaves are bounded in chunks of at most CHUNK // (hidden and output neurons) leaves (at
least 16): per-leaf state is a dozen float64 arrays of the network's widths, and bounds of
a stage are shared between leaves of one chunk with the same box and the same signs below
that stage."""
_HEX = {
    "float32": (re.compile(r"0x[0-9a-fA-F]{1,8}"), np.uint32, np.float32),
    "float64": (re.compile(r"0x[0-9a-fA-F]{1,16}"), np.uint64, np.float64),
}


def parse(text: str) -> Any:
    """A certificate's JSON: the output-bound checker's reader (MAX_BYTES, MAX_INT_DIGITS,
    no NaN / Infinity) without its nesting limit, since split trees nest deeper."""
    return parse_json(text, bounded_depth=False)


@dataclass
class _Net:
    net: ChainNet
    relu_width: dict[int, int]  # relu stage index -> width
    relu_layer: dict[int, int]  # relu stage index -> its position among the relu stages


def _floats(flat: list[Any], dtype: str, what: str) -> np.ndarray:
    """Bit patterns ('0x...' hex strings) of the dtype, decoded to float64; finite only."""
    pat, ut, ft = _HEX[dtype]
    for v in flat:
        if type(v) is not str or not pat.fullmatch(v):
            raise CertificateError(f"{what}: expected a {dtype} hex bit pattern, got {short(v)}")
    vals = np.array([int(v, 16) for v in flat], dtype=ut).view(ft).astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(vals))
    if len(bad):
        raise CertificateError(f"{what}: {flat[bad[0]]} is not a finite {dtype} value")
    return vals


def _network(net: Any, n: int) -> _Net:
    """The chain linear, relu, ..., linear reading an input of width n."""
    if not isinstance(net, dict) or set(net) != {"dtype", "stages"}:
        raise CertificateError("network: expected keys dtype, stages")
    dt = net["dtype"]
    if not isinstance(dt, str) or dt not in DTYPES:
        raise CertificateError(f"network.dtype: expected float32 or float64, got {short(dt)}")
    stages = jlist(net["stages"], None, "network.stages")
    if len(stages) % 2 == 0:
        raise CertificateError("network.stages: expected linear, relu, ..., linear")
    W: list[np.ndarray] = []
    b: list[np.ndarray] = []
    rw: dict[int, int] = {}
    rl: dict[int, int] = {}
    for t, st in enumerate(stages):
        w = f"network stage {t}"
        want = "linear" if t % 2 == 0 else "relu"
        keys = {"op", "weight", "bias"} if want == "linear" else {"op"}
        if not isinstance(st, dict) or st.get("op") != want or set(st) != keys:
            raise CertificateError(
                f"{w}: expected op {want!r} with keys {sorted(keys)} (split certificates "
                "cover chains of linear and relu stages)"
            )
        if want == "relu":
            rw[t], rl[t] = n, len(rl)
            continue
        rows = jlist(st["weight"], None, f"{w}.weight")
        flat = [v for i, r in enumerate(rows) for v in jlist(r, n, f"{w}.weight[{i}]")]
        W.append(_floats(flat, dt, f"{w}.weight").reshape(len(rows), n))
        b.append(_floats(jlist(st["bias"], len(rows), f"{w}.bias"), dt, f"{w}.bias"))
        n = len(rows)
    return _Net(ChainNet(dt, W, b), rw, rl)


def _box(box: Any, n: int) -> tuple[tuple[Fraction, ...], tuple[Fraction, ...]]:
    if not isinstance(box, dict) or set(box) != {"lower", "upper"}:
        raise CertificateError("box: expected keys lower, upper")
    lo = tuple(rat(v, "box.lower") for v in jlist(box["lower"], n, "box.lower"))
    hi = tuple(rat(v, "box.upper") for v in jlist(box["upper"], n, "box.upper"))
    for j, (a, c) in enumerate(zip(lo, hi, strict=True)):
        if a > c:
            raise CertificateError(f"box: lower[{j}] = {a} exceeds upper[{j}] = {c}")
    return lo, hi


def _representable(q: Fraction, dt: str) -> bool:
    if abs(q) > FMAX[dt]:
        return False
    f = float(q)
    return Fraction(f) == q and (dt == "float64" or float(np.float32(f)) == f)


def _rows(rows: Any, m: int, dt: str) -> tuple[np.ndarray, list[Fraction]]:
    """Each row's a (exact floats of the dtype) and d."""
    A, D = [], []
    for i, r in enumerate(jlist(rows, None, "rows")):
        if not isinstance(r, dict) or set(r) != {"a", "d"}:
            raise CertificateError(f"rows[{i}]: expected keys a, d")
        a = [rat(v, f"rows[{i}].a") for v in jlist(r["a"], m, f"rows[{i}].a")]
        for j, q in enumerate(a):
            if not _representable(q, dt):
                raise CertificateError(f"rows[{i}].a[{j}]: {q} is not a {dt} value")
        A.append([float(q) for q in a])
        D.append(rat(r["d"], f"rows[{i}].d"))
    return np.array(A, dtype=np.float64), D


def _alpha(al: Any, nt: _Net, where: str) -> dict[int, np.ndarray]:
    """A leaf's lower slopes: relu stage -> one finite float in [0, 1] per neuron."""
    if not isinstance(al, dict):
        raise CertificateError(f"{where}: expected an object (relu stage -> slopes)")
    out = {}
    for key, vals in al.items():
        t = int(key) if key.isdigit() and len(key) < 6 and str(int(key)) == key else -1
        if t not in nt.relu_width:
            raise CertificateError(f"{where}: {short(key)} is not a relu stage index")
        got = []
        for i, v in enumerate(jlist(vals, nt.relu_width[t], f"{where}[{key}]")):
            try:
                f = float.fromhex(v) if type(v) is str else float("nan")
            except (ValueError, OverflowError):
                f = float("nan")
            if not 0.0 <= f <= 1.0:
                raise CertificateError(
                    f"{where}[{key}][{i}]: expected a finite float in [0, 1] (float.hex), "
                    f"got {short(v)}"
                )
            got.append(f)
        out[nt.relu_layer[t]] = np.array(got)
    return out


def _leaves(leaves: Any, nt: _Net, nrows: int) -> list[tuple[int, dict[int, np.ndarray]]]:
    out = []
    for k, lf in enumerate(jlist(leaves, None, "leaves")):
        w = f"leaves[{k}]"
        if not isinstance(lf, dict) or "row" not in lf or not set(lf) <= {"row", "alpha"}:
            raise CertificateError(f"{w}: expected keys row and optionally alpha")
        r = lf["row"]
        if type(r) is not int or not 0 <= r < nrows:
            raise CertificateError(f"{w}.row: expected a row index 0..{nrows - 1}, got {short(r)}")
        out.append((r, _alpha(lf.get("alpha", {}), nt, f"{w}.alpha")))
    return out


Box = tuple[tuple[Fraction, ...], tuple[Fraction, ...]]


@dataclass
class _Leaf:
    """A leaf as the tree defines it: its box, its sign splits, its node path."""

    box: Box
    signs: tuple[tuple[int, int, int], ...]
    path: tuple[int, ...]


def node_path(path: tuple[int, ...]) -> str:
    """A node's name in messages: tree.children[i].children[j]..."""
    return "tree" + "".join(f".children[{c}]" for c in path)


def _children(node: dict[str, Any], where: str) -> list[Any]:
    return jlist(node["children"], 2, f"{where}.children")


def _walk(tree: Any, box: Box, nt: _Net, nleaves: int) -> list[_Leaf]:
    """Every leaf of the tree, indexed by its number, after validating the tree's shape
    (iterative: the children are pushed high / pos first, so leaves come in DFS order)."""
    found: list[_Leaf | None] = [None] * nleaves
    stack: list[tuple[Any, tuple[int, ...], Box, tuple[tuple[int, int, int], ...]]]
    stack, count = [(tree, (), box, ())], 0
    while stack:
        node, path, bx, signs = stack.pop()
        count += 1
        where = node_path(path)
        if count > MAX_NODES or len(path) > MAX_TREE_DEPTH:
            raise CertificateError(
                f"{where}: the tree exceeds {MAX_NODES} nodes or depth {MAX_TREE_DEPTH}"
            )
        keys = set(node) if isinstance(node, dict) else None
        if keys == {"leaf"}:
            k = node["leaf"]
            if type(k) is not int or not 0 <= k < nleaves or found[k] is not None:
                raise CertificateError(f"{where}.leaf: {short(k)} is out of range or repeated")
            found[k] = _Leaf(bx, signs, path)
        elif keys == {"split", "children"}:
            low, high = _children(node, where)
            j = node["split"]
            stack.append((high, (*path, 1), _half(bx, j, True, where), signs))
            stack.append((low, (*path, 0), _half(bx, j, False, where), signs))
        elif keys == {"relu", "children"}:
            neg, pos = _children(node, where)
            t, i = _neuron(node["relu"], nt, signs, where)
            stack.append((pos, (*path, 1), bx, (*signs, (t, i, 1))))
            stack.append((neg, (*path, 0), bx, (*signs, (t, i, -1))))
        else:
            raise CertificateError(
                f"{where}: expected {{leaf}}, {{split, children}} or {{relu, children}}, "
                f"got keys {sorted(keys) if keys is not None else short(node)}"
            )
    missing = [k for k, f in enumerate(found) if f is None]
    if missing:
        raise CertificateError(f"leaves[{missing[0]}]: does not appear in the tree")
    return [f for f in found if f is not None]


def _half(bx: Box, j: Any, upper: bool, where: str) -> Box:
    """The upper or lower half of bx split at the exact midpoint of coordinate j."""
    lo, hi = bx
    if type(j) is not int or not 0 <= j < len(lo):
        raise CertificateError(f"{where}.split: expected an input coordinate, got {short(j)}")
    mid = (lo[j] + hi[j]) / 2
    if upper:
        return (*lo[:j], mid, *lo[j + 1 :]), hi
    return lo, (*hi[:j], mid, *hi[j + 1 :])


def _neuron(v: Any, nt: _Net, signs: tuple[tuple[int, int, int], ...],
            where: str) -> tuple[int, int]:  # fmt: skip
    ok = isinstance(v, list) and len(v) == 2 and all(type(x) is int for x in v)
    if not ok or v[0] not in nt.relu_width or not 0 <= v[1] < nt.relu_width[v[0]]:
        raise CertificateError(
            f"{where}.relu: expected [relu stage index, neuron] (relu stages "
            f"{sorted(nt.relu_width)}), got {short(v)}"
        )
    if any(s[0] == v[0] and s[1] == v[1] for s in signs):
        raise CertificateError(f"{where}.relu: neuron {v} is split twice on one path")
    return v[0], v[1]


def _enclosures(bx: Box, cache: dict[int, tuple[np.ndarray, np.ndarray]]) -> tuple[Any, Any]:
    """float64 enclosures of a box (lower ends down, upper ends up), once per box object."""
    got = cache.get(id(bx))
    if got is None:
        try:
            got = (np.array([enclose(q, False) for q in bx[0]]),
                   np.array([enclose(q, True) for q in bx[1]]))  # fmt: skip
        except OverflowError:
            raise CertificateError("box: an end lies outside the float64 range") from None
        cache[id(bx)] = got
    return got


def _batch(nt: _Net, found: list[_Leaf], leaves: list[tuple[int, dict[int, np.ndarray]]],
           A: np.ndarray, part: range, cache: dict[int, Any]) -> LeafBatch:  # fmt: skip
    """The arrays of leaves `part` for `leaf_bounds`."""
    enc = [_enclosures(found[k].box, cache) for k in part]
    layers = sorted(nt.relu_width)
    signs = [np.zeros((len(part), nt.relu_width[t]), dtype=np.int8) for t in layers]
    alpha = [np.full((len(part), nt.relu_width[t]), np.nan) for t in layers]
    for r, k in enumerate(part):
        for t, i, s in found[k].signs:
            signs[nt.relu_layer[t]][r, i] = s
        for j, a in leaves[k][1].items():
            alpha[j][r] = a
    rows = np.array([leaves[k][0] for k in part], dtype=np.int64)
    return LeafBatch(np.array([e[0] for e in enc]), np.array([e[1] for e in enc]), signs,
                     A[rows], alpha)  # fmt: skip


_OUTCOME = {
    EMPTY: "its region was found empty at linear stage {s} (cannot fail)",
    OVERFLOW: "the runtime could overflow at linear stage {s} (network stage {t})",
    NONFINITE: "a bound of linear stage {s} (network stage {t}) is not finite",
}


def _verdict(k: int, leaf: _Leaf, row: int, d: Fraction, lower: float, outcome: int,
             stage: int) -> None:  # fmt: skip
    """Raise for a leaf that is not proved."""
    where = f"leaf {k} at {node_path(leaf.path)}"
    if outcome == EMPTY:
        return
    if outcome != PROVED:
        reason = _OUTCOME[outcome].format(s=stage, t=2 * stage)
        raise CertificateError(f"{where}: not proved: {reason}")
    if not (np.isfinite(lower) and Fraction(float(lower)) > d):
        raise CertificateError(
            f"{where}: not proved: the lower bound {float(lower)!r} of rows[{row}]'s a . Y is "
            f"not > d = {d}"
        )


def _bounds(nt: _Net, found: list[_Leaf], leaves: list[Any], A: np.ndarray,
            D: list[Fraction]) -> int:  # fmt: skip
    """Bound every leaf in DFS order, chunk by chunk; the number found empty."""
    order = sorted(range(len(found)), key=lambda k: found[k].path)
    cache: dict[int, Any] = {}
    empty = 0
    step = max(16, CHUNK // sum(len(b) for b in nt.net.b))
    for c in range(0, len(order), step):
        part = order[c : c + step]
        lb = _batch(nt, found, leaves, A, part, cache)  # type: ignore[arg-type]
        lower, outcome, stage = leaf_bounds(nt.net, lb)
        for r, k in enumerate(part):
            row = leaves[k][0]
            _verdict(k, found[k], row, D[row], lower[r], int(outcome[r]), int(stage[r]))
        empty += int(np.sum(outcome == EMPTY))
    return empty


def flops(cert: Any) -> tuple[int, int]:
    """(widest value, float64 multiply-adds) the check of `cert` demands, from sizes only
    (list lengths, nothing decoded): per leaf, 2 x width rows of every linear stage
    back-substituted through the stages up to it, plus each objective row through all of
    them (leaves sharing a box and the signs below a stage share that stage's work, so
    this is an upper estimate). (0, 0) where the sizes are malformed: the check refuses."""
    if not isinstance(cert, dict) or not isinstance(cert.get("box"), dict):
        return 0, 0
    lower, net = cert["box"].get("lower"), cert.get("network")
    stages = net.get("stages") if isinstance(net, dict) else None
    if not isinstance(lower, list) or not isinstance(stages, list):
        return 0, 0
    widths, prefix, per_leaf = [len(lower)], 0, 0
    for st in stages:
        rows = st.get("weight") if isinstance(st, dict) and st.get("op") == "linear" else None
        if isinstance(rows, list):
            prefix += len(rows) * widths[-1]
            per_leaf += 2 * len(rows) * prefix
            widths.append(len(rows))
    count = [len(v) if isinstance(v, list) else 1 for v in (cert.get("rows"), cert.get("leaves"))]
    return max(widths), count[1] * (per_leaf + count[0] * prefix)


def _cap(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or int(raw) < 1:
        raise CertificateWorkError(f"{name}={raw!r} must be an integer >= 1")
    return int(raw)


def check_work(cert: Any, max_width: int | None = None) -> tuple[int, int]:
    """`flops(cert)`, refused (`CertificateWorkError`, before anything is decoded) when the
    widest value exceeds the width cap (`max_width`, else `proofs.cert_work.caps()`) or the
    multiply-adds exceed MAX_FLOPS (or TORCHLEAN_MAX_CERT_FLOPS)."""
    width, work = flops(cert)
    cap_w = caps()[0] if max_width is None else max_width
    if width > cap_w:
        raise CertificateWorkError(
            f"the certificate declares a value of {width} entries (at most {cap_w}; raise "
            "with --max-width or TORCHLEAN_MAX_CERT_WIDTH)"
        )
    cap = _cap(ENV_FLOPS, MAX_FLOPS)
    if work > cap:
        raise CertificateWorkError(
            f"checking the certificate would take about {work:.3g} float64 multiply-adds "
            f"(at most {cap:.3g}; raise with {ENV_FLOPS})"
        )
    return width, work


def check_certificate(cert: Any) -> str:
    """Re-validate a split certificate (a parsed JSON object); a one-line summary if it
    holds. Raises `CertificateError` for one that is malformed or does not hold."""
    return rejecting(_check, cert)


def _check(cert: Any) -> str:
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise CertificateError(f"not a {FORMAT} certificate")
    if set(cert) != KEYS:
        extra, missing = sorted(set(cert) - KEYS), sorted(KEYS - set(cert))
        raise CertificateError(f"certificate: unknown keys {extra}, missing keys {missing}")
    if cert["digest"] != canonical_sha({k: v for k, v in cert.items() if k != "digest"}):
        raise CertificateError("digest: the certificate was modified after it was written")
    if cert["model_hash"] != canonical_sha(cert["network"]):
        raise CertificateError("model_hash: does not match the embedded network")
    lower = cert["box"].get("lower") if isinstance(cert["box"], dict) else None
    n = len(jlist(lower, None, "box.lower"))
    nt = _network(cert["network"], n)
    box = _box(cert["box"], n)
    A, D = _rows(cert["rows"], nt.net.width(len(nt.net.W) - 1), nt.net.dtype)
    leaves = _leaves(cert["leaves"], nt, len(D))
    found = _walk(cert["tree"], box, nt, len(leaves))
    empty = _bounds(nt, found, leaves, A, D)
    return (
        f"certificate holds: split bounds, 1 conjunction of {len(D)} row(s) empty on {n} "
        f"inputs, dtype {nt.net.dtype}, levels real and runtime, {len(leaves)} leaves, "
        f"model {cert['model_hash'][:12]}; {empty} leaves infeasible"
    )


def check_file(path: str) -> str:
    """`check_certificate` of a file: a regular file of at most MAX_BYTES of UTF-8."""
    return check_certificate(read_certificate(path, parse))
