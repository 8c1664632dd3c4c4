"""Values and graphs aimed at the hard cases (the suite's `*_hard` properties).

Invariants:
- Nothing here changes the draws of `values` or `core`: these are separate strategies, so
  the other properties keep their cases.
- `hard_scalars(D)` mixes: the ordinary elements (`scalars`, specials included), kink values
  (±0, ±1/2, ±1, ±2: relu/abs/sqrt at 0, clamp at small rational bounds), rounding-boundary
  values (1 ± ulp, half-ulps, 1.5), range boundaries (2**emin — MPFR's emin, so twice the
  smallest subnormal, not the smallest normal —, the subnormals, the largest finite) and
  each transcendental's hard ranges (`transcendental_hard`: exp near overflow and underflow,
  log near 1, tanh near saturation and 0, sin/cos at large arguments and near multiples of
  π/2, plus inputs whose correctly rounded result lies nearest a rounding midpoint, found by
  enumerating the format (16-bit formats) or by a fixed-seed search (float64, long double as
  the wide format)).
- `hard_tensors_for` draws each tensor either from a pool of 1 to 3 such values, so ties
  (equal elements, +0 vs −0) are frequent (maximum/minimum/reduce_max/max_pool2d tie rules,
  repeated values), or elementwise from finite values with full-width significands
  (`rounding_scalars`, so sums and products round); or (IEEE) all tensors of a case from one
  shared pool of ±0 and up to 2 values and their negations, so ties occur *across* operands
  (minimum(+0, −0), clamp at an operand-equal bound, abs of x and −x).
- One case in six (IEEE) draws its tensors from a pool of NaN (twice), ±inf, −0 and one
  finite value (`_special_pool`): lanes with several NaNs or equal infinities, so which NaN
  a reduction propagates (and where its cotangent goes) shows. `finite=True` (the engine
  runner's hard phase) leaves NaN and ±inf out everywhere and puts two cases in five, the
  first one drawn included, on `_range_pool` instead (the ends of the finite range:
  subnormals, the smallest normal, the largest finite value, ±, with 1/2, 2 and a full-width
  value, so results land on subnormals or overflow: an engine that flushes subnormals
  shows); the default draws are unchanged by it.
- `direct_graphs(gs, ops)` cuts a graph after its last node of a focused op, so the seed
  (signed zeros or full-width values) lands on that op's output and reaches its VJP as is.
- `long_reduction_graphs(ops)` reduces 9 to 12 elements (a pairwise sum and a left fold
  differ there), or folds over 3 to 6 rows (matmul's right-operand cotangent, linear's
  weight and bias cotangents: a reversed or reordered row fold shows); values of these
  graphs stay within `MAX_ELEMENTS`.
- `hard_seeds_for` makes a third of the seeds signed zeros only, so VJP sign rules show
  (`0 − x` vs `−x`) wherever the first contribution is stored as is, and a third
  full-width values only, so a reordered VJP (`(t*y)*(1-y)` vs `t*(y*(1-y))`) rounds apart.
- `fanin_graphs(ops)` builds `op(x, x)` followed by a node using x again (repeated
  arguments whose slot already holds a cotangent: the fan-in fold's order shows).
- `broadcast_graphs(ops)` builds `op(x, y)` (or `broadcast_to`) where the cotangent of y is
  reduced over two or more axes that are each longer than 1, followed by a sum so values round.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from functools import cache
from typing import Any

import gmpy2
import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from spec.domains import Domain, IEEEDomain
from spec.graph import Graph, GraphBuilder
from spec.shape import Shape, size
from spec.tensor import Tensor, TensorPack

from .values import scalars, special_values

__all__ = [
    "BROADCAST_OPS",
    "FANIN_OPS",
    "REDUCTION_OPS",
    "broadcast_graphs",
    "direct_graphs",
    "fanin_graphs",
    "hard_inputs_for",
    "hard_scalars",
    "hard_seeds_for",
    "hard_tensors_for",
    "long_reduction_graphs",
    "rounding_scalars",
    "rounding_tensors_for",
    "signed_zero_tensors_for",
    "transcendental_hard",
]

_NP16 = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
_FNS = ("exp", "log", "tanh", "sin", "cos")


def _name(D: IEEEDomain) -> str:
    return {8: "bfloat16", 11: "float16", 24: "float32", 53: "float64"}[D.precision]


def _nearest_midpoint_16(dtype: str, fn: str, k: int = 6) -> list[float]:
    """The k inputs of a 16-bit format whose fn result (float64) is nearest a midpoint."""
    t = _NP16[dtype]
    with np.errstate(all="ignore"):
        x = np.arange(2**16, dtype=np.uint16).view(t).astype(np.float64)
    x = x[np.isfinite(x)]
    with np.errstate(all="ignore"):
        y = getattr(np, fn)(x)
        c = y.astype(t).astype(np.float64)
        nxt = np.nextafter(c.astype(t), (np.sign(y - c) * np.inf).astype(t)).astype(np.float64)
        frac = np.abs(y - c) / np.abs(nxt - c)
        hard = np.abs(0.5 - frac)
    ok = np.isfinite(hard) & np.isfinite(y) & (y != 0) & (frac > 0)
    idx = np.argsort(np.where(ok, hard, np.inf), kind="stable")[:k]
    return [float(v) for v in x[idx]]


def _nearest_midpoint_64(fn: str, k: int = 6) -> list[float]:
    """Float64 inputs (fixed-seed search) whose long-double fn is nearest a float64
    midpoint, within one long-double ulp: where a wide candidate can round wrongly."""
    if np.finfo(np.longdouble).nmant < 63:
        return []
    rng = np.random.default_rng(16)
    lo, hi = {"exp": (-700, 700), "log": (1e-300, 1e300)}.get(fn, (-20.0, 20.0))
    x = rng.uniform(-8, 8, 20_000) if fn != "log" else rng.uniform(0, 8, 20_000)
    x = np.clip(x, lo, hi)
    with np.errstate(all="ignore"):
        y = getattr(np, fn)(x.astype(np.longdouble))
        c = y.astype(np.float64)
        mid = (c.astype(np.longdouble) + np.nextafter(c, np.sign(y - c) * np.inf)) / 2
        d = np.abs(y - mid) / np.spacing(np.abs(y))
    idx = np.argsort(np.where(np.isfinite(d), d, np.inf), kind="stable")[:k]
    return [float(v) for v in x[idx]]


@cache
def transcendental_hard(dtype: str) -> tuple[float, ...]:
    """Hard-range inputs of exp, log, tanh, sin, cos for a dtype (as floats)."""
    fin = {"float64": np.finfo(np.float64), "float32": np.finfo(np.float32)}
    big = float(fin[dtype].max) if dtype in fin else float(_finfo16(dtype).max)
    tiny = float(fin[dtype].tiny) if dtype in fin else float(_finfo16(dtype).tiny)
    lmax, lmin = float(np.log(big)), float(np.log(tiny))
    vals = [lmax, lmax + 0.01, lmax - 0.01, lmin, lmin - 3.0, 1e-5, -1e-5]  # exp
    vals += [1.0 + 2**-10, 1.0 - 2**-11, tiny, big]  # log
    vals += [4.5, 9.0, 19.0, -9.0]  # tanh near saturation
    vals += [1.5707963267948966, 3.141592653589793, 6.283185307179586, 1e4, 710.0, 355.0]
    if dtype in _NP16:
        for fn in _FNS:
            vals += _nearest_midpoint_16(dtype, fn)
    elif dtype == "float64":
        for fn in _FNS:
            vals += _nearest_midpoint_64(fn)
    return tuple(vals)


def _finfo16(dtype: str) -> Any:
    return np.finfo(np.float16) if dtype == "float16" else ml_dtypes.finfo(ml_dtypes.bfloat16)


_MEMO: dict[Any, Any] = {}


def _memo(key: Any, make: Any) -> Any:
    """The strategy `make()` built once per key (performance only: Hypothesis validates a
    strategy object's tree once, so a strategy rebuilt for every case cost a validation
    per case; a strategy's draws do not depend on which equal object is drawn from)."""
    hit = _MEMO.get(key)
    if hit is None:
        if len(_MEMO) > 20_000:  # shapes are few; a bound all the same
            _MEMO.clear()
        hit = _MEMO[key] = make()
    return hit


def _boundary(D: IEEEDomain) -> list[Any]:
    u = 2.0 ** -(D.precision - 1)
    fl = [1.0 + u, 1.0 - u / 2, 1.5, u / 2, 3 * u / 2, -(1.0 + u), 2.0**D.emin]
    return [D.from_float(v) for v in fl]


def hard_scalars(domain: Domain, *, finite: bool = False) -> st.SearchStrategy[Any]:
    """Elements aimed at the hard cases (see the module docstring); `finite` leaves out NaN
    and ±inf (subnormals, ±0 and the largest finite values stay)."""
    return _memo(("hard_scalars", domain, finite), lambda: _hard_scalars(domain, finite))


def _hard_scalars(domain: Domain, finite: bool) -> st.SearchStrategy[Any]:
    base = scalars(domain, specials=not finite)
    if not isinstance(domain, IEEEDomain):
        return base
    D = domain
    kinks = [D.from_float(v) for v in (0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0)]
    trans = [D.from_float(v) for v in transcendental_hard(_name(D))]
    edges = _boundary(D) + special_values(D)
    if finite:
        edges = [v for v in edges if gmpy2.is_finite(v)]
    return st.one_of(
        base,
        st.sampled_from(kinks),
        st.sampled_from(edges),
        st.sampled_from(trans),
    )


def rounding_scalars(domain: Domain) -> st.SearchStrategy[Any]:
    """Finite values with full-width significands (n / 2**(p-1), scaled by 2**e, e in
    [-4, 2]): their sums and products round, unlike Hypothesis' simple floats."""
    return _memo(("rounding_scalars", domain), lambda: _rounding_scalars(domain))


def _rounding_scalars(domain: Domain) -> st.SearchStrategy[Any]:
    if not isinstance(domain, IEEEDomain):
        return scalars(domain)
    D = domain
    p = D.precision
    return st.builds(
        lambda n, e: D.from_rational(Fraction(n, 2 ** (p - 1)) * Fraction(2) ** e),
        st.integers(-(2**p) + 1, 2**p - 1),
        st.integers(-4, 2),
    )


@st.composite
def _pooled(draw: Any, shape: Shape, elems: st.SearchStrategy[Any]) -> Tensor:
    # one composite for every shape (performance only: Hypothesis parses a composite's
    # source each time it decorates one; the draws are the same)
    n = size(shape)
    pool = draw(st.lists(elems, min_size=1, max_size=3))
    idx = draw(st.lists(st.integers(0, len(pool) - 1), min_size=n, max_size=n))
    return Tensor(shape, tuple(pool[i] for i in idx))


def _own_pools(
    shapes: Sequence[Shape], domain: Domain, finite: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    elems = hard_scalars(domain, finite=finite)
    plain = rounding_scalars(domain)

    def one(s: Shape) -> st.SearchStrategy[Tensor]:
        n = size(s)
        free = st.lists(plain, min_size=n, max_size=n).map(lambda v: Tensor(s, tuple(v)))
        return st.one_of(_pooled(s, elems), free)

    return st.tuples(*(one(tuple(s)) for s in shapes)).map(list)


@st.composite
def _shared_pool(
    draw: Any, shapes: Sequence[Shape], domain: Domain, finite: bool = False
) -> list[Tensor]:
    """Every tensor from one pool of ±0 and 0 to 2 values and their negations: ties *across*
    operands (maximum/minimum/clamp of equal or ±0 arguments, abs of x and -x)."""
    base = draw(st.lists(hard_scalars(domain, finite=finite), min_size=0, max_size=2))
    zero = domain.from_float(0.0)  # always with +0 and -0: signed-zero ties
    pool = [zero, domain.neg(zero), *base, *(domain.neg(v) for v in base)]
    # positions from a Hypothesis-controlled Random: drawn index lists shrink towards all
    # zeros (one value everywhere), which would make the cross-operand ties rare
    r = draw(st.randoms(use_true_random=False))
    out = []
    for s in shapes:
        out.append(Tensor(tuple(s), tuple(pool[r.randrange(len(pool))] for _ in range(size(s)))))
    return out


@st.composite
def _special_pool(draw: Any, shapes: Sequence[Shape], domain: IEEEDomain) -> list[Tensor]:
    """Every tensor from one pool of NaN (twice), ±inf, −0 and one finite value: lanes
    with two NaNs or equal infinities (which NaN a reduction or a pick propagates, where
    its cotangent goes), inf − inf and 0·inf inside rules."""
    v = draw(rounding_scalars(domain))
    nan, inf = domain.from_float(float("nan")), domain.from_float(float("inf"))
    pool = [nan, nan, inf, domain.neg(inf), domain.from_float(-0.0), v]
    r = draw(st.randoms(use_true_random=False))
    return [
        Tensor(tuple(s), tuple(pool[r.randrange(len(pool))] for _ in range(size(s))))
        for s in shapes
    ]


@st.composite
def _range_pool(draw: Any, shapes: Sequence[Shape], domain: IEEEDomain) -> list[Tensor]:
    """Every tensor from one pool at the ends of the finite range, each value of either
    sign: the smallest and largest subnormals, one drawn subnormal, the smallest normal,
    the largest finite value, 1/2, 2 and one full-width value (products and sums that land
    on subnormals, on the normal boundary, or overflow)."""
    D = domain
    sub = draw(st.integers(1, (1 << D.mbits) - 1))
    bits = [
        1,
        (1 << D.mbits) - 1,
        sub,
        1 << D.mbits,
        ((2**D.ebits - 2) << D.mbits) | ((1 << D.mbits) - 1),
    ]
    base = [D.from_bits(b) for b in bits] + [D.from_float(0.5), D.from_float(2.0)]
    base.append(draw(rounding_scalars(D)))
    pool = base + [D.neg(v) for v in base]
    r = draw(st.randoms(use_true_random=False))
    return [
        Tensor(tuple(s), tuple(pool[r.randrange(len(pool))] for _ in range(size(s))))
        for s in shapes
    ]


def hard_tensors_for(
    shapes: Sequence[Shape], domain: Domain, *, finite: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    """Hard-case tensors (see the module docstring); `finite`: no NaN or ±inf anywhere (the
    special pool left out, the others drawn from finite hard values)."""
    key = ("hard_tensors_for", tuple(map(tuple, shapes)), domain, finite)
    return _memo(key, lambda: _hard_tensors_for(shapes, domain, finite))


def _hard_tensors_for(
    shapes: Sequence[Shape], domain: Domain, finite: bool
) -> st.SearchStrategy[list[Tensor]]:
    if not isinstance(domain, IEEEDomain):
        return _own_pools(shapes, domain)
    own, shared = _own_pools(shapes, domain, finite), _shared_pool(shapes, domain, finite)
    if finite:  # the range pool 2/5 (first: Hypothesis starts from 0), own 2/5, shared 1/5
        edge = _range_pool(shapes, domain)
        return st.integers(0, 4).flatmap(lambda k: edge if k < 2 else own if k < 4 else shared)
    # own pools 1/2, a shared pool 1/3, the special pool 1/6
    pick = st.integers(0, 5)
    special = _special_pool(shapes, domain)
    return pick.flatmap(lambda k: own if k < 3 else shared if k < 5 else special)


def hard_inputs_for(
    graph: Graph, domain: Domain, *, finite: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    return hard_tensors_for(graph.inputs, domain, finite=finite)


def signed_zero_tensors_for(
    shapes: Sequence[Shape], domain: Domain
) -> st.SearchStrategy[list[Tensor]]:
    """Tensors of +0 and −0 only (IEEE domains): every cotangent a seed of these reaches is
    a signed zero (unless it meets inf/NaN), so a VJP's sign rule is all that shows."""
    key = ("signed_zero_tensors_for", tuple(map(tuple, shapes)), domain)
    return _memo(key, lambda: _signed_zero_tensors_for(shapes, domain))


def _signed_zero_tensors_for(
    shapes: Sequence[Shape], domain: Domain
) -> st.SearchStrategy[list[Tensor]]:
    if not isinstance(domain, IEEEDomain):
        return hard_tensors_for(shapes, domain)
    zs = st.sampled_from([domain.from_float(0.0), domain.from_float(-0.0)])
    return st.tuples(
        *(
            st.lists(zs, min_size=size(s), max_size=size(s)).map(
                lambda v, s=tuple(s): Tensor(s, tuple(v))
            )
            for s in shapes
        )
    ).map(list)


def rounding_tensors_for(
    shapes: Sequence[Shape], domain: Domain
) -> st.SearchStrategy[list[Tensor]]:
    """One tensor per shape, elements with full-width significands (`rounding_scalars`)."""
    key = ("rounding_tensors_for", tuple(map(tuple, shapes)), domain)
    return _memo(key, lambda: _rounding_tensors_for(shapes, domain))


def _rounding_tensors_for(
    shapes: Sequence[Shape], domain: Domain
) -> st.SearchStrategy[list[Tensor]]:
    plain = rounding_scalars(domain)
    return st.tuples(
        *(
            st.lists(plain, min_size=size(s), max_size=size(s)).map(
                lambda v, s=tuple(s): Tensor(s, tuple(v))
            )
            for s in shapes
        )
    ).map(list)


def hard_seeds_for(
    graph: Graph, domain: Domain, *, finite: bool = False
) -> st.SearchStrategy[TensorPack]:
    """Hard-case seeds: a third signed zeros only (`signed_zero_tensors_for`), a third
    full-width values only (so the operation order inside a VJP rounds differently)."""
    shapes = graph.shapes
    return _memo(
        ("hard_seeds_for", shapes, domain, finite),
        lambda: st.one_of(
            hard_tensors_for(shapes, domain, finite=finite),
            signed_zero_tensors_for(shapes, domain),
            rounding_tensors_for(shapes, domain),
        ).map(lambda ts: TensorPack(shapes, tuple(ts))),
    )


def direct_graphs(gs: st.SearchStrategy[Graph], ops: Sequence[str]) -> st.SearchStrategy[Graph]:
    """`gs` cut after its last node whose op is in `ops` (when there is one): the seed then
    lands on that op's output directly, so a signed-zero or full-width seed reaches its VJP
    unchanged (first contributions of scatter/gather/index VJPs, operation order in a VJP)."""
    want = frozenset(ops)

    def cut(g: Graph) -> Graph:
        ks = [k for k, n in enumerate(g.nodes) if n.op in want]
        return g.prefix(ks[-1] + 1) if ks else g

    return gs.map(cut)


BROADCAST_OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "broadcast_to")
_BIG = ((2, 2, 3), (3, 2, 2), (2, 3, 2))


@st.composite
def broadcast_graphs(draw: Any, ops: Sequence[str] | None = None) -> Graph:
    """x (rank 3) op y, y broadcast over >= 2 axes each longer than 1; then sum."""
    usable = [o for o in (ops or BROADCAST_OPS) if o in BROADCAST_OPS] or list(BROADCAST_OPS)
    op = draw(st.sampled_from(usable))
    big = draw(st.sampled_from(_BIG))
    keep = draw(st.integers(0, 2))  # the one axis y keeps (or none for rank 0)
    small = draw(
        st.sampled_from(
            [
                tuple(d if i == keep else 1 for i, d in enumerate(big)),
                (big[-1],) if keep == 2 else (),
                (),
            ]
        )
    )
    b = GraphBuilder()
    if op == "broadcast_to":
        y = b.input(small)
        z = b.node("broadcast_to", y, shape=big)
    else:
        x, y = b.input(big), b.input(small)
        z = b.node(op, x, y) if draw(st.booleans()) else b.node(op, y, x)
    b.node("sum", z)
    return b.build()


FANIN_OPS = ("add", "sub", "mul", "div", "maximum", "minimum", "matmul", "linear")


@st.composite
def fanin_graphs(draw: Any, ops: Sequence[str] | None = None) -> Graph:
    """`y = op(x, x)` (a repeated argument), then a later node that uses x and y again, so
    x's slot already holds a cotangent when the repeated-argument node adds its two: the
    fan-in fold (the two folded first, in argument order, then added to the slot) shows."""
    usable = [o for o in (ops or FANIN_OPS) if o in FANIN_OPS] or list(FANIN_OPS)
    op = draw(st.sampled_from(usable))
    square = op in ("matmul", "linear")
    shape = draw(st.sampled_from(((2, 2), (3, 3)) if square else ((3,), (2, 2), (4,))))
    b = GraphBuilder()
    x = b.input(shape)
    if op == "linear":
        y = b.node("linear", x, x, b.input(shape[:1]))
    else:
        y = b.node(op, x, x)
    later = draw(st.sampled_from(("mul", "add", "sub")))
    z = b.node(later, y, x) if draw(st.booleans()) else b.node(later, x, y)
    if draw(st.booleans()):
        b.node("sum", z)
    return b.build()


REDUCTION_OPS = ("sum", "mean", "reduce_sum", "reduce_mean", "matmul", "add", "mul", "linear")
_LONG = ((12,), (9,), (11,), (1, 12), (2, 6), (10,))


@st.composite
def long_reduction_graphs(draw: Any, ops: Sequence[str] | None = None) -> Graph:
    """A reduction over 9 to 12 elements (where a pairwise sum and a left fold differ):
    sum/mean of a long vector, reduce_sum over a long axis, a k >= 9 matmul, or a scalar
    broadcast against a long vector (its cotangent folds all of them)."""
    usable = [o for o in (ops or REDUCTION_OPS) if o in REDUCTION_OPS] or list(REDUCTION_OPS)
    op = draw(st.sampled_from(usable))
    shape = draw(st.sampled_from(_LONG))
    b = GraphBuilder()
    if op == "matmul":
        # a long k-loop, or >= 3 rows (the right operand's cotangent folds over rows)
        m, k = draw(st.sampled_from(((1, 9), (1, 10), (1, 12), (3, 2), (4, 3), (6, 2))))
        x, y = b.input((m, k)), b.input((k, 1 if m == 1 else 2))
        b.node("matmul", x, y)
    elif op == "linear":
        # 3 to 6 rows: the weight and bias cotangents fold over the rows (order shows)
        rows = draw(st.sampled_from((3, 4, 6)))
        x, w, bias = b.input((rows, 2)), b.input((2, 2)), b.input((2,))
        b.node("linear", x, w, bias)
    elif op in ("add", "mul"):
        x, y = b.input(shape), b.input(())
        b.node(op, x, y)
    elif op in ("reduce_sum", "reduce_mean"):
        b.node(op, b.input(shape), axis=len(shape) - 1)
    else:
        b.node(op, b.input(shape))
    return b.build()
