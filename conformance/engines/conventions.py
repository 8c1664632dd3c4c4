"""Named conventions: the points where engines legitimately choose differently from the
spec (subgradients, tie rules, NaN and signed-zero handling, thresholds), as data.

Invariants:
- A `Convention` names an op, a direction ("forward", "vjp", "jvp"), a sentence, and an
  `alt` rule: given the exact inputs (HP tensors), the cotangent or tangent g and the
  attributes, it returns the results *under the alternative rule* (one tensor per result),
  with None at every element where the convention's condition does not hold. An element
  where the engine differs from the spec is classified as this convention only when its
  `alt` entry is not None (the inputs hit the condition) and the engine's value equals the
  alternative value within the op's budget; otherwise it stays an accuracy error.
- `point` holds the convention's defining points (ties, zeros, bounds, thresholds; each
  input 1-D unless `point_shapes` gives its shape): the runner evaluates spec and engine
  there in every dtype and reports spec and engine values side by side, whether or not
  random cases hit them.
- Signed zeros: an engine returning -0 where the spec returns +0 (or the reverse) is the
  convention `signed_zero` for every op (IEEE leaves the sign of many exact zeros to the
  formula used); it is reported, never a failure.
- Flushed subnormals: `flush_subnormals` (every op) applies to an engine whose probe
  (`local.flush_probe`: smallest subnormal x 1, smallest normal x 1/2) returns a zero in
  that dtype. It explains an element where the engine gives ±0 and the exact value is
  below the dtype's smallest normal (FTZ), or where it matches, within the budget, the
  exact op (or one of the op's conventions) on its inputs and cotangent/tangent with every
  subnormal read as a zero of its sign (DAZ). A float-environment mode, not a rounding
  error: reported, and a failure only with `--strict-conventions`.
- NaN and ±inf: `NONFINITE` states, per op, what the spec's rules do with a NaN or ±inf
  in each argument (and in the cotangent/tangent): every op not listed follows
  `NONFINITE_DEFAULT` (IEEE propagation through the rule's own arithmetic); a listed op's
  rule *chooses* a value somewhere (a mask, a pick, sqrt's 0 outside x > 0), and the entry
  says where. `nan_propagation` (every op, classified by the checker) explains an element
  where spec and engine disagree only on being NaN — the engine NaN where the spec's rule
  chose a number, or a number where the spec's rule propagated NaN — and a NaN or ±inf is
  among the element's inputs, cotangent or tangent (its own lane for elementwise ops whose
  arguments and result have one element per lane, any element otherwise). Reported, a
  failure only with `--strict-conventions`.
- All alternative values are computed in `HP` (256-bit MPFR): exact for these rules. The
  node checks hand every `alt` rule the attributes plus `DTYPE_KEY` (the run's dtype name),
  for a rule that rounds intermediates as an engine's kernel does
  (`group_norm_folded_affine`: a, b rounded in the kernel's opmath type); such a rule
  explains nothing where it is given no dtype.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2

from spec.ops import conv_out_dim, expand, get_op, unbroadcast
from spec.shape import broadcast_shapes
from spec.tensor import Tensor

from ..bounds.core import HP
from .alt_rules import (
    DTYPE_KEY,
    ZERO,
    Alt,
    group_norm_folded,
    hp,
    lse_inf_lane,
    pow_zero_nan,
    prelu_pass,
    std_flat_jvp,
    std_flat_vjp,
    window_tie_mean,
)

__all__ = [
    "CONVENTIONS",
    "DTYPE_KEY",
    "NAN_PROPAGATION",
    "NONFINITE",
    "NONFINITE_DEFAULT",
    "NONFINITE_POINTS",
    "SIGNED_ZERO",
    "SUBNORMAL_FLUSH",
    "Convention",
    "conventions_for",
    "named_conventions",
    "nan_probe",
    "nonfinite_rule",
]

HALF = gmpy2.mpfr(0.5)


@dataclass(frozen=True)
class Convention:
    name: str
    op: str
    directions: tuple[str, ...]
    sentence: str
    alt: Alt
    point: tuple[tuple[tuple[float, ...], ...], dict[str, Any]] = field(default=((), {}))
    point_shapes: tuple[tuple[int, ...], ...] | None = None  # default: each input 1-D


def _unary(rule: Callable[[Any, Any, dict[str, Any]], Any]) -> Alt:
    """An elementwise unary rule rule(x, g, attrs) -> value or None."""

    def alt(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
        gd = g.data if g is not None else (None,) * len(xs[0].data)
        return [
            Tensor(
                xs[0].shape, tuple(rule(x, gi, attrs) for x, gi in zip(xs[0].data, gd, strict=True))
            )
        ]

    return alt


def _tie_binary(share_a: Any, share_b: Any) -> Alt:
    """maximum/minimum with a tie a == b: a gets share_a*g and b gets share_b*g."""

    def alt(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
        assert g is not None
        a, b = xs
        shape = broadcast_shapes(a.shape, b.shape)
        ea, eb = expand(a, shape), expand(b, shape)
        outs = []
        for arg, share in ((a, share_a), (b, share_b)):
            vals, hits = [], []
            for x, y, gi in zip(ea.data, eb.data, g.data, strict=True):
                tie = (not gmpy2.is_nan(x)) and x == y
                vals.append(gi * share if tie else ZERO)
                hits.append(gmpy2.mpfr(1) if tie else ZERO)
            v = unbroadcast(HP, Tensor(shape, tuple(vals)), arg.shape)
            h = unbroadcast(HP, Tensor(shape, tuple(hits)), arg.shape)
            # only elements whose cotangent comes entirely from ties are predicted
            full = unbroadcast(HP, Tensor(shape, (gmpy2.mpfr(1),) * len(hits)), arg.shape)
            outs.append(
                Tensor(
                    arg.shape,
                    tuple(
                        vi if hi == fi else None
                        for vi, hi, fi in zip(v.data, h.data, full.data, strict=True)
                    ),
                )
            )
        return outs

    return alt


def _reduce_max_split(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """reduce_max tie: the cotangent split evenly over all maximal elements."""
    assert g is not None
    (x,) = xs
    ax = attrs["axis"]
    shape = x.shape
    outer = 1
    for d in shape[:ax]:
        outer *= d
    n = shape[ax]
    inner = 1
    for d in shape[ax + 1 :]:
        inner *= d
    out: list[Any] = [None] * len(x.data)
    for o in range(outer):
        for i in range(inner):
            idx = [(o * n + k) * inner + i for k in range(n)]
            vals = [x.data[j] for j in idx]
            if any(gmpy2.is_nan(v) for v in vals):
                continue
            m = max(vals)
            ties = [j for j in idx if x.data[j] == m]
            if len(ties) < 2:
                continue
            gi = g.data[o * inner + i]
            for j in idx:
                out[j] = gi / len(ties) if j in ties else ZERO
    return [Tensor(shape, tuple(out))]


def _reduce_max_split_jvp(
    xs: list[Tensor], t: Tensor | None, attrs: dict[str, Any]
) -> list[Tensor]:
    """reduce_max tie, forward mode: the mean of the tied elements' tangents."""
    assert t is not None
    (x,) = xs
    ax = attrs["axis"]
    outer = 1
    for d in x.shape[:ax]:
        outer *= d
    n = x.shape[ax]
    inner = len(x.data) // max(outer * n, 1) if n else 0
    out: list[Any] = []
    for o in range(outer):
        for i in range(inner):
            idx = [(o * n + k) * inner + i for k in range(n)]
            vals = [x.data[j] for j in idx]
            if n == 0 or any(gmpy2.is_nan(v) for v in vals):
                out.append(None)
                continue
            m = max(vals)
            ties = [j for j in idx if x.data[j] == m]
            out.append(sum((t.data[j] for j in ties), ZERO) / len(ties) if len(ties) > 1 else None)
    shape = x.shape[:ax] + x.shape[ax + 1 :]
    return [Tensor(shape, tuple(out))]


def _max_pool_split(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    """max_pool2d with tied maxima in a window: that window's cotangent split evenly over
    its tied in-bounds elements (padding never ties: it is below every value), summed over
    overlapping windows. Predicted only at elements some tied window reaches and no window
    holding a NaN does."""
    assert g is not None
    (x,) = xs
    kh, kw = attrs["kernel_size"]
    sh, sw = attrs.get("stride") or (kh, kw)
    ph, pw = attrs.get("padding") or (0, 0)
    dh, dw = attrs.get("dilation") or (1, 1)
    h, w = x.shape[-2:]
    oh_n = conv_out_dim("max_pool2d", h, kh, sh, ph, dh)
    ow_n = conv_out_dim("max_pool2d", w, kw, sw, pw, dw)
    acc = [ZERO] * len(x.data)
    tied, poisoned = [False] * len(x.data), [False] * len(x.data)
    for p in range(len(x.data) // max(h * w, 1)):
        for oh in range(oh_n):
            for ow in range(ow_n):
                taps = [
                    (p * h + ih) * w + iw
                    for i in range(kh)
                    for j in range(kw)
                    if 0 <= (ih := oh * sh - ph + i * dh) < h
                    and 0 <= (iw := ow * sw - pw + j * dw) < w
                ]
                vals = [x.data[t] for t in taps]
                if not taps or any(gmpy2.is_nan(v) for v in vals):
                    for t in taps:
                        poisoned[t] = True
                    continue
                m = max(vals)
                ties = [t for t in taps if x.data[t] == m]
                gi = g.data[(p * oh_n + oh) * ow_n + ow]
                for t in ties:
                    acc[t] += gi / len(ties)
                    tied[t] |= len(ties) > 1
    out = [a if t and not q else None for a, t, q in zip(acc, tied, poisoned, strict=True)]
    return [Tensor(x.shape, tuple(out))]


def _window_tie_split(op: str) -> Alt:
    """A max pool of any rank (max_pool1d/3d, adaptive_max_pool*) with tied maxima in a
    window: the window's cotangent split evenly over its distinct tied taps, summed over
    overlapping windows; the windows are read off the op's spec body (its gather's index
    table, lead rows (N, C) flattened), so padded or unused slots, which repeat a tap of the
    window, count once. Predicted only where some tied window reaches and no NaN window does."""

    def alt(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
        assert g is not None
        (x,) = xs
        body = get_op(op).body
        assert body is not None
        gather = next(n for n in body([x.shape], attrs).nodes if n.op == "gather")
        n_win, k = gather.attrs["shape"]
        idx = gather.attrs["indices"]
        m = len(x.data) // max(len(g.data) // max(n_win, 1), 1) if n_win else 0
        acc = [ZERO] * len(x.data)
        tied, poisoned = [False] * len(x.data), [False] * len(x.data)
        for row in range(len(g.data) // max(n_win, 1)):
            for w in range(n_win):
                taps = list(dict.fromkeys(row * m + t for t in idx[w * k : (w + 1) * k]))
                vals = [x.data[t] for t in taps]
                if any(gmpy2.is_nan(v) for v in vals):
                    for t in taps:
                        poisoned[t] = True
                    continue
                top = max(vals)
                ties = [t for t in taps if x.data[t] == top]
                for t in ties:
                    acc[t] += g.data[row * n_win + w] / len(ties)
                    tied[t] |= len(ties) > 1
        out = [a if t and not q else None for a, t, q in zip(acc, tied, poisoned, strict=True)]
        return [Tensor(x.shape, tuple(out))]

    return alt


def _pool_tie_convention(op: str, point: tuple[Any, ...], attrs: dict[str, Any],
                         shape: tuple[int, ...]) -> Convention:  # fmt: skip
    return Convention(
        f"{op}_tie_split",
        op,
        ("vjp",),
        f"{op} with tied maxima in a window: the spec gives the window's cotangent to the "
        "first maximal element (row-major), as PyTorch's CPU kernels do; engines whose max "
        "is a reduce over the window (tinygrad) split it evenly over the tied elements.",
        _window_tie_split(op),
        ((point,), attrs),
        (shape,),
    )


def _clamp_ties(x: Any, g: Any, a: dict[str, Any], pass_share: bool) -> Any:
    lo, hi = hp(a["lo"]), hp(a["hi"])
    if gmpy2.is_nan(x) or not (x == lo or x == hi):
        return None
    if pass_share:
        return g
    ties = (x == lo) + (x == hi)
    return g / 2**ties


def _bound_ties(lo: Callable[[dict[str, Any]], Any], hi: Callable[[dict[str, Any]], Any]) -> Alt:
    """hardtanh/relu6 at a bound, written as minimum(maximum(x, lo), hi): clamp's half split."""
    return _unary(lambda x, g, a: _clamp_ties(x, g, {"lo": lo(a), "hi": hi(a)}, False))


CONVENTIONS: tuple[Convention, ...] = (
    Convention(
        "sqrt_grad_at_zero",
        "sqrt",
        ("vjp", "jvp"),
        "sqrt'(0): the spec returns 0 (a subgradient choice keeping gradients finite); "
        "engines that differentiate by g/(2*sqrt(x)) return +-inf.",
        _unary(lambda x, g, a: g / (2 * gmpy2.sqrt(x)) if x == 0 else None),
        (((0.0, 4.0),), {}),
    ),
    Convention(
        "sqrt_grad_below_zero",
        "sqrt",
        ("vjp", "jvp"),
        "sqrt'(x < 0): the spec returns 0 (forward is NaN); engines propagate NaN from "
        "g/(2*sqrt(x)).",
        _unary(lambda x, g, a: gmpy2.nan() if x < 0 else None),
        (((-1.0, 1.0),), {}),
    ),
    Convention(
        "clamp_grad_at_bounds_pass",
        "clamp",
        ("vjp", "jvp"),
        "clamp at x == lo or x == hi: the spec's derivative is 0 at the bounds; PyTorch "
        "passes the cotangent (mask lo <= x <= hi).",
        _unary(lambda x, g, a: _clamp_ties(x, g, a, True)),
        (((-1.0, 0.0, 1.0),), {"lo": Fraction(-1), "hi": Fraction(1)}),
    ),
    Convention(
        "clamp_grad_at_bounds_half",
        "clamp",
        ("vjp", "jvp"),
        "clamp at a bound, written as minimum(maximum(x, lo), hi): each tie splits the "
        "cotangent in half (JAX's clip), g/2 at a bound and g/4 when lo == hi == x.",
        _unary(lambda x, g, a: _clamp_ties(x, g, a, False)),
        (((-1.0, 0.0, 1.0),), {"lo": Fraction(-1), "hi": Fraction(1)}),
    ),
    Convention(
        "relu_grad_at_zero_half",
        "relu",
        ("vjp", "jvp"),
        "relu'(0): the spec returns 0; relu written as maximum(x, 0) splits the tie and "
        "returns g/2 (HIPS autograd).",
        _unary(lambda x, g, a: g * HALF if x == 0 else None),
        (((0.0, 1.0),), {}),
    ),
    Convention(
        "relu_grad_at_zero_pass",
        "relu",
        ("vjp", "jvp"),
        "relu'(0): the spec returns 0; an engine may take the right derivative 1.",
        _unary(lambda x, g, a: g if x == 0 else None),
        (((0.0, 1.0),), {}),
    ),
    Convention(
        "relu_nan_to_zero",
        "relu",
        ("forward",),
        "relu(NaN): the spec propagates NaN; relu written as where(x > 0, x, 0) returns 0.",
        _unary(lambda x, g, a: ZERO if gmpy2.is_nan(x) else None),
        (((float("nan"), 1.0),), {}),
    ),
    Convention(
        "abs_grad_at_zero_pass",
        "abs",
        ("vjp", "jvp"),
        "abs'(0): the spec returns sign(0) = 0; an engine may return the right derivative.",
        _unary(lambda x, g, a: g if x == 0 else None),
        (((0.0, -2.0),), {}),
    ),
    Convention(
        "maximum_tie_first",
        "maximum",
        ("vjp",),
        "maximum(a, b) with a == b: the spec splits g/2 to each side; an engine may give "
        "all of g to a.",
        _tie_binary(gmpy2.mpfr(1), ZERO),
        (((1.0, 2.0), (1.0, 3.0)), {}),
    ),
    Convention(
        "maximum_tie_second",
        "maximum",
        ("vjp",),
        "maximum(a, b) with a == b: an engine may give all of g to b (spec: g/2 each).",
        _tie_binary(ZERO, gmpy2.mpfr(1)),
        (((1.0, 2.0), (1.0, 3.0)), {}),
    ),
    Convention(
        "minimum_tie_first",
        "minimum",
        ("vjp",),
        "minimum(a, b) with a == b: an engine may give all of g to a (spec: g/2 each).",
        _tie_binary(gmpy2.mpfr(1), ZERO),
        (((1.0, 2.0), (1.0, 0.0)), {}),
    ),
    Convention(
        "minimum_tie_second",
        "minimum",
        ("vjp",),
        "minimum(a, b) with a == b: an engine may give all of g to b (spec: g/2 each).",
        _tie_binary(ZERO, gmpy2.mpfr(1)),
        (((1.0, 2.0), (1.0, 0.0)), {}),
    ),
    Convention(
        "reduce_max_tie_split",
        "reduce_max",
        ("vjp",),
        "reduce_max with tied maxima: the spec gives the whole cotangent to the first "
        "maximal element; PyTorch's amax, JAX's max and HIPS autograd's max split it "
        "evenly over the tied elements.",
        _reduce_max_split,
        (((1.0, 1.0, 0.0),), {"axis": 0}),
    ),
    Convention(
        "reduce_max_tie_split",
        "reduce_max",
        ("jvp",),
        "reduce_max with tied maxima, forward mode: the spec's tangent is the first maximal "
        "element's; engines that split ties return the mean of the tied tangents.",
        _reduce_max_split_jvp,
        (((1.0, 1.0, 0.0),), {"axis": 0}),
    ),
    Convention(
        "max_pool2d_tie_split",
        "max_pool2d",
        ("vjp",),
        "max_pool2d with tied maxima in a window: the spec gives the window's cotangent to "
        "the first maximal element (row-major), as PyTorch's CPU kernel does; tinygrad's "
        "max (a reduce over the window) splits it evenly over the tied elements.",
        _max_pool_split,
        (((1.0, 1.0, 0.0, 1.0),), {"kernel_size": (2, 2)}),
        ((1, 2, 2),),
    ),
    Convention(
        "safe_log_floor_pass",
        "safe_log",
        ("vjp", "jvp"),
        "safe_log at x == 2**-24 (its floor): the spec's log(maximum(x, 2**-24)) splits the "
        "tie, so x gets g/(2x); an engine writing log(clamp(x, min=2**-24)) passes all of "
        "g/x (PyTorch's clamp passes the cotangent at its bound).",
        _unary(lambda x, g, a: g / x if x == hp(Fraction(1, 2**24)) else None),
        (((2.0**-24, 1.0),), {}),
    ),
    Convention(
        "softplus_threshold",
        "softplus",
        ("forward", "vjp", "jvp"),
        "softplus(x) for x > 20: the spec keeps x + log(1 + exp(-x)); PyTorch switches to "
        "the identity (threshold=20), so the value is x and the derivative exactly 1.",
        _unary(
            lambda x, g, a: (x if g is None else g) if (not gmpy2.is_nan(x)) and x > 20 else None
        ),
        (((21.0, 30.0, 1.0),), {}),
    ),
    _pool_tie_convention("max_pool1d", (1.0, 1.0, 0.0, 1.0), {"kernel_size": (2,)}, (1, 4)),
    _pool_tie_convention(
        "max_pool3d", (1.0, 1.0, 0.0, 1.0), {"kernel_size": (1, 2, 2)}, (1, 1, 2, 2)
    ),
    _pool_tie_convention(
        "adaptive_max_pool1d", (1.0, 1.0, 0.0, 1.0), {"output_size": (1,)}, (1, 4)
    ),
    _pool_tie_convention(
        "adaptive_max_pool2d", (1.0, 1.0, 0.0, 1.0), {"output_size": (1, 1)}, (1, 2, 2)
    ),
    _pool_tie_convention(
        "adaptive_max_pool3d", (1.0, 1.0, 0.0, 1.0), {"output_size": (1, 1, 1)}, (1, 1, 2, 2)
    ),
    Convention(
        "leaky_relu_grad_at_zero_pass",
        "leaky_relu",
        ("vjp", "jvp"),
        "leaky_relu'(0): the spec (as PyTorch) gives the slope; JAX's where(x >= 0, x, s*x) "
        "passes the whole cotangent.",
        _unary(lambda x, g, a: g if x == 0 else None),
        (((0.0, -1.0, 1.0),), {"negative_slope": Fraction(1, 10)}),
    ),
    Convention(
        "sign_nan_to_zero",
        "sign",
        ("forward",),
        "sign(NaN): the spec propagates NaN; PyTorch returns 0.",
        _unary(lambda x, g, a: ZERO if gmpy2.is_nan(x) else None),
        (((float("nan"), -0.0, 2.0),), {}),
    ),
    Convention(
        "hardtanh_grad_at_bounds_half",
        "hardtanh",
        ("vjp", "jvp"),
        "hardtanh at a bound: the spec (as PyTorch) gives 0; clip written as "
        "minimum(maximum(x, lo), hi) splits each tie in half (JAX's clip).",
        _bound_ties(lambda a: a.get("min_val", -1), lambda a: a.get("max_val", 1)),
        (((-1.0, 0.0, 1.0),), {}),
    ),
    Convention(
        "relu6_grad_at_bounds_half",
        "relu6",
        ("vjp", "jvp"),
        "relu6 at 0 or 6: the spec (as PyTorch) gives 0; relu6 written as "
        "minimum(maximum(x, 0), 6) splits each tie in half.",
        _bound_ties(lambda a: 0, lambda a: 6),
        (((0.0, 6.0, 3.0),), {}),
    ),
    Convention(
        "std_grad_at_zero_variance",
        "std",
        ("vjp",),
        "std on a lane of equal elements: the spec's sqrt'(0) = 0 gives 0; engines divide "
        "by 2*std = 0 and return NaN.",
        std_flat_vjp,
        (((2.0, 2.0, 2.0),), {"dim": 0}),
    ),
    Convention(
        "std_grad_at_zero_variance_jvp",
        "std",
        ("jvp",),
        "std's tangent on a lane of equal elements: 0 in the spec, NaN in engines.",
        std_flat_jvp,
        (((2.0, 2.0, 2.0),), {"dim": 0}),
    ),
    Convention(
        "logsumexp_inf_lane",
        "logsumexp",
        ("forward",),
        "logsumexp of a lane whose maximum is ±inf: the spec's max shift gives inf - inf = "
        "NaN; PyTorch masks infinite maxima and returns the infinity.",
        lse_inf_lane,
        (((float("inf"), 1.0),), {"dim": 0}),
    ),
    Convention(
        "prelu_jvp_at_zero_pass",
        "prelu",
        ("jvp",),
        "prelu's tangent at x == 0: the spec (PyTorch's backward) takes the weight branch, "
        "w*dx + dw*x; PyTorch's forward mode (where(x >= 0, dx, ...)) passes dx.",
        prelu_pass,
        (((0.0, -1.0, 1.0), (0.25,)), {}),
        ((3,), (1,)),
    ),
    *(
        Convention(
            f"adaptive_max_pool{n}d_tie_split_jvp",
            f"adaptive_max_pool{n}d",
            ("jvp",),
            f"adaptive_max_pool{n}d with tied maxima in a window, forward mode: the spec's "
            "tangent is the first maximal tap's; engines whose max is a reduce over the "
            "window (JAX's jnp.max) return the mean of the tied taps' tangents.",
            window_tie_mean(f"adaptive_max_pool{n}d"),
            ((pt,), {"output_size": (1,) * n}),
            (shape,),
        )
        for n, pt, shape in (
            (1, (1.0, 1.0, 0.0, 1.0), (1, 4)),
            (2, (1.0, 1.0, 0.0, 1.0), (1, 2, 2)),
            (3, (1.0, 1.0, 0.0, 1.0), (1, 1, 2, 2)),
        )
    ),
    Convention(
        "pow_grad_exponent_zero_nan",
        "pow",
        ("vjp", "jvp"),
        "pow(x, 0)'s derivative at x == 0: the spec (as PyTorch) gives 0; an engine "
        "differentiating e*x**(e - 1) gives 0*inf = NaN (JAX).",
        _unary(lambda x, g, a: gmpy2.nan() if Fraction(a["exponent"]) == 0 and x == 0 else None),
        (((0.0, 2.0),), {"exponent": Fraction(0)}),
    ),
    Convention(
        "pow_tensor_grad_a_at_zero_exponent_nan",
        "pow_tensor",
        ("vjp", "jvp"),
        "pow_tensor's derivative to a at a == 0, b == 0: the spec (as PyTorch) gives 0; an "
        "engine differentiating b*a**(b - 1) gives 0*inf = NaN (JAX).",
        pow_zero_nan,
        (((0.0, 2.0), (0.0, 1.0)), {}),
    ),
    Convention(
        "group_norm_folded_affine",
        "group_norm",
        ("forward",),
        "group_norm on a group of equal elements (variance 0, e.g. one element per group): "
        "the spec gives β exactly; PyTorch's CPU kernel folds the affine into y = x·a + b "
        "with a = rstd·γ, b = β − mean·a rounded first, and rstd = 1/sqrt(eps) makes "
        "x·a and b large, so their sum cancels (620 ulp in float32 at x = -7.64, γ = β = -1).",
        group_norm_folded,
        (((-7.642651862570801, 0.0), (-1.0,), (-1.0,)), {"num_groups": 1, "eps": None}),
        ((2, 1), (1,), (1,)),
    ),
)


def _signed_zero(xs: list[Tensor], g: Tensor | None, attrs: dict[str, Any]) -> list[Tensor]:
    raise AssertionError("classified by the checker (`local`), not by an alt rule")


SIGNED_ZERO = Convention(
    "signed_zero",
    "*",
    ("forward", "vjp", "jvp"),
    "an exact zero whose sign differs from the spec's (e.g. relu(-0) = -0, or g*0 with "
    "g < 0): IEEE leaves it to the formula; reported, never a failure.",
    _signed_zero,
)


SUBNORMAL_FLUSH = Convention(
    "flush_subnormals",
    "*",
    ("forward", "vjp", "jvp"),
    "subnormals flushed to zero (FTZ/DAZ; XLA on the CPU does so): the engine returns ±0 "
    "where the exact result is below the dtype's smallest normal, or the exact result of "
    "the op with its subnormal inputs (and cotangent or tangent) read as zeros.",
    _signed_zero,  # classified by the checker (`local`), not by an alt rule
)


def conventions_for(op: str, direction: str) -> Sequence[Convention]:
    return [c for c in CONVENTIONS if c.op == op and direction in c.directions]


NAN_PROPAGATION = Convention(
    "nan_propagation",
    "*",
    ("forward", "vjp", "jvp"),
    "NaN or ±inf among an element's inputs (or its cotangent/tangent), and spec and engine "
    "differ only in whether the result is NaN: the engine propagates NaN (IEEE arithmetic "
    "through its formula) where the spec's rule chooses a value (`NONFINITE`: e.g. "
    "sqrt'(NaN) = 0), or chooses a value where the spec propagates NaN.",
    _signed_zero,  # classified by the checker (`local`), not by an alt rule
)

NONFINITE_DEFAULT = (
    "IEEE propagation: a NaN in an argument the rule reads gives NaN in every result element "
    "that reads it; ±inf follows IEEE arithmetic (inf - inf and 0*inf give NaN)"
)
"""What every op's rules do with NaN and ±inf unless `NONFINITE` lists the op."""

NONFINITE: dict[str, str] = {
    # op -> where its rules choose a value instead of propagating (the forward propagates
    # NaN for these ops too unless the entry says otherwise)
    "relu": "vjp/jvp: g where x > 0, else 0 (x NaN gives 0; g NaN at x <= 0 gives 0)",
    "abs": "vjp/jvp: sign(x)*g with 0 where x is 0 or NaN (x NaN gives 0)",
    "clamp": "vjp/jvp: g where lo < x < hi, else 0 (x NaN gives 0; g NaN outside gives 0)",
    "sqrt": "vjp/jvp: g/(2*sqrt(x)) for x > 0, else 0 (x NaN, -inf, <= 0 give 0, even for g NaN)",
    "maximum": "forward: NaN propagates (a's first); vjp/jvp: the larger side gets g, a tie "
    "g/2 each, a NaN operand gives 0 to both sides (a NaN g then gives 0)",
    "minimum": "forward: NaN propagates (a's first); vjp/jvp: the smaller side gets g, a tie "
    "g/2 each, a NaN operand gives 0 to both sides (a NaN g then gives 0)",
    "reduce_max": "forward: NaN propagates (the fold of maximum); vjp/jvp: maximum's rule "
    "along the fold, so a NaN lane's elements get 0",
    "safe_log": "vjp/jvp: through maximum(x, 2**-24): x NaN gives 0 for the cotangent; the "
    "tangent propagates",
    "softplus": "vjp: x NaN gives 0 (its body's maximum and abs give 0 at NaN); jvp "
    "propagates (exp(-abs(x)) = NaN times abs's zero tangent)",
    "mask_neg_inf": "forward: masked positions are -inf whatever x holds; vjp/jvp: 0 there",
    "detach": "vjp/jvp: 0 whatever x or g hold",
    "sign": "vjp/jvp: 0 whatever x or g hold",
    "leaky_relu": "vjp/jvp: g where x > 0, else slope*g (x NaN gives slope*g)",
    "hardtanh": "vjp/jvp: clamp's rule, g where min_val < x < max_val, else 0 (x NaN gives 0; "
    "g NaN outside gives 0)",
    "relu6": "vjp/jvp: clamp's rule, g where 0 < x < 6, else 0 (x NaN gives 0; g NaN outside "
    "gives 0)",
    "hardsigmoid": "vjp/jvp: g/6 where -3 < x < 3, else 0 (g NaN outside gives 0); x NaN gives "
    "0 for the cotangent; the tangent propagates",
    "hardswish": "vjp: clamp's rule drops the x*clamp' term outside -3 < x < 3, so x +inf gives "
    "g and -inf gives 0; the tangent is NaN there (inf times clamp's zero tangent); x NaN "
    "propagates",
    "maximum_n": "forward: NaN propagates (the left fold of maximum); vjp/jvp: maximum's rule "
    "along the fold, so a NaN operand gives 0 to every argument (a NaN g then gives 0)",
    "minimum_n": "forward: NaN propagates (the left fold of minimum); vjp/jvp: minimum's rule "
    "along the fold, so a NaN operand gives 0 to every argument (a NaN g then gives 0)",
    "std": "vjp/jvp: through sqrt's rule at the variance: a lane of zero variance gives 0 even "
    "for g NaN; x NaN or ±inf gives the tangent 0 (sqrt's 0 at a NaN variance), the cotangent "
    "NaN (var's rule)",
    "prelu": "vjp/jvp: g where x > 0, else w*g (x NaN gives w*g); the weight's cotangent "
    "sums x*g where x <= 0 or NaN, +0 where x > 0",
    "where": "forward: picks a or b by the mask, the other side's NaN/±inf never reaches the "
    "result; vjp/jvp: g to the picked side, +0 to the other (a NaN g too)",
    "pow": "forward: C99 pow: x**0 = 1 even for x NaN; vjp/jvp: exponent 0 gives 0 whatever "
    "x or g hold",
    "pow_tensor": "forward: C99 pow: a**0 = 1 for a NaN, 1**b = 1 for b NaN; vjp/jvp: 0 to a "
    "where b = 0 and to b where a = ±0 and b >= 0, whatever g holds",
    **dict.fromkeys(  # the max pools, fixed and adaptive, share PyTorch's CPU rule
        [f"{p}max_pool{n}d" for p in ("", "adaptive_") for n in (1, 2, 3)],
        "forward: NaN propagates (a window's first NaN wins); vjp/jvp: each window's g to its "
        "first maximal element or first NaN (which gets g), the others 0 (a NaN g too)",
    ),
    "batch_norm_eval": "vjp/jvp: through sqrt's rule at running_var + eps: where that is <= 0 "
    "or NaN, the derivative through the denominator is 0 (the forward is NaN there)",
}
"""Per op, where its rules choose a value for a NaN/±inf (see the module docstring)."""


def nonfinite_rule(op: str) -> str:
    """The sentence of `op`'s NaN/±inf handling: its `NONFINITE` entry, else the default."""
    return NONFINITE.get(op, NONFINITE_DEFAULT)


NAN = float("nan")
NONFINITE_POINTS: dict[str, tuple[tuple[tuple[float, ...], ...], dict[str, Any]]] = {
    # op -> (inputs, attributes): a NaN where the op's rule chooses a value (`NONFINITE`),
    # probed in every dtype like the other conventions' defining points (cotangent 1)
    "relu": (((NAN, 1.0),), {}),
    "abs": (((NAN, -2.0),), {}),
    "clamp": (((NAN, 0.5),), {"lo": Fraction(-1), "hi": Fraction(1)}),
    "sqrt": (((NAN, 4.0),), {}),
    "safe_log": (((NAN, 1.0),), {}),
    "softplus": (((NAN, 1.0),), {}),
    "maximum": (((NAN, 1.0), (1.0, 2.0)), {}),
    "minimum": (((NAN, 1.0), (1.0, 0.0)), {}),
    "reduce_max": (((NAN, 1.0, 0.0),), {"axis": 0}),
}
"""Where `nan_propagation` is probed: the listed ops of `NONFINITE` at a NaN input."""


def nan_probe(op: str) -> Convention:
    """`nan_propagation` as a convention of `op` at its `NONFINITE_POINTS` entry (for the
    runner's probes; the checker classifies it, there is no alt rule)."""
    return Convention(
        NAN_PROPAGATION.name,
        op,
        ("vjp", "jvp"),
        NAN_PROPAGATION.sentence,
        _signed_zero,
        NONFINITE_POINTS[op],
    )


def named_conventions() -> dict[str, str]:
    """Every convention this judge can report, name -> sentence (a report's
    `meta.conventions`: which judge made it)."""
    named = (*CONVENTIONS, SIGNED_ZERO, NAN_PROPAGATION, SUBNORMAL_FLUSH)
    return {c.name: c.sentence for c in named}
