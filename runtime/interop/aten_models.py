"""ATen rules for constructs of real models (timm, transformers) that are compositions
of table ops, plus the no-op checks `torch.export` leaves in a program.

Invariants:
- A no-op check (`aten._assert_tensor_metadata`, from `.to(device)` / `.to(dtype)`) has
  no users and emits nothing; the shape it asserts is checked against the value's shape
  at import time (a mismatch is the model's error), its dtype and device are not modelled
  (casts between float dtypes are identities: the whole graph runs in one dtype).
- Every other rule builds its value from table ops only (no new primitive): vector norms
  as sqrt of a sum of squares, group norm as the layer-norm body per (n, group), nearest
  upsampling as `index_select` per axis, attention with an additive float mask as the
  table's attention body with the mask added before the softmax (-inf entries of a
  constant mask are `mask_neg_inf`, `Emitter.add_extended`).
- Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from spec.ops.attention import default_attention_scale

from .aten_guard import Poison
from .core import Emitter, InvalidModelError, Static, Unsupported, axes_of

__all__ = ["MODEL_RULES", "batch_stats_norm", "no_running_stats", "sdpa_additive"]

Rule = Callable[..., Any]


def _assert_tensor_metadata(
    E: Emitter,
    a: Any,
    size: Any = None,
    stride: Any = None,
    dtype: Any = None,
    *,
    device: Any = None,
    layout: Any = None,
) -> None:
    if size is not None and tuple(int(d) for d in size) != tuple(E.shape(a)):
        raise InvalidModelError(
            f"aten._assert_tensor_metadata: the value has shape {tuple(E.shape(a))}, "
            f"the program asserts {tuple(size)}"
        )
    return None


STATS = "mean/rstd outputs (the table's norms return only y)"


def no_running_stats(packet: str, args: Any, kwargs: Any) -> bool:
    """Is this batch-norm node one without running statistics (it normalises by the
    statistics of its own input in every mode and updates no state)?"""
    if packet == "aten._native_batch_norm_legit":
        return len(args) > 3 and isinstance(args[3], bool)  # the .no_stats overload
    mean = kwargs.get("running_mean", args[3] if len(args) > 3 else None)
    var = kwargs.get("running_var", args[4] if len(args) > 4 else None)
    return mean is None and var is None


def batch_stats_norm(E: Emitter, x: Any, w: Any, b: Any, eps: float) -> Any:
    """Batch norm by the statistics of `x` itself (channel axis 1; mean and biased
    variance over every other axis), as torch computes it without running statistics:
    the channel moved first and flattened, the layer-norm body over the rest, moved back,
    then the per-channel weight and bias."""
    s = tuple(E.shape(x))
    if len(s) < 2:
        raise Unsupported(f"batch norm of a rank-{len(s)} input (needs (N, C, ...))")
    c, rest = s[1], int(np.prod(s)) // s[1]
    moved = E.move_axis(x, 1, 0)
    flat = E.reshape(moved, (c, rest))
    y = E.reshape(E.layer_norm(flat, None, None, (rest,), float(eps)), E.shape(moved))
    return E.channel_affine(E.move_axis(y, 0, 1), w, b)


def _bn_legit(E: Emitter, x: Any, w: Any, b: Any, *rest: Any) -> tuple[Any, ...]:
    """`_native_batch_norm_legit`: `.no_stats` (x, w, b, training, momentum, eps) is
    `batch_stats_norm`; the overload with running statistics is refused in training
    mode and is eval batch norm otherwise."""
    p = Poison("aten._native_batch_norm_legit (statistics outputs)", STATS)
    if isinstance(rest[0], bool):
        return batch_stats_norm(E, x, w, b, rest[2]), p, p
    mean, var, training, _, eps = rest
    if training:
        raise Unsupported("training-mode batch norm with running statistics")
    return E.batch_norm_eval(x, w, b, mean, var, eps), p, p


def _vector_norm(
    E: Emitter, x: Any, ord: Any = 2, dim: Any = None, keepdim: bool = False, *, dtype: Any = None
) -> Any:
    """`linalg_vector_norm` of order 2 (`F.normalize`, `torch.norm`): sqrt of the sum of
    squares over `dim` (all axes when None). Its gradient at a zero vector is the
    table's sqrt rule (not torch's subgradient 0)."""
    if float(ord) != 2.0:
        raise Unsupported(f"vector norm of order {ord} (order 2 only)")
    rank = len(E.shape(x))
    dims = [dim] if isinstance(dim, int) else dim
    axes = None if dims is None or len(dims) == 0 else axes_of(dims, rank)
    return E.node("sqrt", E.reduce("reduce_sum", E.node("mul", x, x), axes, keepdim))


def _group_norm(
    E: Emitter, x: Any, w: Any, b: Any, n: int, c: int, hxw: int, group: int, eps: float
) -> tuple[Any, ...]:
    """`native_group_norm`: the layer-norm body over each (sample, group), then the
    per-channel weight and bias."""
    s = tuple(E.shape(x))
    if c % group:
        raise InvalidModelError(f"native_group_norm: {c} channels in {group} groups")
    flat = E.reshape(x, (s[0], group, int(np.prod(s)) // (s[0] * group)))
    y = E.reshape(E.layer_norm(flat, None, None, (E.shape(flat)[-1],), float(eps)), s)
    y = E.channel_affine(y, w, b)
    p = Poison("aten.native_group_norm (statistics outputs)", STATS)
    return y, p, p


def _nearest_index(n_in: int, n_out: int, scale: float | None) -> tuple[int, ...]:
    """torch's nearest source index per output position (`nearest_idx`): the identity
    when the sizes match, i // 2 for an exact doubling, else floor(i * s) in float32 with
    s = 1 / scale_factor when given, else n_in / n_out, capped at n_in - 1."""
    if n_out == n_in:
        return tuple(range(n_out))
    if n_out == 2 * n_in:
        return tuple(i >> 1 for i in range(n_out))
    s = np.float32(1.0 / scale) if scale else np.float32(n_in) / np.float32(n_out)
    idx = np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64)
    return tuple(int(min(i, n_in - 1)) for i in idx)


def _upsample_nearest(E: Emitter, x: Any, size: Any = None, scales: Any = None) -> Any:
    """`upsample_nearest{1,2,3}d(.vec)`: one `index_select` per spatial axis."""
    s = tuple(E.shape(x))
    nd = len(s) - 2
    sc: list[Any] = list(scales) if scales is not None else [None] * nd
    if size is None:
        if scales is None:
            raise Unsupported("nearest upsampling without sizes or scales")
        size = [int(np.floor(s[2 + k] * float(sc[k]))) for k in range(nd)]
    y = x
    for k in range(nd):
        idx = _nearest_index(s[2 + k], int(size[k]), None if sc[k] is None else float(sc[k]))
        y = E.on_axis(y, 2 + k, 0, lambda v, idx=idx: E.node("index_select", v, indices=idx))
    return y


def _upsample(E: Emitter, x: Any, size: Any, *rest: Any, **kw: Any) -> Any:
    """Both overloads: `.vec` (x, output_size | None, scale_factors | None) and the default
    (x, output_size, scales per axis | None)."""
    if "scale_factors" in kw:
        return _upsample_nearest(E, x, size, kw["scale_factors"])
    if len(rest) == 1 and (rest[0] is None or isinstance(rest[0], list | tuple)):
        return _upsample_nearest(E, x, size, rest[0])
    scales = [*rest, *kw.values()]
    given = bool(scales) and all(v is not None for v in scales)
    return _upsample_nearest(E, x, size, scales if given else None)


def sdpa_additive(E: Emitter, q: Any, k: Any, v: Any, mask: Any, causal: bool, scale: Any) -> Any:
    """Attention with an additive float mask (a constant, -inf entries included, or a
    graph value such as a learned position bias): softmax(q k^T * scale + mask) v, the
    table's attention body with the mask added before the softmax."""
    d = E.shape(q)[-1]
    c = Fraction(scale) if scale is not None else default_attention_scale(max(d, 1))
    s = E.node("scale", E.node("matmul", q, E.node("transpose", k)), c=c)
    s = E.add_extended(s, mask) if isinstance(mask, Static) else E.node("add", s, mask)
    if causal:
        lq, lk = E.shape(s)[-2:]
        keep = tuple(int(j <= i) for i in range(lq) for j in range(lk))
        s = E.node("mask_neg_inf", s, mask=keep, mask_shape=(lq, lk))
    return E.node("matmul", E.node("softmax", s), v)


MODEL_RULES: dict[str, Rule] = {
    "aten._assert_tensor_metadata": _assert_tensor_metadata,
    "aten._native_batch_norm_legit": _bn_legit,
    "aten.linalg_vector_norm": _vector_norm,
    "aten.native_group_norm": _group_norm,
    "aten.upsample_nearest1d": _upsample,
    "aten.upsample_nearest2d": _upsample,
    "aten.upsample_nearest3d": _upsample,
}
"""ATen op packet -> rule, merged into `aten.ATEN`."""
