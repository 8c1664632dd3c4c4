"""Model-scale layers built out of Session ops: convolution (1-D, 2-D, 3-D), pooling (max and
average in 1-D, 2-D, 3-D; adaptive), flattening, 2-d batch normalisation, embedding and
multi-head attention.

Invariants (those of `runtime.training.layers`, which these layers follow):
- A layer is an immutable description; its state is a list of `StateSpec` in a fixed
  order, initialised in binary64 from the seeds of a `SeedStream` (`init_values`).
- Input errors name the layer and "input 0": layers whose op takes weights too (Conv2d,
  MultiHeadAttention) check the input against their own sizes first, so a wrong input is
  never reported as a wrong weight; the op's shape rule then checks the rest (`_op_shape`,
  errors naming the layer).
- `BatchNorm2d` is `BatchNorm1d` over the rows of the NHWC view: it reports new buffer
  values through `Forward.set_buffer` in training mode and never mutates anything itself.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from spec.errors import ShapeError

from ..session import TensorRef
from .layers import BatchNorm1d, Forward, Layer, SeedStream, StateSpec, init_values

__all__ = [
    "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d",
    "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d",
    "AdaptiveMaxPool2d",
    "AdaptiveMaxPool3d",
    "AvgPool1d",
    "AvgPool2d",
    "AvgPool3d",
    "BatchNorm2d",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "Embedding",
    "Flatten",
    "MaxPool1d",
    "MaxPool2d",
    "MaxPool3d",
    "MultiHeadAttention",
]


# --------------------------------------------------------------------------- model-scale layers


def _pair(name: str, v: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(v, int):
        t: tuple[Any, ...] = (v, v)
    else:
        try:
            t = tuple(v)
        except TypeError:
            t = ()
    if len(t) != 2 or any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in t):
        raise ShapeError(f"{name}: expected an int >= 0 or a pair of them, got {v!r}")
    return (int(t[0]), int(t[1]))


def _op_shape(layer: str, op: str, shapes: list[tuple[int, ...]], attrs: dict[str, Any]) -> Any:
    """The op's output shape by the spec's rule (errors name the layer)."""
    from spec.errors import GraphError
    from spec.validate import check_node

    try:
        return check_node(op, list(range(len(shapes))), attrs, shapes)[1]
    except (ShapeError, GraphError) as e:
        raise ShapeError(f"{layer}: {e}") from None


class Conv2d(Layer):
    """`conv2d` (channel-first; input (C, H, W) or (N, C, H, W)). State order: weight
    (out, in / groups, kh, kw) — kaiming_uniform by default, fan_in = in / groups * kh * kw,
    fan_out = out / groups * kh * kw, one seed — then bias (out,) zeros (if `bias`)."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        init: str = "kaiming_uniform",
    ) -> None:
        for n, v in (
            ("in_channels", in_channels),
            ("out_channels", out_channels),
            ("groups", groups),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ShapeError(f"Conv2d: {n} must be a positive int, got {v!r}")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"Conv2d: groups {groups} must divide in_channels {in_channels} and "
                f"out_channels {out_channels}"
            )
        self.cin, self.cout, self.groups, self.bias, self.init = (
            in_channels,
            out_channels,
            groups,
            bias,
            init,
        )
        self.k = _pair("Conv2d kernel_size", kernel_size)
        if 0 in self.k:
            raise ShapeError(f"Conv2d: kernel_size must be positive, got {kernel_size!r}")
        self.attrs = {
            "stride": _pair("Conv2d stride", stride),
            "padding": _pair("Conv2d padding", padding),
            "dilation": _pair("Conv2d dilation", dilation),
            "groups": groups,
        }

    def __repr__(self) -> str:
        return f"Conv2d({self.cin}, {self.cout}, kernel_size={self.k})"

    def state_specs(self) -> list[StateSpec]:
        w = StateSpec("weight", (self.cout, self.cin // self.groups, *self.k), True)
        return [w, StateSpec("bias", (self.cout,), True)] if self.bias else [w]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        taps = self.k[0] * self.k[1]
        fan_in, fan_out = self.cin // self.groups * taps, self.cout // self.groups * taps
        w = init_values(self.init, self.state_specs()[0].shape, seeds, fan_in, fan_out)
        return [w, np.zeros(self.cout)] if self.bias else [w]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (3, 4) or in_shape[-3] != self.cin:
            raise ShapeError(
                f"{self!r}: input 0: expected shape ({self.cin}, H, W) or "
                f"(N, {self.cin}, H, W), got {in_shape}"
            )
        shapes = [in_shape] + [sp.shape for sp in self.state_specs()]
        return tuple(_op_shape(repr(self), "conv2d", shapes, dict(self.attrs)))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.conv2d(x, *state, **self.attrs)


class _Pool2d(Layer):
    op = ""

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
    ) -> None:
        name = type(self).__name__
        self.k = _pair(f"{name} kernel_size", kernel_size)
        if 0 in self.k:
            raise ShapeError(f"{name}: kernel_size must be positive, got {kernel_size!r}")
        st = self.k if stride is None else _pair(f"{name} stride", stride)
        self.attrs = {
            "kernel_size": self.k,
            "stride": st,
            "padding": _pair(f"{name} padding", padding),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.k})"

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(_op_shape(repr(self), self.op, [in_shape], dict(self.attrs)))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.op(self.op, x, **self.attrs)


class MaxPool2d(_Pool2d):
    """`max_pool2d` (stride defaults to the kernel size). Ties: the first maximal element
    of the window in row-major order gets the whole gradient (the op's rule)."""

    op = "max_pool2d"


class AvgPool2d(_Pool2d):
    """`avg_pool2d` (stride defaults to the kernel size; zero padding counts)."""

    op = "avg_pool2d"


class Flatten(Layer):
    """(C, H, W) -> (C*H*W,); (N, C, H, W) -> (N, C*H*W): the last `dims` axes become one
    (row-major `reshape`)."""

    def __init__(self, dims: int = 3) -> None:
        if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
            raise ShapeError(f"Flatten: dims must be a positive int, got {dims!r}")
        self.dims = dims

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (self.dims, self.dims + 1):
            raise ShapeError(
                f"Flatten({self.dims}): input 0: expected rank {self.dims} or "
                f"{self.dims + 1}, got shape {in_shape}"
            )
        lead = in_shape[: len(in_shape) - self.dims]
        return (*lead, math.prod(in_shape[len(lead) :]))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        return f.s.reshape(x, shape=self.out_shape(x.shape))


class BatchNorm2d(BatchNorm1d):
    """Batch normalisation per channel over the batch and spatial axes of a (N, C, H, W)
    input; a (C, H, W) input is a batch of one. The input is laid out as rows (N*H*W, C)
    (two `swap_adjacent` and a `reshape`), normalised exactly as `BatchNorm1d` does with
    B = N*H*W (same state order, running statistics and evaluation rule), and laid back."""

    def __repr__(self) -> str:
        return f"BatchNorm2d({self.c})"

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (3, 4) or in_shape[-3] != self.c:
            raise ShapeError(
                f"BatchNorm2d({self.c}): input 0: expected shape ({self.c}, H, W) or "
                f"(N, {self.c}, H, W), got {in_shape}"
            )
        return in_shape

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        s = f.s
        x4 = x if len(x.shape) == 4 else s.reshape(x, shape=(1, *x.shape))
        n, c, h, w = x4.shape
        nhwc = s.swap_adjacent(s.swap_adjacent(x4, axis=1), axis=2)  # (N, H, W, C)
        y = self._rows(f, state, slots, s.reshape(nhwc, shape=(n * h * w, c)))
        y = s.swap_adjacent(s.swap_adjacent(s.reshape(y, shape=(n, h, w, c)), axis=2), axis=1)
        return y if len(x.shape) == 4 else s.reshape(y, shape=x.shape)


class Embedding(Layer):
    """Rows of a (num, dim) table (`embedding`): the input holds integral ids (read as
    data, not differentiated; each must be in [0, num)); output shape ids.shape + (dim,).
    State: weight (num, dim), `normal` initialiser by default (one seed)."""

    def __init__(self, num: int, dim: int, init: str = "normal") -> None:
        for n, v in (("num", num), ("dim", dim)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ShapeError(f"Embedding: {n} must be a positive int, got {v!r}")
        self.num, self.dim, self.init = num, dim, init

    def __repr__(self) -> str:
        return f"Embedding({self.num}, {self.dim})"

    def state_specs(self) -> list[StateSpec]:
        return [StateSpec("weight", (self.num, self.dim), True)]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        return [init_values(self.init, (self.num, self.dim), seeds, self.num, self.dim)]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return (*in_shape, self.dim)

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        from fractions import Fraction as _F

        vals = np.asarray(f.s.get_value(x)).reshape(-1)
        ids = []
        for k, v in enumerate(vals):
            try:
                q = v if isinstance(v, _F) else _F(float(v))
            except (ValueError, OverflowError):  # NaN, inf
                q = _F(-1)
            if q.denominator != 1 or not 0 <= q < self.num:
                raise ShapeError(
                    f"{self!r}: input 0 element {k}: expected an integral id in "
                    f"[0, {self.num}), got {v!r}"
                )
            ids.append(int(q))
        return f.s.embedding(state[0], indices=ids, shape=tuple(x.shape))


class MultiHeadAttention(Layer):
    """Self-attention `multi_head_attention(x, x, x, wq, wk, wv, wo, heads, causal)` on a
    (T, E) or (N, T, E) input; weights (E, E) used as x @ w^T, no biases. State order:
    wq, wk, wv, wo, each xavier_uniform (fan_in = fan_out = E), one seed each."""

    def __init__(self, embed: int, heads: int, causal: bool = False) -> None:
        for n, v in (("embed", embed), ("heads", heads)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ShapeError(f"MultiHeadAttention: {n} must be a positive int, got {v!r}")
        if embed % heads:
            raise ShapeError(f"MultiHeadAttention: heads {heads} must divide embed {embed}")
        self.e, self.heads, self.causal = embed, heads, bool(causal)

    def __repr__(self) -> str:
        return f"MultiHeadAttention({self.e}, heads={self.heads})"

    def state_specs(self) -> list[StateSpec]:
        return [StateSpec(n, (self.e, self.e), True) for n in ("wq", "wk", "wv", "wo")]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        return [
            init_values("xavier_uniform", (self.e, self.e), seeds, self.e, self.e) for _ in range(4)
        ]

    def _attrs(self) -> dict[str, Any]:
        return {"heads": self.heads, "causal": int(self.causal)}

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (2, 3) or in_shape[-1] != self.e:
            raise ShapeError(
                f"{self!r}: input 0: expected shape (T, {self.e}) or (N, T, {self.e}), "
                f"got {in_shape}"
            )
        shapes = [in_shape] * 3 + [(self.e, self.e)] * 4
        return tuple(_op_shape(repr(self), "multi_head_attention", shapes, self._attrs()))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.multi_head_attention(x, x, x, *state, **self._attrs())


# --------------------------------------------------------------------------- 1-D and 3-D, adaptive


def _ints(name: str, v: int | Sequence[int], nd: int, minimum: int) -> tuple[int, ...]:
    """An int (repeated) or nd ints >= minimum, as PyTorch's layers take them."""
    t: tuple[Any, ...] = (v,) * nd if isinstance(v, int) and not isinstance(v, bool) else ()
    if not t:
        try:
            t = tuple(v)  # type: ignore[arg-type]
        except TypeError:
            t = ()
    if len(t) != nd or any(isinstance(k, bool) or not isinstance(k, int) or k < minimum for k in t):
        raise ShapeError(f"{name}: expected an int >= {minimum} or {nd} of them, got {v!r}")
    return tuple(int(k) for k in t)


class _ConvNd(Layer):
    """`conv1d` / `conv3d` (channel-first). State order and initialisation as `Conv2d`:
    weight (out, in / groups, *kernel) kaiming_uniform, then bias (out,) zeros."""

    nd = 0

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] = 1,
        padding: int | Sequence[int] = 0,
        dilation: int | Sequence[int] = 1,
        groups: int = 1,
        bias: bool = True,
        init: str = "kaiming_uniform",
    ) -> None:
        name, nd = type(self).__name__, self.nd
        for n, v in (("in_channels", in_channels), ("out_channels", out_channels)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ShapeError(f"{name}: {n} must be a positive int, got {v!r}")
        if isinstance(groups, bool) or not isinstance(groups, int) or groups <= 0:
            raise ShapeError(f"{name}: groups must be a positive int, got {groups!r}")
        if in_channels % groups or out_channels % groups:
            raise ShapeError(
                f"{name}: groups {groups} must divide in_channels {in_channels} and "
                f"out_channels {out_channels}"
            )
        self.cin, self.cout, self.groups, self.bias, self.init = (
            in_channels,
            out_channels,
            groups,
            bias,
            init,
        )
        self.k = _ints(f"{name} kernel_size", kernel_size, nd, 1)
        self.attrs = {
            "stride": _ints(f"{name} stride", stride, nd, 1),
            "padding": _ints(f"{name} padding", padding, nd, 0),
            "dilation": _ints(f"{name} dilation", dilation, nd, 1),
            "groups": groups,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.cin}, {self.cout}, kernel_size={self.k})"

    def state_specs(self) -> list[StateSpec]:
        w = StateSpec("weight", (self.cout, self.cin // self.groups, *self.k), True)
        return [w, StateSpec("bias", (self.cout,), True)] if self.bias else [w]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        taps = math.prod(self.k)
        fan_in, fan_out = self.cin // self.groups * taps, self.cout // self.groups * taps
        w = init_values(self.init, self.state_specs()[0].shape, seeds, fan_in, fan_out)
        return [w, np.zeros(self.cout)] if self.bias else [w]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        nd = self.nd
        if len(in_shape) not in (nd + 1, nd + 2) or in_shape[-nd - 1] != self.cin:
            raise ShapeError(
                f"{self!r}: input 0: expected shape ({self.cin}, {nd} spatial dims) or "
                f"(N, {self.cin}, ...), got {in_shape}"
            )
        shapes = [in_shape] + [sp.shape for sp in self.state_specs()]
        return tuple(_op_shape(repr(self), f"conv{nd}d", shapes, dict(self.attrs)))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.op(f"conv{self.nd}d", x, *state, **self.attrs)


class Conv1d(_ConvNd):
    """`conv1d`: input (C, L) or (N, C, L); see `_ConvNd` for the state."""

    nd = 1


class Conv3d(_ConvNd):
    """`conv3d`: input (C, D, H, W) or (N, C, D, H, W); see `_ConvNd` for the state."""

    nd = 3


class _PoolNd(Layer):
    """A stateless pool: `op` with the attributes given (validated by the op's rule)."""

    op = ""
    nd = 0

    def __init__(
        self,
        kernel_size: int | Sequence[int],
        stride: int | Sequence[int] | None = None,
        padding: int | Sequence[int] = 0,
        ceil_mode: bool = False,
    ) -> None:
        name, nd = type(self).__name__, self.nd
        self.k = _ints(f"{name} kernel_size", kernel_size, nd, 1)
        self.attrs: dict[str, Any] = {
            "kernel_size": self.k,
            "stride": self.k if stride is None else _ints(f"{name} stride", stride, nd, 1),
            "padding": _ints(f"{name} padding", padding, nd, 0),
            "ceil_mode": bool(ceil_mode),
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.k})"

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(_op_shape(repr(self), self.op, [in_shape], dict(self.attrs)))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.op(self.op, x, **self.attrs)


class MaxPool1d(_PoolNd):
    """`max_pool1d` (stride defaults to the kernel size; ties: the first maximal element)."""

    op, nd = "max_pool1d", 1


class MaxPool3d(_PoolNd):
    """`max_pool3d` (stride defaults to the kernel size; ties: the first maximal element)."""

    op, nd = "max_pool3d", 3


class AvgPool1d(_PoolNd):
    """`avg_pool1d` (stride defaults to the kernel size; zero padding counts)."""

    op, nd = "avg_pool1d", 1


class AvgPool3d(_PoolNd):
    """`avg_pool3d` (stride defaults to the kernel size; zero padding counts)."""

    op, nd = "avg_pool3d", 3


class _AdaptivePool(Layer):
    """`adaptive_{avg,max}_pool{nd}d` to `output_size` (an int is repeated)."""

    op = ""
    nd = 0

    def __init__(self, output_size: int | Sequence[int]) -> None:
        name = type(self).__name__
        self.attrs = {"output_size": _ints(f"{name} output_size", output_size, self.nd, 1)}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.attrs['output_size']})"

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(_op_shape(repr(self), self.op, [in_shape], dict(self.attrs)))

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.op(self.op, x, **self.attrs)


class AdaptiveAvgPool1d(_AdaptivePool):
    """`adaptive_avg_pool1d` (PyTorch's windows: sizes need not divide the input)."""

    op, nd = "adaptive_avg_pool1d", 1


class AdaptiveAvgPool2d(_AdaptivePool):
    """`adaptive_avg_pool2d` (PyTorch's windows: sizes need not divide the input)."""

    op, nd = "adaptive_avg_pool2d", 2


class AdaptiveAvgPool3d(_AdaptivePool):
    """`adaptive_avg_pool3d` (PyTorch's windows: sizes need not divide the input)."""

    op, nd = "adaptive_avg_pool3d", 3


class AdaptiveMaxPool1d(_AdaptivePool):
    """`adaptive_max_pool1d` (ties: the first maximal element of the window)."""

    op, nd = "adaptive_max_pool1d", 1


class AdaptiveMaxPool2d(_AdaptivePool):
    """`adaptive_max_pool2d` (ties: the first maximal element of the window)."""

    op, nd = "adaptive_max_pool2d", 2


class AdaptiveMaxPool3d(_AdaptivePool):
    """`adaptive_max_pool3d` (ties: the first maximal element of the window)."""

    op, nd = "adaptive_max_pool3d", 3
