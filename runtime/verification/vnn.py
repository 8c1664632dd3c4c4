"""`verify_vnnlib`: an ONNX network and a VNN-LIB property decided as sat / unsat / unknown
/ timeout.

Invariants:
- The network is imported with `runtime.interop.from_onnx` and rebuilt by
  `from_graph.network_from_imported`; the property is read by `vnnlib.read_vnnlib_cases`
  (one `Property` per input box; `decide_cases`: sat as soon as one case is, unsat only
  when every case is).
- A counterexample is a point of the box whose coordinates are values of the model's
  dtype (the runtime input is exactly the reported X), at which the runtime — `predict`
  with the `ordered` kernels in the model's dtype — returns outputs Y satisfying every row
  of one conjunction, checked exactly in Fractions. Candidates: the projected-gradient
  search's best points (`splitting.pgd` on the untrusted `floatnet.FloatNet`), the box
  center, the box vertices (all of them for up to 10 inputs, else SAMPLES seeded ones),
  SAMPLES seeded uniform points, the input-splitting search's attack points and branch
  and bound's counterexample.
- Networks of at most SPLIT_INPUTS inputs that `rigorous.SoundNet` accepts (chains of dense
  linear / relu stages in float32 / float64): a conjunction is proved by
  `splitting.sound_split_search` on the rigorous engine and answered with one split
  certificate (`splitcert`, `torchlean_split_bounds_v1`) holding the whole tree; its
  proofs entry is {"conjunction": i, "first": k, "split": True}.
- Otherwise, `unsat` only when every conjunction is proved empty: on every leaf of a split
  tree covering the box (networks of at most SPLIT_INPUTS inputs; one leaf, the whole box,
  otherwise) some row `a . Y <= d` has a lower bound of `a . Y` above d at both soundness
  levels (real network on real inputs, and the runtime on binary64 inputs), by CROWN or
  alpha-CROWN on the network with one more exact linear layer (weights `a`, bias 0: the
  layer's level-2 error interval contains 0, so its bounds also bound the exact `a . Y`
  of the runtime's outputs); or, for a top-label region on a network with more inputs,
  by branch and bound (`algorithm="bab"`, a certificate of the original network with the
  top_label property). `proofs` records per case and conjunction which certificates
  prove it and the split tree (see `splitting`); each certificate is checked by
  `python -m proofs check-cert`.
- `verify_vnnlib` decides in a child process and ends it `GRACE` seconds after the
  budget: then the answer is `timeout`. `unknown` when the search gives up earlier (budget
  read inside it, or nothing left to try); coefficients `a` not exactly representable in
  the dtype are refused.
- A dense ReLU chain with more than SPLIT_INPUTS inputs is decided by
  `relubab.decide_property` (its own attack, then ReLU-split branch and bound on the
  rigorous engine): unsat carries one split certificate per conjunction.
"""

from __future__ import annotations

import itertools
import multiprocessing as mp
import time
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np

from runtime.interop import from_onnx
from runtime.nn import Linear, Sequential
from spec.errors import TorchLeanError

from .api import verify
from .core import VerificationError
from .floatnet import FloatNet
from .from_graph import Network, network_from_imported
from .relubab import decide_property
from .rigorous import SoundNet
from .splitcert import split_certificate
from .splitting import Box, pgd, sound_split_search, split_search
from .vnnlib import Property, Row, read_vnnlib_cases

__all__ = [
    "GRACE",
    "SAMPLES",
    "SPLIT_INPUTS",
    "VnnResult",
    "decide",
    "decide_cases",
    "format_result",
    "verify_vnnlib",
]

SAMPLES = 256
SPLIT_INPUTS = 16  # input-domain splitting for networks with at most this many inputs
GRACE = 1.0  # seconds past the timeout before the deciding process is ended
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
    proofs: list[dict[str, Any]] = field(default_factory=list)


def _snap(v: float, lo: Fraction, hi: Fraction, dt: Any) -> float:
    """A value of dtype `dt` near v, moved inward toward [lo, hi] (an interval holding no
    such value gives a point outside it, which the caller's membership test drops)."""
    y = dt(min(max(v, float(lo)), float(hi)))
    while Fraction(float(y)) < lo:
        y = np.nextafter(y, dt(np.inf))
    while Fraction(float(y)) > hi:
        y = np.nextafter(y, dt(-np.inf))
    return float(y)


def _candidates(
    p: Property, dtype: str, extra: list[list[float]], sample: bool = True
) -> list[list[float]]:
    dt = _NP[dtype]
    lo, hi = [float(v) for v in p.lower], [float(v) for v in p.upper]
    rng = np.random.default_rng(0)
    n = len(lo)
    pts = list(extra)
    if sample:
        pts.append([(a + b) / 2 for a, b in zip(lo, hi, strict=True)])
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


def _attack(
    net: Network, p: Property, extra: list[list[float]], sample: bool = True
) -> VnnResult | None:
    """The first candidate (`_candidates`, or only `extra` snapped into the box) at which
    the runtime's outputs satisfy some conjunction exactly."""
    pts = _candidates(p, net.result.dtype, extra, sample)
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


def _prove(
    net: Network, p: Property, conj: tuple[Row, ...], algorithm: str
) -> dict[str, Any] | None:
    """The certificate (CROWN or alpha-CROWN on the objective network) when some row is
    proved violated on the whole box at both levels."""
    c, r = _box(net, p)
    vr = verify(_objective(net, conj), c, r, algorithm=algorithm)
    for i, (_, d) in enumerate(conj):
        if vr.real.lower[i] > d and vr.runtime.lower[i] > d:
            return vr.certificate()
    return None


def _rows_np(conj: tuple[Row, ...]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([[float(a) for a in r] for r, _ in conj]),
            np.array([float(d) for _, d in conj]))  # fmt: skip


def _pgd_attack(net: Network, fn: FloatNet | None, p: Property, deadline: float) -> Any:
    """The projected-gradient search per conjunction; its points re-checked by `_attack`."""
    if fn is None:
        return None
    lo = np.array([float(v) for v in p.lower])
    hi = np.array([float(v) for v in p.upper])
    for conj in p.disjuncts:
        if conj and time.monotonic() < deadline:
            pts, _ = pgd(fn, lo, hi, _rows_np(conj), deadline, restarts=256, steps=100)
            hit = _attack(net, p, [x.tolist() for x in pts[:32]], sample=False)
            if hit is not None:
                return hit
    return None


def _sub_property(p: Property, box: Box) -> Property:
    return replace(p, lower=box[0], upper=box[1])


def _split_conj(
    net: Network, fn: FloatNet, p: Property, conj: tuple[Row, ...], deadline: float
) -> VnnResult:
    """Input-domain branch and bound on one conjunction (`splitting.split_search`), each
    leaf proved by CROWN (then alpha-CROWN) on the objective network."""

    def prove(b: Box) -> dict[str, Any] | None:
        sub = _sub_property(p, b)
        return _prove(net, sub, conj, "crown") or (
            _prove(net, sub, conj, "alpha-crown") if time.monotonic() < deadline else None
        )

    def attack(pts: list[np.ndarray]) -> VnnResult | None:
        return _attack(net, p, [x.tolist() for x in pts], sample=False)

    status, got = split_search(fn, (p.lower, p.upper), _rows_np(conj), prove, attack, deadline)
    if status == "sat":
        return got
    if status == "unknown":
        return VnnResult("unknown", reason=got)
    tree, certs = got
    return VnnResult("unsat", certificates=certs, proofs=[{"tree": tree}])


def _exact_rows(net: Network, conj: tuple[Row, ...]) -> None:
    dt = _NP[net.result.dtype]
    if any(Fraction(float(np.asarray(float(a), dtype=dt))) != a for r, _ in conj for a in r):
        raise VerificationError(f"a property coefficient is not exact in {net.result.dtype}")


def _sound_conj(
    net: Network,
    sn: SoundNet,
    fn: FloatNet | None,
    p: Property,
    conj: tuple[Row, ...],
    deadline: float,
) -> VnnResult:
    """Input-domain branch and bound on the rigorous engine (`splitting.sound_split_search`):
    one split certificate for the conjunction."""
    _exact_rows(net, conj)

    def attack(pts: list[np.ndarray]) -> VnnResult | None:
        return _attack(net, p, [x.tolist() for x in pts], sample=False) if pts else None

    box = (p.lower, p.upper)
    status, got = sound_split_search(sn, fn, box, _rows_np(conj), attack, deadline)
    if status == "sat":
        return got
    if status == "unknown":
        return VnnResult("unknown", reason=got)
    cert = split_certificate(net, box, conj, got[0], got[1])
    return VnnResult("unsat", certificates=[cert], proofs=[{"split": True}])


def _decide_conj(
    net: Network,
    fn: FloatNet | None,
    p: Property,
    conj: tuple[Row, ...],
    deadline: float,
    sn: SoundNet | None = None,
) -> VnnResult:
    """One conjunction: empty (unsat, certificates), hit (sat) or unknown."""
    if not conj:
        return VnnResult("unknown", reason="an unconstrained output region")
    if sn is not None and net.n_in <= SPLIT_INPUTS:
        return _sound_conj(net, sn, fn, p, conj, deadline)
    if fn is not None and net.n_in <= SPLIT_INPUTS:
        return _split_conj(net, fn, p, conj, deadline)
    cert = _prove(net, p, conj, "alpha-crown")
    if cert is None:
        return VnnResult("unknown", reason="not proved by alpha-CROWN")
    return VnnResult("unsat", certificates=[cert], proofs=[{"tree": {"leaf": 0}}])


def decide(net: Network, p: Property, timeout: float) -> VnnResult:
    """sat / unsat / unknown for the network on the property (see the module docstring)."""
    deadline = time.monotonic() + timeout
    if p.n_out != net.n_out or len(p.lower) != net.n_in:
        raise VerificationError(
            f"the property has {len(p.lower)} inputs and {p.n_out} outputs, the network "
            f"{net.n_in} and {net.n_out}"
        )
    p.check_dtype(net.result.dtype)
    if net.n_in > SPLIT_INPUTS:  # ReLU-split branch and bound on dense ReLU chains
        hits = lambda pts: _attack(net, p, [x.tolist() for x in pts], sample=False)  # noqa: E731
        got = decide_property(net, p, deadline, hits)
        if got is not None:
            return got[1] if got[0] == "sat" else VnnResult(got[0], **got[1])
    fn = FloatNet.build(net.result, net.in_shape)
    hit = _pgd_attack(net, fn, p, deadline) or _attack(net, p, [])
    if hit is not None:
        return hit
    k = _top_label(p.disjuncts, p.n_out)
    if k is not None and net.n_in > SPLIT_INPUTS:
        return _branch(net, p, k, deadline - time.monotonic())
    sn = SoundNet.build(net)
    out = VnnResult("unsat")
    for i, conj in enumerate(p.disjuncts):
        if time.monotonic() > deadline:
            return VnnResult("unknown", reason="timeout")
        got = _decide_conj(net, fn, p, conj, deadline, sn)
        if got.status != "unsat":
            return got
        base = len(out.certificates)
        out.certificates += got.certificates
        out.proofs += [{"conjunction": i, "first": base, **q} for q in got.proofs]
    return out


def _branch(net: Network, p: Property, k: int, left: float) -> VnnResult:
    if left <= 0:
        return VnnResult("unknown", reason="timeout")
    c, r = _box(net, p)
    vr = verify(net.result, c, r, property=("top_label", k), algorithm="bab", timeout=left)
    if vr.holds:
        return VnnResult("unsat", certificates=[vr.certificate()], proofs=[{"top_label": k}])
    cex = [] if vr.counterexample is None else [vr.counterexample["input"]]
    hit = _attack(net, p, cex, sample=False) if cex else None
    return hit or VnnResult("unknown", reason="branch and bound budget spent")


def decide_cases(net: Network, cases: list[Property], timeout: float) -> VnnResult:
    """An input disjunction: one decision per case (box); unsat only if every case is."""
    deadline = time.monotonic() + timeout
    out = VnnResult("unsat")
    for i, p in enumerate(cases):
        got = decide(net, p, deadline - time.monotonic())
        if got.status != "unsat":
            return got
        base = len(out.certificates)
        out.certificates += got.certificates
        out.proofs += [{**q, "case": i, "first": base + q.get("first", 0)} for q in got.proofs]
    return out


def _worker(conn: Any, model_path: str, property_path: str, timeout: float) -> None:
    try:
        net = network_from_imported(from_onnx(model_path))
        conn.send(("ok", decide_cases(net, read_vnnlib_cases(property_path), timeout)))
    except TorchLeanError as e:
        conn.send(("error", e))
    except Exception as e:  # reported to the parent as an internal error
        conn.send(("error", VerificationError(f"internal error: {type(e).__name__}: {e}")))
    conn.close()


def verify_vnnlib(model_path: str, property_path: str, timeout: float = 60.0) -> VnnResult:
    """Decide the VNN-LIB property at `property_path` for the ONNX model at `model_path`
    in a child process; past `timeout` seconds (plus GRACE) the child is ended and the
    answer is `timeout`. Errors of the child are raised here."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_worker, args=(child, model_path, property_path, timeout))
    proc.start()
    child.close()
    ready = parent.poll(timeout + GRACE)
    try:
        got = parent.recv() if ready else None
    except EOFError:  # the child ended without an answer (killed, out of memory)
        got = ("error", VerificationError("the deciding process ended without an answer"))
    if proc.is_alive():
        proc.kill()
    proc.join()
    if got is None:
        return VnnResult("timeout", reason=f"no answer within {timeout} s")
    if got[0] == "error":
        raise got[1]
    return got[1]


def format_result(r: VnnResult) -> str:
    """VNN-COMP's result text: `unsat`, `unknown`, `timeout`, or `sat` and
    `((X_0 v) ... (Y_0 v))`."""
    if r.status != "sat":
        return r.status
    assert r.x is not None and r.y is not None
    pairs = [f"(X_{i} {v!r})" for i, v in enumerate(r.x)]
    pairs += [f"(Y_{j} {v!r})" for j, v in enumerate(r.y)]
    return "sat\n(" + "\n ".join(pairs) + ")"
