"""`verify_vnnlib`: an ONNX network and a VNN-LIB property decided as sat / unsat / unknown.

Invariants:
- The network is imported with `runtime.interop.from_onnx` and rebuilt by
  `from_graph.network_from_imported`; the property is read by `vnnlib.read_vnnlib`.
- A counterexample is a point of the box whose coordinates are values of the model's
  dtype (the runtime input is exactly the reported X), at which the runtime — `predict`
  with the `ordered` kernels in the model's dtype — returns outputs Y satisfying every row
  of one conjunction, checked exactly in Fractions. Candidates: the box center, the box
  vertices (all of them for up to 10 inputs, else SAMPLES seeded ones), SAMPLES seeded
  uniform points, and branch and bound's counterexample.
- `unsat` only when every conjunction is proved empty: some row `a . Y <= d` has a lower
  bound of `a . Y` above d at both soundness levels (real network on real inputs, and the
  runtime on binary64 inputs), by alpha-CROWN on the network with one more exact linear
  layer (weights `a`, bias 0: the layer's level-2 error interval contains 0, so its
  bounds also bound the exact `a . Y` of the runtime's outputs); a conjunction of the
  top-label form (rows Y_k - Y_j <= 0 for every j != k, one row per disjunct) is also
  tried with branch and bound (`algorithm="bab"`). The certificates are those of the
  objective networks (`VerificationResult.certificate()`), checked by
  `python -m proofs check-cert`; branch and bound's certificate is of the original
  network with the top_label property.
- `unknown` when the budget (seconds) is spent or some conjunction is neither proved nor
  hit; coefficients `a` not exactly representable in the dtype are refused.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from runtime.interop import from_onnx
from runtime.nn import Linear, Sequential

from .api import verify
from .core import VerificationError
from .from_graph import Network, network_from_imported
from .vnnlib import Property, Row, read_vnnlib

__all__ = ["SAMPLES", "VnnResult", "decide", "format_result", "verify_vnnlib"]

SAMPLES = 256
_NP = {"float32": np.float32, "float64": np.float64}


@dataclass
class VnnResult:
    """`status` "sat" / "unsat" / "unknown"; for sat the input and outputs (floats, exact
    values of the dtype); for unsat the certificates; `reason` for unknown."""

    status: str
    x: list[float] | None = None
    y: list[float] | None = None
    certificates: list[dict[str, Any]] = field(default_factory=list)
    reason: str = ""


def _snap(v: float, lo: Fraction, hi: Fraction, dt: Any) -> float:
    """A value of dtype `dt` near v, moved inward toward [lo, hi] (an interval holding no
    such value gives a point outside it, which the caller's membership test drops)."""
    y = dt(min(max(v, float(lo)), float(hi)))
    while Fraction(float(y)) < lo:
        y = np.nextafter(y, dt(np.inf))
    while Fraction(float(y)) > hi:
        y = np.nextafter(y, dt(-np.inf))
    return float(y)


def _candidates(p: Property, dtype: str, extra: list[list[float]]) -> list[list[float]]:
    dt = _NP[dtype]
    lo, hi = [float(v) for v in p.lower], [float(v) for v in p.upper]
    rng = np.random.default_rng(0)
    n = len(lo)
    pts = [[(a + b) / 2 for a, b in zip(lo, hi, strict=True)], *extra]
    if n <= 10:
        pts += [list(v) for v in itertools.product(*zip(lo, hi, strict=True))]
    else:
        pts += np.where(rng.random((SAMPLES, n)) < 0.5, lo, hi).tolist()
    pts += (np.asarray(lo) + rng.random((SAMPLES, n)) * (np.asarray(hi) - lo)).tolist()
    out = [[_snap(v, a, b, dt) for v, a, b in zip(x, p.lower, p.upper, strict=True)]
           for x in pts]  # fmt: skip
    return [x for x in out if all(a <= Fraction(v) <= b for v, a, b in
                                  zip(x, p.lower, p.upper, strict=True))]  # fmt: skip


def satisfies(y: list[float], conj: tuple[Row, ...]) -> bool:
    """Exact check of every row a . y <= d."""
    ys = [Fraction(v) for v in y]
    return all(sum(a * v for a, v in zip(r, ys, strict=True)) <= d for r, d in conj)


def _attack(net: Network, p: Property, extra: list[list[float]]) -> VnnResult | None:
    pts = _candidates(p, net.result.dtype, extra)
    if not pts:
        return None
    xs = np.asarray(pts).reshape(len(pts), *net.in_shape)
    ys = np.asarray(net.result.predict(xs, batch=True), dtype=np.float64)
    for x, y in zip(pts, ys.reshape(len(pts), -1).tolist(), strict=True):
        if all(np.isfinite(y)) and any(satisfies(y, c) for c in p.disjuncts):
            return VnnResult("sat", x, y)
    return None


def _objective(net: Network, conj: tuple[Row, ...]) -> Any:
    """The network followed by an exact linear layer computing each row's a . Y."""
    res = net.result
    dt = _NP[res.dtype]
    W = np.array([[float(a) for a in r] for r, _ in conj], dtype=dt)
    if any(Fraction(float(w)) != a for row, (r, _) in zip(W, conj, strict=True)
           for w, a in zip(row, r, strict=True)):  # fmt: skip
        raise VerificationError(f"a property coefficient is not exact in {res.dtype}")
    model = Sequential(*res.model.layers, Linear(net.n_out, len(conj)))
    return replace(res, model=model, _state=[*res.state(), W, np.zeros(len(conj), dt)])


def _top_label(conjs: tuple[tuple[Row, ...], ...], m: int) -> int | None:
    """k when the region is exactly "some Y_j >= Y_k" (j != k), one row per disjunct."""
    rows = {c[0] for c in conjs if len(c) == 1}
    if len(rows) != len(conjs) or m < 2:
        return None
    for k in range(m):
        want = {(tuple(Fraction(int(i == k) - int(i == j)) for i in range(m)), Fraction(0))
                for j in range(m) if j != k}  # fmt: skip
        if rows == want:
            return k
    return None


def _box(net: Network, p: Property) -> tuple[np.ndarray, np.ndarray]:
    """Center and radius (exact) in the network's input shape (an image: (C, H, W))."""
    c = [(a + b) / 2 for a, b in zip(p.lower, p.upper, strict=True)]
    r = [(b - a) / 2 for a, b in zip(p.lower, p.upper, strict=True)]
    return (np.array(c, dtype=object).reshape(net.in_shape),
            np.array(r, dtype=object).reshape(net.in_shape))  # fmt: skip


def _prove(net: Network, p: Property, conj: tuple[Row, ...]) -> dict[str, Any] | None:
    """alpha-CROWN's certificate when some row is proved violated on the whole box."""
    c, r = _box(net, p)
    vr = verify(_objective(net, conj), c, r, algorithm="alpha-crown")
    for i, (_, d) in enumerate(conj):
        if vr.real.lower[i] > d and vr.runtime.lower[i] > d:
            return vr.certificate()
    return None


def decide(net: Network, p: Property, timeout: float) -> VnnResult:
    """sat / unsat / unknown for the network on the property (see the module docstring)."""
    start = time.monotonic()
    if p.n_out != net.n_out or len(p.lower) != net.n_in:
        raise VerificationError(
            f"the property has {len(p.lower)} inputs and {p.n_out} outputs, the network "
            f"{net.n_in} and {net.n_out}"
        )
    p.check_dtype(net.result.dtype)
    hit = _attack(net, p, [])
    if hit is not None:
        return hit
    certs = []
    for conj in p.disjuncts:
        if time.monotonic() - start > timeout:
            return VnnResult("unknown", reason="timeout")
        cert = _prove(net, p, conj) if conj else None
        if cert is None:
            return _branch(net, p, timeout - (time.monotonic() - start))
        certs.append(cert)
    return VnnResult("unsat", certificates=certs)


def _branch(net: Network, p: Property, left: float) -> VnnResult:
    k = _top_label(p.disjuncts, p.n_out)
    if k is None or left <= 0:
        return VnnResult("unknown", reason="not proved by alpha-CROWN")
    c, r = _box(net, p)
    vr = verify(net.result, c, r, property=("top_label", k), algorithm="bab", timeout=left)
    if vr.holds:
        return VnnResult("unsat", certificates=[vr.certificate()])
    cex = [] if vr.counterexample is None else [vr.counterexample["input"]]
    hit = _attack(net, p, cex) if cex else None
    return hit or VnnResult("unknown", reason="branch and bound budget spent")


def verify_vnnlib(model_path: str, property_path: str, timeout: float = 60.0) -> VnnResult:
    """Decide the VNN-LIB property at `property_path` for the ONNX model at `model_path`."""
    net = network_from_imported(from_onnx(model_path))
    return decide(net, read_vnnlib(property_path), timeout)


def format_result(r: VnnResult) -> str:
    """VNN-COMP's result text: `unsat`, `unknown`, or `sat` and `((X_0 v) ... (Y_0 v))`."""
    if r.status != "sat":
        return r.status
    assert r.x is not None and r.y is not None
    pairs = [f"(X_{i} {v!r})" for i, v in enumerate(r.x)]
    pairs += [f"(Y_{j} {v!r})" for j, v in enumerate(r.y)]
    return "sat\n(" + "\n ".join(pairs) + ")"
