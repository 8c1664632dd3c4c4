"""Kernels of the attention family: scaled_dot_product_attention multi_head_attention
mask_neg_inf.

Invariants:
- mask_neg_inf keeps x where the mask is true and writes -inf (the dtype's, from
  `spec.ops.neg_inf`) elsewhere; its VJP and JVP keep the tangent where the mask is true
  and write +0 elsewhere. An all-true mask returns x itself.
- scaled_dot_product_attention and multi_head_attention are composite: their kernels run
  the spec bodies (`table.composite_kernel`, derived from the op table), so their ordered
  results are the spec's bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from spec.ops import neg_inf
from spec.tensor import Tensor

from ..backends import from_spec
from ..engine.context import KernelContext
from .builders import device_array
from .table import Attrs, Env, register

__all__: list[str] = []


def _keep(ctx: KernelContext, a: Attrs) -> Any:
    m = np.asarray(a["mask"], dtype=bool).reshape(a["mask_shape"])
    return device_array(ctx, m)


def _mask_fwd(ctx: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x = xs[0]
    if all(a["mask"]):
        return x, None
    ninf = from_spec(Tensor((), (neg_inf(ctx.domain),)), ctx.dtype)
    if not ctx.backend.is_numpy:
        ninf = ctx.backend.from_host(ninf)
    return ctx.arr(ctx.xp.where(_keep(ctx, a), x, ninf)), None


def _mask_lin(ctx: KernelContext, t: Any, a: Attrs) -> Any:
    keep = ctx.xp.broadcast_to(_keep(ctx, a), tuple(t.shape))
    return ctx.arr(ctx.xp.where(keep, t, ctx.zeros(tuple(t.shape))))


register(
    family=__name__,
    name="mask_neg_inf",
    forward=_mask_fwd,
    vjp=lambda c, s, g, a, e: [_mask_lin(c, g, a)],
    jvp=lambda c, s, dxs, a, e: _mask_lin(c, dxs[0], a),
    saves="nothing",
)
