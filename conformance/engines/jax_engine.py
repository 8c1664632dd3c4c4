"""JAX adapters: `JaxEngine` (eager) and `JaxJitEngine` (every function under `jax.jit`).

Invariants: every entry of `ops` is the plain `jax.numpy` / `jax.nn` / `jax.lax` call for
that op of the table (`gather` pads the last axis with one +0 column and takes along it,
conv2d and conv_transpose2d are `lax.conv_general_dilated`, the latter with lhs dilation and
the kernel flipped and regrouped; scaled_dot_product_attention and multi_head_attention are
the spec's bodies written with `jnp.matmul`, `jnp.where` (-inf) and `jax.nn.softmax`,
because `jax.nn.dot_product_attention` computes its softmax in float32 whatever the input
dtype; the pools are `lax.reduce_window` as in flax, the adaptive pools reduce each of
PyTorch's windows at once (`jnp.mean`, `jnp.max`), layer_norm and batch_norm
`jax.nn.standardize` with the two-pass variance, then the affine map, and cross_entropy
optax's -sum(t * log_softmax(x)), averaged over a batch); VJPs come from `jax.vjp`, JVPs
from `jax.jvp` (JAX's forward mode). `JaxJitEngine` compiles, per call, one program for the
output and the VJP (`jax.jit` of `jax.vjp`) and one for `jax.jvp`, kept in a
`base.CompileCache`: a program is reused only for the same op, attributes (with their
types), integer environment and shapes and dtypes of every array. float64 needs
`jax_enable_x64`, which constructing an adapter switches on (process-wide, as JAX requires).
Ops without an entry are not covered.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar

import numpy as np

from .base import (
    CompileCache,
    Engine,
    EngineUnavailable,
    keep_mask,
    mha_body,
    pair,
    prelu_shape,
)
from .common import (
    Window,
    dotted,
    math_ops,
    namespace_ops,
    numpy_style_ops,
    operator_ops,
    ops_table,
)

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised where jax is absent
    jax = None
    jnp = None

__all__ = ["JaxEngine", "JaxJitEngine"]


def _mask_neg_inf(x: Any, mask: Any, mask_shape: Any) -> Any:
    keep = np.array(list(mask), dtype=bool).reshape(tuple(mask_shape))
    return jnp.where(keep, x, jnp.array(-jnp.inf, dtype=x.dtype))


def _scatter_add(x: Any, indices: Any, size: int) -> Any:
    out = jnp.zeros((size, *x.shape[1:]), dtype=x.dtype)
    return out.at[np.array(list(indices), dtype=np.int64)].add(x)


def _gather(x: Any, indices: Any, shape: Any) -> Any:
    lead = tuple(x.shape[:-1])
    xp = jnp.pad(x, [(0, 0)] * (x.ndim - 1) + [(0, 1)])  # index M reads this +0
    idx = np.array(list(indices), dtype=np.int64)
    out = jnp.take_along_axis(xp, jnp.broadcast_to(idx, (*lead, len(idx))), axis=-1)
    return out.reshape((*lead, *tuple(shape)))


def _window(x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any) -> dict[str, Any]:
    """`lax.reduce_window`'s arguments for a 2-D pool over the last two axes."""
    lead = (1,) * (x.ndim - 2)
    k = pair(kernel_size, 1)
    ph, pw = pair(padding, 0)
    return {
        "window_dimensions": lead + k,
        "window_strides": lead + (k if stride is None else pair(stride, 1)),
        "padding": [(0, 0)] * len(lead) + [(ph, ph), (pw, pw)],
        "window_dilation": lead + pair(dilation, 1),
    }


def _max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = None,
                dilation: Any = None, ceil_mode: Any = None) -> Any:  # fmt: skip
    """`lax.reduce_window` with `lax.max` from -inf (flax's max_pool)."""
    if ceil_mode:
        return _max_pool_nd(2, x, kernel_size=kernel_size, stride=stride, padding=padding,
                            dilation=dilation, ceil_mode=ceil_mode)  # fmt: skip
    w = _window(x, kernel_size, stride, padding, dilation)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, **w)


def _avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = None,
                dilation: Any = None, **rest: Any) -> Any:  # fmt: skip
    """`lax.reduce_window` with `lax.add` from 0, divided by the window's size (flax's
    avg_pool; the zero padding counted, as the spec's)."""
    if any(v is not None for v in rest.values()):
        return _avg_pool_nd(2, x, kernel_size=kernel_size, stride=stride, padding=padding, **rest)
    w = _window(x, kernel_size, stride, padding, dilation)
    s = jax.lax.reduce_window(x, 0.0, jax.lax.add, **w)
    return s / math.prod(pair(kernel_size, 1))


def _pool_window(c: Window, x: Any) -> tuple[dict[str, Any], list[tuple[int, int]]]:
    """`lax.reduce_window` arguments over the last nd axes; ceil mode adds the end padding
    its last window needs (PyTorch's output length: a window starting in the end padding
    is dropped). Returns them and the (begin, end) pads before that extra."""
    nd, pads, full = c.nd, c.pads(), []
    for n, kk, ss, dd, (lo, hi) in zip(
        x.shape[-nd:], c.kernel, c.pool_stride, c.dilation, pads, strict=True
    ):
        eff = dd * (kk - 1) + 1
        o = (n + lo + hi - eff + (ss - 1 if c.ceil_mode else 0)) // ss + 1
        if c.ceil_mode and (o - 1) * ss >= n + lo:
            o -= 1
        full.append((lo, max(hi, (o - 1) * ss + eff - n - lo)))
    lead = (1,) * (x.ndim - nd)
    w = {
        "window_dimensions": lead + c.kernel,
        "window_strides": lead + c.pool_stride,
        "padding": [(0, 0)] * len(lead) + full,
        "window_dilation": lead + c.dilation,
    }
    return w, pads


def _max_pool_nd(nd: int, x: Any, **attrs: Any) -> Any:
    w, _ = _pool_window(Window(nd, **attrs), x)
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, **w)


def _adaptive_pool(kind: str, nd: int) -> Callable[..., Any]:
    """PyTorch's adaptive pools from jnp ops: output o of an axis of length n pools the
    window [floor(o*n/out), ceil((o+1)*n/out)); each box is reduced at once (jnp.mean, or
    jnp.max, whose gradient splits a tie evenly over the box's tied elements)."""

    def run(x: Any, output_size: Any) -> Any:
        outs = tuple(int(m) for m in output_size)
        ins = x.shape[-nd:]
        wins = [
            [((o * n) // m, -(-((o + 1) * n) // m)) for o in range(m)]
            for n, m in zip(ins, outs, strict=True)
        ]
        red = tuple(range(x.ndim - nd, x.ndim))
        f = jnp.mean if kind == "avg" else jnp.max
        vals = [
            f(x[(..., *[slice(a, b) for a, b in box])], axis=red)
            for box in itertools.product(*wins)
        ]
        return jnp.stack(vals, axis=-1).reshape(*x.shape[:-nd], *outs)

    return run


def _avg_pool_nd(nd: int, x: Any, **attrs: Any) -> Any:
    """The window sum, divided by PyTorch's divisor: divisor_override, or the window sum of
    ones over the input (plus its padding with count_include_pad)."""
    c = Window(nd, **{**attrs, "dilation": None})
    w, pads = _pool_window(c, x)
    s = jax.lax.reduce_window(x, 0.0, jax.lax.add, **w)
    if c.divisor_override:
        return s / float(c.divisor_override)
    spatial = {k: v[-nd:] for k, v in w.items()}
    ones = jnp.ones(x.shape[-nd:], dtype=x.dtype)
    if c.count_include_pad:  # the padding counts; ceil mode's extra does not
        ones = jnp.pad(ones, pads, constant_values=1)
        extra = [(0, full[1] - p[1]) for full, p in zip(spatial["padding"], pads, strict=True)]
        spatial["padding"] = extra
    cnt = jax.lax.reduce_window(ones, 0.0, jax.lax.add, **spatial)
    return s / cnt


def _conv_nd(nd: int) -> Callable[..., Any]:
    dn = ("NC" + "DHW"[3 - nd :], "OI" + "DHW"[3 - nd :], "NC" + "DHW"[3 - nd :])

    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        single = x.ndim == nd + 1
        y = jax.lax.conv_general_dilated(
            x[None] if single else x,
            w,
            c.stride,
            c.pads(),
            rhs_dilation=c.dilation,
            dimension_numbers=dn,
            feature_group_count=c.groups,
        )
        y = y if b is None else y + b.reshape((-1,) + (1,) * nd)
        return y[0] if single else y

    return run


def _conv_t_nd(nd: int) -> Callable[..., Any]:
    dn = ("NC" + "DHW"[3 - nd :], "OI" + "DHW"[3 - nd :], "NC" + "DHW"[3 - nd :])

    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        """The flipped, regrouped kernel over the lhs-dilated input."""
        c = Window(nd, **attrs)
        single = x.ndim == nd + 1
        g = c.groups
        cin, cog, ks = w.shape[0], w.shape[1], w.shape[2:]
        wt = w.reshape(g, cin // g, cog, *ks).swapaxes(1, 2).reshape(g * cog, cin // g, *ks)
        wt = wt[(slice(None), slice(None), *(slice(None, None, -1),) * nd)]
        pads = [
            (d * (k - 1) - lo, d * (k - 1) - hi + e)
            for d, k, (lo, hi), e in zip(c.dilation, ks, c.pads(), c.output_padding, strict=True)
        ]
        y = jax.lax.conv_general_dilated(
            x[None] if single else x,
            wt,
            (1,) * nd,
            pads,
            lhs_dilation=c.stride,
            rhs_dilation=c.dilation,
            dimension_numbers=dn,
            feature_group_count=g,
        )
        y = y if b is None else y + b.reshape((-1,) + (1,) * nd)
        return y[0] if single else y

    return run


_NP_PAD = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad(x: Any, pad: Any, mode: Any = None, value: Any = None) -> Any:
    """`jnp.pad` (reflect, edge, wrap) after slicing away the negative pads."""
    crop, widths = [slice(None)] * x.ndim, [(0, 0)] * x.ndim
    for k in range(len(pad) // 2):
        ax, lo, hi = x.ndim - 1 - k, int(pad[2 * k]), int(pad[2 * k + 1])
        crop[ax] = slice(max(-lo, 0), x.shape[ax] - max(-hi, 0))
        widths[ax] = (max(lo, 0), max(hi, 0))
    y, m = x[tuple(crop)], _NP_PAD[mode or "constant"]
    if m == "constant":
        return jnp.pad(y, widths, constant_values=float(value or 0))
    return jnp.pad(y, widths, mode=m)


def _norm(x: Any, g: Any, b: Any, axis: Any, shape: tuple[int, ...]) -> Any:
    """`jax.nn.standardize` (the two-pass "stable" variance; see docs/ENGINES.md for the
    default "fast" one), then the affine map."""
    y = jax.nn.standardize(x, axis=axis, epsilon=1e-5, algorithm="stable")
    return y * g.reshape(shape) + b.reshape(shape)


def _batch_norm(x: Any, g: Any, b: Any) -> Any:
    axes = (0, *range(2, x.ndim))
    return _norm(x, g, b, axes, (-1, *(1,) * (x.ndim - 2)))


def _cross_entropy(x: Any, t: Any) -> Any:
    """optax's softmax_cross_entropy, -sum(t * log_softmax(x)), averaged over a batch."""
    loss = -jnp.sum(t * jax.nn.log_softmax(x, axis=-1), axis=-1)
    return loss if x.ndim == 1 else jnp.mean(loss)


def _sdpa(q: Any, k: Any, v: Any, mask: Any = None, causal: Any = None, scale: Any = None) -> Any:
    """softmax(scale * q @ k.T, -inf where not kept) @ v from jnp ops (scale default
    1/sqrt(d)); the kept set is `mask` (Lq x Lk, 1 = attend) and, with causal, j <= i."""
    d = q.shape[-1]
    c = 1.0 / math.sqrt(d) if scale is None else float(scale)
    s = jnp.matmul(q, jnp.swapaxes(k, -2, -1)) * c
    keep = keep_mask(q.shape[-2], k.shape[-2], mask, causal)
    if keep is not None:
        s = jnp.where(keep, s, jnp.array(-jnp.inf, dtype=s.dtype))
    return jnp.matmul(jax.nn.softmax(s, axis=-1), v)


_mha = partial(
    mha_body,
    matmul=lambda a, b: jnp.matmul(a, b),
    swap=lambda x, i, j: jnp.swapaxes(x, i, j),
    sdpa=_sdpa,
)  # the spec's body from jnp ops (`base.mha_body` around `_sdpa`)


def _jcumsum(x: Any, dim: int, exclusive: Any = None, reverse: Any = None) -> Any:
    """jnp.cumsum with reverse as flip-cumsum-flip and exclusive as the shifted sums."""
    y = jnp.cumsum(jnp.flip(x, dim) if reverse else x, axis=dim)
    if exclusive and x.shape[dim]:
        y = jnp.concatenate(
            [
                jnp.zeros_like(jax.lax.slice_in_dim(y, 0, 1, axis=dim)),
                jax.lax.slice_in_dim(y, 0, x.shape[dim] - 1, axis=dim),
            ],
            axis=dim,
        )
    return jnp.flip(y, dim) if reverse else y


def _jbn_eval(x: Any, m: Any, v: Any, g: Any, b: Any, eps: Any = None) -> Any:
    """flax's BatchNorm in evaluation mode: (x - mean) * rsqrt(var + eps) * scale + bias."""
    shape = (x.shape[1], *([1] * (x.ndim - 2)))
    e = 1e-5 if eps is None else float(eps)
    inv = jax.lax.rsqrt(v.reshape(shape) + jnp.asarray(e, x.dtype))
    return (x - m.reshape(shape)) * inv * g.reshape(shape) + b.reshape(shape)


OPS: dict[str, Callable[..., Any]] = ops_table(
    operator_ops(),
    namespace_ops(lambda: jnp),
    numpy_style_ops(lambda: jnp),
    math_ops("jax", lambda s, x: dotted(jax, s)(x)),
    {
        "relu": lambda x: jax.nn.relu(x),
        "clamp": lambda x, lo, hi: jnp.clip(x, float(lo), float(hi)),
        "detach": lambda x: jax.lax.stop_gradient(x),
        "sigmoid": lambda x: jax.nn.sigmoid(x),
        "softplus": lambda x: jax.nn.softplus(x),
        "gelu": lambda x, approximate="tanh": jax.nn.gelu(x, approximate=approximate == "tanh"),
        "silu": lambda x: jax.nn.silu(x),
        "safe_log": lambda x: jnp.log(jnp.maximum(x, 2.0**-24)),
        "linear": lambda x, w, b: x @ w.T + b,
        "index_select": lambda x, indices: x[np.array(list(indices), dtype=np.int64)],
        "scatter_add": _scatter_add,
        "gather": _gather,
        "softmax": lambda x: jax.nn.softmax(x, axis=-1),
        "log_softmax": lambda x: jax.nn.log_softmax(x, axis=-1),
        "cross_entropy": _cross_entropy,
        "layer_norm": lambda x, g, b: _norm(x, g, b, -1, (-1,)),
        "batch_norm": _batch_norm,
        "avg_pool2d": _avg_pool2d,
        "max_pool2d": _max_pool2d,
        "conv2d": _conv_nd(2),
        "conv_transpose2d": _conv_t_nd(2),
        "mask_neg_inf": _mask_neg_inf,
        "scaled_dot_product_attention": _sdpa,
        "multi_head_attention": _mha,
        "embedding": lambda table, indices, shape=None: table[
            np.array(list(indices), dtype=np.int64).reshape(
                shape if shape is not None else (len(indices),)
            )
        ],
        "conv1d": _conv_nd(1),
        "conv3d": _conv_nd(3),
        "conv_transpose1d": _conv_t_nd(1),
        "conv_transpose3d": _conv_t_nd(3),
        "avg_pool1d": partial(_avg_pool_nd, 1),
        "avg_pool3d": partial(_avg_pool_nd, 3),
        "max_pool1d": partial(_max_pool_nd, 1),
        "max_pool3d": partial(_max_pool_nd, 3),
        "pad": _pad,
        "leaky_relu": lambda x, negative_slope=0.01: jax.nn.leaky_relu(x, float(negative_slope)),
        "hardtanh": lambda x, min_val=-1, max_val=1: jnp.clip(x, float(min_val), float(max_val)),
        "relu6": lambda x: jax.nn.relu6(x),
        "hardsigmoid": lambda x: jax.nn.hard_sigmoid(x),
        "hardswish": lambda x: jax.nn.hard_swish(x),
        "softsign": lambda x: jax.nn.soft_sign(x),
        "elu": lambda x, alpha=1: jax.nn.elu(x, float(alpha)),
        "celu": lambda x, alpha=1: jax.nn.celu(x, float(alpha)),
        "selu": lambda x: jax.nn.selu(x),
        "mish": lambda x: jax.nn.mish(x),
        "logsumexp": lambda x, dim: jax.nn.logsumexp(x, axis=dim),
        "prelu": lambda x, w: jnp.where(x > 0, x, jnp.reshape(w, prelu_shape(x.ndim, w.size)) * x),
        "where": lambda a, b, mask, mask_shape: jnp.where(
            np.array(list(mask), dtype=bool).reshape(tuple(mask_shape)), a, b
        ),
        "pow": lambda x, exponent: jnp.power(x, float(exponent)),
        **{
            f"adaptive_{k}_pool{n}d": _adaptive_pool(k, n)
            for k in ("avg", "max")
            for n in (1, 2, 3)
        },
        # JAX has no LRN
        "narrow": lambda x, dim, start, length: jax.lax.slice_in_dim(
            x, start, start + length, axis=dim
        ),
        "flip": lambda x, dims: jnp.flip(x, tuple(dims)) if dims else x,
        "roll": lambda x, shifts, dims=None: (
            jnp.roll(x, tuple(shifts), tuple(dims)) if dims else jnp.roll(x, int(shifts[0]))
        ),
        "tile": lambda x, dims: jnp.tile(x, tuple(dims)),
        "repeat_interleave": lambda x, repeats, dim=None: jnp.repeat(
            x,
            int(repeats[0]) if len(repeats) == 1 else np.asarray(repeats),
            axis=dim,
            total_repeat_length=(x.size if dim is None else x.shape[dim]) * int(repeats[0])
            if len(repeats) == 1
            else int(sum(repeats)),
        ),
        "cumsum": _jcumsum,
        "batch_norm_eval": _jbn_eval,
    },
)


class JaxEngine(Engine):
    """JAX eager (op by op dispatch); VJPs by `jax.vjp`, JVPs by `jax.jvp`."""

    name: ClassVar[str] = "jax"
    package: ClassVar[str] = "jax"
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS
    has_jvp: ClassVar[bool] = True
    jit: ClassVar[bool] = False

    @classmethod
    def check_available(cls) -> None:
        if jax is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: JAX is not installed (pip install {cls.package})"
            )
        jax.config.update("jax_enable_x64", True)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "jax": jax.__version__,
            "jit": self.jit,
            "device": str(jax.devices()[0]),
        }

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return jnp.asarray(a.copy())

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        out, pull = jax.vjp(fn, *arrays)
        return out, list(pull(cotangent))

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        return jax.jvp(fn, tuple(arrays), tuple(tangents))


def _vjp_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    def program(xs: tuple[Any, ...], g: Any) -> tuple[Any, Any]:
        out, pull = jax.vjp(fn, *xs)
        return out, pull(g)

    return jax.jit(program)


def _jvp_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    return jax.jit(lambda xs, ts: jax.jvp(fn, xs, ts))


class JaxJitEngine(JaxEngine):
    """JAX with every VJP and JVP one `jax.jit` program (XLA-compiled, fusion allowed),
    compiled once per op, attributes, shapes and dtypes (`cache`)."""

    name: ClassVar[str] = "jax-jit"
    jit: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.cache = CompileCache()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "compile_cache": self.cache.stats()}

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        program = self.cache.get("vjp", fn, [*arrays, cotangent], lambda: _vjp_program(fn))
        out, cts = program(tuple(arrays), cotangent)
        return out, list(cts)

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        program = self.cache.get("jvp", fn, [*arrays, *tangents], lambda: _jvp_program(fn))
        return program(tuple(arrays), tuple(tangents))
