"""Per-node error bounds for the `fast` kernel profile.

Each primitive op states a bound on |ŷ − y| for one output element, where ŷ is the
runtime's result and y the exact result *on the runtime's own inputs to that node*
(composites are inlined into primitives first, since that is how the runtime runs them).
y is computed by the spec forward in a 256-bit MPFR domain (`HP`); a slack of 2**-200·M
absorbs its own rounding. With u = 2**-p the unit roundoff, η the smallest subnormal and
γ_n = n·u/(1 − n·u):

| op | bound |
|---|---|
| structural ops, neg, abs, relu, maximum, minimum, detach, select, gather ... | 0 (exact) |
| reduce_max, mask_neg_inf (a selected input element or −∞) | 0 (exact) |
| add, sub, mul, div, sqrt, clamp, const | u·|y| + η/2 (correctly rounded) |
| scale | 2.01·u·|y| + (|x| + 1)·η (the constant c is rounded first) |
| exp, log, tanh, sin, cos | K·ulp(y), K from `ULP_BUDGET` (data, per dtype) |
| sigmoid = 1/(1 + exp(−x)) | (2K + 2.01)·u·|y| + η |
| sum, reduce_sum (n terms) | γ_n·Σ|x_i| |
| matmul (k terms), linear (k terms + bias) | γ_{k+1}·(Σ|a_p·b_p| + |bias|) + (k+1)·η |
| softmax (n per row) | 1.01·(2·max|z| + 4K + n + 2)·u·y_j + η, z = x − max |
| log_softmax | 1.01·u·(|z_j| + |y_j| + 2K·|log s| + max|z| + 2K + n) + η |

A result may be ±inf where the bound's magnitude reaches the overflow threshold, and must
be NaN exactly where y is NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2

from runtime.backend import DTYPE_DOMAIN, NUMPY, Backend
from runtime.context import KernelContext
from runtime.lower import lower
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.inline import inline
from spec.ops import get_op
from spec.tensor import Tensor

__all__ = ["HP", "ULP_BUDGET", "BoundReport", "check_bounds", "node_bound"]

HP = IEEEDomain("hp256", 256, 24)
# ULP budgets of the fast profile's transcendental functions, per dtype (NumPy on CPU).
# float32: NumPy's SIMD float32 routines are within 4 ulp; bfloat16/float16 are computed
# in float32 and rounded once (< 1 ulp); float64: libm/SVML within 4 ulp.
ULP_BUDGET: dict[str, dict[str, float]] = {
    "float64": dict.fromkeys(("exp", "log", "tanh", "sin", "cos"), 4.0),
    "float32": dict.fromkeys(("exp", "log", "tanh", "sin", "cos"), 4.0),
    "bfloat16": dict.fromkeys(("exp", "log", "tanh", "sin", "cos"), 1.0),
    "float16": dict.fromkeys(("exp", "log", "tanh", "sin", "cos"), 1.0),
}
TRANSCENDENTAL = ("exp", "log", "tanh", "sin", "cos")


@dataclass
class _Fmt:
    u: Fraction
    eta: Fraction
    threshold: Fraction
    D: IEEEDomain


def _fmt(D: IEEEDomain) -> _Fmt:
    u = Fraction(1, 2**D.precision)
    eta = Fraction(1, 2 ** (1 - D.emin))
    max_finite = Fraction(2) ** D.emax - Fraction(2) ** (D.emax - D.precision)
    return _Fmt(u, eta, max_finite + Fraction(2) ** (D.emax - D.precision - 1), D)


def _q(v: Any) -> Fraction | None:
    """Exact rational of an MPFR value, or None for inf/NaN."""
    if not gmpy2.is_finite(v):
        return None
    n, d = v.as_integer_ratio()
    return Fraction(int(n), int(d))


def _abs(v: Any) -> Fraction:
    q = _q(v)
    return abs(q) if q is not None else Fraction(10) ** 400


def _ulp(f: _Fmt, y: Fraction) -> Fraction:
    D = f.D
    a = abs(y)
    if a == 0:
        return f.eta
    e = a.numerator.bit_length() - a.denominator.bit_length() + 1
    while Fraction(2) ** (e - 1) > a:
        e -= 1
    while Fraction(2) ** e <= a:
        e += 1
    return Fraction(2) ** (max(e, D.emin + D.precision - 1) - D.precision)


def _gamma(n: int, u: Fraction) -> Fraction:
    return n * u / (1 - n * u) if n * u < 1 else Fraction(10) ** 400


BoundFn = Callable[
    [_Fmt, list[Tensor], Tensor, dict[str, Any], float], list[tuple[Fraction, Fraction]]
]


def _elementwise(a: float, b: float) -> BoundFn:
    def fn(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
        return [(Fraction(a) * f.u * _abs(v) + Fraction(b) * f.eta, _abs(v)) for v in y.data]

    return fn


def _sigmoid(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    # 1/(1 + e), e = exp(-x) with K ulp (<= 2K·u relative); e/(1+e) <= 1 damps it; the add and
    # the division round once each.
    a = (2 * Fraction(K) + Fraction(201, 100)) * f.u
    return [(a * _abs(v) + f.eta, _abs(v)) for v in y.data]


def _scale(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    return [
        (Fraction(201, 100) * f.u * _abs(v) + (_abs(x) + 1) * f.eta, _abs(v))
        for v, x in zip(y.data, xs[0].data, strict=True)
    ]


def _transcendental(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for v in y.data:
        q = _q(v)
        ulp = _ulp(f, q) if q is not None else Fraction(0)
        out.append((Fraction(K) * ulp, _abs(v)))
    return out


def _sum_like(
    f: _Fmt, terms: list[list[Any]], extra_eta: int = 0, gamma_n: int | None = None
) -> list[tuple[Fraction, Fraction]]:
    out = []
    for ts in terms:
        m = sum((_abs(t) for t in ts), Fraction(0))
        n = gamma_n if gamma_n is not None else len(ts)
        out.append((_gamma(n, f.u) * m + extra_eta * f.eta, m))
    return out


def _sum(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    return _sum_like(f, [list(xs[0].data)])


def _reduce_sum(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    from spec.shape import ravel_index, unravel_index

    x, axis = xs[0], attrs["axis"]
    terms = []
    for flat in range(len(y.data)):
        o = unravel_index(flat, y.shape)
        terms.append(
            [x.data[ravel_index((*o[:axis], k, *o[axis:]), x.shape)] for k in range(x.shape[axis])]
        )
    return _sum_like(f, terms)


def _products(a: Tensor, b: Tensor) -> list[list[Any]]:
    """Per output element of batched a @ b, the exact products a[i,p]*b[p,j] (as HP)."""
    from spec.ops import _matmul_operands
    from spec.shape import ravel_index, size, unravel_index

    A, B = _matmul_operands(
        [a, b],
        (
            *__import__("numpy").broadcast_shapes(a.shape[:-2], b.shape[:-2]),
            a.shape[-2],
            b.shape[-1],
        ),
    )
    k = A.shape[-1]
    out_shape = (*A.shape[:-2], A.shape[-2], B.shape[-1])
    terms = []
    for flat in range(size(out_shape)):
        idx = unravel_index(flat, out_shape)
        bt, i, j = idx[:-2], idx[-2], idx[-1]
        terms.append(
            [
                HP.mul(
                    A.data[ravel_index((*bt, i, p), A.shape)],
                    B.data[ravel_index((*bt, p, j), B.shape)],
                )
                for p in range(k)
            ]
        )
    return terms


def _matmul(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    terms = _products(xs[0], xs[1])
    k = xs[0].shape[-1]
    return _sum_like(f, terms, extra_eta=k + 1, gamma_n=k + 1)


def _linear(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    x, w, b = xs
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    terms = []
    for r in range(rows):
        for i in range(out_dim):
            ts = [HP.mul(w.data[i * n + j], x.data[r * n + j]) for j in range(n)]
            terms.append([*ts, b.data[i]])
    return _sum_like(f, terms, extra_eta=n + 1, gamma_n=n + 1)


def _rows(t: Tensor) -> list[tuple[Any, ...]]:
    n = t.shape[-1]
    return [t.data[r * n : (r + 1) * n] for r in range(len(t.data) // n)]


def _softmax(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for row, yr in zip(_rows(xs[0]), _rows(y), strict=True):
        qs = [_q(v) for v in row]
        finite = [q for q in qs if q is not None]
        zmax = (max(finite) - min(finite)) if finite else Fraction(0)
        a = Fraction(101, 100) * (2 * zmax + 4 * Fraction(K) + len(row) + 2)
        out.extend((a * f.u * _abs(v) + f.eta, _abs(v)) for v in yr)
    return out


def _log_softmax(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for row, yr in zip(_rows(xs[0]), _rows(y), strict=True):
        qs = [_q(v) for v in row]
        if any(q is None for q in qs):
            out.extend((Fraction(0), _abs(v)) for v in yr)
            continue
        m = max(qs)  # type: ignore[type-var]
        zs = [q - m for q in qs]  # type: ignore[operator]
        zmax = max(abs(z) for z in zs)
        for z, v in zip(zs, yr, strict=True):
            ls = abs(_q(v) - z) if _q(v) is not None else Fraction(0)  # |log s| = |z - y|
            c = abs(z) + _abs(v) + 2 * Fraction(K) * ls + zmax + 2 * Fraction(K) + len(row)
            out.append((Fraction(101, 100) * f.u * c + f.eta, _abs(v)))
    return out


_EXACT = (
    "neg",
    "abs",
    "relu",
    "maximum",
    "minimum",
    "detach",
    "reshape",
    "swap_adjacent",
    "broadcast_to",
    "concat",
    "slice",
    "select",
    "index_select",
    "gather",
    "reduce_max",
    "mask_neg_inf",
)
BOUNDS: dict[str, BoundFn] = {
    **dict.fromkeys(_EXACT, _elementwise(0, 0)),
    **dict.fromkeys(("add", "sub", "mul", "div", "sqrt", "clamp", "const"), _elementwise(1, 0.5)),
    **dict.fromkeys(TRANSCENDENTAL, _transcendental),
    "scale": _scale,
    "sigmoid": _sigmoid,
    "sum": _sum,
    "reduce_sum": _reduce_sum,
    "scatter_add": None,  # type: ignore[dict-item]
    "matmul": _matmul,
    "linear": _linear,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
}


def _scatter_add(f: _Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    from spec.shape import size

    x = xs[0]
    inner = size(x.shape[1:])
    terms: list[list[Any]] = [[] for _ in range(len(y.data))]
    for k, j in enumerate(attrs["indices"]):
        for e in range(inner):
            terms[j * inner + e].append(x.data[k * inner + e])
    return _sum_like(f, terms)


BOUNDS["scatter_add"] = _scatter_add


def node_bound(op: str) -> BoundFn:
    try:
        return BOUNDS[op]
    except KeyError:
        raise TorchLeanError(f"no fast-profile error bound stated for op {op!r}") from None


@dataclass
class BoundReport:
    ok: bool
    nodes: int = 0
    worst_ratio: float = 0.0
    max_ulp: float = 0.0
    first_violation: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return float("inf")


def _ratio(err: Fraction, bound: Fraction) -> float:
    if err == 0:
        return 0.0
    return _float(err / bound) if bound > 0 else float("inf")


def check_bounds(
    g: Graph,
    xs: Sequence[Tensor],
    env: Sequence[int] = (),
    *,
    dtype: str,
    kernels: str = "fast",
    backend: Backend = NUMPY,
) -> BoundReport:
    """Run g (inlined) on the runtime (on `backend`); check every primitive node against
    its bound, given the runtime's own inputs to that node."""
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    f = _fmt(D)
    K = 0.5 if kernels == "ordered" else 0.0
    gi, _ = inline(g)
    if backend.guard is not None:
        backend.guard("bounds")  # e.g. CuPy with TF32 enabled: refuse, never "skip"
    try:
        ctx = KernelContext(dtype, kernels, backend)
        tape = lower(gi, [backend.from_spec(x, dtype) for x in xs], env, ctx=ctx)
    except TorchLeanError as e:
        return BoundReport(True, 0, details={"skipped": type(e).__name__})
    rep = BoundReport(True)
    vals = [backend.to_spec(n.value, dtype) for n in tape.nodes]
    for k, node in enumerate(gi.nodes):
        idx = gi.num_inputs + k
        args = [vals[a].map(HP._round) for a in node.args]  # exact: keeps -0, inf, NaN
        op = get_op(node.op)
        try:
            want = op.forward(HP, args, dict(node.attrs), env)
        except TorchLeanError:
            continue
        # the libm function behind an op (log_softmax also calls log: same budget per dtype)
        fn = "exp" if node.op in ("sigmoid", "softmax", "log_softmax") else node.op
        budget = K if kernels == "ordered" else ULP_BUDGET[dtype].get(fn, 0.0)
        bounds = node_bound(node.op)(f, args, want, dict(node.attrs), budget)
        rep.nodes += 1
        for e, (w, got, (bnd, mag)) in enumerate(
            zip(want.data, vals[idx].data, bounds, strict=True)
        ):
            bnd = bnd + mag * Fraction(1, 2**200)
            wq, gq = _q(w), _q(got)
            if gmpy2.is_nan(w) or gmpy2.is_nan(got):
                good = bool(gmpy2.is_nan(w) and gmpy2.is_nan(got))
                ratio = 0.0 if good else float("inf")
            elif gq is None:  # runtime overflowed to ±inf
                good = (wq is None and w == got) or (
                    mag * (1 + 4 * f.u) >= f.threshold
                    and ((wq is not None and (wq > 0) == (got > 0)) or w == got)
                )
                ratio = 0.0 if good else float("inf")
            elif wq is None:
                good, ratio = False, float("inf")
            else:
                err = abs(gq - wq)
                ratio = _ratio(err, bnd)
                good = err <= bnd
                if err:
                    rep.max_ulp = max(rep.max_ulp, _float(err / _ulp(f, wq)))
            rep.worst_ratio = max(rep.worst_ratio, ratio)
            if not good and rep.ok:
                rep.ok = False
                rep.first_violation = (
                    f"node %{idx} {node.op} element {e}: runtime {D.encode(got)} "
                    f"({float(got)!r}) vs exact {float(w)!r}, bound {_float(bnd)!r}"
                )
    return rep
