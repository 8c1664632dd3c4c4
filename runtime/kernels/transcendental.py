"""Kernels of the transcendental family: exp log safe_log tanh sigmoid softplus gelu silu sin
cos erf log1p expm1 elu celu selu mish pow pow_tensor.

Invariants:
- Every kernel is an elementwise unary (`builders.unary_kernel`): the transcendental itself is
  `ctx.unary` (correctly rounded per profile), its derivative the spec rule's sequence.
- log's precondition (x > 0, not NaN) is a `check` run by op constructors, not inside
  composite bodies (as in spec).
- safe_log, softplus, gelu, silu, selu and mish are composite: their kernels run the spec
  bodies (`table.composite_kernel`, derived from the op table).
- erf, log1p, expm1, elu and celu save x only (their derivatives read x, as the spec's);
  elu/celu pick per element with `where`, so both branches are computed and the unused
  one (possibly inf or NaN) is discarded.
- pow and pow_tensor take the power from `ctx.pow` (correctly rounded in `ordered`); their
  derivatives are the spec's sequences, the zero cases (exponent 0; a = ±0 with b >= 0)
  picked per element with `where` (+0), the other branch computed and discarded.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import DomainError
from spec.ops.transcendental import ERF_C

from ..engine.context import KernelContext
from .builders import binary, unary_kernel
from .table import Attrs

__all__: list[str] = []

unary_kernel(
    family=__name__,
    name="exp",
    f=lambda c, x, a: c.unary("exp", x),
    ufunc=np.exp,
    push=lambda c, x, y, t, a: t * y,
    reads="y",
)


def _log_check(ctx: KernelContext, xs: list[Any], attrs: Attrs) -> None:
    x = xs[0]
    with np.errstate(invalid="ignore"):  # ml_dtypes flags NaN comparisons as invalid
        bad = ctx.isnan(x) | ~(ctx.const(0) < x)
    if bool(np.any(bad) if ctx.backend.is_numpy else ctx.xp.any(bad)):
        to_host = ctx.backend.to_host
        i = int(np.flatnonzero(to_host(bad).reshape(-1))[0])
        raise DomainError(
            f"log: input 0 element {i} is {to_host(x).reshape(-1)[i]}; log "
            "refuses inputs <= 0 or NaN (use safe_log)"
        )


unary_kernel(
    family=__name__,
    name="log",
    f=lambda c, x, a: c.unary("log", x),
    ufunc=np.log,
    push=lambda c, x, y, t, a: c.div(t, x),
    reads="x",
    check=_log_check,
)
unary_kernel(
    family=__name__,
    name="tanh",
    f=lambda c, x, a: c.unary("tanh", x),
    ufunc=np.tanh,
    push=lambda c, x, y, t, a: t * (c.const(1) - y * y),
    reads="y",
)
unary_kernel(
    family=__name__,
    name="sigmoid",
    f=lambda c, x, a: c.div(c.const(1), c.const(1) + c.unary("exp", -x)),
    push=lambda c, x, y, t, a: t * (y * (c.const(1) - y)),
    reads="y",
)
unary_kernel(
    family=__name__,
    name="sin",
    f=lambda c, x, a: c.unary("sin", x),
    ufunc=np.sin,
    push=lambda c, x, y, t, a: t * c.unary("cos", x),
    reads="x",
)
unary_kernel(
    family=__name__,
    name="cos",
    f=lambda c, x, a: c.unary("cos", x),
    ufunc=np.cos,
    push=lambda c, x, y, t, a: -(t * c.unary("sin", x)),
    reads="x",
)


unary_kernel(
    family=__name__,
    name="erf",
    f=lambda c, x, a: c.unary("erf", x),
    push=lambda c, x, y, t, a: t * (c.const(ERF_C) * c.unary("exp", -(x * x))),
    reads="x",
)
unary_kernel(
    family=__name__,
    name="log1p",
    f=lambda c, x, a: c.unary("log1p", x),
    ufunc=np.log1p,
    push=lambda c, x, y, t, a: c.div(t, c.const(1) + x),
    reads="x",
)
unary_kernel(
    family=__name__,
    name="expm1",
    f=lambda c, x, a: c.unary("expm1", x),
    ufunc=np.expm1,
    push=lambda c, x, y, t, a: t * c.unary("exp", x),
    reads="x",
)


def _elu(c: KernelContext, x: Any, a: Attrs) -> Any:
    return c.xp.where(c.const(0) < x, x, c.const(a["alpha"]) * c.unary("expm1", x))


def _elu_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return c.xp.where(c.const(0) < x, t, t * (c.const(a["alpha"]) * c.unary("exp", x)))


def _celu(c: KernelContext, x: Any, a: Attrs) -> Any:
    al = c.const(a["alpha"])
    return c.xp.where(c.const(0) < x, x, al * c.unary("expm1", c.div(x, al)))


def _celu_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return c.xp.where(c.const(0) < x, t, t * c.unary("exp", c.div(x, c.const(a["alpha"]))))


unary_kernel(family=__name__, name="elu", f=_elu, push=_elu_push, reads="x")
unary_kernel(family=__name__, name="celu", f=_celu, push=_celu_push, reads="x")


# --------------------------------------------------------------------------- pow


def _pow_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    e = Fraction(a["exponent"])
    if e == 0:
        return c.zeros(tuple(t.shape))
    return t * (c.const(e) * c.pow(x, c.const(e - 1)))


unary_kernel(
    family=__name__,
    name="pow",
    f=lambda c, x, a: c.pow(x, c.const(a["exponent"])),
    push=_pow_push,
    reads="x",
)


def _pow_da(c: KernelContext, a: Any, b: Any, t: Any) -> Any:
    v = c.arr(t * (b * c.pow(a, b - c.const(1))))
    return c.xp.where(b == c.const(0), c.zeros(tuple(v.shape)), v)


def _pow_db(c: KernelContext, a: Any, b: Any, t: Any) -> Any:
    zero = c.const(0)
    v = c.arr(t * (c.pow(a, b) * c.unary("log", a)))
    return c.xp.where((a == zero) & (b >= zero), c.zeros(tuple(v.shape)), v)


binary(
    family=__name__,
    name="pow_tensor",
    f=lambda c, a, b: c.pow(a, b),
    vjp_s=lambda c, a, b, g: (_pow_da(c, a, b, g), _pow_db(c, a, b, g)),
    jvp_s=lambda c, a, b, da, db: _pow_da(c, a, b, da) + _pow_db(c, a, b, db),
    saves="a, b",
)
