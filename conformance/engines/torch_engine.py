"""PyTorch adapter: `TorchEngine` (CPU) and `TorchCudaEngine` (CUDA when present).

Invariants: every entry of `ops` is the plain PyTorch call a user would write for that op
of the table (e.g. `amax` for `reduce_max`, `F.softplus` for `softplus`, `torch.gather`
along the last axis after `F.pad` adds the +0 column for `gather`'s pad index,
`F.conv_transpose2d`, and multi_head_attention as the spec's projections x @ w.T, heads
split on the last axis, `F.scaled_dot_product_attention`, heads merged, output
projection); VJPs come from `torch.autograd.grad`, JVPs from `torch.func.jvp` (PyTorch's
forward mode). An op without an entry is reported as not covered. Importing this module
without torch installed works; constructing the engine raises `EngineUnavailable`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, ClassVar

import numpy as np

from .base import Engine, EngineUnavailable, keep_mask, mha_body
from .common import Window, dotted, math_ops, namespace_ops, nd_ints, operator_ops, ops_table

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - exercised where torch is absent
    torch = None
    F = None

__all__ = ["TorchCudaEngine", "TorchEngine"]


def _f(c: Any) -> float:
    return float(c)


def _idx(x: Any, indices: Sequence[int]) -> Any:
    return torch.tensor(list(indices), dtype=torch.int64, device=x.device)


def _sdpa(q: Any, k: Any, v: Any, mask: Any = None, causal: Any = None, scale: Any = None) -> Any:
    m = keep_mask(q.shape[-2], k.shape[-2], mask, causal)
    keep = None if m is None else torch.tensor(m.tolist(), dtype=torch.bool, device=q.device)
    sc = None if scale is None else float(scale)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=sc)


def _gather(x: Any, indices: Sequence[int], shape: Sequence[int]) -> Any:
    lead = tuple(x.shape[:-1])
    xp = F.pad(x, (0, 1))  # index M reads this +0
    idx = _idx(x, indices).expand(*lead, len(indices))
    return torch.gather(xp, -1, idx).reshape(*lead, *shape)


def _adaptive(name: str, x: Any, output_size: Any) -> Any:
    return getattr(F, name)(x, tuple(output_size))


def _conv(name: str, nd: int) -> Callable[..., Any]:
    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        if c.asymmetric:  # begins != ends: an explicit F.pad, as a user would write it
            x, p = F.pad(x, c.flat_pads()), 0
        else:
            p = c.begins()
        return getattr(F, name)(x, w, b, c.stride, p, c.dilation, c.groups)

    return run


def _conv_t(name: str, nd: int) -> Callable[..., Any]:
    """PyTorch's argument order (stride, padding, output_padding, groups, dilation); begins
    != ends: padding 0, then the output cropped by the pads."""

    def run(x: Any, w: Any, b: Any = None, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        p = 0 if c.asymmetric else c.begins()
        y = getattr(F, name)(x, w, b, c.stride, p, c.output_padding, c.groups, c.dilation)
        if not c.asymmetric:
            return y
        crop = tuple(slice(lo, y.shape[-nd + a] - hi) for a, (lo, hi) in enumerate(c.pads()))
        return y[(..., *crop)]

    return run


def _avg_pool(name: str, nd: int) -> Callable[..., Any]:
    def run(x: Any, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        p = nd_ints(c.padding, nd, (0,) * nd)
        extra = (c.divisor_override,) if c.divisor_override else ()
        f = getattr(F, name)
        return f(x, c.kernel, c.given_stride, p, c.ceil_mode, c.count_include_pad, *extra)

    return run


def _max_pool(name: str, nd: int) -> Callable[..., Any]:
    def run(x: Any, **attrs: Any) -> Any:
        c = Window(nd, **attrs)
        p = nd_ints(c.padding, nd, (0,) * nd)
        return getattr(F, name)(x, c.kernel, c.given_stride, p, c.dilation, c.ceil_mode)

    return run


_mha = partial(
    mha_body,
    matmul=lambda a, b: torch.matmul(a, b),
    swap=lambda x, i, j: x.transpose(i, j),
    sdpa=_sdpa,
)


def _cumsum(x: Any, dim: int, exclusive: Any = None, reverse: Any = None) -> Any:
    """torch.cumsum, with ONNX CumSum's reverse (flip, cumsum, flip) and exclusive (the
    sums shifted one place along dim, a +0 first) written as a user would."""
    y = torch.cumsum(torch.flip(x, (dim,)) if reverse else x, dim)
    if exclusive and x.shape[dim]:
        head = torch.zeros_like(y.narrow(dim, 0, 1))
        y = torch.cat([head, y.narrow(dim, 0, x.shape[dim] - 1)], dim)
    return torch.flip(y, (dim,)) if reverse else y


def _eps(eps: Any) -> float:
    return 1e-5 if eps is None else float(eps)


def _bn_eval(x: Any, m: Any, v: Any, g: Any, b: Any, eps: Any = None) -> Any:
    """Evaluation-mode batch norm written out ((x - mean) / sqrt(var + eps) * w + b, the
    statistics viewed as (C, 1, ...)): F.batch_norm refuses gradients with respect to the
    running statistics, which the spec's op has."""
    shape = (x.shape[1], *([1] * (x.dim() - 2)))
    den = torch.sqrt(v.reshape(shape) + _eps(eps))
    return (x - m.reshape(shape)) / den * g.reshape(shape) + b.reshape(shape)


def _lrn(x: Any, size: int, alpha: Any = None, beta: Any = None, k: Any = None) -> Any:
    a, b, kk = (1e-4 if alpha is None else alpha), (0.75 if beta is None else beta), k
    return F.local_response_norm(x, int(size), float(a), float(b), 1.0 if kk is None else float(kk))


OPS: dict[str, Callable[..., Any]] = ops_table(
    operator_ops(),
    namespace_ops(lambda: torch),
    math_ops("torch", lambda s, x: dotted(torch, s)(x)),
    {
        "relu": lambda x: torch.relu(x),
        "clamp": lambda x, lo, hi: torch.clamp(x, _f(lo), _f(hi)),
        "detach": lambda x: x.detach(),
        "sigmoid": lambda x: torch.sigmoid(x),
        "softplus": lambda x: F.softplus(x),
        "gelu": lambda x, approximate="tanh": F.gelu(x, approximate=approximate),
        "silu": lambda x: F.silu(x),
        "safe_log": lambda x: torch.log(torch.clamp(x, min=2.0**-24)),
        "reduce_sum": lambda x, axis: torch.sum(x, dim=axis),
        "reduce_mean": lambda x, axis: torch.mean(x, dim=axis),
        "reduce_max": lambda x, axis: torch.amax(x, dim=axis),
        "linear": lambda x, w, b: F.linear(x, w, b),
        "swap_adjacent": lambda x, axis: x.transpose(axis, axis + 1),
        "transpose": lambda x: x.transpose(-2, -1),
        "concat": lambda *xs: torch.cat(xs, 0),
        "index_select": lambda x, indices: torch.index_select(x, 0, _idx(x, indices)),
        "scatter_add": lambda x, indices, size: torch.zeros(
            (size, *x.shape[1:]), dtype=x.dtype, device=x.device
        ).index_add(0, _idx(x, indices), x),
        "gather": _gather,
        "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: torch.log_softmax(x, -1),
        "mse_loss": lambda y, t: F.mse_loss(y, t),
        "cross_entropy": lambda x, t: F.cross_entropy(x, t),
        "layer_norm": lambda x, g, b: F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5),
        "batch_norm": lambda x, g, b: F.batch_norm(x, None, None, g, b, training=True, eps=1e-5),
        "conv2d": _conv("conv2d", 2),
        "conv_transpose2d": _conv_t("conv_transpose2d", 2),
        "avg_pool2d": _avg_pool("avg_pool2d", 2),
        "max_pool2d": _max_pool("max_pool2d", 2),
        "mask_neg_inf": lambda x, mask, mask_shape: x.masked_fill(
            ~torch.tensor(list(mask), dtype=torch.bool, device=x.device).reshape(mask_shape),
            float("-inf"),
        ),
        "scaled_dot_product_attention": _sdpa,
        "multi_head_attention": _mha,
        "embedding": lambda table, indices, shape=None: F.embedding(
            _idx(table, indices).reshape(shape if shape is not None else (len(indices),)), table
        ),
        "conv1d": _conv("conv1d", 1),
        "conv3d": _conv("conv3d", 3),
        "conv_transpose1d": _conv_t("conv_transpose1d", 1),
        "conv_transpose3d": _conv_t("conv_transpose3d", 3),
        "avg_pool1d": _avg_pool("avg_pool1d", 1),
        "avg_pool3d": _avg_pool("avg_pool3d", 3),
        "max_pool1d": _max_pool("max_pool1d", 1),
        "max_pool3d": _max_pool("max_pool3d", 3),
        **{
            f"adaptive_{k}_pool{n}d": partial(_adaptive, f"adaptive_{k}_pool{n}d")
            for k in ("avg", "max")
            for n in (1, 2, 3)
        },
        "pad": lambda x, pad, mode=None, value=None: F.pad(
            x, tuple(pad), mode=mode or "constant", value=None if value is None else float(value)
        ),
        "leaky_relu": lambda x, negative_slope=0.01: F.leaky_relu(x, _f(negative_slope)),
        "hardtanh": lambda x, min_val=-1, max_val=1: F.hardtanh(x, _f(min_val), _f(max_val)),
        "relu6": lambda x: F.relu6(x),
        "hardsigmoid": lambda x: F.hardsigmoid(x),
        "hardswish": lambda x: F.hardswish(x),
        "softsign": lambda x: F.softsign(x),
        "var": lambda x, dim, correction=1: torch.var(x, dim=dim, correction=correction),
        "std": lambda x, dim, correction=1: torch.std(x, dim=dim, correction=correction),
        "elu": lambda x, alpha=1: F.elu(x, _f(alpha)),
        "celu": lambda x, alpha=1: F.celu(x, _f(alpha)),
        "selu": lambda x: F.selu(x),
        "mish": lambda x: F.mish(x),
        "logsumexp": lambda x, dim: torch.logsumexp(x, dim),
        "instance_norm": lambda x, g, b, eps=None: F.instance_norm(
            x, weight=g, bias=b, eps=1e-5 if eps is None else float(eps)
        ),
        "group_norm": lambda x, g, b, num_groups, eps=None: F.group_norm(
            x, int(num_groups), g, b, eps=1e-5 if eps is None else float(eps)
        ),
        "prelu": lambda x, w: F.prelu(x, w),
        "where": lambda a, b, mask, mask_shape: torch.where(
            torch.tensor(list(mask), dtype=torch.bool, device=a.device).reshape(mask_shape), a, b
        ),
        "pow": lambda x, exponent: torch.pow(x, _f(exponent)),
        "pow_tensor": lambda a, b: torch.pow(a, b),
        "narrow": lambda x, dim, start, length: torch.narrow(x, dim, start, length),
        "flip": lambda x, dims: torch.flip(x, tuple(dims)),
        "roll": lambda x, shifts, dims=None: (
            torch.roll(x, tuple(shifts), tuple(dims)) if dims else torch.roll(x, int(shifts[0]))
        ),
        "tile": lambda x, dims: torch.tile(x, tuple(dims)),
        "repeat_interleave": lambda x, repeats, dim=None: torch.repeat_interleave(
            x, int(repeats[0]) if len(repeats) == 1 else _idx(x, repeats), dim
        ),
        "cumsum": _cumsum,
        "batch_norm_eval": _bn_eval,
        "local_response_norm": _lrn,
    },
)


class TorchEngine(Engine):
    """PyTorch eager on the CPU; VJPs by `torch.autograd.grad`, JVPs by `torch.func.jvp`."""

    name: ClassVar[str] = "torch"
    package: ClassVar[str] = "torch==2.13.0"
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS
    has_jvp: ClassVar[bool] = True
    device: ClassVar[str] = "cpu"

    @classmethod
    def check_available(cls) -> None:
        if torch is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: PyTorch is not installed (pip install {cls.package})"
            )

    def describe(self) -> dict[str, Any]:
        return {"engine": self.name, "torch": torch.__version__, "device": self.device}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        if dtype == "bfloat16":
            t = torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a.copy())
        return t.to(self.device)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        x = x.detach().cpu()
        if dtype == "bfloat16":
            import ml_dtypes

            return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
        return x.numpy()

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        xs = [a.detach().clone().requires_grad_(True) for a in arrays]
        out = fn(*xs)
        if not out.requires_grad:
            return out, [torch.zeros_like(a) for a in arrays]
        gs = torch.autograd.grad(out, xs, grad_outputs=cotangent, allow_unused=True)
        return out, [
            torch.zeros_like(a) if g is None else g for a, g in zip(arrays, gs, strict=True)
        ]

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        return torch.func.jvp(fn, tuple(arrays), tuple(tangents))


class TorchCudaEngine(TorchEngine):
    """PyTorch eager on CUDA (skipped where no CUDA device is visible)."""

    name: ClassVar[str] = "torch-cuda"
    device: ClassVar[str] = "cuda"

    @classmethod
    def check_available(cls) -> None:
        super().check_available()
        if not torch.cuda.is_available():
            raise EngineUnavailable(
                "engine 'torch-cuda': no CUDA device visible to PyTorch (install a CUDA "
                "build: pip install torch==2.13.0 --index-url https://download.pytorch.org/"
                "whl/cu128)"
            )
