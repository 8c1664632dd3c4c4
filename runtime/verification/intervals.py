"""Interval bound propagation (IBP): each stage's output intervals from its input intervals,
following the runtime's op order, dispatched by op name.

Invariants:
- `ELEMENTWISE[op](A, stage, j, x)` encloses neuron j's output for every input in x at A's
  level; `LAYERS[op](A, stage, xs)` does it for a whole stage. sigmoid, gelu and batch_norm
  execute their `OP_ORDER` trees (`oporder.evaluate`), so level 2 follows the ordered
  kernels' op order; linear is the kernels' left fold over j of w[i,j]*x[j] (from the first
  product) then + b[i]; conv2d / avg_pool2d sum each output's window only (`Windowed.row`,
  its nonzero weights; no dense row); layer_norm follows OP_ORDER["layer_norm"] by hand
  (d*d enclosed as a square; plain interval arithmetic: sound, not tight).
- GELU is not monotone: its input interval is split at 0 and at the points of GELU_GRID;
  on each piece every intermediate of the body except the last product is monotone, so
  plain interval arithmetic per piece is sound, and the union (hull) is taken.
- A stage's input intervals are those of the values it reads, concatenated (`inputs_of`):
  an "add" stage (a residual addition) reads two values of one width and adds them
  elementwise, one rounded addition each.
- A stage output that is not finite raises `VerificationError` ("verification failed:
  layer <label> output j: ... (overflow)").
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import gmpy2
from gmpy2 import mpfr, mpq

from .arithmetic import Arith, fold, square
from .core import GELU_GRID, Iv, VerificationError, hull, q, show
from .network import Stage, Windowed, attr
from .oporder import OP_ORDER, evaluate

__all__ = [
    "ELEMENTWISE",
    "LAYERS",
    "elem",
    "exact_windowed",
    "ibp",
    "inputs_of",
    "layer",
    "window_err",
]

ElemRule = Callable[[Arith, Stage, int, Iv], Iv]
LayerRule = Callable[[Arith, Stage, list[Iv]], list[Iv]]


def _relu(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    z = mpfr(0)
    return max(x[0], z), max(x[1], z)


def _tanh(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    return A.tanh(x)


def _sigmoid(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    return evaluate(A, OP_ORDER["sigmoid"], {"x": x})


def _batch_norm(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    leaves = {
        "x": x,
        "mean": A.enclose(st.mean[j]),
        "var": A.enclose(st.var[j]),
        "eps": A.const(st.eps),
        "weight": A.enclose(st.weight[0][j]),
        "bias": A.enclose(st.bias[j]),
    }
    return evaluate(A, OP_ORDER["batch_norm"], leaves)


def _gelu(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    pts = [mpfr(g) for g in GELU_GRID] + [mpfr(0)]
    cuts = [x[0]] + [p for p in pts if x[0] < p < x[1]] + [x[1]]
    out: Iv | None = None
    for a, b in itertools.pairwise(cuts):
        piece = evaluate(A, OP_ORDER["gelu"], {"x": (a, b)})
        out = piece if out is None else hull(out, piece)
    if out is None:
        out = evaluate(A, OP_ORDER["gelu"], {"x": x})
    return out


def _leaky_relu(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    """x if x > 0 else RN(s * x) with s = negative_slope in [0, 1] (rounded once into the
    format at level 2): nondecreasing, so its endpoint values (directed) bound it."""
    s = A.const(attr(st, "negative_slope"))
    lo = x[0] if x[0] > 0 else A.mul(s, (x[0], x[0]))[0]
    hi = x[1] if x[1] > 0 else A.mul(s, (x[1], x[1]))[1]
    return lo, hi


def _hardtanh(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    """clamp(x, min_val, max_val), each bound a constant (rounded once at level 2, enclosed
    at level 1): nondecreasing in x and in both bounds, and exact (no rounding)."""
    a, b = A.const(attr(st, "min_val")), A.const(attr(st, "max_val"))
    return min(max(x[0], a[0]), b[0]), min(max(x[1], a[1]), b[1])


ELEMENTWISE: dict[str, ElemRule] = {
    "relu": _relu,
    "tanh": _tanh,
    "sigmoid": _sigmoid,
    "gelu": _gelu,
    "batch_norm": _batch_norm,
    "leaky_relu": _leaky_relu,
    "hardtanh": _hardtanh,
}


def elem(A: Arith, st: Stage, j: int, x: Iv) -> Iv:
    """The interval of one elementwise neuron's output, following the runtime op order."""
    return ELEMENTWISE[st.op](A, st, j, x)


def _linear(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    out = []
    for row, b in zip(st.weight, st.bias, strict=True):
        acc: Iv | None = None
        for w, x in zip(row, xs, strict=True):
            p = A.mul(A.enclose(w), x)
            acc = p if acc is None else A.add(acc, p)
        assert acc is not None
        out.append(A.add(acc, A.enclose(b)))
    return out


def exact_windowed(st: Stage) -> Windowed:
    """A conv2d / avg_pool2d stage's windows with its kernel as gmpy2 rationals."""
    assert st.windowed is not None
    return st.windowed.with_kernel(mpq)


def window_err(A: Arith, st: Stage, xs: list[Iv]) -> list[Any]:
    """Level 2 (A in a format): per output of a conv2d / avg_pool2d stage, a bound on the
    rounding error of its dot product with k nonzero weights summed in *any* order, plus
    the bias: gamma_{k+1} (sum |w| max|x| + |b|) + k eta (1 + gamma_{k+1}) (u = 2^-p,
    gamma_k = k u / (1 - k u), eta = 2^(emin-1) for underflowing products; products with
    a zero weight are exact zeros). Zero at level 1. Each output's term is computed from
    its window only."""
    D = A.domain
    if D is None:
        return [mpq(0)] * len(st.bias)
    u, eta = mpq(1, 2**D.precision), mpq(1, 2 ** (1 - D.emin))
    X = [max(abs(q(x[0])), abs(q(x[1]))) for x in xs]
    op = exact_windowed(st)
    out = []
    for j, b in enumerate(st.bias):
        nz = [(w, X[i]) for i, w in op.row(j)]
        k = len(nz)
        g = (k + 1) * u / (1 - (k + 1) * u)
        s = sum((abs(w) * xm for w, xm in nz), mpq(0))
        out.append(g * (s + abs(mpq(b))) + k * eta * (1 + g))
    return out


def _windowed(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    """conv2d / avg_pool2d, whose summation order is not modelled: each output's exact
    interval (the sum over its window's nonzero weights), widened at level 2 by
    `window_err`, which holds for every order, and rounded outward into A's numbers."""
    errs = window_err(A, st, xs)
    op = exact_windowed(st)
    ends = [(q(x[0]), q(x[1])) for x in xs]
    out = []
    for j, (b, e) in enumerate(zip(st.bias, errs, strict=True)):
        lo = hi = mpq(b)
        for i, w in op.row(j):
            a, c = w * ends[i][0], w * ends[i][1]
            lo, hi = lo + min(a, c), hi + max(a, c)
        out.append((A.cv(A.dn, lo - e), A.cv(A.up, hi + e)))
    return out


def _layer_norm(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    """OP_ORDER["layer_norm"]: mu = fold(x) / n; d = x - mu; var = fold(d * d) / n;
    y = (d / sqrt(var + eps)) * w + b (plain interval arithmetic: sound, not tight)."""
    n = A.const(len(xs))
    mu = A.div(fold(A, xs), n)
    ds = [A.sub(x, mu) for x in xs]
    var = A.div(fold(A, [square(A, d) for d in ds]), n)
    den = A.sqrt(A.add(var, A.const(st.eps)))
    return [
        A.add(A.mul(A.div(d, den), A.enclose(w)), A.enclose(b))
        for d, w, b in zip(ds, st.weight[0], st.bias, strict=True)
    ]


def _max_pool(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    """max over each window: exact in every format (the runtime returns one of its inputs),
    so [max of the lower ends, max of the upper ends] at both levels."""
    return [(max(xs[i][0] for i in w), max(xs[i][1] for i in w)) for w in st.windows]


def _add(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    """A residual add: xs is its two inputs' intervals, concatenated (`inputs_of`); one
    rounded addition per element (outward at level 1, directed in the format at level 2,
    which encloses the runtime's round-to-nearest sum)."""
    n = len(xs) // 2
    return [A.add(a, b) for a, b in zip(xs[:n], xs[n:], strict=True)]


def _elementwise_layer(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    return [elem(A, st, j, x) for j, x in enumerate(xs)]


LAYERS: dict[str, LayerRule] = {
    "linear": _linear,
    "conv2d": _windowed,
    "avg_pool2d": _windowed,
    "layer_norm": _layer_norm,
    "max_pool2d": _max_pool,
    "add": _add,
    **{op: _elementwise_layer for op in ELEMENTWISE},
}


def layer(A: Arith, st: Stage, xs: list[Iv]) -> list[Iv]:
    """Stage st's output intervals; raises when one is not finite."""
    ys = LAYERS[st.op](A, st, xs)
    for j, y in enumerate(ys):
        if not (gmpy2.is_finite(y[0]) and gmpy2.is_finite(y[1])):
            raise VerificationError(
                f"verification failed: layer {st.label} output {j}: bound {show(y)} is not "
                "finite (overflow)"
            )
    return ys


def inputs_of(ivs: list[list[Iv]], st: Stage, t: int) -> list[Iv]:
    """Stage t's input intervals: its input values' intervals, concatenated in order."""
    return [x for i in st.srcs(t) for x in ivs[i]]


def ibp(A: Arith, stages: list[Stage], box: list[Iv]) -> list[list[Iv]]:
    """The intervals after every stage (index 0: the box)."""
    ivs = [box]
    for t, st in enumerate(stages, 1):
        ivs.append(layer(A, st, inputs_of(ivs, st, t)))
    return ivs
