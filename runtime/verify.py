"""Certified output bounds for trained results: interval bound propagation (IBP) and CROWN.

`verify(result, center, radius, ...)` (also `Result.verify`) bounds what a trained network
can output for every input of the L-infinity box `[center - radius, center + radius]`, at
two soundness levels, both returned:

- `real` (level 1): the real-valued network — exact real arithmetic on the stored
  parameters (their exact values), GELU's constants c and k and BatchNorm's eps as the exact
  rationals the spec names — for every real input in the box.
- `runtime` (level 2): the runtime's own execution in the result's dtype with the
  `ordered` kernels (what `Result.predict` computes with `kernels="ordered"`), for every
  binary64 input in the box (rounded once into the dtype, as `predict` does). For
  `dtype="exact"` the runtime is exact, so `runtime` equals `real`. Results trained with the
  `fast` kernels are evaluated by `predict` with BLAS/pairwise sums and vendor libm, which
  level 2 does not model: the statement says so, the summary says so, and
  `VerificationResult.holds` claims nothing for them (None when level 1 proves the
  property; see `runtime_covered`).

Soundness argument (the invariants every function below keeps):
- An interval is a pair of MPFR numbers (lo, hi) that encloses every value the quantity can
  take. Level 1 computes with 160-bit MPFR contexts rounding down for lower ends and up for
  upper ends (outward rounding), with the exponent range bounded to emin = LEVEL1_EMIN =
  -3000, emax = 3000 (MPFR's convention: finite magnitudes in [2^-3001, 2^3000)) so that
  every p/q in a certificate stays short. Directed rounding stays outward at both ends:
  a magnitude below the range rounds to 0 or to the least positive number, on the outer
  side; a value above it rounds up to +inf and down to the largest finite number
  (mirrored for negative values), so an overflowed bound is still an enclosure. A bound
  that is not finite at the end of a layer (or at the output) raises `VerificationError`,
  as do NaN (inf - inf, 0 * inf) and a final CROWN bound beyond the range.
- Level 2 follows the op sequence of the ordered kernels exactly (linear: a left fold over j
  of the products w[i,j]*x[j], starting from the first product, then + b[i]; sigmoid:
  1/(1+exp(-x)); gelu: the spec's composite body; BatchNorm1d eval:
  ((x - running_mean) / sqrt(running_var + eps)) * weight + bias), with every operation
  done twice in MPFR contexts *of the target format itself* (precision, emin, emax of the
  format, subnormalize=True), once rounding down and once rounding up. For a monotone
  operation op and operands in the enclosing intervals, RN(op(a, b)) lies in
  [RD(op(lo...)), RU(op(hi...))] because RN(z) is always in [RD(z), RU(z)] and RD, RU are
  monotone; constants are rounded to nearest once, exactly as the runtime casts them.
  Overflow is covered (RU gives +inf, RD the largest finite value); a bound that is not
  finite at the end of a layer raises `VerificationError`.
- GELU is not monotone: its input interval is split at 0 and at a fixed grid of negative
  points; on each piece every intermediate of the body except the last product is monotone,
  so plain interval arithmetic per piece is sound, and the union is taken.
- CROWN (backward linear relaxation) works in exact rational arithmetic (gmpy2.mpq): the
  objective rows are pushed back through every layer exactly, so no rounding enters the
  backward pass. Relaxation slopes are chosen in binary64 (any slope is sound); intercepts
  are computed rigorously: ReLU's upper line from exact endpoint values (ReLU minus a line
  is convex, so a line at or above ReLU at both endpoints is above it on the whole
  interval); ReLU's lower line is y = x or y = 0 (intercept 0), below ReLU everywhere (a
  general lower line would also need checking at the kink x = 0, where line - ReLU, being
  concave, can peak: the checker does that), tanh's and sigmoid's from a 160-bit
  directed-rounding enclosure of min/max of f(x) - a*x over the interval, using that both
  are convex on x <= 0 and concave on x >= 0 (max/min at the endpoints on one side, a
  supporting tangent f(d) + f'(d)(x - d) with d in the piece on the other). GELU and
  BatchNorm1d use two parallel lines with the chord slope a, whose intercepts come from
  the level's own interval evaluation of f on PIECES sub-intervals (f(x) - a x >=
  lo(f([P, Q])) - max(a P, a Q) on each), or constant bounds (slope 0, the IBP interval at
  that level) when those are tighter. tanh/sigmoid intercepts are loosened by
  2^-40 * (1 + |c|), so that an independent checker's own (slightly different) enclosure
  still confirms them. Every pre-activation interval is the intersection of its IBP and
  CROWN bounds, and the final bounds are intersected with IBP's: CROWN is never wider than IBP.
- CROWN at level 2 models the runtime as the real network plus bounded per-neuron errors:
  a linear layer with n inputs adds delta_i with |delta_i| <= gamma_{n+1} * (sum_j
  |w_ij| max|x_j| + |b_i|) + n*eta*(1 + gamma_{n+1}) (u = 2^-p, gamma_k = k u / (1 - k u),
  eta = 2^(emin-1) covers underflow of a product; additions are exact in the subnormal
  range); tanh adds u*max|tanh| + eta (correctly rounded); sigmoid's three roundings add
  max(sigmoid) * ((1 + u) / ((1 - u)(1 - u - eta)) - 1) + eta + 2^(1-emax) (the last term
  covers exp overflowing, where the runtime returns 0); ReLU is exact. These are extra
  bounded inputs of the backward pass; the input box is the format-rounded box.
- The model hash is sha256 over the canonical JSON of the network as evaluated (layer
  kinds, sizes, eps, and every state value as its bit pattern in the dtype, or p/q for
  "exact"). `VerificationResult.certificate()` embeds that network, the box, the bounds as
  exact rationals and, for CROWN, every relaxation and pre-activation interval used, so
  `python -m proofs check-cert FILE` can re-validate it without this module.

Supported layers: Linear, ReLU, Tanh, Sigmoid, GELU, BatchNorm1d (evaluation mode), Dropout
(the identity in evaluation mode), LayerNorm (interval arithmetic in its op order, with
d*d enclosed as a square; CROWN treats it as opaque: the backward pass concretises over
LayerNorm's output interval, so CROWN gains nothing across it). Anything else, results of
`open_typed` sessions and norms other than "inf" raise `VerificationError`
("verification is unavailable for ...").
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpfr, mpq

from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.ops import GELU_C, GELU_K

from .backend import DTYPE_DOMAIN
from .nn import GELU, BatchNorm1d, Dropout, LayerNorm, Linear, ReLU, Sigmoid, Tanh

__all__ = [
    "CERT_FORMAT",
    "GELU_GRID",
    "LEVEL1_EMIN",
    "LEVEL1_PRECISION",
    "PIECES",
    "Bounds",
    "VerificationError",
    "VerificationResult",
    "model_hash",
    "network_json",
    "verify",
]

CERT_FORMAT = "torchlean_output_bounds_v1"
LEVEL1_PRECISION = 160
LEVEL1_EMIN = -3000
PIECES = 24  # pieces per neuron for the GELU / BatchNorm1d linear relaxation
# GELU's negative split points (dyadic, exact in every format); 0 is always a split point.
GELU_GRID = tuple(Fraction(-k, 8) for k in (48, 32, 24, 20, 16, 14, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1))

Iv = tuple[Any, Any]  # (lo, hi) as gmpy2.mpfr


class VerificationError(TorchLeanError):
    """Verification is unavailable for the input, or a bound could not be established."""


# --------------------------------------------------------------------------- interval arithmetic


class _Arith:
    """Outward-rounded interval arithmetic in one pair of MPFR contexts. With `domain` (an
    IEEEDomain) the contexts are the format's (level 2) and constants are rounded to
    nearest once, as the runtime casts them; without it, 160-bit contexts (level 1) and
    constants are enclosed."""

    def __init__(self, domain: IEEEDomain | None) -> None:
        self.domain = domain
        if domain is None:
            # a bounded exponent range keeps every p/q in a certificate short; directed
            # rounding stays outward below 2^LEVEL1_EMIN (to 0 or the least positive number)
            kw: dict[str, Any] = {
                "precision": LEVEL1_PRECISION,
                "emin": LEVEL1_EMIN,
                "emax": -LEVEL1_EMIN,
            }
        else:
            kw = {
                "precision": domain.precision,
                "emin": domain.emin,
                "emax": domain.emax,
                "subnormalize": True,
            }
        self.dn = gmpy2.context(round=gmpy2.RoundDown, **kw)
        self.up = gmpy2.context(round=gmpy2.RoundUp, **kw)

    def _cv(self, ctx: Any, q: Any) -> Any:
        with gmpy2.context(ctx):
            return gmpy2.mpfr(q)

    def enclose(self, q: Any) -> Iv:
        q = mpq(q)
        return self._cv(self.dn, q), self._cv(self.up, q)

    def const(self, q: Fraction | int) -> Iv:
        if self.domain is None:
            return self.enclose(q)
        v = mpfr(self.domain.from_rational(Fraction(q)))
        return v, v

    def add(self, a: Iv, b: Iv) -> Iv:
        return self.dn.add(a[0], b[0]), self.up.add(a[1], b[1])

    def neg(self, a: Iv) -> Iv:
        # exact; a context method, since `-x` would round into the global 53-bit context
        return self.dn.minus(a[1]), self.up.minus(a[0])

    def sub(self, a: Iv, b: Iv) -> Iv:
        return self.add(a, self.neg(b))

    def mul(self, a: Iv, b: Iv) -> Iv:
        los = [self.dn.mul(x, y) for x in a for y in b]
        his = [self.up.mul(x, y) for x in a for y in b]
        return _min(los), _max(his)

    def div(self, a: Iv, b: Iv) -> Iv:
        if not b[0] > 0:
            raise VerificationError(f"interval division: denominator {_show(b)} is not > 0")
        los = [self.dn.div(x, y) for x in a for y in b]
        his = [self.up.div(x, y) for x in a for y in b]
        return _min(los), _max(his)

    def sqrt(self, a: Iv) -> Iv:
        if a[0] < 0:
            raise VerificationError(f"interval sqrt: argument {_show(a)} is not >= 0")
        return self.dn.sqrt(a[0]), self.up.sqrt(a[1])

    def exp(self, a: Iv) -> Iv:
        return self.dn.exp(a[0]), self.up.exp(a[1])

    def tanh(self, a: Iv) -> Iv:
        return self.dn.tanh(a[0]), self.up.tanh(a[1])


def _min(xs: Sequence[Any]) -> Any:
    if any(gmpy2.is_nan(x) for x in xs):
        raise VerificationError("interval arithmetic produced NaN (an overflowed bound)")
    return min(xs)


def _max(xs: Sequence[Any]) -> Any:
    if any(gmpy2.is_nan(x) for x in xs):
        raise VerificationError("interval arithmetic produced NaN (an overflowed bound)")
    return max(xs)


def _show(iv: Iv) -> str:
    return f"[{float(iv[0])!r}, {float(iv[1])!r}]"


def _hull(a: Iv, b: Iv) -> Iv:
    return min(a[0], b[0]), max(a[1], b[1])


# --------------------------------------------------------------------------- the network


@dataclass(frozen=True)
class _Stage:
    """One evaluation-mode layer: kind and exact parameters (Fractions)."""

    kind: str  # linear | relu | tanh | sigmoid | gelu | bn
    weight: tuple[tuple[Fraction, ...], ...] = ()
    bias: tuple[Fraction, ...] = ()
    mean: tuple[Fraction, ...] = ()
    var: tuple[Fraction, ...] = ()
    eps: Fraction = Fraction(0)
    bits: dict[str, Any] = field(default_factory=dict, compare=False)


def _bits(a: np.ndarray, dtype: str) -> list[Any]:
    """Bit patterns of an array's values (row-major, nested like the array); p/q for exact."""
    arr = np.asarray(a)
    if dtype == "exact":
        return np.vectorize(lambda v: f"{Fraction(v).numerator}/{Fraction(v).denominator}",
                            otypes=[object])(arr).tolist()  # fmt: skip
    width = {"float64": np.uint64, "float32": np.uint32, "bfloat16": np.uint16,
             "float16": np.uint16}[dtype]  # fmt: skip
    digits = np.dtype(width).itemsize * 2
    return np.vectorize(lambda v: f"0x{int(v):0{digits}x}", otypes=[object])(
        arr.view(width)
    ).tolist()


def _exact(a: np.ndarray) -> list[Any]:
    arr = np.asarray(a)
    if arr.dtype == object:
        return np.vectorize(Fraction, otypes=[object])(arr).tolist()
    return np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(arr).tolist()


def _unavailable(what: str) -> VerificationError:
    return VerificationError(
        f"verification is unavailable for {what} (supported: Linear, ReLU, Tanh, Sigmoid, GELU,"
        " BatchNorm1d in evaluation mode, LayerNorm, Dropout; results of Trainer.open()"
        " sessions; norm 'inf')"
    )


def _stages(result: Any) -> list[_Stage]:
    if getattr(result, "typed", False):
        raise _unavailable("results of open_typed sessions (typed boundary values)")
    dtype = result.dtype
    if dtype not in ("float64", "float32", "bfloat16", "float16", "exact"):
        raise _unavailable(f"dtype {dtype!r}")
    state = result._state
    out: list[_Stage] = []
    for layer, occ in zip(result.model.layers, result.model.occurrences(), strict=True):
        st = [state[k] for k in occ]
        if isinstance(layer, Linear):
            w, b = st
            out.append(
                _Stage(
                    "linear",
                    weight=tuple(tuple(r) for r in _exact(w)),
                    bias=tuple(_exact(b)),
                    bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
                )
            )
        elif isinstance(layer, (ReLU, Tanh, Sigmoid, GELU)):
            out.append(_Stage({ReLU: "relu", Tanh: "tanh", Sigmoid: "sigmoid", GELU: "gelu"}[
                type(layer)]))  # fmt: skip
        elif isinstance(layer, BatchNorm1d):
            w, b, rm, rv, _ = st
            out.append(
                _Stage(
                    "bn",
                    weight=(tuple(_exact(w)),),
                    bias=tuple(_exact(b)),
                    mean=tuple(_exact(rm)),
                    var=tuple(_exact(rv)),
                    eps=Fraction(layer.eps),
                    bits={
                        "weight": _bits(w, dtype),
                        "bias": _bits(b, dtype),
                        "running_mean": _bits(rm, dtype),
                        "running_var": _bits(rv, dtype),
                    },
                )
            )
        elif isinstance(layer, LayerNorm):
            w, b = st
            out.append(
                _Stage(
                    "ln",
                    weight=(tuple(_exact(w)),),
                    bias=tuple(_exact(b)),
                    eps=Fraction(layer.eps),
                    bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
                )
            )
        elif isinstance(layer, Dropout):
            continue  # the identity in evaluation mode
        else:
            raise _unavailable(f"{type(layer).__name__} layers ({layer!r})")
    return out


def _frac_str(q: Any) -> str:
    q = Fraction(int(mpq(q).numerator), int(mpq(q).denominator))
    return f"{q.numerator}/{q.denominator}"


def network_json(result: Any) -> dict[str, Any]:
    """The network as evaluated, canonical JSON: dtype and one entry per stage."""
    stages = []
    for st in _stages(result):
        e: dict[str, Any] = {"op": st.kind}
        e.update(st.bits)
        if st.kind in ("bn", "ln"):
            e["eps"] = _frac_str(st.eps)
        stages.append(e)
    return {"dtype": result.dtype, "stages": stages}


def _sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_hash(result: Any) -> str:
    """sha256 over the canonical network JSON (architecture and state bits)."""
    return _sha(network_json(result))


# --------------------------------------------------------------------------- IBP


def _elem(A: _Arith, st: _Stage, j: int, x: Iv) -> Iv:
    """The interval of one elementwise neuron's output, following the runtime op order."""
    k = st.kind
    if k == "relu":
        z = mpfr(0)
        return max(x[0], z), max(x[1], z)
    if k == "tanh":
        return A.tanh(x)
    if k == "sigmoid":
        one = A.const(1)
        return A.div(one, A.add(one, A.exp(A.neg(x))))
    if k == "bn":
        den = A.sqrt(A.add(A.enclose(st.var[j]), A.const(st.eps)))
        y = A.mul(A.div(A.sub(x, A.enclose(st.mean[j])), den), A.enclose(st.weight[0][j]))
        return A.add(y, A.enclose(st.bias[j]))
    if k == "gelu":
        pts = [mpfr(g) for g in GELU_GRID] + [mpfr(0)]
        cuts = [x[0]] + [p for p in pts if x[0] < p < x[1]] + [x[1]]
        out: Iv | None = None
        for a, b in itertools.pairwise(cuts):
            piece = _gelu_piece(A, (a, b))
            out = piece if out is None else _hull(out, piece)
        if out is None:
            out = _gelu_piece(A, x)
        return out
    raise _unavailable(f"layer kind {k!r}")  # pragma: no cover - _stages admits no other


def _cube(A: _Arith, x: Iv) -> Iv:
    """(x * x) * x of one value: x -> RN(RN(x*x)*x) is nondecreasing (RN is monotone and
    odd), so its endpoints bound it; this avoids the spurious 0 * inf corner of a product
    of intervals when x*x overflows."""
    a, b = x
    lo = A.dn.mul(A.dn.mul(a, a) if a >= 0 else A.up.mul(a, a), a)
    hi = A.up.mul(A.up.mul(b, b) if b >= 0 else A.dn.mul(b, b), b)
    return lo, hi


def _gelu_piece(A: _Arith, x: Iv) -> Iv:
    x3 = _cube(A, x)
    inner = A.add(x, A.mul(A.const(GELU_K), x3))
    t = A.tanh(A.mul(A.const(GELU_C), inner))
    return A.mul(A.mul(A.const(Fraction(1, 2)), x), A.add(A.const(1), t))


def _linear(A: _Arith, st: _Stage, xs: list[Iv]) -> list[Iv]:
    out = []
    for row, b in zip(st.weight, st.bias, strict=True):
        acc: Iv | None = None
        for w, x in zip(row, xs, strict=True):
            p = A.mul(A.enclose(w), x)
            acc = p if acc is None else A.add(acc, p)
        assert acc is not None
        out.append(A.add(acc, A.enclose(b)))
    return out


def _square(A: _Arith, d: Iv) -> Iv:
    """d * d of one value (not of two independent ones): never below 0."""
    if d[0] >= 0:
        return A.mul(d, d)
    if d[1] <= 0:
        return A.mul(A.neg(d), A.neg(d))
    m = max(A.dn.minus(d[0]), d[1])
    return mpfr(0), A.up.mul(m, m)


def _fold(A: _Arith, xs: list[Iv]) -> Iv:
    acc = xs[0]
    for x in xs[1:]:
        acc = A.add(acc, x)
    return acc


def _layernorm(A: _Arith, st: _Stage, xs: list[Iv]) -> list[Iv]:
    """LayerNorm's op order: mu = fold(x) / n; d = x - mu; var = fold(d * d) / n;
    y = (d / sqrt(var + eps)) * w + b (plain interval arithmetic: sound, not tight)."""
    n = A.const(len(xs))
    mu = A.div(_fold(A, xs), n)
    ds = [A.sub(x, mu) for x in xs]
    var = A.div(_fold(A, [_square(A, d) for d in ds]), n)
    den = A.sqrt(A.add(var, A.const(st.eps)))
    return [
        A.add(A.mul(A.div(d, den), A.enclose(w)), A.enclose(b))
        for d, w, b in zip(ds, st.weight[0], st.bias, strict=True)
    ]


def _layer(A: _Arith, st: _Stage, xs: list[Iv]) -> list[Iv]:
    if st.kind == "linear":
        ys = _linear(A, st, xs)
    elif st.kind == "ln":
        ys = _layernorm(A, st, xs)
    else:
        ys = [_elem(A, st, j, x) for j, x in enumerate(xs)]
    for j, y in enumerate(ys):
        if not (gmpy2.is_finite(y[0]) and gmpy2.is_finite(y[1])):
            raise VerificationError(
                f"verification failed: layer {st.kind} output {j}: bound {_show(y)} is not "
                "finite (overflow)"
            )
    return ys


def _ibp(A: _Arith, stages: list[_Stage], box: list[Iv]) -> list[list[Iv]]:
    ivs = [box]
    for st in stages:
        ivs.append(_layer(A, st, ivs[-1]))
    return ivs


# --------------------------------------------------------------------------- relaxations


def _f(kind: str, x: float) -> float:
    if kind == "tanh":
        return math.tanh(x)
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _df(kind: str, x: float) -> float:
    if kind == "tanh":
        t = math.tanh(x)
        return 1.0 - t * t
    s = _f(kind, x)
    return s * (1.0 - s)


def _tangent_point(kind: str, a: float, p: float, q: float, convex: bool) -> float:
    """A point of [p, q] where f' is about `a` (f' increases on convex pieces, decreases on
    concave ones); any point is sound, this one makes the tangent bound tight."""
    lo, hi = p, q
    fp, fq = _df(kind, p), _df(kind, q)
    if convex:
        if fp >= a:
            return p
        if fq <= a:
            return q
    else:
        if fp <= a:
            return p
        if fq >= a:
            return q
    for _ in range(80):
        m = 0.5 * (lo + hi)
        if (_df(kind, m) < a) == convex:
            lo = m
        else:
            hi = m
    return 0.5 * (lo + hi)


def _phi_range(H: _Arith, kind: str, a: float, lo: Any, hi: Any) -> Iv:
    """An enclosure [m, M] of min and max of f(x) - a*x over [lo, hi] (f tanh or sigmoid:
    convex for x <= 0, concave for x >= 0)."""
    sl = (mpfr(a), mpfr(a))
    dummy = _Stage(kind)

    def phi(x: Any) -> Iv:
        return H.sub(_elem(H, dummy, 0, (x, x)), H.mul(sl, (x, x)))

    def dphi(x: Any) -> Iv:
        y = _elem(H, dummy, 0, (x, x))
        one = H.const(1)
        d = H.sub(one, H.mul(y, y)) if kind == "tanh" else H.mul(y, H.sub(one, y))
        return H.sub(d, sl)

    zero = mpfr(0)
    pieces = []
    if lo < 0:
        pieces.append((lo, min(hi, zero), True))
    if hi > 0:
        pieces.append((max(lo, zero), hi, False))
    if not pieces:
        pieces.append((lo, hi, True))
    mins, maxs = [], []
    for p, q, convex in pieces:
        ep, eq = phi(p), phi(q)
        d = mpfr(_tangent_point(kind, a, float(p), float(q), convex))
        d = max(p, min(q, d))
        tan = H.add(phi(d), H.mul(dphi(d), (H.dn.sub(p, d), H.up.sub(q, d))))
        if convex:
            mins.append(tan[0])
            maxs.append(max(ep[1], eq[1]))
        else:
            mins.append(min(ep[0], eq[0]))
            maxs.append(tan[1])
    return min(mins), max(maxs)


_SLACK = mpq(1, 2**40)
Relax = tuple[Any, Any, Any, Any]  # (aL, cL, aU, cU) exact: aL x + cL <= y <= aU x + cU


def _q(x: Any) -> Any:
    return mpq(x)


def _relax(H: _Arith, A: _Arith, st: _Stage, j: int, x: Iv, err: Any) -> Relax:
    """A sound linear relaxation of neuron j of elementwise stage `st` on the interval x (at
    the level of arithmetic A; `err` widens tanh/sigmoid lines by the level-2 rounding)."""
    lo, hi = x
    k = st.kind
    if k == "relu":
        if hi <= 0:
            return mpq(0), mpq(0), mpq(0), mpq(0)
        if lo >= 0:
            return mpq(1), mpq(0), mpq(1), mpq(0)
        ql, qh = _q(lo), _q(hi)
        a = mpq(float(qh / (qh - ql)))
        cu = max(-a * ql, qh - a * qh)
        return (mpq(1) if qh >= -ql else mpq(0)), mpq(0), a, cu
    if k in ("tanh", "sigmoid"):
        fl, fh = float(lo), float(hi)
        if math.isfinite(fl) and math.isfinite(fh) and fh - fl > 1e-9:
            chord = (_f(k, fh) - _f(k, fl)) / (fh - fl)
            mid = _df(k, 0.5 * (fl + fh))
            if fl >= 0:
                aL, aU = chord, mid
            elif fh <= 0:
                aL, aU = mid, chord
            else:
                aL = aU = chord
            m = _phi_range(H, k, aL, lo, hi)[0]
            M = _phi_range(H, k, aU, lo, hi)[1]
            m, M = _q(m), _q(M)
            # a little slack so an independent checker's own enclosure still confirms them
            slack_m, slack_M = _SLACK * (1 + abs(m)), _SLACK * (1 + abs(M))
            return mpq(aL), m - err - slack_m, mpq(aU), M + err + slack_M
    y = _elem(A, st, j, x)  # constant bounds (gelu, bn, degenerate intervals)
    const = mpq(0), _q(y[0]), mpq(0), _q(y[1])
    if k in ("gelu", "bn") and hi > lo:
        line = _piecewise_line(A, st, j, x)
        if line is not None and line[3] - line[1] < const[3] - const[1]:
            return line
    return const


def _pieces(A: _Arith, x: Iv) -> list[tuple[Any, Any]]:
    """[lo, hi] cut into PIECES equal parts (exact), each widened outward to A's numbers;
    the pieces cover [lo, hi]. Returns (P, Q) pairs of mpfr."""
    lo, hi = _q(x[0]), _q(x[1])
    cuts = [lo + (hi - lo) * mpq(i, PIECES) for i in range(PIECES + 1)]
    return [(A._cv(A.dn, a), A._cv(A.up, b)) for a, b in itertools.pairwise(cuts)]


def _piecewise_line(A: _Arith, st: _Stage, j: int, x: Iv) -> Relax | None:
    """Parallel lines a*x + cL <= f(x) <= a*x + cU for GELU / BatchNorm1d on x, with a the
    chord slope and the intercepts from A's interval evaluation of f on PIECES pieces:
    on a piece [P, Q], f(x) - a*x >= lo(f([P, Q])) - max(a P, a Q), and likewise above.
    At level 2 A's evaluation encloses the runtime's own values, so no error term is
    needed."""
    fl, fh = _elem(A, st, j, (x[0], x[0])), _elem(A, st, j, (x[1], x[1]))
    den = float(x[1]) - float(x[0])
    if not den > 0:
        return None
    a = mpq((float(fh[0]) - float(fl[0])) / den)
    if not math.isfinite(float(a)):
        return None
    cl: Any = None
    cu: Any = None
    for P, Q in _pieces(A, x):
        f = _elem(A, st, j, (P, Q))
        ap, aq = a * _q(P), a * _q(Q)
        lo_i, hi_i = _q(f[0]) - max(ap, aq), _q(f[1]) - min(ap, aq)
        cl = lo_i if cl is None else min(cl, lo_i)
        cu = hi_i if cu is None else max(cu, hi_i)
    return a, cl, a, cu


# --------------------------------------------------------------------------- level-2 errors


@dataclass(frozen=True)
class _Fmt:
    u: Any  # 2^-p
    eta: Any  # 2^(emin-1)
    tiny: Any  # 2^(1-emax)


def _fmt(D: IEEEDomain) -> _Fmt:
    return _Fmt(mpq(1, 2**D.precision), mpq(1, 2 ** (1 - D.emin)), mpq(1, 2 ** (D.emax - 1)))


def _gamma(f: _Fmt, k: int) -> Any:
    return k * f.u / (1 - k * f.u)


def _lin_err(f: _Fmt, st: _Stage, xs: list[Iv]) -> list[Any]:
    n = len(xs)
    g = _gamma(f, n + 1)
    X = [max(abs(_q(x[0])), abs(_q(x[1]))) for x in xs]
    out = []
    for row, b in zip(st.weight, st.bias, strict=True):
        s = sum((abs(mpq(w)) * xm for w, xm in zip(row, X, strict=True)), mpq(0))
        out.append(g * (s + abs(mpq(b))) + n * f.eta * (1 + g))
    return out


def _act_err(H: _Arith, f: _Fmt | None, kind: str, x: Iv) -> Any:
    if f is None or kind not in ("tanh", "sigmoid"):
        return mpq(0)
    dummy = _Stage(kind)
    ends = [_elem(H, dummy, 0, (v, v)) for v in x]
    M = max(max(abs(_q(e[0])), abs(_q(e[1]))) for e in ends)
    if kind == "tanh":
        return f.u * M + f.eta
    u = f.u
    return M * ((1 + u) / ((1 - u) * (1 - u - f.eta)) - 1) + f.eta + f.tiny


# --------------------------------------------------------------------------- CROWN


class _Crown:
    """CROWN at one level. `ivs[t]` encloses the values after stage t (t = 0: the box);
    `relax[t]` holds stage t's relaxations (elementwise stages), `err[t]` its level-2
    error bounds (linear stages)."""

    def __init__(
        self, H: _Arith, A: _Arith, f: _Fmt | None, stages: list[_Stage], box: list[Iv]
    ) -> None:
        self.H, self.A, self.f, self.stages = H, A, f, stages
        self.ivs: list[list[Iv]] = [box]
        self.relax: dict[int, list[Relax]] = {}
        self.err: dict[int, list[Any]] = {}
        self.W = {
            t: [[mpq(w) for w in r] for r in st.weight]
            for t, st in enumerate(stages, 1)
            if st.kind == "linear"
        }
        T = len(stages)
        for t, st in enumerate(stages, 1):
            prev = self.ivs[-1]
            if st.kind == "linear":
                self.err[t] = _lin_err(f, st, prev) if f is not None else [mpq(0)] * len(st.bias)
                out = _layer(A, st, prev)
                if t < T:
                    n = len(out)
                    eye = [[mpq(int(i == j)) for j in range(n)] for i in range(n)]
                    lows = self.backward(eye, t)
                    highs = [-v for v in self.backward([[-v for v in r] for r in eye], t)]
                    out = [
                        (max(o[0], A._cv(A.dn, lq)), min(o[1], A._cv(A.up, hq)))
                        for o, lq, hq in zip(out, lows, highs, strict=True)
                    ]
                self.ivs.append(out)
            elif st.kind == "ln":
                self.ivs.append(_layer(A, st, prev))  # opaque: the backward pass stops here
            else:
                self.relax[t] = [
                    _relax(H, A, st, j, x, _act_err(H, f, st.kind, x)) for j, x in enumerate(prev)
                ]
                self.ivs.append(_layer(A, st, prev))

    def backward(self, C: list[list[Any]], t: int) -> list[Any]:
        """Exact lower bounds of C @ z_t over the box (rows of C are objectives)."""
        lam = [list(r) for r in C]
        c = [mpq(0)] * len(C)
        box = self.ivs[0]
        for s in range(t, 0, -1):
            st = self.stages[s - 1]
            if st.kind == "ln":
                box = self.ivs[s]  # concretise over LayerNorm's output interval
                break
            if st.kind == "linear":
                W, e = self.W[s], self.err[s]
                b = [mpq(v) for v in st.bias]
                for r, row in enumerate(lam):
                    c[r] += sum((lv * bv - abs(lv) * ev for lv, bv, ev in zip(row, b, e,
                                                                                strict=True)),
                                mpq(0))  # fmt: skip
                m = len(W[0])
                lam = [
                    [sum((row[i] * W[i][j] for i in range(len(W)) if row[i]), mpq(0))
                     for j in range(m)]
                    for row in lam
                ]  # fmt: skip
            else:
                rl = self.relax[s]
                for r, row in enumerate(lam):
                    for j, lv in enumerate(row):
                        aL, cL, aU, cU = rl[j]
                        if lv >= 0:
                            row[j], c[r] = lv * aL, c[r] + lv * cL
                        else:
                            row[j], c[r] = lv * aU, c[r] + lv * cU
        out = []
        for r, row in enumerate(lam):
            v = c[r]
            for lv, x in zip(row, box, strict=True):
                v += lv * (_q(x[0]) if lv >= 0 else _q(x[1]))
            out.append(v)
        return out

    def witness(self) -> list[dict[str, Any]]:
        """Per stage: the pre-activation intervals and relaxations used (p/q strings)."""
        out = []
        for t, st in enumerate(self.stages, 1):
            e: dict[str, Any] = {
                "op": st.kind,
                "out": [[_frac_str(a), _frac_str(b)] for a, b in self.ivs[t]],
            }
            if t in self.relax:
                e["relax"] = [[_frac_str(v) for v in r] for r in self.relax[t]]
            out.append(e)
        return out


# --------------------------------------------------------------------------- results


def _frac(q: Any) -> Fraction:
    q = mpq(q)
    return Fraction(int(q.numerator), int(q.denominator))


@dataclass(frozen=True)
class Bounds:
    """Bounds at one soundness level. `lower`/`upper` are exact (Fractions); `ibp_*` are
    the IBP bounds (equal to lower/upper for algorithm "ibp"); with a top_label property,
    `margins[j]` is a lower bound of out_k - out_j (None for j = k) and `holds` says
    whether every margin is > 0."""

    level: str
    statement: str
    lower: tuple[Fraction, ...]
    upper: tuple[Fraction, ...]
    ibp_lower: tuple[Fraction, ...]
    ibp_upper: tuple[Fraction, ...]
    margins: tuple[Fraction | None, ...] | None = None
    holds: bool | None = None
    witness: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def widths(self) -> list[float]:
        return [float(h - lo) for lo, h in zip(self.lower, self.upper, strict=True)]

    def ibp_widths(self) -> list[float]:
        return [float(h - lo) for lo, h in zip(self.ibp_lower, self.ibp_upper, strict=True)]


@dataclass(frozen=True)
class VerificationResult:
    """What `verify` certifies: the box, the algorithm, and `real` (level 1) and
    `runtime` (level 2) bounds."""

    algorithm: str
    property: Any
    norm: str
    dtype: str
    kernels: str
    model_hash: str
    box_lower: tuple[Fraction, ...]
    box_upper: tuple[Fraction, ...]
    center: tuple[Fraction, ...]
    radius: tuple[Fraction, ...]
    real: Bounds
    runtime: Bounds
    network: dict[str, Any] = field(repr=False, compare=False)

    @property
    def runtime_covered(self) -> bool:
        """Whether the runtime level describes what `Result.predict` computes for this
        result: kernels "ordered", or dtype "exact" (exact arithmetic, order-independent).
        For other kernels ("fast") the runtime bounds are those of the ordered kernels."""
        return self.kernels == "ordered" or self.dtype == "exact"

    @property
    def holds(self) -> bool | None:
        """For a top_label property: True when it is proved at the real level and at the
        runtime level, and the runtime level covers the result's kernels
        (`runtime_covered`); False when the real level, or a covering runtime level, does
        not prove it; None for property "bounds", and for a result whose kernels are not
        covered (e.g. "fast") when the real level proves it: nothing is then claimed about
        what `predict` returns (`runtime.holds` still speaks of the ordered kernels)."""
        if self.real.holds is None:
            return None
        if not self.real.holds:
            return False
        if not self.runtime_covered:
            return None
        return bool(self.runtime.holds)

    def summary(self) -> str:
        """One line per level: total width (and IBP's), and the property when one was asked;
        the runtime line says when the result's kernels are not covered."""
        lines = []
        for b in (self.real, self.runtime):
            s = f"{b.level}: {self.algorithm} width {sum(b.widths()):.6g}"
            if self.algorithm != "ibp":
                s += f" (ibp {sum(b.ibp_widths()):.6g})"
            if b.holds is not None:
                verdict = "holds" if b.holds else "not proved"
                s += f"; {self.property[0]} {self.property[1]} {verdict}"
            if b.level == "runtime" and not self.runtime_covered:
                s += f"; kernels={self.kernels!r} not covered (bounds for kernels='ordered')"
            lines.append(s)
        return "\n".join(lines)

    def certificate(self) -> dict[str, Any]:
        """The JSON certificate (see the module docstring); `digest` covers every field."""
        qs = lambda xs: [None if x is None else _frac_str(x) for x in xs]  # noqa: E731
        levels = {}
        for b in (self.real, self.runtime):
            e: dict[str, Any] = {
                "statement": b.statement,
                "lower": qs(b.lower),
                "upper": qs(b.upper),
            }
            if b.margins is not None:
                e["margins"] = qs(b.margins)
                e["holds"] = b.holds
            if b.witness is not None:
                e["witness"] = b.witness
            levels[b.level] = e
        prop = self.property if isinstance(self.property, str) else list(self.property)
        cert: dict[str, Any] = {
            "format": CERT_FORMAT,
            "model_hash": self.model_hash,
            "network": self.network,
            "box": {
                "norm": self.norm,
                "center": qs(self.center),
                "radius": qs(self.radius),
                "lower": qs(self.box_lower),
                "upper": qs(self.box_upper),
            },
            "algorithm": self.algorithm,
            "property": prop,
            "kernels": "ordered",
            "levels": levels,
        }
        cert["digest"] = _sha(cert)
        return cert

    def save_certificate(self, path: Any) -> None:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self.certificate(), fh, indent=1, sort_keys=True)
            fh.write("\n")


def _vector(v: Any, n: int | None, what: str) -> list[Fraction]:
    arr = np.asarray(v, dtype=object)
    if arr.ndim == 0:
        if n is None:
            raise VerificationError(f"verify: {what}: expected a vector, got a scalar")
        arr = np.array([v] * n, dtype=object)
    if arr.ndim != 1 or (n is not None and arr.shape[0] != n):
        raise VerificationError(
            f"verify: {what}: expected shape ({n if n is not None else 'n'},), got {arr.shape}"
        )
    out = []
    for x in arr:
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, Fraction, np.number)):
            raise VerificationError(f"verify: {what}: expected numbers, got {x!r}")
        if isinstance(x, (float, np.floating)) and not math.isfinite(float(x)):
            raise VerificationError(f"verify: {what}: expected finite numbers, got {x!r}")
        out.append(Fraction(x) if isinstance(x, (int, Fraction)) else Fraction(float(x)))
    return out


def _statement(level: str, dtype: str, kernels: str) -> str:
    if level == "real":
        return (
            "level 1: every output of the real-valued network (exact real arithmetic on the "
            "stored parameters) for every real input in the box lies in [lower, upper]; "
            "computed with outward rounding"
        )
    if dtype == "exact":
        return (
            "level 2: the runtime computes exactly in dtype 'exact', so its outputs for every"
            " rational input in the box lie in the level-1 bounds"
        )
    s = (
        f"level 2: Result.predict with kernels='ordered' in {dtype} returns, for every "
        "binary64 input in the box, outputs in [lower, upper] (directed rounding in the "
        f"{dtype} format following the ordered op order)"
    )
    if kernels != "ordered":
        s += (
            f"; this result uses kernels={kernels!r}, whose summation order and libm are not"
            " covered"
        )
    return s


def verify(
    result: Any,
    center: Any,
    radius: Any,
    norm: str = "inf",
    property: Any = "bounds",
    algorithm: str = "ibp",
) -> VerificationResult:
    """Certified output bounds of `result`'s network on the box center +- radius (see the
    module docstring for both soundness levels)."""
    stages = _stages(result)
    if norm != "inf":
        raise _unavailable(f"norm {norm!r}")
    if algorithm not in ("ibp", "crown"):
        raise VerificationError(f"verify: algorithm must be 'ibp' or 'crown', got {algorithm!r}")
    c = _vector(center, None, "center")
    n = len(c)
    r = _vector(radius, n, "radius")
    if any(x < 0 for x in r):
        raise VerificationError(f"verify: radius must be >= 0, got {[float(x) for x in r]}")
    try:
        n_out = result.model.out_shape((n,))
    except TorchLeanError as e:
        raise VerificationError(
            f"verify: center of length {n} does not fit the model: {e}"
        ) from None
    m = n_out[0]
    top: int | None = None
    if property != "bounds":
        if (
            isinstance(property, (tuple, list))
            and len(property) == 2
            and property[0] == "top_label"
            and isinstance(property[1], int)
            and not isinstance(property[1], bool)
            and 0 <= property[1] < m
        ):
            top = property[1]
        else:
            raise VerificationError(
                f"verify: property must be 'bounds' or ('top_label', k) with 0 <= k < {m}, "
                f"got {property!r}"
            )
    lo = [a - b for a, b in zip(c, r, strict=True)]
    hi = [a + b for a, b in zip(c, r, strict=True)]
    H = _Arith(None)
    levels: list[Bounds] = []
    for level in ("real", "runtime"):
        if level == "runtime" and result.dtype == "exact":
            b0 = levels[0]
            levels.append(
                Bounds("runtime", _statement("runtime", "exact", result.kernels), b0.lower,
                       b0.upper, b0.ibp_lower, b0.ibp_upper, b0.margins, b0.holds, b0.witness)
            )  # fmt: skip
            break
        D = DTYPE_DOMAIN[result.dtype] if level == "runtime" else None
        A = _Arith(D if isinstance(D, IEEEDomain) else None)
        f = _fmt(D) if isinstance(D, IEEEDomain) else None
        box = [(A._cv(A.dn, mpq(a)), A._cv(A.up, mpq(b))) for a, b in zip(lo, hi, strict=True)]
        outs = _ibp(A, stages, box)[-1]
        if not all(gmpy2.is_finite(v) for iv in outs for v in iv):  # no layers: the box
            raise VerificationError(f"verification failed: an output bound is not finite"
                                    f" at the {level} level (overflow)")  # fmt: skip
        ilo = [_q(o[0]) for o in outs]
        ihi = [_q(o[1]) for o in outs]
        flo, fhi = list(ilo), list(ihi)
        margins: list[Any] | None = None
        if top is not None:
            margins = [None if j == top else ilo[top] - ihi[j] for j in range(m)]
        wit = None
        if algorithm == "crown":
            cr = _Crown(H, A, f, stages, box)
            T = len(stages)
            eye = [[mpq(int(i == j)) for j in range(m)] for i in range(m)]

            # CROWN's exact results rounded outward to H's numbers: short p/q strings
            def dn(q: Any) -> Any:
                v = H._cv(H.dn, q)
                if not gmpy2.is_finite(v):
                    raise VerificationError(
                        "verification failed: a CROWN bound is beyond the level-1 exponent "
                        "range (overflow)"
                    )
                return _q(v)

            cl = [dn(v) for v in cr.backward(eye, T)]
            ch = [-dn(v) for v in cr.backward([[-v for v in row] for row in eye], T)]
            flo = [max(a, b) for a, b in zip(ilo, cl, strict=True)]
            fhi = [min(a, b) for a, b in zip(ihi, ch, strict=True)]
            if top is not None and margins is not None:
                rows = [
                    [mpq(int(i == top) - int(i == j)) for i in range(m)]
                    for j in range(m)
                    if j != top
                ]
                cm = iter([dn(v) for v in cr.backward(rows, T)])
                margins = [None if j == top else max(margins[j], next(cm)) for j in range(m)]
            wit = cr.witness()
        fm = None if margins is None else tuple(None if x is None else _frac(x) for x in margins)
        levels.append(
            Bounds(
                level,
                _statement(level, result.dtype, result.kernels),
                tuple(_frac(x) for x in flo),
                tuple(_frac(x) for x in fhi),
                tuple(_frac(x) for x in ilo),
                tuple(_frac(x) for x in ihi),
                fm,
                None if fm is None else all(x > 0 for x in fm if x is not None),
                wit,
            )
        )
    return VerificationResult(
        algorithm,
        property if isinstance(property, str) else ("top_label", top),
        norm,
        result.dtype,
        result.kernels,
        model_hash(result),
        tuple(lo),
        tuple(hi),
        tuple(c),
        tuple(r),
        levels[0],
        levels[1],
        network_json(result),
    )
