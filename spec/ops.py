"""The op table: every op declared once, with its shape rule and spec forward/JVP/VJP.

Invariants (the normative evaluation order the runtime's `ordered` kernels must follow):
- Every rule is generic over a `Domain`; each scalar operation is one domain call, rounded
  once. The operand order of every call is as written here.
- Reductions (sum, reduce_sum, matmul/linear inner products, softmax denominators, the
  reduction of broadcast cotangents) are left folds in row-major index order starting from
  the first element; an empty fold is the domain's zero.
- Binary elementwise ops broadcast centrally (`_elementwise2`): the rule sees one output
  position at a time; the cotangent of a broadcast operand is reduced back by `unbroadcast`.
- A rule's VJP returns one cotangent per argument; the graph layer folds them into the
  dense context cotangent (fan-in), never the rule.
- Composite ops (`kind == "composite"`) are defined by a body graph of other ops; their
  forward, JVP and VJP *are* eval_graph / jvp_ctx / backprop_ctx of the body. Preconditions
  (e.g. log's x > 0) are checked on graph nodes only, not inside composite bodies.
- Conventions: relu'(0) = 0; maximum/minimum ties give each side ḡ·(1/2); sqrt' = 0 for
  x <= 0; clamp' = 0 at the bounds; div's denominator cotangent is −(ḡ·((a/b)/b)); sub's
  second cotangent is 0 − ḡ; mse_loss = (1/N)·Σ(ŷ−t)² with N = size (1 for rank 0).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from .domains import Domain
from .errors import DomainError, GraphError, ShapeError, op_error
from .shape import Shape, broadcast_shapes, broadcasts_to, ravel_index, size, unravel_index
from .tensor import Tensor, fold_add

__all__ = [
    "GELU_C",
    "GELU_K",
    "OPS",
    "AttrSpec",
    "OpDef",
    "default_attention_scale",
    "expand",
    "get_op",
    "matmul_operands",
    "neg_inf",
    "unbroadcast",
]

Env = Sequence[int]
Attrs = dict[str, Any]
ForwardFn = Callable[[Domain, list[Tensor], Attrs, Env], Tensor]
JvpFn = Callable[[Domain, list[Tensor], list[Tensor], Attrs, Env], Tensor]
VjpFn = Callable[[Domain, list[Tensor], Tensor, Attrs, Env], list[Tensor]]
ShapeFn = Callable[[list[Shape], Attrs], Shape]


@dataclass(frozen=True)
class AttrSpec:
    """An attribute: `kind` is one of int, nat, ints, shape, rational, rationals."""

    name: str
    kind: str
    required: bool = True
    default: Any = None


@dataclass
class OpDef:
    """One entry of the op table. `arity` None means variadic (at least one argument)."""

    name: str
    arity: int | None
    attrs: tuple[AttrSpec, ...]
    shape: ShapeFn
    forward: ForwardFn
    jvp: JvpFn
    vjp: VjpFn
    saves: str
    doc: str
    kind: str = "primitive"
    body: Callable[[list[Shape], Attrs], Any] | None = None
    precondition: Callable[[Domain, list[Tensor], Attrs], None] | None = None
    algebraic: bool = True
    differentiable: bool = True
    tags: frozenset[str] = field(default_factory=frozenset)


OPS: dict[str, OpDef] = {}


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def _register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise GraphError(f"op {op.name!r} declared twice")
    OPS[op.name] = op
    return op


# --------------------------------------------------------------------------- central helpers


def expand(t: Tensor, shape: Shape) -> Tensor:
    """Broadcast `t` to `shape` (t.shape must broadcast to shape)."""
    if t.shape == shape:
        return t
    if not broadcasts_to(t.shape, shape):
        raise ShapeError(f"expand: {t.shape} does not broadcast to {shape}")
    off = len(shape) - len(t.shape)
    out = []
    for flat in range(size(shape)):
        idx = unravel_index(flat, shape)
        src = tuple(0 if d == 1 else idx[off + i] for i, d in enumerate(t.shape))
        out.append(t.data[ravel_index(src, t.shape)])
    return Tensor(shape, tuple(out))


def unbroadcast(domain: Domain, g: Tensor, shape: Shape) -> Tensor:
    """Reduce a cotangent of the broadcast shape back to `shape`: each element is the left
    fold, in row-major order of g's positions, of the entries that map to it."""
    if g.shape == shape:
        return g
    off = len(g.shape) - len(shape)
    buckets: list[list[Any]] = [[] for _ in range(size(shape))]
    for flat in range(size(g.shape)):
        idx = unravel_index(flat, g.shape)
        src = tuple(0 if d == 1 else idx[off + i] for i, d in enumerate(shape))
        buckets[ravel_index(src, shape)].append(g.data[flat])
    return Tensor(shape, tuple(fold_add(domain, b) for b in buckets))


def _zeros_like(domain: Domain, t: Tensor) -> Tensor:
    return Tensor.zeros(domain, t.shape)


def _err(op: str, check: str, index: int | None = None, expected: Any = None, got: Any = None):
    return op_error(ShapeError, op, check, index=index, expected=expected, got=got)


def _rank_at_least(op: str, shapes: list[Shape], i: int, r: int) -> None:
    if len(shapes[i]) < r:
        raise _err(op, f"rank must be at least {r}", i, f"rank >= {r}", shapes[i])


# --------------------------------------------------------------------------- elementwise


def _same_shape(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], attrs: Attrs) -> Shape:
        return shapes[0]

    return rule


def _unary(
    name: str,
    f: Callable[[Domain, Any, Attrs], Any],
    push: Callable[[Domain, Any, Any, Any, Attrs], Any],
    *,
    saves: str,
    doc: str,
    attrs: tuple[AttrSpec, ...] = (),
    algebraic: bool = True,
    precondition: Callable[[Domain, list[Tensor], Attrs], None] | None = None,
    shape: ShapeFn | None = None,
) -> OpDef:
    """An elementwise unary op. `push(D, x, y, t, attrs)` maps a tangent or cotangent `t`
    through the (diagonal) derivative at x (y = f(x) is the saved output); the same
    sequence serves the JVP and the VJP."""

    def forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        return xs[0].map(lambda v: f(D, v, a))

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        x = xs[0]
        y = forward(D, xs, a, env)
        data = tuple(
            push(D, xv, yv, tv, a) for xv, yv, tv in zip(x.data, y.data, dxs[0].data, strict=True)
        )
        return Tensor(x.shape, data)

    def vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
        return [jvp(D, xs, [g], a, env)]

    return _register(
        OpDef(
            name,
            1,
            attrs,
            shape or _same_shape(name),
            forward,
            jvp,
            vjp,
            saves,
            doc,
            algebraic=algebraic,
            precondition=precondition,
            tags=frozenset({"elementwise"}),
        )
    )


def _broadcast_rule(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], attrs: Attrs) -> Shape:
        out = broadcast_shapes(shapes[0], shapes[1])
        if out is None:
            raise _err(
                op, "operands do not broadcast", 1, f"broadcastable with {shapes[0]}", shapes[1]
            )
        return out

    return rule


def _elementwise2(
    name: str,
    f: Callable[[Domain, Any, Any], Any],
    jvp_s: Callable[[Domain, Any, Any, Any, Any], Any],
    vjp_s: Callable[[Domain, Any, Any, Any], tuple[Any, Any]],
    *,
    saves: str,
    doc: str,
    algebraic: bool = True,
) -> OpDef:
    """A broadcasting binary elementwise op, defined per output position."""
    rule = _broadcast_rule(name)

    def forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        out = rule([xs[0].shape, xs[1].shape], a)
        A, B = expand(xs[0], out), expand(xs[1], out)
        return Tensor(out, tuple(f(D, p, q) for p, q in zip(A.data, B.data, strict=True)))

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        out = rule([xs[0].shape, xs[1].shape], a)
        A, B = expand(xs[0], out), expand(xs[1], out)
        dA, dB = expand(dxs[0], out), expand(dxs[1], out)
        return Tensor(
            out,
            tuple(
                jvp_s(D, p, q, dp, dq)
                for p, q, dp, dq in zip(A.data, B.data, dA.data, dB.data, strict=True)
            ),
        )

    def vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
        out = g.shape
        A, B = expand(xs[0], out), expand(xs[1], out)
        pairs = [vjp_s(D, p, q, gv) for p, q, gv in zip(A.data, B.data, g.data, strict=True)]
        ga = Tensor(out, tuple(p[0] for p in pairs))
        gb = Tensor(out, tuple(p[1] for p in pairs))
        return [unbroadcast(D, ga, xs[0].shape), unbroadcast(D, gb, xs[1].shape)]

    return _register(
        OpDef(
            name,
            2,
            (),
            rule,
            forward,
            jvp,
            vjp,
            saves,
            doc,
            algebraic=algebraic,
            tags=frozenset({"elementwise", "broadcast"}),
        )
    )


def _half(D: Domain) -> Any:
    return D.from_rational(Fraction(1, 2))


_elementwise2(
    "add",
    lambda D, a, b: D.add(a, b),
    lambda D, a, b, da, db: D.add(da, db),
    lambda D, a, b, g: (g, g),
    saves="nothing",
    doc="a + b (broadcasting)",
)
_elementwise2(
    "sub",
    lambda D, a, b: D.sub(a, b),
    lambda D, a, b, da, db: D.sub(da, db),
    lambda D, a, b, g: (g, D.sub(D.zero(), g)),
    saves="nothing",
    doc="a - b (broadcasting); second cotangent is 0 - g",
)
_elementwise2(
    "mul",
    lambda D, a, b: D.mul(a, b),
    lambda D, a, b, da, db: D.add(D.mul(da, b), D.mul(a, db)),
    lambda D, a, b, g: (D.mul(g, b), D.mul(a, g)),
    saves="a, b",
    doc="a * b (broadcasting)",
)
_elementwise2(
    "div",
    lambda D, a, b: D.div(a, b),
    lambda D, a, b, da, db: D.sub(D.div(da, b), D.mul(db, D.div(D.div(a, b), b))),
    lambda D, a, b, g: (D.div(g, b), D.neg(D.mul(g, D.div(D.div(a, b), b)))),
    saves="a, b",
    doc="a / b (broadcasting); denominator cotangent is -(g*((a/b)/b))",
)


def _max_pick(D: Domain, a: Any, b: Any, larger: bool) -> Any:
    # NaN propagates (a first); ties, including +0 vs -0, return a.
    if D.is_nan(a):
        return a
    if D.is_nan(b):
        return b
    if larger:
        return b if D.lt(a, b) else a
    return b if D.lt(b, a) else a


def _max_split(D: Domain, a: Any, b: Any, g: Any, larger: bool) -> tuple[Any, Any]:
    # The winning side gets g; a tie gives each side g*(1/2); with a NaN neither gets any.
    a_wins = D.lt(b, a) if larger else D.lt(a, b)
    b_wins = D.lt(a, b) if larger else D.lt(b, a)
    if a_wins:
        return g, D.zero()
    if b_wins:
        return D.zero(), g
    if D.eq(a, b):
        h = D.mul(g, _half(D))
        return h, h
    return D.zero(), D.zero()


def _max_tangent(D: Domain, a: Any, b: Any, da: Any, db: Any, larger: bool) -> Any:
    a_wins = D.lt(b, a) if larger else D.lt(a, b)
    b_wins = D.lt(a, b) if larger else D.lt(b, a)
    if a_wins:
        return da
    if b_wins:
        return db
    if D.eq(a, b):
        return D.mul(D.add(da, db), _half(D))
    return D.zero()


def _max_family(name: str, larger: bool) -> None:
    def f(D: Domain, a: Any, b: Any) -> Any:
        return _max_pick(D, a, b, larger)

    def jvp_s(D: Domain, a: Any, b: Any, da: Any, db: Any) -> Any:
        return _max_tangent(D, a, b, da, db, larger)

    def vjp_s(D: Domain, a: Any, b: Any, g: Any) -> tuple[Any, Any]:
        return _max_split(D, a, b, g, larger)

    _elementwise2(
        name,
        f,
        jvp_s,
        vjp_s,
        saves="a, b",
        doc=f"elementwise {name} (broadcasting); NaN propagates, ties return a and split "
        "the cotangent as g*(1/2) to each side",
    )


_max_family("maximum", True)
_max_family("minimum", False)


_unary("neg", lambda D, x, a: D.neg(x), lambda D, x, y, t, a: D.neg(t), saves="nothing", doc="-x")


def _scale_c(D: Domain, a: Attrs) -> Any:
    return D.from_rational(a["c"])


_unary(
    "scale",
    lambda D, x, a: D.mul(_scale_c(D, a), x),
    lambda D, x, y, t, a: D.mul(_scale_c(D, a), t),
    saves="nothing",
    attrs=(AttrSpec("c", "rational"),),
    doc="c * x, c an exact rational cast into the domain",
)


def _relu(D: Domain, x: Any, a: Attrs) -> Any:
    if D.is_nan(x):
        return x
    return x if D.lt(D.zero(), x) else D.zero()


_unary(
    "relu",
    _relu,
    lambda D, x, y, t, a: t if D.lt(D.zero(), x) else D.zero(),
    saves="x",
    doc="x if x > 0 else +0 (NaN propagates); relu'(0) = 0",
)


def _abs_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    if D.lt(D.zero(), x):
        return t
    if D.lt(x, D.zero()):
        return D.neg(t)
    return D.zero()


_unary(
    "abs",
    lambda D, x, a: D.abs(x),
    _abs_push,
    saves="x",
    doc="|x|; the derivative is sign(x) with 0 at x = 0",
)


def _clamp(D: Domain, x: Any, a: Attrs) -> Any:
    if D.is_nan(x):
        return x
    lo, hi = D.from_rational(a["lo"]), D.from_rational(a["hi"])
    if D.lt(x, lo):
        return lo
    if D.lt(hi, x):
        return hi
    return x


def _clamp_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    lo, hi = D.from_rational(a["lo"]), D.from_rational(a["hi"])
    return t if D.lt(lo, x) and D.lt(x, hi) else D.zero()


def _clamp_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if a["lo"] > a["hi"]:
        raise op_error(
            GraphError,
            "clamp",
            "bounds out of order",
            expected="lo <= hi",
            got=(str(a["lo"]), str(a["hi"])),
        )
    return shapes[0]


_unary(
    "clamp",
    _clamp,
    _clamp_push,
    saves="x",
    shape=_clamp_shape,
    attrs=(AttrSpec("lo", "rational"), AttrSpec("hi", "rational")),
    doc="min(max(x, lo), hi) with rational bounds lo <= hi; clamp' = 0 at the bounds",
)


def _sqrt_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    # sqrt'(x) = 1/(2*sqrt x) for x > 0; defined as 0 for x <= 0 (and NaN), where the
    # derivative is infinite or undefined.
    if D.lt(D.zero(), x):
        return D.div(t, D.mul(D.from_rational(2), y))
    return D.zero()


_unary(
    "sqrt",
    lambda D, x, a: D.sqrt(x),
    _sqrt_push,
    saves="x, y",
    doc="sqrt(x); cotangent g/(2*y) for x > 0, else 0",
    algebraic=False,
)
_unary(
    "exp",
    lambda D, x, a: D.exp(x),
    lambda D, x, y, t, a: D.mul(t, y),
    saves="y",
    doc="exp(x)",
    algebraic=False,
)


def _log_pre(D: Domain, xs: list[Tensor], a: Attrs) -> None:
    for i, v in enumerate(xs[0].data):
        if D.is_nan(v) or not D.lt(D.zero(), v):
            raise DomainError(
                f"log: input 0 element {i} is {v}; log refuses inputs <= 0 or NaN (use safe_log)"
            )


_unary(
    "log",
    lambda D, x, a: D.log(x),
    lambda D, x, y, t, a: D.div(t, x),
    saves="x",
    doc="natural log; refuses to build on any input <= 0 or NaN",
    algebraic=False,
    precondition=_log_pre,
)
_unary(
    "tanh",
    lambda D, x, a: D.tanh(x),
    lambda D, x, y, t, a: D.mul(t, D.sub(D.one(), D.mul(y, y))),
    saves="y",
    doc="tanh(x); derivative 1 - y*y",
    algebraic=False,
)
_unary(
    "sin",
    lambda D, x, a: D.sin(x),
    lambda D, x, y, t, a: D.mul(t, D.cos(x)),
    saves="x",
    doc="sin(x)",
    algebraic=False,
)
_unary(
    "cos",
    lambda D, x, a: D.cos(x),
    lambda D, x, y, t, a: D.neg(D.mul(t, D.sin(x))),
    saves="x",
    doc="cos(x)",
    algebraic=False,
)


def _identity_push(D: Domain, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return t


def _detach_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    return xs[0]


_register(
    OpDef(
        "detach",
        1,
        (),
        _same_shape("detach"),
        _detach_forward,
        lambda D, xs, dxs, a, env: _zeros_like(D, xs[0]),
        lambda D, xs, g, a, env: [_zeros_like(D, xs[0])],
        saves="nothing",
        doc="identity forward; zero JVP and VJP",
        differentiable=False,
    )
)


# --------------------------------------------------------------------------- const


def _const_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if len(a["values"]) != size(a["shape"]):
        raise _err(
            "const", "value count does not fill the shape", None, size(a["shape"]), len(a["values"])
        )
    return a["shape"]


_register(
    OpDef(
        "const",
        0,
        (AttrSpec("shape", "shape"), AttrSpec("values", "rationals")),
        _const_shape,
        lambda D, xs, a, env: Tensor(a["shape"], tuple(D.from_rational(q) for q in a["values"])),
        lambda D, xs, dxs, a, env: Tensor.zeros(D, a["shape"]),
        lambda D, xs, g, a, env: [],
        saves="nothing",
        doc="exact rational values cast into the domain (one rounding each)",
        differentiable=False,
    )
)


# --------------------------------------------------------------------------- reductions


def _sum_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    return Tensor((), (fold_add(D, xs[0].data),))


_register(
    OpDef(
        "sum",
        1,
        (),
        lambda shapes, a: (),
        _sum_forward,
        lambda D, xs, dxs, a, env: _sum_forward(D, dxs, a, env),
        lambda D, xs, g, a, env: [Tensor.full(xs[0].shape, g.data[0])],
        saves="input shape",
        doc="sum of all elements (left fold in row-major order)",
        tags=frozenset({"reduction"}),
    )
)


def _axis_rule(op: str, shapes: list[Shape], a: Attrs) -> int:
    axis = a["axis"]
    if not 0 <= axis < len(shapes[0]):
        raise _err(op, "axis out of range", 0, f"0 <= axis < {len(shapes[0])}", axis)
    return axis


def _reduce_sum_shape(shapes: list[Shape], a: Attrs) -> Shape:
    axis = _axis_rule("reduce_sum", shapes, a)
    return shapes[0][:axis] + shapes[0][axis + 1 :]


def _reduce_sum_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, axis = xs[0], a["axis"]
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    data = []
    for flat in range(size(out_shape)):
        o = unravel_index(flat, out_shape)
        data.append(
            fold_add(
                D,
                (
                    x.data[ravel_index((*o[:axis], k, *o[axis:]), x.shape)]
                    for k in range(x.shape[axis])
                ),
            )
        )
    return Tensor(out_shape, tuple(data))


def _reduce_sum_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x, axis = xs[0], a["axis"]
    data = []
    for flat in range(size(x.shape)):
        i = unravel_index(flat, x.shape)
        data.append(g.data[ravel_index(i[:axis] + i[axis + 1 :], g.shape)])
    return [Tensor(x.shape, tuple(data))]


_register(
    OpDef(
        "reduce_sum",
        1,
        (AttrSpec("axis", "nat"),),
        _reduce_sum_shape,
        _reduce_sum_forward,
        lambda D, xs, dxs, a, env: _reduce_sum_forward(D, dxs, a, env),
        _reduce_sum_vjp,
        saves="input shape",
        doc="sum over one axis (removed), left fold in index order",
        tags=frozenset({"reduction"}),
    )
)


# --------------------------------------------------------------------------- matmul, linear


def _matmul_shape(shapes: list[Shape], a: Attrs) -> Shape:
    _rank_at_least("matmul", shapes, 0, 2)
    _rank_at_least("matmul", shapes, 1, 2)
    A, B = shapes
    if A[-1] != B[-2]:
        raise _err("matmul", "contraction dims differ", 1, f"leading matrix dim {A[-1]}", B[-2])
    batch = broadcast_shapes(A[:-2], B[:-2])
    if batch is None:
        raise _err(
            "matmul",
            "batch prefixes do not broadcast",
            1,
            f"a prefix broadcastable with {A[:-2]}",
            B[:-2],
        )
    return (*batch, A[-2], B[-1])


def _mm(D: Domain, A: Tensor, B: Tensor, ta: bool, tb: bool) -> Tensor:
    """Batched product of op(A) @ op(B) over equal batch prefixes; op transposes when set.
    Each entry is a left fold over the contraction index of products taken as
    mul(op(A)[i,p], op(B)[p,j])."""
    batch = A.shape[:-2]
    m = A.shape[-1] if ta else A.shape[-2]
    k = A.shape[-2] if ta else A.shape[-1]
    n = B.shape[-2] if tb else B.shape[-1]
    out_shape = (*batch, m, n)
    data = []
    for flat in range(size(out_shape)):
        idx = unravel_index(flat, out_shape)
        b, i, j = idx[:-2], idx[-2], idx[-1]

        def av(i: int, p: int, b: Shape = b) -> Any:
            return A.data[ravel_index((*b, p, i) if ta else (*b, i, p), A.shape)]

        def bv(p: int, j: int, b: Shape = b) -> Any:
            return B.data[ravel_index((*b, j, p) if tb else (*b, p, j), B.shape)]

        data.append(fold_add(D, (D.mul(av(i, p), bv(p, j)) for p in range(k))))
    return Tensor(out_shape, tuple(data))


def _matmul_operands(xs: list[Tensor], out: Shape) -> tuple[Tensor, Tensor]:
    batch = out[:-2]
    A = expand(xs[0], (*batch, *xs[0].shape[-2:]))
    B = expand(xs[1], (*batch, *xs[1].shape[-2:]))
    return A, B


def _matmul_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    A, B = _matmul_operands(xs, _matmul_shape([xs[0].shape, xs[1].shape], a))
    return _mm(D, A, B, False, False)


def _matmul_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    out = _matmul_shape([xs[0].shape, xs[1].shape], a)
    A, B = _matmul_operands(xs, out)
    dA, dB = _matmul_operands(dxs, out)
    left, right = _mm(D, dA, B, False, False), _mm(D, A, dB, False, False)
    return Tensor(out, tuple(D.add(p, q) for p, q in zip(left.data, right.data, strict=True)))


def _matmul_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    A, B = _matmul_operands(xs, g.shape)
    gA = _mm(D, g, B, False, True)  # gA[i,p] = fold_j g[i,j]*B[p,j]
    gB = _mm(D, A, g, True, False)  # gB[p,j] = fold_i A[i,p]*g[i,j]
    return [unbroadcast(D, gA, xs[0].shape), unbroadcast(D, gB, xs[1].shape)]


_register(
    OpDef(
        "matmul",
        2,
        (),
        _matmul_shape,
        _matmul_forward,
        _matmul_jvp,
        _matmul_vjp,
        saves="a, b",
        doc="(..., m, k) @ (..., k, n), batch prefixes broadcast; C[i,j] = fold_p a[i,p]*b[p,j]; "
        "cotangents g@b^T (fold over j), a^T@g (fold over i), reduced over broadcast batch axes",
        tags=frozenset({"reduction"}),
    )
)


def _linear_shape(shapes: list[Shape], a: Attrs) -> Shape:
    x, w, b = shapes
    if len(w) != 2:
        raise _err("linear", "weight must be a matrix", 1, "rank 2", w)
    if len(x) not in (1, 2):
        raise _err("linear", "input must be (in,) or (batch, in)", 0, "rank 1 or 2", x)
    if x[-1] != w[1]:
        raise _err("linear", "input features differ from weight columns", 0, w[1], x[-1])
    if b != (w[0],):
        raise _err("linear", "bias must be (out,)", 2, (w[0],), b)
    return (*x[:-1], w[0])


def _linear_core(D: Domain, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """y[r,i] = fold_j mul(w[i,j], x[r,j]), then add(., b[i]) when b is given."""
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    data = []
    for r in range(rows):
        for i in range(out_dim):
            acc = fold_add(D, (D.mul(w.data[i * n + j], x.data[r * n + j]) for j in range(n)))
            data.append(D.add(acc, b.data[i]) if b is not None else acc)
    return Tensor((*x.shape[:-1], out_dim), tuple(data))


def _linear_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, w, _ = xs
    dx, dw, db = dxs
    p, q = _linear_core(D, dx, w, None), _linear_core(D, x, dw, None)
    out_dim = w.shape[0]
    return Tensor(
        p.shape,
        tuple(
            D.add(D.add(u, v), db.data[k % out_dim])
            for k, (u, v) in enumerate(zip(p.data, q.data, strict=True))
        ),
    )


def _linear_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x, w, b = xs
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    gv = lambda r, i: g.data[r * out_dim + i]  # noqa: E731
    gx = tuple(
        fold_add(D, (D.mul(gv(r, i), w.data[i * n + j]) for i in range(out_dim)))
        for r in range(rows)
        for j in range(n)
    )
    gw = tuple(
        fold_add(D, (D.mul(gv(r, i), x.data[r * n + j]) for r in range(rows)))
        for i in range(out_dim)
        for j in range(n)
    )
    gb = tuple(fold_add(D, (gv(r, i) for r in range(rows))) for i in range(out_dim))
    return [Tensor(x.shape, gx), Tensor(w.shape, gw), Tensor(b.shape, gb)]


_register(
    OpDef(
        "linear",
        3,
        (),
        _linear_shape,
        lambda D, xs, a, env: _linear_core(D, *xs),
        _linear_jvp,
        _linear_vjp,
        saves="x, w",
        doc="linear(x, w, b) = W x + b for x (in,) or (batch, in), w (out, in), b (out,): "
        "y[r,i] = fold_j w[i,j]*x[r,j] + b[i]; gx = fold_i g*w, gw = fold_r g*x, gb = fold_r g",
        tags=frozenset({"reduction"}),
    )
)


# --------------------------------------------------------------------------- structure


def _reshape_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if size(shapes[0]) != size(a["shape"]):
        raise _err(
            "reshape",
            "element counts differ",
            0,
            f"size {size(a['shape'])}",
            f"{shapes[0]} (size {size(shapes[0])})",
        )
    return a["shape"]


_register(
    OpDef(
        "reshape",
        1,
        (AttrSpec("shape", "shape"),),
        _reshape_shape,
        lambda D, xs, a, env: Tensor(a["shape"], xs[0].data),
        lambda D, xs, dxs, a, env: Tensor(a["shape"], dxs[0].data),
        lambda D, xs, g, a, env: [Tensor(xs[0].shape, g.data)],
        saves="input shape",
        doc="same row-major data, new shape",
        tags=frozenset({"structural"}),
    )
)


def _swap_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, k = shapes[0], a["axis"]
    if not 0 <= k < len(s) - 1:
        raise _err("swap_adjacent", "axis out of range", 0, f"0 <= axis < {len(s) - 1}", k)
    return (*s[:k], s[k + 1], s[k], *s[k + 2 :])


def _swap(t: Tensor, k: int) -> Tensor:
    out = _swap_shape([t.shape], {"axis": k})
    data = []
    for flat in range(size(out)):
        i = unravel_index(flat, out)
        src = (*i[:k], i[k + 1], i[k], *i[k + 2 :])
        data.append(t.data[ravel_index(src, t.shape)])
    return Tensor(out, tuple(data))


_register(
    OpDef(
        "swap_adjacent",
        1,
        (AttrSpec("axis", "nat"),),
        _swap_shape,
        lambda D, xs, a, env: _swap(xs[0], a["axis"]),
        lambda D, xs, dxs, a, env: _swap(dxs[0], a["axis"]),
        lambda D, xs, g, a, env: [_swap(g, a["axis"])],
        saves="nothing",
        doc="swap axes axis and axis+1",
        tags=frozenset({"structural"}),
    )
)


def _broadcast_to_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if not broadcasts_to(shapes[0], a["shape"]):
        raise _err(
            "broadcast_to",
            "input does not broadcast to the target",
            0,
            f"a shape broadcasting to {a['shape']}",
            shapes[0],
        )
    return a["shape"]


_register(
    OpDef(
        "broadcast_to",
        1,
        (AttrSpec("shape", "shape"),),
        _broadcast_to_shape,
        lambda D, xs, a, env: expand(xs[0], a["shape"]),
        lambda D, xs, dxs, a, env: expand(dxs[0], a["shape"]),
        lambda D, xs, g, a, env: [unbroadcast(D, g, xs[0].shape)],
        saves="input shape",
        doc="expand to a target shape; VJP reduces by unbroadcast",
        tags=frozenset({"structural"}),
    )
)


def _concat_shape(shapes: list[Shape], a: Attrs) -> Shape:
    if not shapes:
        raise _err("concat", "needs at least one input", None, ">= 1 input", 0)
    for i, s in enumerate(shapes):
        if len(s) < 1:
            raise _err("concat", "inputs must have rank >= 1", i, "rank >= 1", s)
        if s[1:] != shapes[0][1:]:
            raise _err("concat", "trailing dims differ", i, shapes[0][1:], s[1:])
    return (sum(s[0] for s in shapes), *shapes[0][1:])


def _concat_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    out, start = [], 0
    for x in xs:
        n = size(x.shape)
        out.append(Tensor(x.shape, g.data[start : start + n]))
        start += n
    return out


_register(
    OpDef(
        "concat",
        None,
        (),
        _concat_shape,
        lambda D, xs, a, env: Tensor(
            _concat_shape([x.shape for x in xs], a),
            tuple(itertools.chain.from_iterable(x.data for x in xs)),
        ),
        lambda D, xs, dxs, a, env: Tensor(
            _concat_shape([x.shape for x in xs], a),
            tuple(itertools.chain.from_iterable(d.data for d in dxs)),
        ),
        _concat_vjp,
        saves="input shapes",
        doc="concatenate on the leading axis (variadic)",
        tags=frozenset({"structural"}),
    )
)


def _slice_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise _err("slice", "input must have rank >= 1", 0, "rank >= 1", s)
    if not 0 <= a["start"] <= a["stop"] <= s[0]:
        raise _err(
            "slice",
            "bounds out of range",
            0,
            f"0 <= start <= stop <= {s[0]}",
            (a["start"], a["stop"]),
        )
    return (a["stop"] - a["start"], *s[1:])


def _slice_fwd(t: Tensor, a: Attrs) -> Tensor:
    inner = size(t.shape[1:])
    return Tensor(_slice_shape([t.shape], a), t.data[a["start"] * inner : a["stop"] * inner])


def _slice_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    inner = size(x.shape[1:])
    z = D.zero()
    data = (z,) * (a["start"] * inner) + g.data + (z,) * ((x.shape[0] - a["stop"]) * inner)
    return [Tensor(x.shape, data)]


_register(
    OpDef(
        "slice",
        1,
        (AttrSpec("start", "nat"), AttrSpec("stop", "nat")),
        _slice_shape,
        lambda D, xs, a, env: _slice_fwd(xs[0], a),
        lambda D, xs, dxs, a, env: _slice_fwd(dxs[0], a),
        _slice_vjp,
        saves="input shape",
        doc="rows start..stop-1 of the leading axis; VJP pads with zeros",
        tags=frozenset({"structural"}),
    )
)


def _select_index(op: str, a: Attrs, env: Env, dim: int) -> int:
    if a.get("env_slot") is not None:
        slot = a["env_slot"]
        if not 0 <= slot < len(env):
            raise op_error(
                GraphError, op, "env slot out of range", expected=f"< {len(env)}", got=slot
            )
        i = env[slot]
    else:
        i = a["index"]
    if not 0 <= i < dim:
        raise _err(op, "index out of range", 0, f"0 <= index < {dim}", i)
    return i


def _select_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise _err("select", "input must have rank >= 1", 0, "rank >= 1", s)
    if (a.get("index") is None) == (a.get("env_slot") is None):
        raise op_error(GraphError, "select", "give exactly one of index and env_slot")
    if a.get("index") is not None:
        _select_index("select", a, (), s[0])
    return s[1:]


def _select_fwd(t: Tensor, a: Attrs, env: Env) -> Tensor:
    i = _select_index("select", a, env, t.shape[0])
    inner = size(t.shape[1:])
    return Tensor(t.shape[1:], t.data[i * inner : (i + 1) * inner])


def _select_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    i = _select_index("select", a, env, x.shape[0])
    inner = size(x.shape[1:])
    z = D.zero()
    return [Tensor(x.shape, (z,) * (i * inner) + g.data + (z,) * ((x.shape[0] - i - 1) * inner))]


_register(
    OpDef(
        "select",
        1,
        (AttrSpec("index", "nat", False), AttrSpec("env_slot", "nat", False)),
        _select_shape,
        lambda D, xs, a, env: _select_fwd(xs[0], a, env),
        lambda D, xs, dxs, a, env: _select_fwd(dxs[0], a, env),
        _select_vjp,
        saves="input shape",
        doc="x[i] on the leading axis (axis removed); i a literal `index` or "
        "env[env_slot] from the non-differentiable integer environment",
        tags=frozenset({"structural", "index"}),
    )
)


def _gather(t: Tensor, indices: Sequence[int]) -> Tensor:
    inner = size(t.shape[1:])
    data: list[Any] = []
    for i in indices:
        data.extend(t.data[i * inner : (i + 1) * inner])
    return Tensor((len(indices), *t.shape[1:]), tuple(data))


def _scatter(D: Domain, t: Tensor, indices: Sequence[int], n: int) -> Tensor:
    """out[j] = fold over k with indices[k] == j (in order of k) of t[k]; zero if none."""
    inner = size(t.shape[1:])
    buckets: list[list[int]] = [[] for _ in range(n)]
    for k, j in enumerate(indices):
        buckets[j].append(k)
    data: list[Any] = []
    for j in range(n):
        for e in range(inner):
            data.append(fold_add(D, (t.data[k * inner + e] for k in buckets[j])))
    return Tensor((n, *t.shape[1:]), tuple(data))


def _index_select_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise _err("index_select", "input must have rank >= 1", 0, "rank >= 1", s)
    for i in a["indices"]:
        if not 0 <= i < s[0]:
            raise _err("index_select", "index out of range", 0, f"0 <= index < {s[0]}", i)
    return (len(a["indices"]), *s[1:])


_register(
    OpDef(
        "index_select",
        1,
        (AttrSpec("indices", "ints"),),
        _index_select_shape,
        lambda D, xs, a, env: _gather(xs[0], a["indices"]),
        lambda D, xs, dxs, a, env: _gather(dxs[0], a["indices"]),
        lambda D, xs, g, a, env: [_scatter(D, g, a["indices"], xs[0].shape[0])],
        saves="input shape",
        doc="rows x[indices[k]]; VJP scatter-adds in order of k",
        tags=frozenset({"structural", "index"}),
    )
)


def _scatter_add_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise _err("scatter_add", "input must have rank >= 1", 0, "rank >= 1", s)
    if len(a["indices"]) != s[0]:
        raise _err("scatter_add", "one index per input row", 0, s[0], len(a["indices"]))
    for i in a["indices"]:
        if not 0 <= i < a["size"]:
            raise _err("scatter_add", "index out of range", 0, f"0 <= index < {a['size']}", i)
    return (a["size"], *s[1:])


_register(
    OpDef(
        "scatter_add",
        1,
        (AttrSpec("indices", "ints"), AttrSpec("size", "nat")),
        _scatter_add_shape,
        lambda D, xs, a, env: _scatter(D, xs[0], a["indices"], a["size"]),
        lambda D, xs, dxs, a, env: _scatter(D, dxs[0], a["indices"], a["size"]),
        lambda D, xs, g, a, env: [_gather(g, a["indices"])],
        saves="nothing",
        doc="out[j] = fold over k with indices[k]==j of x[k]; VJP gathers",
        tags=frozenset({"structural", "index"}),
    )
)


# --------------------------------------------------------------------------- softmax family


def _last_axis_rule(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], a: Attrs) -> Shape:
        s = shapes[0]
        if len(s) < 1 or s[-1] < 1:
            raise _err(op, "needs rank >= 1 and a non-empty last axis", 0, "(..., n>=1)", s)
        return s

    return rule


def _rows(t: Tensor) -> list[tuple[Any, ...]]:
    n = t.shape[-1]
    return [t.data[r * n : (r + 1) * n] for r in range(size(t.shape[:-1]))]


def _softmax_row(D: Domain, row: Sequence[Any]) -> tuple[list[Any], list[Any], Any]:
    """(z, e, s): m = fold maximum (max-shift), z_j = x_j - m, e_j = exp(z_j),
    s = fold add e_j."""
    m = row[0]
    for v in row[1:]:
        m = _max_pick(D, m, v, True)
    z = [D.sub(v, m) for v in row]
    e = [D.exp(v) for v in z]
    return z, e, fold_add(D, e)


def _softmax_fwd(D: Domain, x: Tensor) -> Tensor:
    out: list[Any] = []
    for row in _rows(x):
        _, e, s = _softmax_row(D, row)
        out.extend(D.div(v, s) for v in e)
    return Tensor(x.shape, tuple(out))


def _softmax_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    y = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for yr, dr in zip(_rows(y), _rows(dxs[0]), strict=True):
        t = fold_add(D, (D.mul(p, q) for p, q in zip(yr, dr, strict=True)))
        out.extend(D.mul(p, D.sub(q, t)) for p, q in zip(yr, dr, strict=True))
    return Tensor(y.shape, tuple(out))


def _softmax_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    y = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for yr, gr in zip(_rows(y), _rows(g), strict=True):
        d = fold_add(D, (D.mul(q, p) for p, q in zip(yr, gr, strict=True)))
        out.extend(D.mul(p, D.sub(q, d)) for p, q in zip(yr, gr, strict=True))
    return [Tensor(y.shape, tuple(out))]


_register(
    OpDef(
        "softmax",
        1,
        (),
        _last_axis_rule("softmax"),
        lambda D, xs, a, env: _softmax_fwd(D, xs[0]),
        _softmax_jvp,
        _softmax_vjp,
        saves="y",
        doc="max-shifted softmax on the last axis: y_j = exp(x_j - m)/fold exp(x_k - m); "
        "VJP y_j*(g_j - fold_k g_k*y_k); JVP y_j*(dx_j - fold_k y_k*dx_k)",
        algebraic=False,
        tags=frozenset({"reduction"}),
    )
)


def _log_softmax_fwd(D: Domain, x: Tensor) -> Tensor:
    out: list[Any] = []
    for row in _rows(x):
        z, _, s = _softmax_row(D, row)
        ls = D.log(s)
        out.extend(D.sub(v, ls) for v in z)
    return Tensor(x.shape, tuple(out))


def _log_softmax_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    p = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for pr, dr in zip(_rows(p), _rows(dxs[0]), strict=True):
        t = fold_add(D, (D.mul(u, v) for u, v in zip(pr, dr, strict=True)))
        out.extend(D.sub(v, t) for v in dr)
    return Tensor(p.shape, tuple(out))


def _log_softmax_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    p = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for pr, gr in zip(_rows(p), _rows(g), strict=True):
        sg = fold_add(D, gr)
        out.extend(D.sub(q, D.mul(u, sg)) for u, q in zip(pr, gr, strict=True))
    return [Tensor(p.shape, tuple(out))]


_register(
    OpDef(
        "log_softmax",
        1,
        (),
        _last_axis_rule("log_softmax"),
        lambda D, xs, a, env: _log_softmax_fwd(D, xs[0]),
        _log_softmax_jvp,
        _log_softmax_vjp,
        saves="softmax p",
        doc="max-shifted log-softmax on the last axis: y_j = (x_j - m) - log(fold exp(x_k - m)); "
        "VJP g_j - p_j*fold_k g_k with p = softmax(x); JVP dx_j - fold_k p_k*dx_k",
        algebraic=False,
        tags=frozenset({"reduction"}),
    )
)


# --------------------------------------------------------------------------- composites


def _composite(
    name: str,
    arity: int | None,
    body: Callable[[Any, list[int], Attrs], int],
    *,
    doc: str,
    attrs: tuple[AttrSpec, ...] = (),
    algebraic: bool = True,
    tags: frozenset[str] = frozenset(),
) -> OpDef:
    """A composite op: `body(b, args, attrs)` emits nodes on a `GraphBuilder` b whose inputs
    are the op's arguments and returns the result id. Semantics = the body's semantics."""

    bodies: dict[Any, Any] = {}  # (shapes, attrs) -> body Graph (immutable, so shared)

    def build(shapes: list[Shape], a: Attrs) -> Any:
        from .graph import GraphBuilder

        try:
            key: Any = (tuple(tuple(s) for s in shapes), tuple(sorted(a.items())))
            hit = bodies.get(key)
        except TypeError:  # an unhashable attribute value: build without caching
            key, hit = None, None
        if hit is not None:
            return hit
        b = GraphBuilder()
        args = [b.input(s) for s in shapes]
        out = body(b, args, a)
        g = b.build(output=out)
        if key is not None:
            if len(bodies) >= 512:
                bodies.clear()
            bodies[key] = g
        return g

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        try:
            g = build(shapes, a)
        except ShapeError as e:
            msg = str(e)  # body rules usually name the composite already
            raise ShapeError(msg if msg.startswith(f"{name}: ") else f"{name}: {msg}") from None
        return g.shapes[-1]

    def forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        from .graph import eval_graph

        g = build([x.shape for x in xs], a)
        return eval_graph(D, g, xs, env, check=False).tensors[-1]

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        from .graph import jvp_ctx

        g = build([x.shape for x in xs], a)
        return jvp_ctx(D, g, xs, dxs, env, check=False).tensors[-1]

    def vjp(D: Domain, xs: list[Tensor], gout: Tensor, a: Attrs, env: Env) -> list[Tensor]:
        from .graph import backprop_ctx
        from .tensor import TensorPack

        g = build([x.shape for x in xs], a)
        seed = TensorPack.zeros(D, g.shapes[:-1]).snoc(gout)
        return list(backprop_ctx(D, g, xs, seed, env, check=False).tensors)

    return _register(
        OpDef(
            name,
            arity,
            attrs,
            shape,
            forward,
            jvp,
            vjp,
            saves="the body's saved values",
            doc=doc,
            kind="composite",
            body=build,
            algebraic=algebraic,
            tags=tags,
        )
    )


def _c(b: Any, q: Fraction | int) -> int:
    """A scalar const node (shape ()), broadcast by the op that uses it."""
    return b.node("const", shape=(), values=(Fraction(q),))


_composite(
    "inv",
    1,
    lambda b, x, a: b.node("div", _c(b, 1), x[0]),
    doc="1 / x, as div(const 1, x)",
    tags=frozenset({"elementwise"}),
)


def _mean_body(b: Any, x: list[int], a: Attrs) -> int:
    n = size(b.shape_of(x[0]))
    if n == 0:
        raise _err("mean", "mean of an empty tensor is undefined", 0, "size >= 1", 0)
    return b.node("div", b.node("sum", x[0]), _c(b, n))


_composite(
    "mean",
    1,
    _mean_body,
    doc="div(sum(x), const N), N = size(x) >= 1 cast once",
    tags=frozenset({"reduction"}),
)


def _reduce_mean_body(b: Any, x: list[int], a: Attrs) -> int:
    s = b.shape_of(x[0])
    if not 0 <= a["axis"] < len(s):
        raise _err("reduce_mean", "axis out of range", 0, f"0 <= axis < {len(s)}", a["axis"])
    n = s[a["axis"]]
    if n == 0:
        raise _err("reduce_mean", "mean over an empty axis is undefined", 0, "dim >= 1", 0)
    return b.node("div", b.node("reduce_sum", x[0], axis=a["axis"]), _c(b, n))


_composite(
    "reduce_mean",
    1,
    _reduce_mean_body,
    attrs=(AttrSpec("axis", "nat"),),
    doc="div(reduce_sum(x, axis), const n) with n the axis length >= 1",
    tags=frozenset({"reduction"}),
)


def _transpose_body(b: Any, x: list[int], a: Attrs) -> int:
    r = len(b.shape_of(x[0]))
    if r < 2:
        raise _err("transpose", "needs rank >= 2", 0, "rank >= 2", b.shape_of(x[0]))
    return b.node("swap_adjacent", x[0], axis=r - 2)


_composite(
    "transpose",
    1,
    _transpose_body,
    doc="swap the last two axes (swap_adjacent)",
    tags=frozenset({"structural"}),
)


def _sigmoid(D: Domain, x: Any, a: Attrs) -> Any:
    return D.div(D.one(), D.add(D.one(), D.exp(D.neg(x))))


# A primitive rather than the composite div(1, add(1, exp(neg x))): composed, the
# derivative for x < about -88 (binary32) is (-0)*inf = NaN, because exp(-x) overflows.
# The explicit rule y*(1 - y) stays finite.
_unary(
    "sigmoid",
    _sigmoid,
    lambda D, x, y, t, a: D.mul(t, D.mul(y, D.sub(D.one(), y))),
    saves="y",
    doc="div(1, add(1, exp(neg x))); derivative mul(y, sub(1, y))",
    algebraic=False,
)


def _softplus_body(b: Any, x: list[int], a: Attrs) -> int:
    # max(x, 0) + log(1 + exp(-|x|)): no overflow; at x = 0 the tie rule of maximum gives
    # 1/2 and abs'(0) = 0, so the composed derivative is the true sigmoid(0) = 1/2.
    tail = b.node("log", b.node("add", _c(b, 1), b.node("exp", b.node("neg", b.node("abs", x[0])))))
    return b.node("add", b.node("maximum", x[0], _c(b, 0)), tail)


_composite(
    "softplus",
    1,
    _softplus_body,
    doc="add(maximum(x, 0), log(add(1, exp(neg(abs x)))))",
    algebraic=False,
    tags=frozenset({"elementwise"}),
)

GELU_C = Fraction(0.7978845608028654)  # the binary64 nearest sqrt(2/pi), as an exact rational
GELU_K = Fraction(44715, 10**6)


def _gelu_body(b: Any, x: list[int], a: Attrs) -> int:
    x0 = x[0]
    x3 = b.node("mul", b.node("mul", x0, x0), x0)
    inner = b.node("add", x0, b.node("mul", _c(b, GELU_K), x3))
    t = b.node("tanh", b.node("mul", _c(b, GELU_C), inner))
    return b.node("mul", b.node("mul", _c(b, Fraction(1, 2)), x0), b.node("add", _c(b, 1), t))


_composite(
    "gelu",
    1,
    _gelu_body,
    doc="tanh form: mul(mul(1/2, x), add(1, tanh(mul(c, add(x, mul(k, mul(mul(x,x),x)))))))"
    " with c = binary64 sqrt(2/pi) = 0.7978845608028654 and k = 0.044715, both exact "
    "rationals cast once",
    algebraic=False,
    tags=frozenset({"elementwise"}),
)
_composite(
    "silu",
    1,
    lambda b, x, a: b.node("mul", x[0], b.node("sigmoid", x[0])),
    doc="mul(x, sigmoid x)",
    algebraic=False,
    tags=frozenset({"elementwise"}),
)

SAFE_LOG_EPS = Fraction(1, 2**24)  # exact in binary64/32, bfloat16 and float16


_composite(
    "safe_log",
    1,
    lambda b, x, a: b.node("log", b.node("maximum", x[0], _c(b, SAFE_LOG_EPS))),
    doc="log(maximum(x, 2**-24)): total (accepts every input; NaN gives NaN)",
    algebraic=False,
    tags=frozenset({"elementwise"}),
)


def _mse_body(b: Any, x: list[int], a: Attrs) -> int:
    sy, st = b.shape_of(x[0]), b.shape_of(x[1])
    if sy != st:
        raise _err("mse_loss", "prediction and target shapes differ", 1, sy, st)
    n = size(sy)
    if n == 0:
        raise _err("mse_loss", "mse of an empty tensor is undefined", 0, "size >= 1", 0)
    d = b.node("sub", x[0], x[1])
    return b.node("mul", _c(b, Fraction(1, n)), b.node("sum", b.node("mul", d, d)))


_composite(
    "mse_loss",
    2,
    _mse_body,
    doc="mul(const 1/N, sum(mul(d, d))), d = sub(y, t), N = size (1 for rank 0)",
    tags=frozenset({"loss"}),
)


def _ce_body(b: Any, x: list[int], a: Attrs) -> int:
    sx, st = b.shape_of(x[0]), b.shape_of(x[1])
    if sx != st:
        raise _err("cross_entropy", "logits and target shapes differ", 1, sx, st)
    if len(sx) not in (1, 2) or sx[-1] < 1:
        raise _err(
            "cross_entropy", "logits must be (C,) or (B, C) with C >= 1", 0, "(C,) or (B, C)", sx
        )
    nll = b.node("neg", b.node("sum", b.node("mul", x[1], b.node("log_softmax", x[0]))))
    if len(sx) == 1:
        return nll
    if sx[0] == 0:
        raise _err("cross_entropy", "empty batch", 0, "B >= 1", 0)
    return b.node("div", nll, _c(b, sx[0]))


_composite(
    "cross_entropy",
    2,
    _ce_body,
    doc="neg(sum(mul(t, log_softmax(x)))) for (C,); divided by const B for (B, C); "
    "t is a one-hot (or any) target",
    algebraic=False,
    tags=frozenset({"loss"}),
)


# The model-scale ops (convolution, pooling, normalisation, attention, embeddings) register
# themselves here, so OPS is complete whenever spec.ops is imported.
from .ops_model import default_attention_scale, neg_inf  # noqa: E402

matmul_operands = _matmul_operands
