"""ATen rules of the sliding-window and padding families: convolutions, transposed
convolutions, max / average / adaptive pools in 1-D, 2-D and 3-D, and `pad` in its four
modes, each mapped onto the op table's op of the same family and rank.

Invariants:
- The rank comes from the op (`max_pool3d`) or, for `aten.convolution`, from the weight's
  rank; the table op is `{family}{nd}d` with torch's attribute names, so PyTorch's output
  sizes (`ceil_mode`, padding, dilation) and divisor rules (`count_include_pad`,
  `divisor_override`) are the table's, not re-derived here.
- Integer outputs no table op gives (max-pool and adaptive-max-pool indices) are `Poison`:
  reported only when something uses them.
- Padding values are exact rationals of the float64 torch gives (no rounding before the
  run's dtype); a non-finite fill has no rational and is refused.
- Nothing here imports torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

from .aten_guard import Poison
from .core import Emitter, Unsupported

__all__ = ["WINDOW_RULES", "nd_ints"]

Rule = Callable[..., Any]


def nd_ints(v: Any, nd: int) -> tuple[int, ...]:
    """torch's int-or-list argument as nd ints (one value repeated)."""
    if isinstance(v, int):
        return (v,) * nd
    t = tuple(int(x) for x in v)
    return t * nd if len(t) == 1 else t


def _rank(E: Emitter, w: Any) -> int:
    nd = len(E.shape(w)) - 2
    if nd not in (1, 2, 3):
        raise Unsupported(f"a {nd}-D convolution (1-D, 2-D and 3-D are mapped)")
    return nd


def _same_padding(w_shape: Sequence[int], dilation: Sequence[int]) -> tuple[int, ...]:
    """padding='same' (stride 1): per axis d*(k-1) split with the extra tap at the end, as
    torch does; returned as the table's (begins..., ends...)."""
    total = [d * (k - 1) for k, d in zip(w_shape[2:], dilation, strict=True)]
    return (*(t // 2 for t in total), *(t - t // 2 for t in total))


def conv(
    E: Emitter,
    x: Any,
    w: Any,
    b: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    dilation: Any = 1,
    groups: int = 1,
) -> Any:
    """conv{1,2,3}d (rank from the weight); padding 'valid' / 'same' as torch reads them."""
    nd = _rank(E, w)
    st, dil = nd_ints(stride, nd), nd_ints(dilation, nd)
    if padding == "valid":
        pad: tuple[int, ...] = (0,) * nd
    elif padding == "same":
        if any(s != 1 for s in st):
            raise Unsupported(f"padding='same' with stride {st} (torch requires stride 1)")
        pad = _same_padding(E.shape(w), dil)
    elif isinstance(padding, str):
        raise Unsupported(f"padding={padding!r}")
    else:
        pad = nd_ints(padding, nd)
    args = (x, w) if b is None else (x, w, b)
    return E.node(f"conv{nd}d", *args, stride=st, padding=pad, dilation=dil, groups=int(groups))


def conv_transpose(
    E: Emitter,
    x: Any,
    w: Any,
    b: Any = None,
    stride: Any = 1,
    padding: Any = 0,
    output_padding: Any = 0,
    groups: int = 1,
    dilation: Any = 1,
) -> Any:
    nd = _rank(E, w)
    args = (x, w) if b is None else (x, w, b)
    return E.node(
        f"conv_transpose{nd}d",
        *args,
        stride=nd_ints(stride, nd),
        padding=nd_ints(padding, nd),
        output_padding=nd_ints(output_padding, nd),
        dilation=nd_ints(dilation, nd),
        groups=int(groups),
    )


def convolution(
    E: Emitter,
    x: Any,
    w: Any,
    b: Any,
    stride: Any,
    padding: Any,
    dilation: Any,
    transposed: bool,
    output_padding: Any,
    groups: int,
) -> Any:
    if transposed:
        return conv_transpose(E, x, w, b, stride, padding, output_padding, groups, dilation)
    return conv(E, x, w, b, stride, padding, dilation, groups)


def _max_pool(nd: int) -> Rule:
    def rule(
        E: Emitter,
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        dilation: Any = 1,
        ceil_mode: bool = False,
    ) -> Any:
        k = nd_ints(kernel_size, nd)
        return E.node(
            f"max_pool{nd}d",
            x,
            kernel_size=k,
            stride=nd_ints(stride, nd) if stride else k,
            padding=nd_ints(padding, nd),
            dilation=nd_ints(dilation, nd),
            ceil_mode=bool(ceil_mode),
        )

    return rule


def _with_indices(op: str, rule: Rule) -> Rule:
    def both(E: Emitter, *args: Any, **kw: Any) -> tuple[Any, Poison]:
        why = "integer indices are not a table value"
        return rule(E, *args, **kw), Poison(f"aten.{op} (indices output)", why)

    return both


def _avg_pool(nd: int) -> Rule:
    def rule(
        E: Emitter,
        x: Any,
        kernel_size: Any,
        stride: Any = (),
        padding: Any = 0,
        ceil_mode: bool = False,
        count_include_pad: bool = True,
        divisor_override: Any = None,
    ) -> Any:
        k = nd_ints(kernel_size, nd)
        extra = {} if divisor_override is None else {"divisor_override": int(divisor_override)}
        return E.node(
            f"avg_pool{nd}d",
            x,
            kernel_size=k,
            stride=nd_ints(stride, nd) if stride else k,
            padding=nd_ints(padding, nd),
            ceil_mode=bool(ceil_mode),
            count_include_pad=bool(count_include_pad),
            **extra,
        )

    return rule


def _adaptive(kind: str, nd: int) -> Rule:
    """adaptive_{kind}_pool{nd}d; an output size of None keeps that axis' input size."""

    def rule(E: Emitter, x: Any, output_size: Any) -> Any:
        dims = E.shape(x)[-nd:]
        sizes = [output_size] * nd if isinstance(output_size, int) else list(output_size)
        if len(sizes) == 1:
            sizes *= nd
        out = tuple(d if o is None else int(o) for o, d in zip(sizes, dims, strict=True))
        return E.node(f"adaptive_{kind}_pool{nd}d", x, output_size=out)

    return rule


def _fill(value: Any) -> Fraction:
    v = 0.0 if value is None else float(value)
    if not math.isfinite(v):
        raise Unsupported(f"padding value {v!r} (the table's pad fills with a rational)")
    return Fraction(v)


def pad(E: Emitter, x: Any, pad: Sequence[int], mode: str = "constant", value: Any = None) -> Any:
    """F.pad / aten.pad and constant_pad_nd: the table's `pad` (negative amounts crop)."""
    v = _fill(value)
    extra = {"value": v} if v else {}
    return E.node("pad", x, pad=tuple(int(p) for p in pad), mode=mode, **extra)


def _mode_pad(mode: str) -> Rule:
    return lambda E, x, padding: pad(E, x, padding, mode)


WINDOW_RULES: dict[str, Rule] = {
    "aten.conv1d": conv,
    "aten.conv2d": conv,
    "aten.conv3d": conv,
    "aten.conv_transpose1d": conv_transpose,
    "aten.conv_transpose2d": conv_transpose,
    "aten.conv_transpose3d": conv_transpose,
    "aten.convolution": convolution,
    "aten.constant_pad_nd": lambda E, x, p, value=0: pad(E, x, p, "constant", value),
    "aten.pad": pad,
    "aten._pad_circular": _mode_pad("circular"),
    **{f"aten.reflection_pad{n}d": _mode_pad("reflect") for n in (1, 2, 3)},
    **{f"aten.replication_pad{n}d": _mode_pad("replicate") for n in (1, 2, 3)},
    **{f"aten.max_pool{n}d": _max_pool(n) for n in (1, 2, 3)},
    **{
        f"aten.max_pool{n}d_with_indices": _with_indices(f"max_pool{n}d_with_indices", _max_pool(n))
        for n in (1, 2, 3)
    },
    **{f"aten.avg_pool{n}d": _avg_pool(n) for n in (1, 2, 3)},
    **{f"aten.adaptive_avg_pool{n}d": _adaptive("avg", n) for n in (1, 2, 3)},
    **{f"aten._adaptive_avg_pool{n}d": _adaptive("avg", n) for n in (2, 3)},
    **{
        f"aten.adaptive_max_pool{n}d": _with_indices(f"adaptive_max_pool{n}d", _adaptive("max", n))
        for n in (1, 2, 3)
    },
}
"""ATen packet -> rule for the conv, pool and pad families (merged into `aten.ATEN`)."""
