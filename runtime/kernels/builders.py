"""Kernel builders and helpers shared by several kernel families (not a family itself).

Invariants:
- Every helper performs its spec rule's operation sequence (same operations, same operand
  order, same folds); the profile-dependent pieces live in `KernelContext`.
- Broadcasting is central: `binary` kernels compute on broadcast operands and
  `ctx.unbroadcast` reduces cotangents. `unary_kernel` maps tangents and cotangents through the
  same diagonal derivative. Both save only what their derivative reads.
- `binary`/`unary_kernel` register through `table.register` with the caller's `family` (its
  module `__name__`); this module registers no kernel itself.
- A `unary_kernel` given a `ufunc` calls it directly on the NumPy IEEE `fast` context
  (`ctx.numpy_libm`) and runs its reference, `UNARY_REFERENCE[name]` (through `f`),
  everywhere else; the two are equal bit for bit (tests/test_session_fastpath_kernels.py).
- Written against `ctx.xp`; NumPy is used only to precompute host structures and where a
  NumPy-only fast path is guarded (`ctx.numpy_fast`, `ctx.maskable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..engine.context import KernelContext
from .table import Attrs, Env, register

__all__ = [
    "READS",
    "UNARY_REFERENCE",
    "binary",
    "bshape",
    "device_array",
    "pad_rows",
    "pick",
    "scatter",
    "shape_saved",
    "take",
    "unary_kernel",
    "where",
    "zero_like",
]


def bshape(a: Any, b: Any) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(a.shape, b.shape))


def binary(
    *,
    family: str,
    name: str,
    f: Any,
    vjp_s: Any,
    jvp_s: Any,
    saves: str,
    values: bool = True,
) -> None:
    """f(ctx, a, b) on broadcast operands; vjp_s(ctx, a, b, g) -> (ga, gb) per position.
    With `values=False` (add, sub) the rules never read the operands: only their shapes are
    saved, and vjp_s/jvp_s receive None for them."""

    def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        a, b = xs
        y = f(ctx, a, b)
        if type(y) is not ctx.atype:
            y = ctx.arr(y)
        if a.shape != b.shape or y.shape != a.shape:
            out = bshape(a, b)
            if tuple(y.shape) != out:
                y = ctx.xp.broadcast_to(y, out)
        return y, ((a, b) if values else (a.shape, b.shape))

    def vjp(ctx: KernelContext, saved: Any, g: Any, attrs: Attrs, env: Env) -> list[Any]:
        a, b = saved
        xp = ctx.xp
        gs = g.shape
        sa, sb = (a.shape, b.shape) if values else (a, b)
        if values:
            A = a if sa == gs else xp.broadcast_to(a, gs)
            B = b if sb == gs else xp.broadcast_to(b, gs)
        else:
            A = B = None
        ga, gb = vjp_s(ctx, A, B, g)
        if type(ga) is not ctx.atype or ga.shape != gs:
            ga = xp.broadcast_to(ctx.arr(ga), gs)
        if type(gb) is not ctx.atype or gb.shape != gs:
            gb = xp.broadcast_to(ctx.arr(gb), gs)
        return [ctx.unbroadcast(ga, sa), ctx.unbroadcast(gb, sb)]

    def jvp(ctx: KernelContext, saved: Any, dxs: list[Any], attrs: Attrs, env: Env) -> Any:
        a, b = saved
        sa, sb = (a.shape, b.shape) if values else (a, b)
        out = tuple(np.broadcast_shapes(sa, sb))
        xp = ctx.xp
        A = xp.broadcast_to(a, out) if values else None
        B = xp.broadcast_to(b, out) if values else None
        dA, dB = xp.broadcast_to(dxs[0], out), xp.broadcast_to(dxs[1], out)
        return xp.broadcast_to(ctx.arr(jvp_s(ctx, A, B, dA, dB)), out)

    register(family=family, name=name, forward=forward, vjp=vjp, jvp=jvp, saves=saves)


def zero_like(ctx: KernelContext, x: Any) -> Any:
    return ctx.zeros(tuple(x.shape))


def pick(c: KernelContext, a: Any, b: Any, larger: bool) -> Any:
    # NaN propagates (a first); ties (including +0 vs -0) return a.
    take_b = (a < b) if larger else (b < a)
    xp = c.xp
    return xp.where(c.isnan(a), a, xp.where(c.isnan(b), b, xp.where(take_b, b, a)))


UNARY_REFERENCE: dict[str, Any] = {}
"""Per op registered by `unary_kernel` with a `ufunc`: the reference forward (through `f`) that the
kernel's forward must equal bit for bit (value and saved values) on every context."""


READS = {"x": "x", "y": "y", "xy": "x, y", "": "nothing"}
"""`reads=` of `unary_kernel` (what the derivative reads) -> the kernel's `saves` text."""


def unary_kernel(
    *,
    family: str,
    name: str,
    f: Any,
    push: Any,
    reads: str,
    check: Any = None,
    ufunc: Any = None,
) -> None:
    """Elementwise unary: y = f(ctx, x, attrs); push(ctx, x, y, t, attrs) maps a tangent
    or cotangent through the diagonal derivative (same sequence for JVP and VJP). `reads`
    (a key of `READS`: "x", "y", "xy" or "") names what the derivative reads; only that is
    saved, and push receives None for the rest.

    `ufunc` (optional): the NumPy function that `f` calls on the NumPy IEEE `fast` context
    (`ctx.numpy_libm`), e.g. `np.tanh` for `ctx.unary("tanh", x)`. There the forward calls
    it directly, one call per op instead of f's layers (the eager per-op path); everywhere
    else it runs the reference, `UNARY_REFERENCE[name]` (through `f`), which it must equal
    bit for bit (tests/test_session_fastpath_kernels.py)."""
    if reads not in READS:
        raise ValueError(f"kernel {name!r}: reads={reads!r} is not one of {sorted(READS)}")
    kx, ky = "x" in reads, "y" in reads

    def reference(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        x = xs[0]
        y = f(ctx, x, attrs)
        if type(y) is not ctx.atype:
            y = ctx.arr(y)
        return y, (x if kx else None, y if ky else None)

    forward = reference
    if ufunc is not None:
        UNARY_REFERENCE[name] = reference
        ndarray = np.ndarray

        def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
            if not ctx.numpy_libm:
                return reference(ctx, xs, attrs, env)
            x = xs[0]
            y = ufunc(x)
            if type(y) is not ndarray:  # a 0-d operand gives a NumPy scalar
                y = ctx.arr(y)
            return y, (x if kx else None, y if ky else None)

    # The derivative calls push directly (no wrapper layer); a NumPy scalar result (0-d
    # operands) becomes a 0-d array of the dtype.
    def vjp(ctx: KernelContext, saved: Any, g: Any, attrs: Attrs, env: Env) -> list[Any]:
        r = push(ctx, saved[0], saved[1], g, attrs)
        return [r if type(r) is ctx.atype else ctx.arr(r)]

    def jvp(ctx: KernelContext, saved: Any, dxs: list[Any], attrs: Attrs, env: Env) -> Any:
        r = push(ctx, saved[0], saved[1], dxs[0], attrs)
        return r if type(r) is ctx.atype else ctx.arr(r)

    register(
        family=family,
        name=name,
        forward=forward,
        vjp=vjp,
        jvp=jvp,
        saves=READS[reads],
        check=check,
    )


def where(c: KernelContext, cond: Any, t: Any, shape: Any) -> Any:
    """where(cond, t, zeros(shape))."""
    if c.maskable(cond, t) and tuple(shape) == tuple(t.shape):
        return c.select_or_zero(cond, t)
    return c.xp.where(cond, t, c.zeros(tuple(shape)))


def shape_saved(ctx: KernelContext, xs: list[Any], f: Any) -> tuple[Any, Any]:
    return ctx.arr(f(xs)), tuple(tuple(x.shape) for x in xs)


def pad_rows(c: KernelContext, g: Any, shape: tuple[int, ...], start: int) -> Any:
    z = c.zeros(shape)
    parts = [z[:start, ...], g, z[start + g.shape[0] :, ...]]
    return c.xp.concat(parts, axis=0)


def scatter(c: KernelContext, t: Any, indices: Sequence[int], n: int) -> Any:
    """out[j] = left fold over k with indices[k] == j of t[k] (first stored as is)."""
    rows: list[Any] = [None] * n
    for k, j in enumerate(indices):
        rows[j] = t[k, ...] if rows[j] is None else rows[j] + t[k, ...]
    z = c.zeros(tuple(t.shape[1:]))
    if n == 0:
        return c.zeros((0, *t.shape[1:]))
    return c.xp.stack([z if r is None else c.arr(r) for r in rows], axis=0)


def take(c: KernelContext, x: Any, indices: Sequence[int]) -> Any:
    return c.xp.take(x, c.xp.asarray(list(indices), dtype=c.xp.int64), axis=0)


def device_array(ctx: KernelContext, a: Any) -> Any:
    """A host array (index structure, mask) on the context's backend."""
    return a if ctx.backend.is_numpy else ctx.xp.asarray(a)
