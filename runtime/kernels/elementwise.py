"""Kernels of the elementwise family: add sub neg mul scale div inv maximum minimum abs relu
clamp sqrt detach const leaky_relu sign hardtanh relu6 hardsigmoid hardswish softsign add_n
maximum_n minimum_n mean_n.

Invariants:
- Each kernel performs its spec rule's operation sequence (same operations, same operand
  order); binary kernels compute on broadcast operands and unbroadcast their cotangents
  (`builders.binary`), unary ones push tangents and cotangents through the same diagonal
  derivative (`builders.unary_kernel`); both save only what their derivative reads.
- maximum/minimum: NaN propagates (the first operand first), ties return the first operand
  and split the cotangent in halves.
- `inv`, hardtanh, relu6, hardsigmoid, hardswish, softsign and the variadic add_n,
  maximum_n, minimum_n, mean_n are composite: their kernels run the spec bodies
  (`table.composite_kernel`, derived from the op table).
- leaky_relu picks per element (`where`); sign is not differentiable (zero JVP and VJP).
- `const` rounds each exact value once into the dtype (MPFR) and returns a fresh copy on
  every call.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..engine.context import KernelContext
from .builders import binary, pick, unary_kernel, where
from .table import Attrs, Env, register

__all__: list[str] = []

binary(
    family=__name__,
    name="add",
    f=lambda c, a, b: a + b,
    vjp_s=lambda c, a, b, g: (g, g),
    jvp_s=lambda c, a, b, da, db: da + db,
    saves="shapes of a, b",
    values=False,
)
binary(
    family=__name__,
    name="sub",
    f=lambda c, a, b: a - b,
    vjp_s=lambda c, a, b, g: (g, c.const(0) - g),
    jvp_s=lambda c, a, b, da, db: da - db,
    saves="shapes of a, b",
    values=False,
)
binary(
    family=__name__,
    name="mul",
    f=lambda c, a, b: a * b,
    vjp_s=lambda c, a, b, g: (g * b, a * g),
    jvp_s=lambda c, a, b, da, db: da * b + a * db,
    saves="a, b",
)


def _div_vjp(c: KernelContext, a: Any, b: Any, g: Any) -> tuple[Any, Any]:
    q = c.div(c.div(a, b), b)
    return c.div(g, b), -(g * q)


binary(
    family=__name__,
    name="div",
    f=lambda c, a, b: c.div(a, b),
    vjp_s=_div_vjp,
    jvp_s=lambda c, a, b, da, db: c.div(da, b) - db * c.div(c.div(a, b), b),
    saves="a, b",
)


def _split(c: KernelContext, a: Any, b: Any, g: Any, larger: bool) -> tuple[Any, Any]:
    xp = c.xp
    a_wins = (b < a) if larger else (a < b)
    b_wins = (a < b) if larger else (b < a)
    h = g * c.const(Fraction(1, 2))
    z = c.zeros(tuple(g.shape))
    tie = a == b
    ga = xp.where(a_wins, g, xp.where(b_wins, z, xp.where(tie, h, z)))
    gb = xp.where(b_wins, g, xp.where(a_wins, z, xp.where(tie, h, z)))
    return ga, gb


def _tangent(c: KernelContext, a: Any, b: Any, da: Any, db: Any, larger: bool) -> Any:
    xp = c.xp
    a_wins = (b < a) if larger else (a < b)
    b_wins = (a < b) if larger else (b < a)
    z = c.zeros(tuple(da.shape))
    return xp.where(
        a_wins, da, xp.where(b_wins, db, xp.where(a == b, (da + db) * c.const(Fraction(1, 2)), z))
    )


for _n, _l in (("maximum", True), ("minimum", False)):
    binary(
        family=__name__,
        name=_n,
        f=lambda c, a, b, L=_l: pick(c, a, b, L),
        vjp_s=lambda c, a, b, g, L=_l: _split(c, a, b, g, L),
        jvp_s=lambda c, a, b, da, db, L=_l: _tangent(c, a, b, da, db, L),
        saves="a, b",
    )


unary_kernel(
    family=__name__,
    name="neg",
    f=lambda c, x, a: -x,
    ufunc=np.negative,
    push=lambda c, x, y, t, a: -t,
    reads="",
)
unary_kernel(
    family=__name__,
    name="scale",
    f=lambda c, x, a: c.const(a["c"]) * x,
    push=lambda c, x, y, t, a: c.const(a["c"]) * t,
    reads="",
)


def _relu(c: KernelContext, x: Any, a: Attrs) -> Any:
    if c.numpy_fast:
        drop = x <= c.const(0)
        if c.maskable(drop, x):
            # x <= 0 is false exactly for x > 0 and NaN, which keep x; every other x
            # (including -0) becomes +0, as in the generic form below.
            return c.select_or_zero(drop, x, keep=False)
    return c.xp.where(c.isnan(x), x, where(c, c.const(0) < x, x, x.shape))


def _relu_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return where(c, c.const(0) < x, t, x.shape)


unary_kernel(family=__name__, name="relu", f=_relu, push=_relu_push, reads="x")


def _abs_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    zero = c.const(0)
    return c.xp.where(zero < x, t, where(c, x < zero, -t, x.shape))


unary_kernel(
    family=__name__,
    name="abs",
    f=lambda c, x, a: c.xp.abs(x) if not c.exact else np.abs(x),
    ufunc=np.abs,
    push=_abs_push,
    reads="x",
)


def _clamp(c: KernelContext, x: Any, a: Attrs) -> Any:
    lo, hi = c.const(a["lo"]), c.const(a["hi"])
    xp = c.xp
    return xp.where(c.isnan(x), x, xp.where(x < lo, lo, xp.where(hi < x, hi, x)))


unary_kernel(
    family=__name__,
    name="clamp",
    f=_clamp,
    push=lambda c, x, y, t, a: where(
        c, (c.const(a["lo"]) < x) & (x < c.const(a["hi"])), t, x.shape
    ),
    reads="x",
)


def _sqrt_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    # sqrt' is defined as 0 for x <= 0 (and NaN); the denominator is replaced where unused
    # so the exact dtype never divides by zero.
    pos = c.const(0) < x
    den = c.xp.where(pos, c.const(2) * y, c.const(1))
    return where(c, pos, c.div(t, den), x.shape)


unary_kernel(
    family=__name__,
    name="sqrt",
    f=lambda c, x, a: c.sqrt(x),
    push=_sqrt_push,
    reads="xy",
    ufunc=np.sqrt,
)

register(
    family=__name__,
    name="detach",
    forward=lambda c, xs, a, e: (xs[0], tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.zeros(s)],
    jvp=lambda c, s, dxs, a, e: c.zeros(s),
    saves="input shape",
)


def _const_forward(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    """Each exact value rounded once into the dtype (MPFR), remembered per context for
    small constants (composite bodies such as mse_loss's 1/N run one per call); every call
    returns a fresh copy."""
    try:
        key: Any = (a["shape"], tuple(a["values"]))
        hit = c.const_arrays.get(key)
    except TypeError:
        key, hit = None, None
    if hit is None:
        from spec.tensor import Tensor

        from ..backends import from_spec

        D = c.domain
        t = Tensor(a["shape"], tuple(D.from_rational(q) for q in a["values"]))
        hit = from_spec(t, c.dtype)
        if not c.backend.is_numpy:
            hit = c.backend.from_host(hit)
        if key is not None and len(a["values"]) <= 1024:
            if len(c.const_arrays) >= 256:
                c.const_arrays.clear()
            c.const_arrays[key] = hit
    if c.backend.is_numpy:
        return np.array(hit, copy=True), a["shape"]
    return c.xp.asarray(hit, copy=True), a["shape"]


register(
    family=__name__,
    name="const",
    forward=_const_forward,
    vjp=lambda c, s, g, a, e: [],
    jvp=lambda c, s, dxs, a, e: c.zeros(s),
    saves="shape",
)


def _leaky(c: KernelContext, x: Any, a: Attrs) -> Any:
    return c.xp.where(c.const(0) < x, x, c.const(a["negative_slope"]) * x)


def _leaky_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return c.xp.where(c.const(0) < x, t, c.const(a["negative_slope"]) * t)


unary_kernel(family=__name__, name="leaky_relu", f=_leaky, push=_leaky_push, reads="x")


def _sign(c: KernelContext, x: Any) -> Any:
    xp, zero = c.xp, c.const(0)
    pos = xp.where(zero < x, c.const(1), c.zeros(tuple(x.shape)))
    return xp.where(x < zero, c.const(-1), xp.where(c.isnan(x), x, pos))


register(
    family=__name__,
    name="sign",
    forward=lambda c, xs, a, e: (c.arr(_sign(c, xs[0])), tuple(xs[0].shape)),
    vjp=lambda c, s, g, a, e: [c.zeros(s)],
    jvp=lambda c, s, dxs, a, e: c.zeros(s),
    saves="input shape",
)
