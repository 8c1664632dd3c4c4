"""Runtime kernels for every op of the spec op table.

Invariants:
- `KERNELS[name]` exists for every `spec.ops.OPS` entry (a test iterates the table).
  Primitive ops have hand-written kernels; composite ops get `_composite_kernel`, which runs
  the spec body's nodes through these kernels, so the composition is the same sequence.
- A kernel is three functions over a `KernelContext`:
  `forward(ctx, xs, attrs, env) -> (y, saved)`, `vjp(ctx, saved, g, attrs, env) -> [g_i]`
  (one cotangent per argument) and `jvp(ctx, saved, dxs, attrs, env) -> dy`. `saved` is
  exactly what the forward keeps for the backward; each kernel says what it is.
- Every kernel performs its spec rule's operation sequence (same operations, same operand
  order, same folds); the profile-dependent pieces live in `KernelContext`. Broadcasting is
  central: elementwise kernels compute on broadcast operands and `ctx.unbroadcast` reduces
  cotangents; fan-in is folded by the caller (`fold_fanin`), never by a kernel.
- Preconditions (log's x > 0) are `check` functions run by op constructors, not inside
  composite bodies (as in spec).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from spec.errors import DomainError, GraphError, ShapeError
from spec.ops import OPS, OpDef

from .context import KernelContext

__all__ = ["KERNELS", "Kernel", "fold_fanin", "kernel_for"]

Attrs = dict[str, Any]
Env = Sequence[int]


@dataclass(frozen=True)
class Kernel:
    name: str
    forward: Callable[[KernelContext, list[Any], Attrs, Env], tuple[Any, Any]]
    vjp: Callable[[KernelContext, Any, Any, Attrs, Env], list[Any]]
    jvp: Callable[[KernelContext, Any, list[Any], Attrs, Env], Any]
    saves: str
    check: Callable[[KernelContext, list[Any], Attrs], None] | None = None
    # Optional: vjp_some(ctx, saved, g, attrs, env, needs) computes only the cotangents of
    # the arguments with needs[i] True (None for the others); each one it computes is the
    # same array, bit for bit, as vjp's. The tape uses it when some argument is frozen
    # (PyTorch's needs_input_grad), e.g. to skip the input gradient of a first layer.
    vjp_some: (
        Callable[[KernelContext, Any, Any, Attrs, Env, tuple[bool, ...]], list[Any]] | None
    ) = None


KERNELS: dict[str, Kernel] = {}


def _k(
    name: str,
    forward: Any,
    vjp: Any,
    jvp: Any,
    saves: str,
    check: Any = None,
    vjp_some: Any = None,
) -> None:
    if name not in OPS:
        raise GraphError(f"kernel for {name!r}, which is not in the spec op table")
    KERNELS[name] = Kernel(name, forward, vjp, jvp, saves, check, vjp_some)


def fold_fanin(args: Sequence[int], per_arg: Sequence[Any]) -> dict[int, Any]:
    """Per distinct argument id: the left fold of its cotangents in argument order."""
    out: dict[int, Any] = {}
    for a, g in zip(args, per_arg, strict=True):
        out[a] = g if a not in out else out[a] + g
    return out


# --------------------------------------------------------------------------- elementwise


def _bshape(a: Any, b: Any) -> tuple[int, ...]:
    return tuple(np.broadcast_shapes(a.shape, b.shape))


def _binary(name: str, f: Any, vjp_s: Any, jvp_s: Any, saves: str, values: bool = True) -> None:
    """f(ctx, a, b) on broadcast operands; vjp_s(ctx, a, b, g) -> (ga, gb) per position.
    With `values=False` (add, sub) the rules never read the operands: only their shapes are
    saved, and vjp_s/jvp_s receive None for them."""

    def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        a, b = xs
        y = f(ctx, a, b)
        if type(y) is not ctx.atype:
            y = ctx.arr(y)
        if a.shape != b.shape or y.shape != a.shape:
            out = _bshape(a, b)
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

    _k(name, forward, vjp, jvp, saves)


def _zero_like(ctx: KernelContext, x: Any) -> Any:
    return ctx.zeros(tuple(x.shape))


_binary(
    "add",
    lambda c, a, b: a + b,
    lambda c, a, b, g: (g, g),
    lambda c, a, b, da, db: da + db,
    "shapes of a, b",
    values=False,
)
_binary(
    "sub",
    lambda c, a, b: a - b,
    lambda c, a, b, g: (g, c.const(0) - g),
    lambda c, a, b, da, db: da - db,
    "shapes of a, b",
    values=False,
)
_binary(
    "mul",
    lambda c, a, b: a * b,
    lambda c, a, b, g: (g * b, a * g),
    lambda c, a, b, da, db: da * b + a * db,
    "a, b",
)


def _div_vjp(c: KernelContext, a: Any, b: Any, g: Any) -> tuple[Any, Any]:
    q = c.div(c.div(a, b), b)
    return c.div(g, b), -(g * q)


_binary(
    "div",
    lambda c, a, b: c.div(a, b),
    _div_vjp,
    lambda c, a, b, da, db: c.div(da, b) - db * c.div(c.div(a, b), b),
    "a, b",
)


def _pick(c: KernelContext, a: Any, b: Any, larger: bool) -> Any:
    # NaN propagates (a first); ties (including +0 vs -0) return a.
    take_b = (a < b) if larger else (b < a)
    xp = c.xp
    return xp.where(c.isnan(a), a, xp.where(c.isnan(b), b, xp.where(take_b, b, a)))


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
    _binary(
        _n,
        lambda c, a, b, L=_l: _pick(c, a, b, L),
        lambda c, a, b, g, L=_l: _split(c, a, b, g, L),
        lambda c, a, b, da, db, L=_l: _tangent(c, a, b, da, db, L),
        "a, b",
    )


def _unary(name: str, f: Any, push: Any, saves: str, check: Any = None, keep: str = "xy") -> None:
    """Elementwise unary: y = f(ctx, x, attrs); push(ctx, x, y, t, attrs) maps a tangent
    or cotangent through the diagonal derivative (same sequence for JVP and VJP). `keep`
    names what the derivative reads ("x", "y", both or neither); only that is saved, and
    push receives None for the rest."""
    kx, ky = "x" in keep, "y" in keep

    def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        x = xs[0]
        y = f(ctx, x, attrs)
        if type(y) is not ctx.atype:
            y = ctx.arr(y)
        return y, (x if kx else None, y if ky else None)

    def run(ctx: KernelContext, saved: Any, t: Any, attrs: Attrs) -> Any:
        x, y = saved
        r = push(ctx, x, y, t, attrs)
        return r if type(r) is ctx.atype else ctx.arr(r)

    _k(
        name,
        forward,
        lambda ctx, s, g, a, env: [run(ctx, s, g, a)],
        lambda ctx, s, dxs, a, env: run(ctx, s, dxs[0], a),
        saves,
        check,
    )


def _where(c: KernelContext, cond: Any, t: Any, shape: Any) -> Any:
    """where(cond, t, zeros(shape))."""
    if c.maskable(cond, t) and tuple(shape) == tuple(t.shape):
        return c.select_or_zero(cond, t)
    return c.xp.where(cond, t, c.zeros(tuple(shape)))


_unary("neg", lambda c, x, a: -x, lambda c, x, y, t, a: -t, "nothing", keep="")
_unary(
    "scale",
    lambda c, x, a: c.const(a["c"]) * x,
    lambda c, x, y, t, a: c.const(a["c"]) * t,
    "nothing",
    keep="",
)


def _relu(c: KernelContext, x: Any, a: Attrs) -> Any:
    if c._np:
        drop = x <= c.const(0)
        if c.maskable(drop, x):
            # x <= 0 is false exactly for x > 0 and NaN, which keep x; every other x
            # (including -0) becomes +0, as in the generic form below.
            return c.select_or_zero(drop, x, keep=False)
    return c.xp.where(c.isnan(x), x, _where(c, c.const(0) < x, x, x.shape))


def _relu_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    return _where(c, c.const(0) < x, t, x.shape)


_unary("relu", _relu, _relu_push, "x", keep="x")


def _abs_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    zero = c.const(0)
    return c.xp.where(zero < x, t, _where(c, x < zero, -t, x.shape))


_unary("abs", lambda c, x, a: c.xp.abs(x) if not c.exact else np.abs(x), _abs_push, "x", keep="x")


def _clamp(c: KernelContext, x: Any, a: Attrs) -> Any:
    lo, hi = c.const(a["lo"]), c.const(a["hi"])
    xp = c.xp
    return xp.where(c.isnan(x), x, xp.where(x < lo, lo, xp.where(hi < x, hi, x)))


_unary(
    "clamp",
    _clamp,
    lambda c, x, y, t, a: _where(c, (c.const(a["lo"]) < x) & (x < c.const(a["hi"])), t, x.shape),
    "x",
    keep="x",
)


def _sqrt_push(c: KernelContext, x: Any, y: Any, t: Any, a: Attrs) -> Any:
    # sqrt' is defined as 0 for x <= 0 (and NaN); the denominator is replaced where unused
    # so the exact dtype never divides by zero.
    pos = c.const(0) < x
    den = c.xp.where(pos, c.const(2) * y, c.const(1))
    return _where(c, pos, c.div(t, den), x.shape)


_unary("sqrt", lambda c, x, a: c.sqrt(x), _sqrt_push, "x, y")
_unary("exp", lambda c, x, a: c.unary("exp", x), lambda c, x, y, t, a: t * y, "y", keep="y")


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


_unary(
    "log",
    lambda c, x, a: c.unary("log", x),
    lambda c, x, y, t, a: c.div(t, x),
    "x",
    check=_log_check,
    keep="x",
)
_unary(
    "tanh",
    lambda c, x, a: c.unary("tanh", x),
    lambda c, x, y, t, a: t * (c.const(1) - y * y),
    "y",
    keep="y",
)
_unary(
    "sigmoid",
    lambda c, x, a: c.div(c.const(1), c.const(1) + c.unary("exp", -x)),
    lambda c, x, y, t, a: t * (y * (c.const(1) - y)),
    "y",
    keep="y",
)
_unary(
    "sin",
    lambda c, x, a: c.unary("sin", x),
    lambda c, x, y, t, a: t * c.unary("cos", x),
    "x",
    keep="x",
)
_unary(
    "cos",
    lambda c, x, a: c.unary("cos", x),
    lambda c, x, y, t, a: -(t * c.unary("sin", x)),
    "x",
    keep="x",
)


def _shape_saved(ctx: KernelContext, xs: list[Any], f: Any) -> tuple[Any, Any]:
    return ctx.arr(f(xs)), tuple(tuple(x.shape) for x in xs)


_k(
    "detach",
    lambda c, xs, a, e: (xs[0], tuple(xs[0].shape)),
    lambda c, s, g, a, e: [c.zeros(s)],
    lambda c, s, dxs, a, e: c.zeros(s),
    "input shape",
)


def _const_forward(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    """Each exact value rounded once into the dtype (MPFR), remembered per context for
    small constants (composite bodies such as mse_loss's 1/N run one per call); every call
    returns a fresh copy."""
    try:
        key: Any = (a["shape"], tuple(a["values"]))
        hit = c._const_arrays.get(key)
    except TypeError:
        key, hit = None, None
    if hit is None:
        from spec.tensor import Tensor

        from .backend import from_spec

        D = c.domain
        t = Tensor(a["shape"], tuple(D.from_rational(q) for q in a["values"]))
        hit = from_spec(t, c.dtype)
        if not c.backend.is_numpy:
            hit = c.backend.from_host(hit)
        if key is not None and len(a["values"]) <= 1024:
            if len(c._const_arrays) >= 256:
                c._const_arrays.clear()
            c._const_arrays[key] = hit
    if c.backend.is_numpy:
        return np.array(hit, copy=True), a["shape"]
    return c.xp.asarray(hit, copy=True), a["shape"]


_k("const", _const_forward, lambda c, s, g, a, e: [], lambda c, s, dxs, a, e: c.zeros(s), "shape")


# --------------------------------------------------------------------------- reductions

_k(
    "sum",
    lambda c, xs, a, e: (c.sum_all(xs[0]), tuple(xs[0].shape)),
    lambda c, s, g, a, e: [c.xp.broadcast_to(g, s)],
    lambda c, s, dxs, a, e: c.sum_all(dxs[0]),
    "input shape",
)
_k(
    "reduce_sum",
    lambda c, xs, a, e: (c.sum_axis(xs[0], a["axis"]), tuple(xs[0].shape)),
    lambda c, s, g, a, e: [c.xp.broadcast_to(c.xp.expand_dims(g, axis=a["axis"]), s)],
    lambda c, s, dxs, a, e: c.sum_axis(dxs[0], a["axis"]),
    "input shape",
)


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


_k("matmul", _matmul_fwd, _matmul_vjp, _matmul_jvp, "a, b", vjp_some=_matmul_vjp_some)


def _rows2(c: KernelContext, x: Any) -> Any:
    return c.xp.reshape(x, (1, x.shape[0])) if x.ndim == 1 else x


def _lin(c: KernelContext, x: Any, w: Any) -> Any:
    """fold_j w[i,j]*x[r,j] as (x @ w^T), rows of x."""
    return c.matmul(_rows2(c, x), c.xp.permute_dims(w, (1, 0)))


def _linear_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x, w, b = xs
    y = _lin(c, x, w)
    if c._np and y.flags.writeable and y.shape[-1:] == b.shape:
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


_k("linear", _linear_fwd, _linear_vjp, _linear_jvp, "x, w", vjp_some=_linear_vjp_some)


# --------------------------------------------------------------------------- structure

_k(
    "reshape",
    lambda c, xs, a, e: (c.xp.reshape(xs[0], a["shape"]), tuple(xs[0].shape)),
    lambda c, s, g, a, e: [c.xp.reshape(g, s)],
    lambda c, s, dxs, a, e: c.xp.reshape(dxs[0], a["shape"]),
    "input shape",
)


def _swap(c: KernelContext, x: Any, k: int) -> Any:
    perm = list(range(x.ndim))
    perm[k], perm[k + 1] = perm[k + 1], perm[k]
    return c.xp.permute_dims(x, tuple(perm))


_k(
    "swap_adjacent",
    lambda c, xs, a, e: (_swap(c, xs[0], a["axis"]), None),
    lambda c, s, g, a, e: [_swap(c, g, a["axis"])],
    lambda c, s, dxs, a, e: _swap(c, dxs[0], a["axis"]),
    "nothing",
)
_k(
    "broadcast_to",
    lambda c, xs, a, e: (c.xp.broadcast_to(xs[0], a["shape"]), tuple(xs[0].shape)),
    lambda c, s, g, a, e: [c.unbroadcast(g, s)],
    lambda c, s, dxs, a, e: c.xp.broadcast_to(dxs[0], a["shape"]),
    "input shape",
)


def _concat_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    out, start = [], 0
    for shape in s:
        out.append(g[start : start + shape[0], ...])
        start += shape[0]
    return out


_k(
    "concat",
    lambda c, xs, a, e: (c.xp.concat(list(xs), axis=0), tuple(tuple(x.shape) for x in xs)),
    _concat_vjp,
    lambda c, s, dxs, a, e: c.xp.concat(list(dxs), axis=0),
    "input shapes",
)


def _pad_rows(c: KernelContext, g: Any, shape: tuple[int, ...], start: int) -> Any:
    z = c.zeros(shape)
    parts = [z[:start, ...], g, z[start + g.shape[0] :, ...]]
    return c.xp.concat(parts, axis=0)


_k(
    "slice",
    lambda c, xs, a, e: (xs[0][a["start"] : a["stop"], ...], tuple(xs[0].shape)),
    lambda c, s, g, a, e: [_pad_rows(c, g, s, a["start"])],
    lambda c, s, dxs, a, e: dxs[0][a["start"] : a["stop"], ...],
    "input shape",
)


def _sel_index(a: Attrs, env: Env, dim: int) -> int:
    if a.get("env_slot") is not None:
        slot = a["env_slot"]
        if not 0 <= slot < len(env):
            raise GraphError(f"select: env slot out of range (expected < {len(env)}, got {slot})")
        i = env[slot]
    else:
        i = a["index"]
    if not 0 <= i < dim:
        raise ShapeError(
            f"select: input 0: index out of range (expected 0 <= index < {dim}, got {i})"
        )
    return i


def _select_fwd(c: KernelContext, xs: list[Any], a: Attrs, e: Env) -> tuple[Any, Any]:
    x = xs[0]
    i = _sel_index(a, e, x.shape[0])
    return c.arr(x[i, ...]), (tuple(x.shape), i)


def _select_vjp(c: KernelContext, s: Any, g: Any, a: Attrs, e: Env) -> list[Any]:
    shape, i = s
    return [_pad_rows(c, c.xp.reshape(g, (1, *shape[1:])), shape, i)]


_k(
    "select",
    _select_fwd,
    _select_vjp,
    lambda c, s, dxs, a, e: c.arr(dxs[0][s[1], ...]),
    "input shape, index",
)


def _scatter(c: KernelContext, t: Any, indices: Sequence[int], n: int) -> Any:
    """out[j] = left fold over k with indices[k] == j of t[k] (first stored as is)."""
    rows: list[Any] = [None] * n
    for k, j in enumerate(indices):
        rows[j] = t[k, ...] if rows[j] is None else rows[j] + t[k, ...]
    z = c.zeros(tuple(t.shape[1:]))
    if n == 0:
        return c.zeros((0, *t.shape[1:]))
    return c.xp.stack([z if r is None else c.arr(r) for r in rows], axis=0)


def _take(c: KernelContext, x: Any, indices: Sequence[int]) -> Any:
    return c.xp.take(x, c.xp.asarray(list(indices), dtype=c.xp.int64), axis=0)


_k(
    "index_select",
    lambda c, xs, a, e: (_take(c, xs[0], a["indices"]), xs[0].shape[0]),
    lambda c, s, g, a, e: [_scatter(c, g, a["indices"], s)],
    lambda c, s, dxs, a, e: _take(c, dxs[0], a["indices"]),
    "leading dim",
)
_k(
    "scatter_add",
    lambda c, xs, a, e: (_scatter(c, xs[0], a["indices"], a["size"]), None),
    lambda c, s, g, a, e: [_take(c, g, a["indices"])],
    lambda c, s, dxs, a, e: _scatter(c, dxs[0], a["indices"], a["size"]),
    "nothing",
)


# --------------------------------------------------------------------------- softmax family


def _row_max(c: KernelContext, x: Any) -> Any:
    """fold of maximum (NaN propagates, ties keep the earlier) along the last axis."""
    m = x[..., 0]
    for j in range(1, x.shape[-1]):
        m = _pick(c, m, x[..., j], True)
    return c.xp.expand_dims(c.arr(m), axis=-1)


def _softmax_parts(c: KernelContext, x: Any) -> tuple[Any, Any, Any]:
    """z = x - m, e = exp(z), s = fold e (last axis, kept)."""
    z = x - _row_max(c, x)
    e = c.unary("exp", z)
    s = c.xp.expand_dims(c.sum_axis(e, -1), axis=-1)
    return z, e, s


def _softmax_fwd(c: KernelContext, xs: list[Any], a: Attrs, env: Env) -> tuple[Any, Any]:
    _, e, s = _softmax_parts(c, xs[0])
    y = c.div(e, s)
    return y, y


def _lastsum(c: KernelContext, x: Any) -> Any:
    return c.xp.expand_dims(c.sum_axis(x, -1), axis=-1)


_k(
    "softmax",
    _softmax_fwd,
    lambda c, y, g, a, e: [y * (g - _lastsum(c, g * y))],
    lambda c, y, dxs, a, e: y * (dxs[0] - _lastsum(c, y * dxs[0])),
    "y",
)


def _log_softmax_fwd(c: KernelContext, xs: list[Any], a: Attrs, env: Env) -> tuple[Any, Any]:
    z, e, s = _softmax_parts(c, xs[0])
    y = z - c.unary("log", s)
    return c.arr(y), c.div(e, s)


_k(
    "log_softmax",
    _log_softmax_fwd,
    lambda c, p, g, a, e: [g - p * _lastsum(c, g)],
    lambda c, p, dxs, a, e: dxs[0] - _lastsum(c, p * dxs[0]),
    "softmax p",
)


# --------------------------------------------------------------------------- composites


@lru_cache(maxsize=4096)
def _body(name: str, shapes: tuple[tuple[int, ...], ...], attrs_key: tuple[Any, ...]) -> Any:
    op = OPS[name]
    assert op.body is not None
    return op.body(list(shapes), dict(attrs_key))


def _composite_kernel(op: OpDef) -> Kernel:
    """Runs the spec body node by node through these kernels. The VJP mirrors spec's
    backprop_ctx of the body with seed (0, ..., 0, g): starting from +0, a cotangent slot is
    never -0 (+0 + -0 = +0 and exact cancellation gives +0), so adding the zero
    contributions of non-arguments is the identity and is skipped."""

    def body_of(xs: list[Any], attrs: Attrs) -> Any:
        key = tuple(sorted(attrs.items()))
        return _body(op.name, tuple(tuple(x.shape) for x in xs), key)

    def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        g = body_of(xs, attrs)
        vals, saves = list(xs), []
        for node in g.nodes:
            y, s = KERNELS[node.op].forward(
                ctx, [vals[a] for a in node.args], dict(node.attrs), env
            )
            vals.append(ctx.arr(y))
            saves.append(s)
        return vals[-1], (g, saves)

    def vjp(ctx: KernelContext, saved: Any, gout: Any, attrs: Attrs, env: Env) -> list[Any]:
        g, saves = saved
        n_in = g.num_inputs
        ct: list[Any] = [None] * (g.num_values - 1) + [gout]
        for k in range(len(g.nodes) - 1, -1, -1):
            node, idx = g.nodes[k], n_in + k
            seed = ct[idx] if ct[idx] is not None else ctx.zeros(g.shapes[idx])
            per_arg = [
                ctx.arr(c) for c in KERNELS[node.op].vjp(ctx, saves[k], seed, dict(node.attrs), env)
            ]
            for j, c in fold_fanin(node.args, per_arg).items():
                ct[j] = ctx.arr(ctx.zeros(g.shapes[j]) + c) if ct[j] is None else ct[j] + c
        return [ctx.zeros(g.shapes[j]) if ct[j] is None else ctx.arr(ct[j]) for j in range(n_in)]

    def jvp(ctx: KernelContext, saved: Any, dxs: list[Any], attrs: Attrs, env: Env) -> Any:
        g, saves = saved
        tans = list(dxs)
        for k, node in enumerate(g.nodes):
            tans.append(
                ctx.arr(
                    KERNELS[node.op].jvp(
                        ctx, saves[k], [tans[a] for a in node.args], dict(node.attrs), env
                    )
                )
            )
        return tans[-1]

    return Kernel(op.name, forward, vjp, jvp, "the body's saved values")


for _name, _op in OPS.items():
    if _op.kind == "composite":
        KERNELS[_name] = _composite_kernel(_op)


def kernel_for(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise GraphError(f"no runtime kernel for op {name!r}") from None


# The model-scale primitives (gather, reduce_max, mask_neg_inf) register their kernels here;
# the model-scale composites got `_composite_kernel` above like every composite.
from . import kernels_model as _kernels_model  # noqa: E402,F401
