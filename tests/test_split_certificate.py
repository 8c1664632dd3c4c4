"""The independent checker of split-bound certificates (`torchlean_split_bounds_v1`):
hand-worked golden certificates, certificates from a tiny generator written here (split the
box until an exact interval bound proves a row on each leaf), forged ones, the command
line, and soundness: whenever the checker accepts, exact evaluation of the real network and
float evaluation of the runtime at sampled points never satisfy the conjunction."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from proofs import split_certificate_bounds as scb
from proofs import split_certificate_check as scc
from proofs.bounds_certificate_ia import CertificateError
from proofs.cert_work import CertificateWorkError
from proofs.cli import main as proofs_main

F = Fraction


def _sha(o: Any) -> str:
    return hashlib.sha256(json.dumps(o, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _bits(a: Any, dt: str) -> Any:
    ut, d = (np.uint32, 8) if dt == "float32" else (np.uint64, 16)
    arr = np.asarray(a, dtype=dt).view(ut)
    return np.vectorize(lambda v: f"0x{int(v):0{d}x}", otypes=[object])(arr).tolist()


def _pq(q: Any) -> str:
    q = F(q)
    return f"{q.numerator}/{q.denominator}"


def network(Ws: list[Any], bs: list[Any], dt: str) -> dict[str, Any]:
    st: list[dict[str, Any]] = []
    for k, (w, b) in enumerate(zip(Ws, bs, strict=True)):
        if k:
            st.append({"op": "relu"})
        st.append({"op": "linear", "weight": _bits(w, dt), "bias": _bits(b, dt)})
    return {"dtype": dt, "stages": st}


def seal(c: dict[str, Any]) -> dict[str, Any]:
    """Recompute model hash and digest (so a forgery is judged on its content)."""
    c = {k: v for k, v in c.items() if k != "digest"}
    c["model_hash"] = _sha(c["network"])
    c["digest"] = _sha(c)
    return c


def cert(net: dict[str, Any], lo: list[Any], hi: list[Any], rows: list[tuple[list[Any], Any]],
         tree: Any, leaves: list[Any]) -> dict[str, Any]:  # fmt: skip
    return seal({
        "format": scc.FORMAT, "network": net,
        "box": {"lower": [_pq(v) for v in lo], "upper": [_pq(v) for v in hi]},
        "rows": [{"a": [_pq(v) for v in a], "d": _pq(d)} for a, d in rows],
        "tree": tree, "leaves": leaves,
    })  # fmt: skip


def holds(c: dict[str, Any]) -> bool:
    try:
        scc.check_certificate(c)
    except CertificateError:
        return False
    return True


def refused(c: dict[str, Any], text: str) -> None:
    with pytest.raises(CertificateError, match=text):
        scc.check_certificate(c)


LEAF = {"leaf": 0}


# ------------------------------------------------------------------ hand-worked golden cases


def _gamma(dt: str, n: int) -> Fraction:
    u = F(1, 2**24) if dt == "float32" else F(1, 2**53)
    return n * u / (1 - n * u)


def _eta(dt: str) -> Fraction:
    return F(1, 2**127) if dt == "float32" else F(1, 2**1023)


@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_golden_2_2_1_bound_is_the_contract_formula(dt: str) -> None:
    """z1 = x1 + x2, z2 = x1 - x2, Y = relu(z1) + relu(z2) on [1, 2] x [0, 1]: Y = 2 x1 >= 2.
    The rigorous lower bound is 2 - 2 E1 - E2 with E from the contract (z2's interval
    [-E1, 2 + E1] is unstable, its lower slope 1 since u >= -l); computed here in exact
    Fractions, the checker must accept d just below it and refuse d just above it."""
    g, eta = _gamma(dt, 3), _eta(dt)
    E1 = g * 3 + 2 * eta * (1 + g)  # sum_j |W_ij| m_j = 1*2 + 1*1, no bias
    E2 = g * ((3 + E1) + (2 + E1)) + 2 * eta * (1 + g)
    bound = 2 - 2 * E1 - E2
    net = network([[[1, 1], [1, -1]], [[1, 1]]], [[0, 0], [0]], dt)

    def at(d: Fraction) -> dict[str, Any]:
        return cert(net, [1, 0], [2, 1], [([1], d)], LEAF, [{"row": 0}])

    assert holds(at(bound - F(1, 10**12)))
    refused(at(bound + F(1, 10**12)), r"leaf 0 at tree: not proved: the lower bound")
    assert not holds(at(F(2)))  # Y = 2 at x1 = 1: the conjunction Y <= 2 has a solution


def _relu_net(dt: str = "float64") -> dict[str, Any]:
    return network([[[1]], [[1]]], [[0], [0]], dt)  # Y = relu(x)


def test_golden_relu_alpha_and_split() -> None:
    """Y = relu(x) on [-1, 1], claim Y <= -1/2 has no solution. The adaptive lower slope
    (1, since u >= -l) gives Y >= x >= -1: not proved; alpha 0 gives Y >= 0; alpha 1/2
    gives Y >= -1/2 = d: not > d. Split at the neuron: on z <= 0 the neuron is inactive,
    Y = 0 > -1/2; on z >= 0 it is active, Y = z, and the back-substitution reaches the
    whole box (the split constrains only the intervals): Y >= -1, not proved there."""
    net, rows = _relu_net(), [([1], F(-1, 2))]
    refused(cert(net, [-1], [1], rows, LEAF, [{"row": 0}]), r"lower bound -1\.0000")
    zero = {"1": [(0.0).hex()]}
    assert holds(cert(net, [-1], [1], rows, LEAF, [{"row": 0, "alpha": zero}]))
    half = {"1": [(0.5).hex()]}
    refused(cert(net, [-1], [1], rows, LEAF, [{"row": 0, "alpha": half}]), "not proved")
    split = {"relu": [1, 0], "children": [{"leaf": 0}, {"leaf": 1}]}
    c = cert(net, [-1], [1], rows, split, [{"row": 0}, {"row": 0}])
    refused(c, r"leaf 1 at tree\.children\[1\]: not proved: the lower bound -1\.0000")
    # the active branch proved by another row: -Y <= -2 (Y = x <= 1 there)
    c = cert(net, [-1], [1], [*rows, ([-1], F(-2))], split, [{"row": 0}, {"row": 1}])
    assert "2 leaves, model " in scc.check_certificate(c)


def test_golden_upper_relaxation() -> None:
    """-Y = -relu(x) on [-1, 1] against d = -3/2: the upper line relu(z) <= z/2 + 1/2 gives
    -Y >= -1 > -3/2; against d = -1 (reached at x = 1) refused."""
    net = _relu_net()
    assert holds(cert(net, [-1], [1], [([-1], F(-3, 2))], LEAF, [{"row": 0}]))
    assert not holds(cert(net, [-1], [1], [([-1], F(-1))], LEAF, [{"row": 0}]))


def test_golden_empty_region() -> None:
    """On [1, 2] the neuron z = x is positive: the branch z <= 0 is empty, so its leaf
    holds whatever its row claims; the other branch must still be proved."""
    net = _relu_net()
    rows = [([1], F(10**6)), ([-1], F(-5, 2))]  # row 0 unprovable; row 1: -Y >= -2 > -5/2
    split = {"relu": [1, 0], "children": [{"leaf": 0}, {"leaf": 1}]}
    c = cert(net, [1], [2], rows, split, [{"row": 0}, {"row": 1}])
    assert "; 1 leaves infeasible" in scc.check_certificate(c)
    refused(
        cert(net, [1], [2], rows, split, [{"row": 0}, {"row": 0}]), r"leaf 1 at tree\.children\[1\]"
    )


# ------------------------------------------------- a two-row certificate and its forgeries


def two_rows(dt: str = "float32") -> dict[str, Any]:
    """Y = relu(x) - relu(-x) = x on [-1, 1]; rows Y <= -1/10 and -Y <= -1/10 (no Y does
    both). Split at x = 0: the low half violates row 1 (Y <= 0), the high half row 0."""
    net = network([[[1], [-1]], [[1, -1]]], [[0, 0], [0]], dt)
    tree = {"split": 0, "children": [{"leaf": 0}, {"leaf": 1}]}
    rows = [([1], F(-1, 10)), ([-1], F(-1, 10))]
    return cert(net, [-1], [1], rows, tree, [{"row": 1}, {"row": 0}])


def _edit(c: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    c = json.loads(json.dumps(c))
    node = c
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value
    return seal(c)


def test_two_rows_holds() -> None:
    c = two_rows()
    assert scc.check_certificate(c).startswith(
        "certificate holds: split bounds, 1 conjunction of 2 row(s) empty on 1 inputs, "
        "dtype float32, levels real and runtime, 2 leaves"
    )


FORGERIES = [
    # (edit path, new value, message)
    (["tree", "children"], [{"leaf": 1}, {"leaf": 0}], r"leaf 1 at tree\.children\[0\]: not"),
    (["leaves", 0, "row"], 0, r"leaf 0 at tree\.children\[0\]: not proved"),
    (["leaves", 0, "row"], 2, r"leaves\[0\]\.row: expected a row index 0\.\.1"),
    (["leaves"], [{"row": 1}], r"tree\.children\[1\]\.leaf: 1 is out of range or repeated"),
    (["tree", "children", 1], {"leaf": 0}, r"tree\.children\[1\]\.leaf: 0 is out of range or"),
    (["leaves"], [{"row": 1}, {"row": 0}, {"row": 0}], r"leaves\[2\]: does not appear"),
    (["leaves", 0, "alpha"], {"1": ["0x1.8000000000000p+0", "0x0.0p+0"]}, r"\[0, 1\]"),
    (["leaves", 0, "alpha"], {"1": ["nan", "0x0.0p+0"]}, r"alpha\[1\]\[0\]: expected a finite"),
    (["leaves", 0, "alpha"], {"1": ["0x0.0p+0"]}, r"expected 2 entries"),
    (["leaves", 0, "alpha"], {"0": ["0x0.0p+0"]}, r"'0' is not a relu stage index"),
    (["box", "lower", 0], "-2/1", r"leaf 1 at tree\.children\[1\]: not proved"),
    (["box", "upper", 0], "-2/1", r"box: lower\[0\] = -1 exceeds upper\[0\] = -2"),
    (["network", "stages", 2, "weight", 0, 1], _bits(1.0, "float32"), "leaf 0 .*not proved"),
    (["network", "stages", 2, "weight", 0, 1], "0x7fc00000", "not a finite float32 value"),
    (["network", "stages", 2, "weight", 0, 1], "0x1_0", "expected a float32 hex bit pattern"),
    (["network", "stages", 1], {"op": "tanh"}, r"network stage 1: expected op 'relu'"),
    (["network", "dtype"], "bfloat16", "expected float32 or float64"),
    (["rows", 0, "a", 0], "1/3", r"rows\[0\]\.a\[0\]: 1/3 is not a float32 value"),
    (["rows", 0, "a"], ["1/1", "0/1"], r"rows\[0\]\.a: expected 1 entries"),
    (["tree", "split"], 1, r"tree\.split: expected an input coordinate, got 1"),
    (["tree"], {"relu": [0, 0], "children": [LEAF, {"leaf": 1}]}, r"tree\.relu: expected \[relu"),
    (["tree"], {"relu": [1, 2], "children": [LEAF, {"leaf": 1}]}, r"tree\.relu: expected \[relu"),
    (["tree", "kind"], "x", r"tree: expected \{leaf\}, \{split, children\} or"),
    (["leaves", 0, "note"], "x", r"leaves\[0\]: expected keys row and optionally alpha"),
    (["extra"], 1, r"certificate: unknown keys \['extra'\]"),
]


@pytest.mark.parametrize(("path", "value", "message"), FORGERIES)
def test_forgery_refused(path: list[Any], value: Any, message: str) -> None:
    refused(_edit(two_rows(), path, value), message)


def test_digest_and_model_hash() -> None:
    c = two_rows()
    c["rows"][0]["d"] = "1/1"
    refused(c, "digest: the certificate was modified")
    c = two_rows()
    c["network"]["stages"][0]["bias"][0] = _bits(0.5, "float32")
    c["digest"] = _sha({k: v for k, v in c.items() if k != "digest"})
    refused(c, "model_hash: does not match the embedded network")
    refused({"format": "torchlean_output_bounds_v1"}, "not a torchlean_split_bounds_v1")


def test_duplicate_relu_split_on_a_path() -> None:
    net, rows = _relu_net(), [([1], F(-1, 2))]
    inner = {"relu": [1, 0], "children": [{"leaf": 0}, {"leaf": 1}]}
    tree = {"relu": [1, 0], "children": [inner, {"leaf": 2}]}
    refused(cert(net, [-1], [1], rows, tree, [{"row": 0}] * 3),
            r"tree\.children\[0\]\.relu: neuron \[1, 0\] is split twice")  # fmt: skip


def _deep(depth: int) -> Any:
    tree: Any = {"leaf": 0}
    for k in range(depth):
        tree = {"split": 0, "children": [tree, {"leaf": k + 1}]}
    return tree


def test_depth_and_node_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    net, rows = _relu_net(), [([1], F(-10))]
    ok = cert(net, [-1], [1], rows, _deep(scc.MAX_TREE_DEPTH), [{"row": 0}] * 65)
    assert holds(ok)
    deep = cert(net, [-1], [1], rows, _deep(scc.MAX_TREE_DEPTH + 1), [{"row": 0}] * 66)
    refused(deep, "exceeds 2000000 nodes or depth 64")
    monkeypatch.setattr(scc, "MAX_NODES", 10)
    refused(cert(net, [-1], [1], rows, _deep(5), [{"row": 0}] * 6), "exceeds 10 nodes")


def test_parse_refuses_nan_deep_nesting_and_long_integers() -> None:
    with pytest.raises(CertificateError, match="JSON constant NaN"):
        scc.parse('{"a": NaN}')
    with pytest.raises(CertificateError, match="nested too deeply"):
        scc.parse("[" * 100_000 + "]" * 100_000)
    with pytest.raises(CertificateError, match="digits"):
        scc.parse('{"leaf": ' + "9" * 40 + "}")
    refused(["not", "an", "object"], "not a torchlean_split_bounds_v1")  # type: ignore[arg-type]


def test_malformed_values_refused_in_one_line() -> None:
    c = two_rows()
    c["tree"] = {"split": 0, "children": "xy"}
    refused(seal(c), r"tree\.children: expected 2 entries")
    c["tree"] = {"split": True, "children": [LEAF, {"leaf": 1}]}
    refused(seal(c), r"tree\.split: expected an input coordinate, got True")


# ---------------------------------------------------------------------- the command line


def test_cli(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "c.json"
    p.write_text(json.dumps(two_rows()))
    assert proofs_main(["check-cert", str(p)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("certificate holds: split bounds") and out.count("\n") == 1
    p.write_text(json.dumps(_edit(two_rows(), ["leaves", 0, "row"], 0)))
    assert proofs_main(["check-cert", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "leaf 0 at tree.children[0]: not proved" in err
    p.write_text(json.dumps(two_rows()).replace('"digest"', '"x": NaN, "digest"'))
    assert proofs_main(["check-cert", str(p)]) == 2
    assert "JSON constant NaN" in capsys.readouterr().err


def test_work_cap(monkeypatch: pytest.MonkeyPatch, tmp_path: Any,
                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    c = two_rows()
    # linear 2x1 (2 rows, prefix 2), relu, linear 1x2 (1 row, prefix 4); 2 rows; 2 leaves
    assert scc.check_work(c) == (2, 2 * (2 * 2 * 2 + 2 * 1 * 4 + 2 * 4))
    monkeypatch.setenv("TORCHLEAN_MAX_CERT_FLOPS", "10")
    with pytest.raises(CertificateWorkError, match="float64 multiply-adds"):
        scc.check_work(c)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(c))
    assert proofs_main(["check-cert", str(p)]) == 2
    assert "TORCHLEAN_MAX_CERT_FLOPS" in capsys.readouterr().err


# --------------------------------------- a tiny generator and the soundness property


def _exact_layers(Ws: list[Any], bs: list[Any], lo: list[F], hi: list[F]) -> list[Any]:
    """Exact interval bounds of every linear stage's output (real network) on a box."""
    out, cur = [], list(zip(lo, hi, strict=True))
    for k, (W, b) in enumerate(zip(Ws, bs, strict=True)):
        if k:
            cur = [(max(a, F(0)), max(c, F(0))) for a, c in out[-1]]
        nxt = []
        for row, bi in zip(W, b, strict=True):
            s_lo = sum((w * (a if w >= 0 else c) for w, (a, c) in zip(row, cur, strict=True)),
                       F(bi))  # fmt: skip
            s_hi = sum((w * (c if w >= 0 else a) for w, (a, c) in zip(row, cur, strict=True)),
                       F(bi))  # fmt: skip
            nxt.append((s_lo, s_hi))
        out.append(nxt)
    return out


def _row_lower(a: list[F], ys: list[Any]) -> F:
    return sum((ai * (lo if ai >= 0 else hi) for ai, (lo, hi) in zip(a, ys, strict=True)), F(0))


def generate(Ws: list[Any], bs: list[Any], lo: list[F], hi: list[F], rows: list[Any],
             depth: int, rng: Any = None) -> tuple[Any, list[Any], bool]:  # fmt: skip
    """Split the widest coordinate until, by exact interval arithmetic, some row is
    violated by a margin; the leaf counts as proved when every hidden neuron is also stable
    by a margin (then the checker's CROWN bound, exact on a stable region up to tiny
    rounding terms, proves it too; with unstable neurons it may not); at the depth
    limit a leaf names the row of best interval bound, unproved (below up to two random
    ReLU splits when `rng` is given). Returns (tree, leaves, every leaf proved)."""
    leaves: list[Any] = []
    margin = F(1, 1000)

    def rec(lo: list[F], hi: list[F], left: int) -> Any:
        layers = _exact_layers(Ws, bs, lo, hi)
        stable = all(a > margin or c < -margin for lay in layers[:-1] for a, c in lay)
        for i, (a, d) in enumerate(rows):
            if _row_lower(a, layers[-1]) > d + margin:  # with unstable neurons: not sure
                leaves.append({"row": i, "proved": stable})
                return {"leaf": len(leaves) - 1}
        if left == 0:  # unproved: the row with the best interval bound
            best = max(
                range(len(rows)), key=lambda i: _row_lower(rows[i][0], layers[-1]) - rows[i][1]
            )
            return relu_splits(best, 0 if rng is None else int(rng.integers(0, 3)), ())
        j = max(range(len(lo)), key=lambda i: hi[i] - lo[i])
        mid = (lo[j] + hi[j]) / 2
        low = rec(lo, [*hi[:j], mid, *hi[j + 1 :]], left - 1)
        high = rec([*lo[:j], mid, *lo[j + 1 :]], hi, left - 1)
        return {"split": j, "children": [low, high]}

    def relu_splits(row: int, count: int, used: tuple[Any, ...]) -> Any:
        """A leaf, or (count > 0) a split of a random unused hidden neuron above two."""
        hidden = [(2 * k + 1, i) for k in range(len(Ws) - 1) for i in range(len(Ws[k]))]
        free = [h for h in hidden if h not in used]
        if count == 0 or not free:
            leaves.append({"row": row, "proved": False})
            return {"leaf": len(leaves) - 1}
        t, i = free[int(rng.integers(0, len(free)))]
        kids = [relu_splits(row, count - 1, (*used, (t, i))) for _ in range(2)]
        return {"relu": [t, i], "children": kids}

    tree = rec(lo, hi, depth)
    ok = all(lf.pop("proved") for lf in leaves)
    return tree, leaves, ok


def _random_case(seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    dt = ["float32", "float64"][seed % 2]
    sizes = [int(rng.integers(1, 3))] + [int(rng.integers(2, 5)) for _ in range(rng.integers(1, 3))]
    sizes.append(int(rng.integers(1, 3)))
    Ws = [rng.standard_normal((sizes[i + 1], sizes[i])).astype(dt) for i in range(len(sizes) - 1)]
    bs = [(rng.standard_normal(s) * 0.5).astype(dt) for s in sizes[1:]]
    lo = [F(int(rng.integers(-8, 8)), 7) for _ in range(sizes[0])]
    hi = [v + F(int(rng.integers(1, 8)), 7) for v in lo]
    Wq = [[[F(float(v)) for v in r] for r in W] for W in Ws]
    bq = [[F(float(v)) for v in b] for b in bs]
    return {"dt": dt, "Ws": Ws, "bs": bs, "Wq": Wq, "bq": bq, "lo": lo, "hi": hi, "rng": rng}


def _real(case: dict[str, Any], x: list[F]) -> list[F]:
    h = x
    for k, (W, b) in enumerate(zip(case["Wq"], case["bq"], strict=True)):
        if k:
            h = [max(v, F(0)) for v in h]
        h = [
            sum((w * v for w, v in zip(r, h, strict=True)), bi) for r, bi in zip(W, b, strict=True)
        ]
    return h


def _runtime(case: dict[str, Any], x: np.ndarray) -> list[F]:
    h = x.astype(case["dt"])
    for k, (W, b) in enumerate(zip(case["Ws"], case["bs"], strict=True)):
        if k:
            h = np.maximum(h, 0)
        h = W @ h + b
    return [F(float(v)) for v in h]


def _points(case: dict[str, Any], count: int) -> list[list[F]]:
    lo, hi, rng = case["lo"], case["hi"], case["rng"]
    n = len(lo)
    pts = [[hi[j] if (v >> j) & 1 else lo[j] for j in range(n)] for v in range(2**n)]
    pts += [[lo[j] + (hi[j] - lo[j]) * F(int(rng.integers(0, 65)), 64) for j in range(n)]
            for _ in range(count)]  # fmt: skip
    return pts


def _satisfies(rows: list[Any], y: list[F]) -> bool:
    return all(sum((ai * yi for ai, yi in zip(a, y, strict=True)), F(0)) <= d for a, d in rows)


@given(seed=hs.integers(0, 10**6), shift=hs.sampled_from([-3, -1, 0, 1]))
def test_generated_certificates_are_sound(seed: int, shift: int) -> None:
    """Rows a . Y <= d with d near the sampled minimum of a . Y (shift < 0: below it, where
    the conjunction may be empty; shift >= 0: at or above, where a sampled point satisfies
    it): whenever the checker accepts, no sampled point (box vertices, grid points; real
    network exactly, runtime in the dtype) satisfies the conjunction; and when the
    generator's exact interval bounds proved every leaf with a margin, the checker accepts."""
    case = _random_case(seed)
    pts = _points(case, 24)
    m = len(case["bq"][-1])
    rng = case["rng"]
    rows = []
    for _ in range(int(rng.integers(1, 3))):
        a = [F(int(v)) for v in rng.integers(-2, 3, m)]
        vals = [sum((ai * yi for ai, yi in zip(a, _real(case, x), strict=True)), F(0)) for x in pts]
        rows.append((a, min(vals) + F(shift, 10)))
    tree, leaves, proved = generate(case["Wq"], case["bq"], case["lo"], case["hi"], rows, 6, rng)
    c = cert(network(case["Ws"], case["bs"], case["dt"]), case["lo"], case["hi"], rows, tree,
             leaves)  # fmt: skip
    accepted = holds(c)
    if proved:
        assert accepted, scc.check_certificate(c)
    if not accepted:
        return
    for x in pts + _points(case, 24):  # the points that set d, and fresh ones
        assert not _satisfies(rows, _real(case, x)), f"accepted, but x = {x} satisfies the rows"
        xf = np.array([float(v) for v in x]).astype(case["dt"])
        inside = all(
            lo <= F(float(v)) <= hi for v, lo, hi in zip(xf, case["lo"], case["hi"], strict=True)
        )
        if inside:
            assert not _satisfies(rows, _runtime(case, xf)), f"runtime at {x} satisfies the rows"


# ------------------------------- the engine against the contract's algorithm in Fractions


def _E(dt: str, W: list[Any], b: list[F], cur: list[Any]) -> list[F]:
    n, g = len(cur), _gamma(dt, len(cur) + 1)
    m = [max(abs(lo), abs(hi)) for lo, hi in cur]
    return [g * (sum((abs(w) * mj for w, mj in zip(r, m, strict=True)), F(0)) + abs(bi))
            + n * _eta(dt) * (1 + g) for r, bi in zip(W, b, strict=True)]  # fmt: skip


def _relaxation(lu: tuple[F, F], al: F | None) -> tuple[F, F, F]:
    """(lower slope, upper slope, upper intercept) of ReLU on [l, u] (adaptive al if None)."""
    lo, hi = lu
    if lo >= 0:
        return F(1), F(1), F(0)
    if hi <= 0:
        return F(0), F(0), F(0)
    s = hi / (hi - lo)
    return (F(int(hi >= -lo)) if al is None else al), s, -s * lo


def _exact_backsub(case: dict[str, Any], Es: list[Any], inter: list[Any], box: list[Any],
                   k: int, lam: list[F], alpha: list[Any] | None) -> F:  # fmt: skip
    W, b, const = case["Wq"], case["bq"], F(0)
    for j in range(k, -1, -1):
        const += sum((c * bi - abs(c) * e for c, bi, e in zip(lam, b[j], Es[j], strict=True)), F(0))
        G = [
            sum((c * W[j][i][col] for i, c in enumerate(lam)), F(0)) for col in range(len(W[j][0]))
        ]
        if j == 0:
            return const + sum(
                (min(g * lo, g * hi) for g, (lo, hi) in zip(G, box, strict=True)), F(0)
            )
        lam = []
        for i, g in enumerate(G):
            al = None if alpha is None or alpha[j - 1] is None else alpha[j - 1][i]
            lower, s, beta = _relaxation(inter[j - 1][i], al)
            lam.append(g * (lower if g >= 0 else s))
            const += g * beta if g < 0 else 0
    raise AssertionError


def exact_leaf(case: dict[str, Any], box: list[Any], signs: list[dict[int, int]], a: list[F],
               alpha: list[Any] | None) -> F | None:  # fmt: skip
    """The contract's leaf bound in exact arithmetic (None: the region is empty)."""
    W, b, dt = case["Wq"], case["bq"], case["dt"]
    Es: list[Any] = []
    inter: list[Any] = []
    cur = list(box)
    for k in range(len(W)):
        Es.append(_E(dt, W[k], b[k], cur))
        if k == len(W) - 1:
            break
        ibp = _exact_layers([W[k]], [b[k]], [c[0] for c in cur], [c[1] for c in cur])[0]
        lay = []
        for i, ((lo, hi), e) in enumerate(zip(ibp, Es[k], strict=True)):
            unit = [F(int(r == i)) for r in range(len(W[k]))]
            lo = max(lo - e, _exact_backsub(case, Es, inter, box, k, unit, None))
            hi = min(hi + e, -_exact_backsub(case, Es, inter, box, k, [-v for v in unit], None))
            s = signs[k].get(i, 0)
            lo, hi = (max(lo, F(0)) if s > 0 else lo), (min(hi, F(0)) if s < 0 else hi)
            if lo > hi:
                return None
            lay.append((lo, hi))
        inter.append(lay)
        cur = [(max(lo, F(0)), max(hi, F(0))) for lo, hi in lay]
    return _exact_backsub(case, Es, inter, box, len(W) - 1, a, alpha)


@given(seed=hs.integers(0, 10**6))
def test_engine_equals_the_contract_algorithm_in_fractions(seed: int) -> None:
    """Random small networks, boxes, sign splits and slopes: the float64 engine's bound
    is the exact algorithm's to within 1e-9 (1 + |bound|) (it may only differ by its own
    rounding terms and its float upper slopes), and it finds the same regions empty."""
    case = _random_case(seed)
    rng = case["rng"]
    widths = [len(b) for b in case["bq"]]
    net = scb.ChainNet(case["dt"], [np.array(W, dtype=np.float64) for W in case["Ws"]],
                       [np.array(b, dtype=np.float64) for b in case["bs"]])  # fmt: skip
    box = list(zip(case["lo"], case["hi"], strict=True))
    signs = [{int(i): int(rng.choice([-1, 1])) for i in rng.integers(0, w, rng.integers(0, 2))}
             for w in widths[:-1]]  # fmt: skip
    alpha = [None if rng.random() < 0.5 else [F(float(v)) for v in rng.random(w).round(3)]
             for w in widths[:-1]]  # fmt: skip
    a = [F(int(v)) for v in rng.integers(-2, 3, widths[-1])]
    want = exact_leaf(case, box, signs, a, alpha)
    sg = [np.array([[s.get(i, 0) for i in range(w)]], dtype=np.int8)
          for s, w in zip(signs, widths, strict=False)]  # fmt: skip
    al = [np.full((1, w), np.nan) if v is None else np.array([[float(x) for x in v]])
          for v, w in zip(alpha, widths, strict=False)]  # fmt: skip
    lb = scb.LeafBatch(np.array([[scb.enclose(lo, False) for lo, _ in box]]),
                       np.array([[scb.enclose(hi, True) for _, hi in box]]), sg,
                       np.array([[float(v) for v in a]]), al)  # fmt: skip
    lower, outcome, _ = scb.leaf_bounds(net, lb)
    if want is None:
        assert outcome[0] == scb.EMPTY
        return
    assert outcome[0] == scb.PROVED
    assert abs(F(float(lower[0])) - want) <= F(1, 10**9) * (1 + abs(want)), (float(want), lower)


def test_a_single_linear_stage() -> None:
    """Y = x1 - 2 x2 on [0, 1]^2 (float64, no ReLU): min Y = -2, so Y <= -2.5 is empty and
    Y <= -2 is not; a ReLU split or slope names a stage that does not exist."""
    net = network([[[1, -2]]], [[0]], "float64")
    assert holds(cert(net, [0, 0], [1, 1], [([1], F(-5, 2))], LEAF, [{"row": 0}]))
    refused(cert(net, [0, 0], [1, 1], [([1], F(-2))], LEAF, [{"row": 0}]), "not proved")
    split = {"relu": [1, 0], "children": [LEAF, {"leaf": 1}]}
    refused(cert(net, [0, 0], [1, 1], [([1], F(-5, 2))], split, [{"row": 0}] * 2),
            r"relu stages \[\]")  # fmt: skip


def test_cli_reads_trees_deeper_than_the_output_bound_format_nests(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tree of depth 64 nests JSON about 130 levels deep (the output-bound format refuses
    more than 32): check-cert dispatches on the format before that limit applies."""
    c = cert(_relu_net(), [-1], [1], [([1], F(-10))], _deep(64), [{"row": 0}] * 65)
    p = tmp_path / "deep.json"
    p.write_text(json.dumps(c))
    assert proofs_main(["check-cert", str(p)]) == 0
    assert "65 leaves" in capsys.readouterr().out


def _paths(o: Any, p: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [p] if p else []
    items = o.items() if isinstance(o, dict) else enumerate(o) if isinstance(o, list) else []
    for k, v in items:
        if k not in ("digest", "model_hash"):
            out += _paths(v, (*p, k))
    return out


def _alpha_split() -> dict[str, Any]:
    split = {
        "relu": [1, 0],
        "children": [{"leaf": 0}, {"split": 0, "children": [LEAF, {"leaf": 2}]}],
    }
    zero = {"1": [(0.0).hex()]}
    leaves = [{"row": 0}, {"row": 0, "alpha": zero}, {"row": 0}]
    return cert(_relu_net("float32"), [-1], [1], [([1], F(-10))], split, leaves)


JUNK = [None, -1, 0, 1, 2, 10**6, "x", "1/0", "0x", [], {}, [1], {"leaf": 0}, True, 1.5,
        "-1/1", "0xffffffff", [[]], {"a": 1}, "nan"]  # fmt: skip


@given(base=hs.sampled_from([two_rows, _alpha_split]), where=hs.integers(0, 10**6),
       junk=hs.sampled_from(JUNK))  # fmt: skip
def test_any_one_edit_is_judged_with_a_named_reason(base: Any, where: int, junk: Any) -> None:
    """Any value of a valid certificate replaced by junk (model hash and digest recomputed):
    the checker accepts or names what it refuses; never a bare 'malformed' fallback."""
    c = base()
    paths = _paths(c)
    path = paths[where % len(paths)]
    node = c
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = junk
    try:
        scc.check_certificate(seal(c))
    except CertificateError as e:
        assert not str(e).startswith("malformed"), (path, junk, str(e))
