"""The norm family: layer_norm batch_norm instance_norm group_norm batch_norm_eval
local_response_norm (composites).

Invariants:
- Bodies are reduce_mean / sub / mul / sqrt / div with ε = LN_EPS = 1/100000 as an exact
  `const`; the variance is biased; batch_norm uses training statistics only.
- instance_norm is group_norm with one group per channel: both reduce the last axis of a
  (N, G, C/G * spatial) view; their eps is an optional rational attribute (default LN_EPS).
- batch_norm_eval uses the given running statistics (evaluation mode), any rank >= 2.
- local_response_norm sums the squares over a channel window with one gather (a table
  built with vectorised NumPy), then divides x by exp(beta·log(k + alpha·mean)), k > 0.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import GraphError, op_error
from ..shape import Shape, size
from .builders import composite, scalar_const, second_arg, second_point, shape_error
from .table import Attrs, AttrSpec, arg, sample
from .windows import flat_gather

__all__ = ["FAMILY", "LN_EPS"]

FAMILY = "norm"


LN_EPS = Fraction(1, 100000)
"""ε of layer_norm and batch_norm: 1e-5 as an exact rational, cast once into the domain."""


# --------------------------------------------------------------------------- normalisation


def _affine_args(op: str, b: Any, args: list[int], want: Shape) -> None:
    for i in (1, 2):
        if b.shape_of(args[i]) != want:
            raise shape_error(
                op,
                "weight and bias must match the normalised features",
                i,
                want,
                b.shape_of(args[i]),
            )


def _layer_norm_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "layer_norm"
    s = b.shape_of(args[0])
    if len(s) < 1 or s[-1] < 1:
        raise shape_error(op, "input must have a non-empty last axis", 0, "(..., D >= 1)", s)
    _affine_args(op, b, args, (s[-1],))
    ax, keep = len(s) - 1, (*s[:-1], 1)
    x = args[0]
    mu = b.node("reshape", b.node("reduce_mean", x, axis=ax), shape=keep)
    xc = b.node("sub", x, mu)
    var = b.node("reshape", b.node("reduce_mean", b.node("mul", xc, xc), axis=ax), shape=keep)
    den = b.node("sqrt", b.node("add", var, scalar_const(b, LN_EPS)))
    return b.node("add", b.node("mul", b.node("div", xc, den), args[1]), args[2])


composite(
    name="layer_norm",
    family=FAMILY,
    arity=3,
    body=_layer_norm_body,
    doc="layer_norm(x, γ, β) over the last axis (D = x.shape[-1], γ and β (D,)): mu = "
    "reduce_mean(x), xc = sub(x, mu), var = reduce_mean(mul(xc, xc)) (biased), y = "
    "add(mul(div(xc, sqrt(add(var, ε))), γ), β) with ε = 1/100000 an exact const",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            arg((3,), 1, 2, -1),
            arg((3,), 0, 1, 2),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((3,), Fraction(1, 2), -2, 2),
            arg((3,), Fraction(1, 2), -1, 0),
        ),
    ),
)


def _channel_mean(b: Any, v: int, s: Shape, bshape: Shape) -> int:
    """Per-channel mean over batch and spatial axes: swap C to the front, flatten, fold
    over (n, spatial...) in row-major order, divide, reshape to the broadcast shape."""
    c = s[1]
    t = b.node("reshape", b.node("swap_adjacent", v, axis=0), shape=(c, size(s) // c))
    return b.node("reshape", b.node("reduce_mean", t, axis=1), shape=bshape)


def _batch_norm_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "batch_norm"
    s = b.shape_of(args[0])
    if len(s) < 2 or s[1] < 1 or size(s) == 0:
        raise shape_error(
            op, "input must be (N, C, ...) with N, C and spatial dims >= 1", 0, "(N, C, ...)", s
        )
    _affine_args(op, b, args, (s[1],))
    bshape = (s[1], *([1] * (len(s) - 2)))
    x = args[0]
    xc = b.node("sub", x, _channel_mean(b, x, s, bshape))
    var = _channel_mean(b, b.node("mul", xc, xc), s, bshape)
    den = b.node("sqrt", b.node("add", var, scalar_const(b, LN_EPS)))
    gamma = b.node("reshape", args[1], shape=bshape)
    beta = b.node("reshape", args[2], shape=bshape)
    return b.node("add", b.node("mul", b.node("div", xc, den), gamma), beta)


composite(
    name="batch_norm",
    family=FAMILY,
    arity=3,
    body=_batch_norm_body,
    doc="batch_norm(x, γ, β), training statistics: x (N, C, ...), γ and β (C,); per channel "
    "mu and biased var are reduce_mean over (N, spatial...) in row-major order (after "
    "swap_adjacent(x, 0) and a reshape to (C, -1)), y = add(mul(div(sub(x, mu), "
    "sqrt(add(var, ε))), γ), β), ε = 1/100000 an exact const; no running statistics",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 2, 2), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            arg((2,), 1, 2),
            arg((2,), 0, 1),
            note="generic point",
        ),
        second_point(
            arg(
                (2, 2, 3),
                1,
                -2,
                Fraction(1, 2),
                3,
                Fraction(1, 4),
                Fraction(-3, 2),
                1,
                2,
                Fraction(1, 2),
                3,
                Fraction(1, 4),
                Fraction(3, 2),
            ),
            arg((2,), 1, 2),
            arg((2,), 0, Fraction(1, 2)),
        ),
    ),
)


# --------------------------------------------------------------------------- group statistics


def _eps(op: str, a: Attrs) -> Fraction:
    eps = Fraction(a["eps"]) if a.get("eps") is not None else LN_EPS
    if eps <= 0:
        raise op_error(GraphError, op, "eps must be positive", expected="eps > 0", got=eps)
    return eps


def _grouped_norm(op: str, b: Any, args: list[int], a: Attrs, min_rank: int) -> int:
    """x (N, C, *spatial) viewed as (N, G, C/G * prod(spatial)): per (n, g) mean and biased
    variance by reduce_mean over the last axis (row-major: channels of the group, then
    spatial positions), then the per-channel affine γ, β (C,) reshaped to (C, 1, ...)."""
    s = b.shape_of(args[0])
    if len(s) < min_rank or size(s) == 0:
        raise shape_error(
            op,
            f"input must be (N, C, ...) of rank >= {min_rank} with no zero dim",
            0,
            "(N, C, ...)" if min_rank == 2 else "(N, C, spatial...)",
            s,
        )
    c = s[1]
    groups = c if op == "instance_norm" else int(a["num_groups"])
    if groups < 1 or c % groups:
        raise op_error(
            GraphError,
            op,
            "num_groups must divide the channel count",
            expected=f"a divisor of C = {c}",
            got=groups,
        )
    _affine_args(op, b, args, (c,))
    view = (s[0], groups, size(s) // (s[0] * groups))
    keep = (s[0], groups, 1)
    x = b.node("reshape", args[0], shape=view)
    mu = b.node("reshape", b.node("reduce_mean", x, axis=2), shape=keep)
    xc = b.node("sub", x, mu)
    var = b.node("reshape", b.node("reduce_mean", b.node("mul", xc, xc), axis=2), shape=keep)
    den = b.node("sqrt", b.node("add", var, scalar_const(b, _eps(op, a))))
    y = b.node("reshape", b.node("div", xc, den), shape=s)
    bshape = (c, *([1] * (len(s) - 2)))
    gamma = b.node("reshape", args[1], shape=bshape)
    beta = b.node("reshape", args[2], shape=bshape)
    return b.node("add", b.node("mul", y, gamma), beta)


_EPS_ATTR = AttrSpec("eps", "rational", False)

_GROUPED_DOC = (
    "mu = reduce_mean and var = reduce_mean(mul(xc, xc)) (biased) over the last axis of "
    "reshape(x, (N, G, C/G * prod(spatial))) (row-major: the group's channels, then spatial "
    "positions), xc = sub(x, mu), y = add(mul(reshape(div(xc, sqrt(add(var, eps))), "
    "x.shape), γ), β) with γ, β (C,) reshaped to (C, 1, ...); eps (default 1/100000) an "
    "exact const. Weight and bias are required arguments, as in layer_norm and batch_norm "
    "(PyTorch's weight=None / bias=None are ones / zeros)"
)

composite(
    name="instance_norm",
    family=FAMILY,
    arity=3,
    body=lambda b, args, a: _grouped_norm("instance_norm", b, args, a, 3),
    attrs=(_EPS_ATTR,),
    doc="instance_norm(x, γ, β, eps): x (N, C, *spatial) with spatial dims >= 1, statistics "
    "per (n, c) (group_norm with G = C; PyTorch's use_input_stats=True, no running "
    "statistics): " + _GROUPED_DOC,
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            arg((2,), 1, 2),
            arg((2,), 0, Fraction(1, 2)),
            note="generic point",
        ),
        sample(
            arg((2, 1, 2), 1, 1, 3, Fraction(-1, 2)),
            arg((1,), Fraction(1, 2)),
            arg((1,), -1),
            note="a constant instance (var = 0: the output is β, sqrt(eps) in the denominator)",
            kind="boundary",
        ),
    ),
)

composite(
    name="group_norm",
    family=FAMILY,
    arity=3,
    body=lambda b, args, a: _grouped_norm("group_norm", b, args, a, 2),
    attrs=(AttrSpec("num_groups", "int"), _EPS_ATTR),
    doc="group_norm(x, γ, β, num_groups, eps): x (N, C, ...), num_groups divides C, "
    "statistics per (n, group of C/G consecutive channels): " + _GROUPED_DOC,
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((1, 4, 2), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            arg((4,), 1, 2, -1, Fraction(1, 2)),
            arg((4,), 0, Fraction(1, 2), 1, -2),
            attrs={"num_groups": 2},
            note="generic point",
        ),
        sample(
            arg((2, 2), 1, -2, 3, 3),
            arg((2,), 1, 2),
            arg((2,), 0, 1),
            attrs={"num_groups": 1, "eps": Fraction(1, 10)},
            note="rank 2, one group over the channels; a constant group (var = 0) and eps given",
            kind="boundary",
        ),
    ),
)


# --------------------------------------------------------------------------- evaluation mode


def _batch_norm_eval_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "batch_norm_eval"
    s = b.shape_of(args[0])
    if len(s) < 2 or s[1] < 1:
        raise shape_error(op, "input must be (N, C, ...) with C >= 1", 0, "(N, C, ...)", s)
    for i in (1, 2, 3, 4):
        if b.shape_of(args[i]) != (s[1],):
            raise shape_error(
                op, "statistics, weight and bias must be (C,)", i, (s[1],), b.shape_of(args[i])
            )
    bshape = (s[1], *([1] * (len(s) - 2)))
    mean, var, gamma, beta = (b.node("reshape", args[i], shape=bshape) for i in (1, 2, 3, 4))
    den = b.node("sqrt", b.node("add", var, scalar_const(b, _eps(op, a))))
    y = b.node("div", b.node("sub", args[0], mean), den)
    return b.node("add", b.node("mul", y, gamma), beta)


composite(
    name="batch_norm_eval",
    family=FAMILY,
    arity=5,
    body=_batch_norm_eval_body,
    attrs=(_EPS_ATTR,),
    doc="F.batch_norm(x, running_mean, running_var, weight, bias, training=False, eps): x "
    "(N, C, ...) of any rank >= 2 ((N, C), (N, C, L), (N, C, H, W), (N, C, D, H, W)), the "
    "four others (C,) reshaped to (C, 1, ...): y = add(mul(div(sub(x, mean), sqrt(add(var, "
    "eps))), weight), bias), eps (default 1/100000) an exact const; no statistics of x",
    algebraic=False,
    tags=frozenset({"model"}),
    samples=(
        sample(
            arg((2, 2, 2), 1, -2, 3, Fraction(1, 2), 4, -1, 2, Fraction(-3, 2)),
            arg((2,), Fraction(1, 2), -1),
            arg((2,), 2, Fraction(1, 4)),
            arg((2,), 1, -2),
            arg((2,), 0, 1),
            note="generic point",
        ),
        sample(
            arg((2, 1), 1, -3),
            arg((1,), 0),
            arg((1,), 0),
            arg((1,), Fraction(3, 2)),
            arg((1,), -1),
            attrs={"eps": Fraction(1, 4)},
            kind="boundary",
            note="(N, C) input, zero running variance: eps alone in the denominator",
        ),
    ),
)


def _rational(op: str, a: Attrs, key: str, default: Fraction, positive: bool = False) -> Fraction:
    v = Fraction(a[key]) if a.get(key) is not None else default
    if positive and v <= 0:
        raise op_error(GraphError, op, f"{key} must be positive", expected=f"{key} > 0", got=v)
    return v


def _lrn_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "local_response_norm"
    x = args[0]
    s = b.shape_of(x)
    if len(s) < 3:
        raise shape_error(op, "input must be (N, C, *spatial) of rank >= 3", 0, "rank >= 3", s)
    n = int(a["size"])
    if n < 1:
        raise op_error(GraphError, op, "size must be positive", expected="size >= 1", got=n)
    alpha = _rational(op, a, "alpha", Fraction(1, 10000))
    beta = _rational(op, a, "beta", Fraction(3, 4))
    k = _rational(op, a, "k", Fraction(1), positive=True)
    c, rest = s[1], size(s[2:])
    # window table (N, C, size, rest): tap j of channel ch reads channel ch - size//2 + j
    nn = np.arange(s[0], dtype=np.int64).reshape(-1, 1, 1, 1)
    ch = np.arange(c, dtype=np.int64).reshape(1, -1, 1, 1)
    tap = ch - n // 2 + np.arange(n, dtype=np.int64).reshape(1, 1, -1, 1)
    sp = np.arange(rest, dtype=np.int64).reshape(1, 1, 1, -1)
    ok = np.broadcast_to((tap >= 0) & (tap < c), (s[0], c, n, rest))
    flat = (nn * c + tap) * rest + sp
    sq = b.node("reshape", b.node("mul", x, x), shape=(s[0], c, rest))
    win = flat_gather(b, sq, np.broadcast_to(flat, ok.shape), ok)
    avg = b.node("div", b.node("reduce_sum", win, axis=2), scalar_const(b, n))
    base = b.node("add", b.node("mul", avg, scalar_const(b, alpha)), scalar_const(b, k))
    den = b.node("exp", b.node("mul", b.node("log", base), scalar_const(b, beta)))
    return b.node("div", x, b.node("reshape", den, shape=s))


composite(
    name="local_response_norm",
    family=FAMILY,
    arity=1,
    body=_lrn_body,
    attrs=(
        AttrSpec("size", "int"),
        AttrSpec("alpha", "rational", False),
        AttrSpec("beta", "rational", False),
        AttrSpec("k", "rational", False),
    ),
    doc="F.local_response_norm(x, size, alpha=1/10000, beta=3/4, k=1): x (N, C, *spatial); "
    "s = reduce_sum over taps j < size of mul(x, x) at channel c - size//2 + j (+0 outside "
    "0..C-1; PyTorch's window; ONNX LRN's for odd size), y = div(x, exp(mul(log(add(mul("
    "div(s, size), alpha), k)), beta))) (pow as exp∘log: k > 0 required, so the base is "
    "positive). Body: one gather of the window table over the flattened squares",
    algebraic=False,
    tags=frozenset({"model"}),
    samples=(
        sample(
            arg((1, 3, 2), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"size": 3, "alpha": Fraction(1, 2), "beta": Fraction(3, 4), "k": 2},
            note="generic point",
        ),
        sample(
            arg((1, 2, 1), 0, 0),
            attrs={"size": 2},
            kind="boundary",
            note="zero input: the base is k (the window reads +0 beyond the channels)",
        ),
        sample(
            arg((2, 1, 2), 1, -2, 3, Fraction(1, 2)),
            attrs={"size": 4, "alpha": 1, "beta": 1, "k": Fraction(1, 2)},
            kind="boundary",
            note="an even size wider than the channel axis (one channel)",
        ),
    ),
)
