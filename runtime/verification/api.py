"""`verify`: parse the arguments, bound each soundness level, build the result.

Invariants:
- Arguments are checked in a fixed order, each failure a `VerificationError` with the
  same message as always: the network (`network.stages`: typed results, dtype, layers),
  the norm, the algorithm, center, radius (shape, numbers, finite, >= 0), the model's fit
  to the center's length, the property.
- The box is exact: lower = center - radius, upper = center + radius (Fractions); each
  level rounds it outward once into its own numbers.
- Level "real" always runs with 160-bit outward arithmetic; level "runtime" in the dtype's
  own format, except for dtype "exact", where it repeats level 1's bounds (the runtime is
  exact). CROWN's results are rounded outward to level-1 numbers (short p/q) and
  intersected with IBP; a CROWN bound beyond the level-1 exponent range raises.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2
import numpy as np
from gmpy2 import mpq

from runtime.backends import DTYPE_DOMAIN
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError

from .arithmetic import Arith
from .bab import MAX_BRANCHES, TIMEOUT, Level, Outcome, search
from .core import VerificationError, frac, q, unavailable
from .crown import Crown, fmt, slopes_json
from .intervals import ibp
from .network import Stage, model_hash, network_json, stages
from .results import Bounds, VerificationResult, statement

__all__ = ["ALGORITHMS", "Request", "parse", "verify"]

ALGORITHMS = ("ibp", "crown", "alpha-crown", "bab")


@dataclass(frozen=True)
class Request:
    """A checked `verify` call: the stages, the exact box and the output property."""

    stages: list[Stage]
    center: list[Fraction]
    radius: list[Fraction]
    lower: list[Fraction]
    upper: list[Fraction]
    n_out: int
    top: int | None
    in_shape: tuple[int, ...] = ()


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


def _top_label(property: Any, m: int) -> int | None:
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
    return top


def parse(
    result: Any, center: Any, radius: Any, norm: str, property: Any, algorithm: str
) -> Request:
    """The checked request (raises `VerificationError` in the documented order)."""
    sts = stages(result)
    if norm != "inf":
        raise unavailable(f"norm {norm!r}")
    if algorithm not in ALGORITHMS:
        raise VerificationError(
            f"verify: algorithm must be one of {', '.join(map(repr, ALGORITHMS))}, "
            f"got {algorithm!r}"
        )
    arr = np.asarray(center, dtype=object)
    shape = tuple(arr.shape) if arr.ndim > 1 else None  # an image: (C, H, W)
    c = _vector(arr.reshape(-1) if shape else center, None, "center")
    n = len(c)
    rad = np.asarray(radius, dtype=object)
    r = _vector(rad.reshape(-1) if shape and rad.shape == shape else radius, n, "radius")
    if any(x < 0 for x in r):
        raise VerificationError(f"verify: radius must be >= 0, got {[float(x) for x in r]}")
    in_shape = shape or (n,)
    try:
        n_out = result.model.out_shape(in_shape)
    except TorchLeanError as e:
        raise VerificationError(
            f"verify: center of shape {in_shape} does not fit the model: {e}"
        ) from None
    if len(n_out) != 1:
        raise unavailable(f"outputs of shape {tuple(n_out)} (a vector is needed)")
    m = n_out[0]
    sts = stages(result, in_shape)
    top = _top_label(property, m)
    if algorithm == "bab" and top is None:
        raise VerificationError("verify: algorithm 'bab' needs property ('top_label', k)")
    lo = [a - b for a, b in zip(c, r, strict=True)]
    hi = [a + b for a, b in zip(c, r, strict=True)]
    return Request(sts, c, r, lo, hi, m, top, in_shape)


def _crown_bounds(
    H: Arith,
    A: Arith,
    D: Any,
    req: Request,
    box: list[Any],
    bounds: tuple[Any, Any, Any],
    alpha: bool,
) -> tuple[list[Any], list[Any], list[Any] | None, list[dict[str, Any]], dict[str, Any] | None]:
    """CROWN's bounds and margins intersected with IBP's (`bounds`), and the witness; with
    `alpha`, also alpha-CROWN's (its chain, per-row slopes and bounds), intersected too."""
    ilo, ihi, margins = bounds
    m, top = req.n_out, req.top
    f = fmt(D) if isinstance(D, IEEEDomain) else None
    cr = Crown(H, A, f, req.stages, box)
    chains = [cr] if not alpha else [cr, Crown(H, A, f, req.stages, box, prior=cr)]
    T = len(req.stages)
    eye = [[mpq(int(i == j)) for j in range(m)] for i in range(m)]
    neg = [[-v for v in row] for row in eye]
    rows = [[mpq(int(i == top) - int(i == j)) for i in range(m)] for j in range(m) if j != top]

    # CROWN's exact results rounded outward to H's numbers: short p/q strings
    def dn(v: Any) -> Any:
        w = H.cv(H.dn, v)
        if not gmpy2.is_finite(w):
            raise VerificationError(
                "verification failed: a CROWN bound is beyond the level-1 exponent range (overflow)"
            )
        return q(w)

    flo, fhi = list(ilo), list(ihi)
    final: dict[str, Any] = {}
    for ch in chains:
        objectives = [("lower", eye), ("upper", neg)]
        if top is not None and margins is not None:
            objectives.append(("margins", rows))
        for kind, C in objectives:
            sl = ch.slopes(C, T)
            if sl is not None:
                final[kind] = slopes_json(sl)
            got = [dn(v) for v in ch.backward(C, T, sl)]
            if kind == "lower":
                flo = [max(a, b) for a, b in zip(flo, got, strict=True)]
            elif kind == "upper":
                fhi = [min(a, -b) for a, b in zip(fhi, got, strict=True)]
            else:
                it = iter(got)
                margins = [None if j == top else max(margins[j], next(it)) for j in range(m)]
    extra = None
    if alpha:
        last = chains[1].ivs[-1]  # the alpha chain's own last interval: sound as well
        flo = [max(a, q(x[0])) for a, x in zip(flo, last, strict=True)]
        fhi = [min(a, q(x[1])) for a, x in zip(fhi, last, strict=True)]
        extra = {"witness": chains[1].witness(), "slopes": final}
    return flo, fhi, margins, cr.witness(), extra


def _setup(result: Any, req: Request, level: str) -> tuple[Any, Arith, list[Any]]:
    """A level's domain (None at level 1), arithmetic and box rounded outward into it."""
    D = DTYPE_DOMAIN[result.dtype] if level == "runtime" else None
    A = Arith(D if isinstance(D, IEEEDomain) else None)
    box = [(A.cv(A.dn, mpq(a)), A.cv(A.up, mpq(b))) for a, b in zip(req.lower, req.upper,
                                                                      strict=True)]  # fmt: skip
    return D, A, box


def level_bounds(result: Any, req: Request, level: str, algorithm: str, H: Arith) -> Bounds:
    """The bounds at one level ("real" or "runtime") of an inexact dtype."""
    D, A, box = _setup(result, req, level)
    outs = ibp(A, req.stages, box)[-1]
    if not all(gmpy2.is_finite(v) for iv in outs for v in iv):  # no layers: the box
        raise VerificationError(f"verification failed: an output bound is not finite"
                                f" at the {level} level (overflow)")  # fmt: skip
    ilo = [q(o[0]) for o in outs]
    ihi = [q(o[1]) for o in outs]
    flo, fhi = list(ilo), list(ihi)
    m, top = req.n_out, req.top
    margins: list[Any] | None = None
    if top is not None:
        margins = [None if j == top else ilo[top] - ihi[j] for j in range(m)]
    wit = extra = None
    if algorithm in ("crown", "alpha-crown"):
        flo, fhi, margins, wit, extra = _crown_bounds(
            H, A, D, req, box, (ilo, ihi, margins), algorithm == "alpha-crown"
        )
    fm = None if margins is None else tuple(None if x is None else frac(x) for x in margins)
    return Bounds(
        level,
        statement(level, result.dtype, result.kernels),
        tuple(frac(x) for x in flo),
        tuple(frac(x) for x in fhi),
        tuple(frac(x) for x in ilo),
        tuple(frac(x) for x in ihi),
        fm,
        None if fm is None else all(x > 0 for x in fm if x is not None),
        wit,
        extra,
    )


def _exact_runtime(real: Bounds, kernels: str) -> Bounds:
    """Level 2 of dtype "exact": the runtime is exact, so level 1's bounds."""
    b0 = real
    return dataclasses.replace(
        b0, level="runtime", statement=statement("runtime", "exact", kernels)
    )


def _branch(
    result: Any, req: Request, H: Arith, bounds: list[Bounds], budget: tuple[int, float]
) -> tuple[list[Bounds], Outcome]:
    """Branch and bound from the root (alpha-CROWN) bounds of each level."""
    levels = []
    for b in bounds:
        D, A, box = _setup(result, req, b.level)
        f = fmt(D) if isinstance(D, IEEEDomain) else None
        assert b.margins is not None
        levels.append(Level(b.level, H, A, f, box, b.margins))
    assert req.top is not None
    out = search(result, req.stages, levels, (req.lower, req.upper, req.in_shape), req.top, budget)
    if out.leaves is None:
        return bounds, out
    new = []
    for b in bounds:
        ms = out.margins[b.level]
        holds = all(x > 0 for x in ms if x is not None)
        new.append(dataclasses.replace(b, margins=ms, holds=holds, branches=out.leaves[b.level]))
    return new, out


def verify(
    result: Any,
    center: Any,
    radius: Any,
    norm: str = "inf",
    property: Any = "bounds",
    algorithm: str = "ibp",
    *,
    max_branches: int = MAX_BRANCHES,
    timeout: float = TIMEOUT,
) -> VerificationResult:
    """Certified output bounds of `result`'s network on the box center +- radius (see the
    package docstring for both soundness levels); `max_branches` and `timeout` (seconds)
    bound algorithm "bab"'s search."""
    req = parse(result, center, radius, norm, property, algorithm)
    H = Arith(None)
    root = "alpha-crown" if algorithm == "bab" else algorithm
    real = level_bounds(result, req, "real", root, H)
    runtime = None if result.dtype == "exact" else level_bounds(result, req, "runtime", root, H)
    out = None
    if algorithm == "bab":
        got, out = _branch(result, req, H, [real] if runtime is None else [real, runtime],
                           (max_branches, timeout))  # fmt: skip
        real, runtime = got[0], got[-1] if runtime is not None else None
    if runtime is None:
        runtime = _exact_runtime(real, result.kernels)
    return VerificationResult(
        algorithm,
        property if isinstance(property, str) else ("top_label", req.top),
        norm,
        result.dtype,
        result.kernels,
        model_hash(result, req.in_shape),
        tuple(req.lower),
        tuple(req.upper),
        tuple(req.center),
        tuple(req.radius),
        real,
        runtime,
        network_json(result, req.in_shape),
        None if out is None else out.counterexample,
        0 if out is None else out.branches,
    )
