"""Kernels of the linalg family: matmul linear.

Invariants:
- Products are the context's `ctx.matmul` (under `ordered`: a left fold over k per output
  element); batch dimensions broadcast as in spec.
- linear is fold_j w[i,j]*x[r,j] as x @ w^T, then + b (added into the matmul's fresh result
  on NumPy).
- Both have `vjp_some`: the cotangents of the arguments that need one are the same arrays,
  bit for bit, as `vjp`'s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..engine.context import KernelContext
from .table import Attrs, Env, register

__all__: list[str] = []


def _swap_last(c: KernelContext, x: Any) -> Any:
    n = x.ndim
    return c.xp.permute_dims(x, (*range(n - 2), n - 1, n - 2))


def _mm_operands(c: KernelContext, a: Any, b: Any) -> tuple[Any, Any]:
    batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    xp = c.xp
    return (
        xp.broadcast_to(a, (*batch, *a.shape[-2:])),
        xp.broadcast_to(b, (*batch, *b.shape[-2:])),
    )


def _matmul_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    A, B = _mm_operands(c, *xs)
    return c.matmul(A, B), (xs[0], xs[1])


def _matmul_vjp_some(
    c: KernelContext, s: Any, g: Any, a: Attrs, e: Env, needs: tuple[bool, ...]
) -> list[Any]:
    A, B = _mm_operands(c, *s)
    gA = c.unbroadcast(c.matmul(g, _swap_last(c, B)), s[0].shape) if needs[0] else None
    gB = c.unbroadcast(c.matmul(_swap_last(c, A), g), s[1].shape) if needs[1] else None
    return [gA, gB]


def _matmul_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    return _matmul_vjp_some(c, s, g, a, e, (True, True))


def _matmul_jvp(c: KernelContext, s: Any, dxs: list[Any], a: Attrs, e: Env) -> Any:
    A, B = _mm_operands(c, *s)
    dA, dB = _mm_operands(c, *dxs)
    return c.matmul(dA, B) + c.matmul(A, dB)


register(
    family=__name__,
    name="matmul",
    forward=_matmul_fwd,
    vjp=_matmul_vjp,
    jvp=_matmul_jvp,
    saves="a, b",
    vjp_some=_matmul_vjp_some,
)


def _rows2(c: KernelContext, x: Any) -> Any:
    return c.xp.reshape(x, (1, x.shape[0])) if x.ndim == 1 else x


def _lin(c: KernelContext, x: Any, w: Any) -> Any:
    """fold_j w[i,j]*x[r,j] as (x @ w^T), rows of x."""
    return c.matmul(_rows2(c, x), c.xp.permute_dims(w, (1, 0)))


def _linear_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x, w, b = xs
    y = _lin(c, x, w)
    if c.numpy_fast and y.flags.writeable and y.shape[-1:] == b.shape:
        np.add(y, b, out=y)  # y + b, into the matmul's fresh result (no new array)
    else:
        y = y + b
    return c.arr(c.xp.reshape(y, (*x.shape[:-1], w.shape[0]))), (x, w)


def _linear_vjp_some(
    c: KernelContext, s: Any, g: Any, a: Attrs, e: Env, needs: tuple[bool, ...]
) -> list[Any]:
    x, w = s
    g2 = _rows2(c, g)
    gx = c.xp.reshape(c.matmul(g2, w), x.shape) if needs[0] else None
    gw = c.matmul(c.xp.permute_dims(g2, (1, 0)), _rows2(c, x)) if needs[1] else None
    return [gx, gw, c.fold0(g2) if needs[2] else None]


def _linear_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    return _linear_vjp_some(c, s, g, a, e, (True, True, True))


def _linear_jvp(c: KernelContext, s: Any, dxs: list[Any], a: Attrs, e: Env) -> Any:
    x, w = s
    dx, dw, db = dxs
    y = (_lin(c, dx, w) + _lin(c, x, dw)) + db
    return c.arr(c.xp.reshape(y, (*x.shape[:-1], w.shape[0])))


register(
    family=__name__,
    name="linear",
    forward=_linear_fwd,
    vjp=_linear_vjp,
    jvp=_linear_jvp,
    saves="x, w",
    vjp_some=_linear_vjp_some,
)
