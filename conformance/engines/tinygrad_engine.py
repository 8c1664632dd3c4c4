"""tinygrad adapter: `TinygradEngine`.

Invariants: every entry of `ops` is the plain tinygrad `Tensor` method for that op of the
table (`gather` pads the last axis with one +0 column and gathers along it; a (C, H, W)
input of `conv_transpose2d` gets a batch axis of 1; multi_head_attention is the spec's
projections x @ w.T around `Tensor.scaled_dot_product_attention`, the causal and explicit
masks combined into one boolean mask); VJPs come from
`Tensor.gradient(*inputs, gradient=cotangent)` (tinygrad's reverse mode; it has no forward
mode, so no JVP is claimed). Ops without an entry are not covered.

Device: tinygrad's default where its CPU device can run, else the `PYTHON` device
(tinygrad's own UOp interpreter; the fallback sets tinygrad's process-wide default device);
the report names the device. tinygrad 0.14's CPU device runs the C compiler named by `CC`
(default `clang`) when it is constructed, whatever its renderer: `DEV=CPU:LLVM` compiles
kernels with libLLVM, but the device's own queue programs are still C compiled by `CC`
with clang's `--target=` flag, which gcc rejects. So the CPU device is used only where
that compiler is on PATH (or `DEV` is set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial, reduce
from typing import Any, ClassVar

import numpy as np

from .base import (
    Engine,
    EngineUnavailable,
    Unsupported,
    keep_mask,
    mha_body,
    prelu_shape,
)
from .common import Window, dotted, math_ops, nd_ints, operator_ops, ops_table

try:
    import tinygrad
    from tinygrad import Tensor as TT
    from tinygrad import dtypes, nn
except ImportError:  # pragma: no cover - exercised where tinygrad is absent
    tinygrad = None
    nn = None
    TT = None
    dtypes = None

__all__ = ["TinygradEngine"]


def _ints(x: Any, values: Sequence[int]) -> Any:
    return TT(list(values), dtype=dtypes.int32, device=x.device)


def _gather(x: Any, indices: Sequence[int], shape: Sequence[int]) -> Any:
    lead, p = tuple(x.shape[:-1]), len(indices)
    xp = x.pad(((0, 0),) * (x.ndim - 1) + ((0, 1),))  # index M reads this +0
    idx = _ints(x, indices).reshape(*(1,) * len(lead), p).expand(*lead, p)
    return xp.gather(-1, idx).reshape(*lead, *shape)


def _tg_padding(c: Window) -> Any:
    """nd ints (symmetric) as they are; 2*nd (begins, then ends) in tinygrad's (and F.pad's)
    order: (begin, end) pairs from the last axis backwards."""
    return c.flat_pads() if len(c.padding) == 2 * c.nd else nd_ints(c.padding, c.nd, 0)


def _pool_nd(method: str, nd: int, x: Any, **attrs: Any) -> Any:
    """tinygrad's N-d `max_pool2d` / `avg_pool2d` (ceil_mode, count_include_pad are its
    own arguments; it has no divisor_override: refused)."""
    c = Window(nd, **attrs)
    if c.divisor_override:
        raise Unsupported("tinygrad's avg_pool2d has no divisor_override")
    extra = {} if method == "max_pool2d" else {"count_include_pad": c.count_include_pad}
    return getattr(x, method)(
        c.kernel,
        stride=c.pool_stride,
        dilation=c.dilation,
        padding=_tg_padding(c),
        ceil_mode=c.ceil_mode,
        **extra,
    )


def _unbatched(nd: int, fn: Callable[..., Any]) -> Callable[..., Any]:
    def run(x: Any, *rest: Any, **attrs: Any) -> Any:
        if x.ndim == nd + 1:
            return fn(x.unsqueeze(0), *rest, **attrs).squeeze(0)
        return fn(x, *rest, **attrs)

    return run


def _conv_nd(nd: int) -> Callable[..., Any]:
    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        return x.conv2d(
            w, b, groups=c.groups, stride=c.stride, dilation=c.dilation, padding=_tg_padding(c)
        )

    return _unbatched(nd, run)


def _conv_t_nd(nd: int) -> Callable[..., Any]:
    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        if c.asymmetric:
            raise Unsupported("tinygrad's conv_transpose2d takes symmetric padding")
        return x.conv_transpose2d(
            w,
            b,
            groups=c.groups,
            stride=c.stride,
            dilation=c.dilation,
            padding=c.begins(),
            output_padding=c.output_padding,
        )

    return _unbatched(nd, run)


def _pad(x: Any, pad: Any, mode: Any = None, value: Any = None) -> Any:
    """`Tensor.pad` with F.pad's flat (begin, end) list from the last axis backwards."""
    pairs = [None] * x.ndim
    for k in range(len(pad) // 2):
        pairs[x.ndim - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    return x.pad(tuple(pairs), mode=mode or "constant", value=float(value or 0))


def _layer_norm(x: Any, g: Any, b: Any) -> Any:
    ln = nn.LayerNorm(x.shape[-1], eps=1e-5)  # tinygrad's module, its weight and bias ours
    ln.weight, ln.bias = g, b
    return ln(x)


def _batch_norm(x: Any, g: Any, b: Any) -> Any:
    bn = nn.BatchNorm(x.shape[1], eps=1e-5, track_running_stats=False)  # batch statistics
    bn.weight, bn.bias = g, b
    return bn(x)


def _embedding(table: Any, indices: Sequence[int], shape: Any = None) -> Any:
    emb = nn.Embedding(table.shape[0], table.shape[1])
    emb.weight = table
    return emb(_ints(table, indices).reshape(tuple(shape) if shape is not None else (-1,)))


def _scatter_add(x: Any, indices: Sequence[int], size: int) -> Any:
    idx = _ints(x, indices).reshape(-1, *(1,) * (x.ndim - 1)).expand(*x.shape)
    out = TT.zeros(size, *x.shape[1:], dtype=x.dtype, device=x.device)
    return out.scatter_reduce(0, idx, x, reduce="sum")


def _sdpa(q: Any, k: Any, v: Any, mask: Any = None, causal: Any = None, scale: Any = None) -> Any:
    if scale is not None:
        raise TypeError(
            "tinygrad's scaled_dot_product_attention has no scale argument (it divides by sqrt(d))"
        )
    # the causal and explicit masks as one (tinygrad refuses attn_mask with is_causal)
    m = keep_mask(q.shape[-2], k.shape[-2], mask, causal)
    keep = None if m is None else TT(m.tolist(), dtype=dtypes.bool, device=q.device)
    return q.scaled_dot_product_attention(k, v, attn_mask=keep)


_mha = partial(
    mha_body,
    matmul=lambda a, b: a.matmul(b),
    swap=lambda x, i, j: x.transpose(i, j),
    sdpa=_sdpa,
)


def _tg_cumsum(x: Any, dim: int, exclusive: Any = None, reverse: Any = None) -> Any:
    """Tensor.cumsum with reverse as flip-cumsum-flip and exclusive as the shifted sums
    (`pad` adds the leading +0, `shrink` drops the last sum)."""
    y = (x.flip(dim) if reverse else x).cumsum(dim)
    n = x.shape[dim]
    if exclusive and n:
        pads = [(0, 0)] * x.ndim
        pads[dim] = (1, 0)
        keep = [None] * x.ndim
        keep[dim] = (0, n)
        y = y.pad(tuple(pads)).shrink(tuple(keep))
    return y.flip(dim) if reverse else y


def _tg_repeat_interleave(x: Any, repeats: Any, dim: Any = None) -> Any:
    if len(repeats) != 1:
        raise Unsupported("tinygrad's repeat_interleave takes one int repeat")
    return x.repeat_interleave(int(repeats[0]), dim)


def _tg_bn_eval(x: Any, m: Any, v: Any, g: Any, b: Any, eps: Any = None) -> Any:
    """tinygrad's BatchNorm in evaluation mode: batchnorm(weight, bias, mean,
    (var + eps).rsqrt())."""
    return x.batchnorm(g, b, m, (v + (1e-5 if eps is None else float(eps))).rsqrt())


OPS: dict[str, Callable[..., Any]] = ops_table(
    operator_ops(),
    math_ops("tinygrad", lambda s, x: dotted(x, s)()),
    {
        "maximum": lambda a, b: a.maximum(b),
        "minimum": lambda a, b: a.minimum(b),
        "relu": lambda x: x.relu(),
        "abs": lambda x: x.abs(),
        "clamp": lambda x, lo, hi: x.clamp(float(lo), float(hi)),
        "sqrt": lambda x: x.sqrt(),
        "detach": lambda x: x.detach(),
        "inv": lambda x: x.reciprocal(),
        "sigmoid": lambda x: x.sigmoid(),
        "softplus": lambda x: x.softplus(),
        "gelu": lambda x, approximate="tanh": (
            x.gelu() if approximate == "tanh" else x * 0.5 * (1 + (x * 0.7071067811865476).erf())
        ),
        "silu": lambda x: x.silu(),
        "safe_log": lambda x: x.maximum(2.0**-24).log(),
        "sum": lambda x: x.sum(),
        "reduce_sum": lambda x, axis: x.sum(axis),
        "mean": lambda x: x.mean(),
        "reduce_mean": lambda x, axis: x.mean(axis),
        "reduce_max": lambda x, axis: x.max(axis),
        "matmul": lambda a, b: a.matmul(b),
        "linear": lambda x, w, b: x.linear(w.transpose(), b),  # nn.Linear's call
        "reshape": lambda x, shape: x.reshape(shape),
        "swap_adjacent": lambda x, axis: x.transpose(axis, axis + 1),
        "transpose": lambda x: x.transpose(-2, -1),
        "broadcast_to": lambda x, shape: x.expand(shape),
        "concat": lambda *xs: xs[0].cat(*xs[1:], dim=0),
        "index_select": lambda x, indices: x[_ints(x, indices)],
        "scatter_add": _scatter_add,
        "gather": _gather,
        "softmax": lambda x: x.softmax(-1),
        "log_softmax": lambda x: x.log_softmax(-1),
        "mse_loss": lambda y, t: ((y - t) * (y - t)).mean(),
        "cross_entropy": lambda x, t: x.cross_entropy(t),
        "layer_norm": _layer_norm,
        "batch_norm": _batch_norm,
        "conv2d": _conv_nd(2),
        "conv_transpose2d": _conv_t_nd(2),
        "avg_pool2d": partial(_pool_nd, "avg_pool2d", 2),
        "max_pool2d": partial(_pool_nd, "max_pool2d", 2),
        "mask_neg_inf": lambda x, mask, mask_shape: x.masked_fill(
            TT(
                np.array(list(mask), bool).reshape(tuple(mask_shape)).tolist(), device=x.device
            ).logical_not(),
            float("-inf"),
        ),
        "scaled_dot_product_attention": _sdpa,
        "multi_head_attention": _mha,
        "embedding": _embedding,
        "conv1d": _conv_nd(1),
        "conv3d": _conv_nd(3),
        "conv_transpose1d": _conv_t_nd(1),
        "conv_transpose3d": _conv_t_nd(3),
        "avg_pool1d": _unbatched(1, partial(_pool_nd, "avg_pool2d", 1)),
        "avg_pool3d": partial(_pool_nd, "avg_pool2d", 3),
        "max_pool1d": _unbatched(1, partial(_pool_nd, "max_pool2d", 1)),
        "max_pool3d": partial(_pool_nd, "max_pool2d", 3),
        "pad": _pad,
        # tinygrad has no log1p or expm1
        "leaky_relu": lambda x, negative_slope=0.01: x.leaky_relu(float(negative_slope)),
        "sign": lambda x: x.sign(),
        "hardtanh": lambda x, min_val=-1, max_val=1: x.hardtanh(float(min_val), float(max_val)),
        "relu6": lambda x: x.relu6(),
        "hardsigmoid": lambda x: x.hardsigmoid(),
        "hardswish": lambda x: x.hardswish(),
        "softsign": lambda x: x.softsign(),
        "maximum_n": lambda *xs: reduce(lambda a, b: a.maximum(b), xs),
        "minimum_n": lambda *xs: reduce(lambda a, b: a.minimum(b), xs),
        "var": lambda x, dim, correction=1: x.var(dim, correction=correction),
        "std": lambda x, dim, correction=1: x.std(dim, correction=correction),
        "elu": lambda x, alpha=1: x.elu(float(alpha)),
        "celu": lambda x, alpha=1: x.celu(float(alpha)),
        "selu": lambda x: x.selu(),
        "mish": lambda x: x.mish(),
        "logsumexp": lambda x, dim: x.logsumexp(dim),
        "prelu": lambda x, w: (x > 0).where(x, w.reshape(prelu_shape(x.ndim, w.numel())) * x),
        "where": lambda a, b, mask, mask_shape: TT(
            np.array(list(mask), bool).reshape(tuple(mask_shape)).tolist(), device=a.device
        ).where(a, b),
        "pow": lambda x, exponent: x.pow(float(exponent)),
        "pow_tensor": lambda a, b: a.pow(b),
        # tinygrad has no LRN
        "narrow": lambda x, dim, start, length: x.shrink(
            tuple((start, start + length) if a == dim else None for a in range(x.ndim))
        ),
        "flip": lambda x, dims: x.flip(tuple(dims)) if dims else x,
        "roll": lambda x, shifts, dims=None: (
            x.roll(tuple(shifts), tuple(dims))
            if dims
            else x.flatten().roll(int(shifts[0]), 0).reshape(x.shape)
        ),
        "tile": lambda x, dims: x.repeat(tuple((1,) * (x.ndim - len(dims)) + tuple(dims))),
        "repeat_interleave": _tg_repeat_interleave,
        "cumsum": _tg_cumsum,
        "batch_norm_eval": _tg_bn_eval,
    },
)

_DT = {"float64": "float64", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}
_UINT = {"float64": "uint64", "float32": "uint32", "bfloat16": "uint16", "float16": "uint16"}


def _device() -> str:
    """tinygrad's default device, or its PYTHON interpreter where the CPU device has no C
    compiler to run (`CC`, default `clang`; set process-wide, before tinygrad picks a
    device)."""
    import os
    import shutil

    from tinygrad import Device
    from tinygrad.helpers import DEV

    if not os.environ.get("DEV") and shutil.which(os.environ.get("CC") or "clang") is None:
        DEV.value = "PYTHON"
    return str(Device.DEFAULT)


class TinygradEngine(Engine):
    """tinygrad (lazy graphs realised per call); VJPs by `Tensor.gradient`."""

    name: ClassVar[str] = "tinygrad"
    package: ClassVar[str] = "tinygrad"
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS
    _dev: ClassVar[str | None] = None

    @classmethod
    def check_available(cls) -> None:
        if tinygrad is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: tinygrad is not installed (pip install {cls.package})"
            )
        if TinygradEngine._dev is None:
            TinygradEngine._dev = _device()

    @property
    def device(self) -> str:
        return TinygradEngine._dev or "PYTHON"

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"engine": self.name, "tinygrad": version("tinygrad"), "device": self.device}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        bits = np.ascontiguousarray(a).view(getattr(np, _UINT[dtype])).copy()
        t = TT(bits.reshape(-1), device=self.device) if bits.size else None
        if t is None:
            return TT.zeros(*a.shape, dtype=getattr(dtypes, _DT[dtype]), device=self.device)
        return t.bitcast(getattr(dtypes, _DT[dtype])).reshape(a.shape)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        from .base import NP_DTYPE

        shape = tuple(x.shape)
        if x.numel() == 0:
            return np.zeros(shape, dtype=NP_DTYPE[dtype])
        bits = x.bitcast(getattr(dtypes, _UINT[dtype])).reshape(-1).numpy()
        return bits.view(NP_DTYPE[dtype]).reshape(shape)

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        xs = [a.detach() for a in arrays]
        out = fn(*xs)
        gs = out.gradient(*xs, gradient=cotangent)
        return out, list(gs)
