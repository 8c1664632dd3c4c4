"""Builders and shared helpers of the op families (no op is registered here).

Invariants:
- `elementwise1`, `elementwise2` and `composite` register one op each through
  `table.register`, by keyword; every family module builds its ops with them or with
  `register` directly. `elementwise1`'s `reads=` ("x", "y", "xy" or "") says what its
  derivative reads, and the op's `saves` text is derived from it.
- `tags` (a frozenset on the `OpDef`) are read by the judged engines' budgets
  (`conformance.engines.budgets.budget_class`): "elementwise" (one result element per
  operand element: `elementwise1` and `elementwise2` set it, a composite names it), and
  "broadcast" (`elementwise2`: the operands broadcast centrally).
- `elementwise2` broadcasts centrally: the rule sees one output position at a time and the
  cotangent of a broadcast operand is reduced back by `unbroadcast`.
- `max_pick` / `max_split` / `max_tangent` are the maximum/minimum conventions shared by
  maximum, minimum and softmax's max-shift: NaN propagates (a first), ties return a and
  split the cotangent as g·(1/2) to each side.
- A composite's semantics *is* its body graph (eval_graph / jvp_ctx / backprop_ctx); body
  graphs are cached per (shapes, attrs) and immutable.
- Shape errors name the op, the input index and expected vs got (`shape_error`).
- Most ops carry a "second generic point" sample built by `second_point`, usually with
  `second_arg()` (the six values `SECOND_VALUES` in one shape, by default (2, 3)).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from ..domains import Domain, add_math_function
from ..errors import GraphError, ShapeError, op_error
from ..mathfns import MATH_FNS, MathFn
from ..shape import Shape, broadcast_shapes, sliding_window_out_dim
from ..tensor import Tensor
from .table import (
    Attrs,
    AttrSpec,
    Env,
    OpDef,
    Sample,
    SampleArg,
    ShapeFn,
    arg,
    expand,
    register,
    sample,
    unbroadcast,
)

__all__ = [
    "READS",
    "SECOND_NOTE",
    "SECOND_VALUES",
    "broadcast_rule",
    "composite",
    "conv_out_dim",
    "elementwise1",
    "elementwise2",
    "half",
    "image_dims",
    "int_pair",
    "max_pick",
    "max_split",
    "max_tangent",
    "rank_at_least",
    "same_shape",
    "scalar_const",
    "second_arg",
    "second_point",
    "shape_error",
    "zeros_like",
]


SECOND_VALUES = (1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2))
"""The row-major values of the shared second generic point (six: shape (2, 3) or
another shape of six elements)."""

SECOND_NOTE = "a second generic point"


def second_arg(shape: Shape = (2, 3)) -> SampleArg:
    """A sample argument of `shape` (six elements) holding `SECOND_VALUES`."""
    return arg(shape, *SECOND_VALUES)


def second_point(*args: SampleArg, attrs: dict[str, Any] | None = None, note: str = "") -> Sample:
    """An op's second ordinary sample: `args` (most often `second_arg()` first) and
    `attrs`, noted `SECOND_NOTE` (followed by `note` in parentheses when given)."""
    text = f"{SECOND_NOTE} ({note})" if note else SECOND_NOTE
    return sample(*args, attrs=attrs, note=text)


def zeros_like(domain: Domain, t: Tensor) -> Tensor:
    return Tensor.zeros(domain, t.shape)


def shape_error(
    op: str, check: str, index: int | None = None, expected: Any = None, got: Any = None
):
    return op_error(ShapeError, op, check, index=index, expected=expected, got=got)


def rank_at_least(op: str, shapes: list[Shape], i: int, r: int) -> None:
    if len(shapes[i]) < r:
        raise shape_error(op, f"rank must be at least {r}", i, f"rank >= {r}", shapes[i])


def same_shape(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], attrs: Attrs) -> Shape:
        return shapes[0]

    return rule


READS = {"x": "x", "y": "y", "xy": "x, y", "": "nothing"}
"""The `reads=` values of the elementwise builders: what the derivative reads (the operand,
the result, both or neither) -> the `saves` text of the op."""


def elementwise1(
    *,
    name: str,
    family: str,
    push: Callable[[Domain, Any, Any, Any, Attrs], Any],
    reads: str,
    doc: str,
    f: Callable[[Domain, Any, Attrs], Any] | None = None,
    math: MathFn | None = None,
    attrs: tuple[AttrSpec, ...] = (),
    algebraic: bool = True,
    precondition: Callable[[Domain, list[Tensor], Attrs], None] | None = None,
    shape: ShapeFn | None = None,
    samples: tuple[Sample, ...] = (),
) -> OpDef:
    """An elementwise unary op. `push(D, x, y, t, attrs)` maps a tangent or cotangent `t`
    through the (diagonal) derivative at x; `reads` (a key of `READS`) says whether it
    reads x, y = f(x) or both (what it does not read is None, and y is not computed for
    it); the same sequence serves the JVP and the VJP. `math` (a `spec.mathfns.MathFn`)
    makes the op the math function of that record: f defaults to `D.<name>(x)`, and the
    record is added to `MATH_FNS` (deriving its domain methods) unless it is there."""
    if reads not in READS:
        raise GraphError(f"op {name!r}: reads={reads!r} is not one of {sorted(READS)}")
    if math is not None and math.name not in MATH_FNS:
        add_math_function(math)
    if f is None:
        if math is None:
            raise GraphError(f"op {name!r}: elementwise1 needs f= or math=")
        fname = math.name

        def f(D: Domain, v: Any, a: Attrs) -> Any:
            return getattr(D, fname)(v)

    fx = f
    ky = "y" in reads

    def forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        return xs[0].map(lambda v: fx(D, v, a))

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        x = xs[0]
        ys = forward(D, xs, a, env).data if ky else (None,) * len(x.data)
        data = tuple(
            push(D, xv, yv, tv, a) for xv, yv, tv in zip(x.data, ys, dxs[0].data, strict=True)
        )
        return Tensor(x.shape, data)

    def vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
        return [jvp(D, xs, [g], a, env)]

    return register(
        name=name,
        family=family,
        arity=1,
        attrs=attrs,
        shape=shape or same_shape(name),
        forward=forward,
        jvp=jvp,
        vjp=vjp,
        saves=READS[reads],
        doc=doc,
        algebraic=algebraic,
        precondition=precondition,
        tags=frozenset({"elementwise"}),
        samples=samples,
        math=math,
    )


def broadcast_rule(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], attrs: Attrs) -> Shape:
        out = broadcast_shapes(shapes[0], shapes[1])
        if out is None:
            raise shape_error(
                op, "operands do not broadcast", 1, f"broadcastable with {shapes[0]}", shapes[1]
            )
        return out

    return rule


def elementwise2(
    *,
    name: str,
    family: str,
    f: Callable[[Domain, Any, Any], Any],
    jvp_s: Callable[[Domain, Any, Any, Any, Any], Any],
    vjp_s: Callable[[Domain, Any, Any, Any], tuple[Any, Any]],
    saves: str,
    doc: str,
    algebraic: bool = True,
    samples: tuple[Sample, ...] = (),
) -> OpDef:
    """A broadcasting binary elementwise op, defined per output position."""
    rule = broadcast_rule(name)

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

    return register(
        name=name,
        family=family,
        arity=2,
        attrs=(),
        shape=rule,
        forward=forward,
        jvp=jvp,
        vjp=vjp,
        saves=saves,
        doc=doc,
        algebraic=algebraic,
        tags=frozenset({"elementwise", "broadcast"}),
        samples=samples,
    )


def half(D: Domain) -> Any:
    return D.from_rational(Fraction(1, 2))


def max_pick(D: Domain, a: Any, b: Any, larger: bool) -> Any:
    # NaN propagates (a first); ties, including +0 vs -0, return a.
    if D.is_nan(a):
        return a
    if D.is_nan(b):
        return b
    if larger:
        return b if D.lt(a, b) else a
    return b if D.lt(b, a) else a


def max_split(D: Domain, a: Any, b: Any, g: Any, larger: bool) -> tuple[Any, Any]:
    # The winning side gets g; a tie gives each side g*(1/2); with a NaN neither gets any.
    a_wins = D.lt(b, a) if larger else D.lt(a, b)
    b_wins = D.lt(a, b) if larger else D.lt(b, a)
    if a_wins:
        return g, D.zero()
    if b_wins:
        return D.zero(), g
    if D.eq(a, b):
        h = D.mul(g, half(D))
        return h, h
    return D.zero(), D.zero()


def max_tangent(D: Domain, a: Any, b: Any, da: Any, db: Any, larger: bool) -> Any:
    a_wins = D.lt(b, a) if larger else D.lt(a, b)
    b_wins = D.lt(a, b) if larger else D.lt(b, a)
    if a_wins:
        return da
    if b_wins:
        return db
    if D.eq(a, b):
        return D.mul(D.add(da, db), half(D))
    return D.zero()


class _BodyCache:
    """A composite's body graph per (argument shapes, attributes), built on first use by the
    body function; at most 512 are kept (the graphs are immutable, so they are shared)."""

    def __init__(self, body: Callable[[Any, list[int], Attrs], int]) -> None:
        self.body = body
        self.bodies: dict[Any, Any] = {}

    def __call__(self, shapes: list[Shape], a: Attrs) -> Any:
        from ..graph import GraphBuilder

        try:
            key: Any = (tuple(tuple(s) for s in shapes), tuple(sorted(a.items())))
            hit = self.bodies.get(key)
        except TypeError:  # an unhashable attribute value: build without caching
            key, hit = None, None
        if hit is not None:
            return hit
        b = GraphBuilder()
        args = [b.input(s) for s in shapes]
        out = self.body(b, args, a)
        g = b.build(output=out)
        if key is not None:
            if len(self.bodies) >= 512:
                self.bodies.clear()
            self.bodies[key] = g
        return g


def composite(
    *,
    name: str,
    family: str,
    arity: int | None,
    body: Callable[[Any, list[int], Attrs], int],
    doc: str,
    attrs: tuple[AttrSpec, ...] = (),
    algebraic: bool = True,
    differentiable: bool = True,
    tags: frozenset[str] = frozenset(),
    samples: tuple[Sample, ...] = (),
) -> OpDef:
    """A composite op: `body(b, args, attrs)` emits nodes on a `GraphBuilder` b whose inputs
    are the op's arguments and returns the result id. Semantics = the body's semantics."""

    build = _BodyCache(body)

    def shape(shapes: list[Shape], a: Attrs) -> Shape:
        try:
            g = build(shapes, a)
        except ShapeError as e:
            msg = str(e)  # body rules usually name the composite already
            raise ShapeError(msg if msg.startswith(f"{name}: ") else f"{name}: {msg}") from None
        return g.shapes[-1]

    def forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        from ..graph import eval_graph

        g = build([x.shape for x in xs], a)
        return eval_graph(D, g, xs, env, check=False).tensors[-1]

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
        from ..graph import jvp_ctx

        g = build([x.shape for x in xs], a)
        return jvp_ctx(D, g, xs, dxs, env, check=False).tensors[-1]

    def vjp(D: Domain, xs: list[Tensor], gout: Tensor, a: Attrs, env: Env) -> list[Tensor]:
        from ..graph import backprop_ctx
        from ..tensor import TensorPack

        g = build([x.shape for x in xs], a)
        seed = TensorPack.zeros(D, g.shapes[:-1]).snoc(gout)
        return list(backprop_ctx(D, g, xs, seed, env, check=False).tensors)

    return register(
        name=name,
        family=family,
        arity=arity,
        attrs=attrs,
        shape=shape,
        forward=forward,
        jvp=jvp,
        vjp=vjp,
        saves="the body's saved values",
        doc=doc,
        kind="composite",
        body=build,
        algebraic=algebraic,
        differentiable=differentiable,
        tags=tags,
        samples=samples,
    )


def scalar_const(b: Any, q: Fraction | int) -> int:
    """A scalar const node (shape ()), broadcast by the op that uses it."""
    return b.node("const", shape=(), values=(Fraction(q),))


def conv_out_dim(op: str, n: int, k: int, stride: int, pad: int, dil: int) -> int:
    """The sliding-window rule with an effective kernel dil*(k-1)+1; >= 1 required."""
    eff = dil * (k - 1) + 1 if k else 0
    out = sliding_window_out_dim(n, eff, stride, pad)
    if out < 1:
        raise shape_error(
            op,
            "output would be empty",
            0,
            f"input + 2*padding >= dilation*(kernel-1)+1 = {eff}",
            n + 2 * pad,
        )
    return out


def int_pair(
    op: str, a: Attrs, key: str, default: tuple[int, int], minimum: int
) -> tuple[int, int]:
    v = a.get(key)
    if v is None:
        return default
    if len(v) != 2 or min(v) < minimum:
        raise op_error(
            GraphError,
            op,
            f"attribute {key!r} must be two ints >= {minimum}",
            expected=f"(h, w) >= {minimum}",
            got=v,
        )
    return int(v[0]), int(v[1])


def image_dims(op: str, b: Any, x: int, index: int = 0) -> tuple[Shape, Shape]:
    """(batch prefix, (C, H, W)) of an input (C, H, W) or (N, C, H, W)."""
    s = b.shape_of(x)
    if len(s) not in (3, 4):
        raise shape_error(op, "input must be (C, H, W) or (N, C, H, W)", index, "rank 3 or 4", s)
    return s[:-3], s[-3:]
