"""The attention family: scaled_dot_product_attention multi_head_attention mask_neg_inf.

Invariants:
- mask_neg_inf is a primitive: −∞ where a constant 0/1 mask is 0, the input elsewhere; its
  JVP and VJP pass the tangent/cotangent where mask = 1, else 0.
- Attention is a composite: matmul, scale (default the binary64 nearest 1/sqrt(d),
  `default_attention_scale`), mask, softmax, matmul; all sums are left folds in index
  order. Masks are attributes, never tensor arguments.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import DomainError, GraphError, op_error
from ..shape import Shape, broadcasts_to, size
from ..tensor import Tensor
from .builders import composite, second_arg, second_point, shape_error
from .table import Attrs, AttrSpec, Env, arg, expand, register, sample

__all__ = ["FAMILY", "default_attention_scale", "neg_inf"]

FAMILY = "attention"


def neg_inf(D: Domain) -> Any:
    """−∞ of the domain (IEEE formats; `-oo` symbolically); rationals have none."""
    if D.name == "symbolic":
        import sympy

        return -sympy.oo
    try:
        return D.from_float(float("-inf"))
    except (ValueError, OverflowError, DomainError):
        raise DomainError(f"{D.name}: no -inf in this domain (mask_neg_inf)") from None


# --------------------------------------------------------------------------- mask_neg_inf


def _mask_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, ms = shapes[0], a["mask_shape"]
    if len(a["mask"]) != size(ms):
        raise shape_error(
            "mask_neg_inf", "mask does not fill mask_shape", None, size(ms), len(a["mask"])
        )
    if any(v not in (0, 1) for v in a["mask"]):
        raise op_error(
            GraphError,
            "mask_neg_inf",
            "mask entries must be 0 or 1",
            expected="0 or 1",
            got=sorted(set(a["mask"])),
        )
    if not broadcasts_to(ms, s):
        raise shape_error(
            "mask_neg_inf",
            "mask_shape does not broadcast to the input",
            0,
            f"a shape broadcasting to {s}",
            ms,
        )
    return s


def _mask_full(a: Attrs, shape: Shape) -> Tensor:
    return expand(Tensor(a["mask_shape"], tuple(a["mask"])), shape)


def _mask_fwd(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x = xs[0]
    keep = _mask_full(a, x.shape).data
    if all(keep):
        return x
    ninf = neg_inf(D)
    return Tensor(x.shape, tuple(v if k else ninf for v, k in zip(x.data, keep, strict=True)))


def _mask_lin(D: Domain, t: Tensor, a: Attrs) -> Tensor:
    keep = _mask_full(a, t.shape).data
    z = D.zero()
    return Tensor(t.shape, tuple(v if k else z for v, k in zip(t.data, keep, strict=True)))


register(
    name="mask_neg_inf",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("mask", "ints"), AttrSpec("mask_shape", "shape")),
    shape=_mask_shape,
    forward=_mask_fwd,
    jvp=lambda D, xs, dxs, a, env: _mask_lin(D, dxs[0], a),
    vjp=lambda D, xs, g, a, env: [_mask_lin(D, g, a)],
    saves="nothing",
    doc="x where mask = 1, −∞ where mask = 0 (mask: 0/1 constants of mask_shape, which "
    "broadcasts to x); JVP and VJP pass the tangent/cotangent where mask = 1, else 0 "
    "(PyTorch's masked_fill(~mask, -inf))",
    algebraic=False,
    tags=frozenset({"elementwise", "index"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"mask": (1, 1, 1), "mask_shape": (3,)},
            note="all kept: a masked -inf output would make finite differences NaN",
        ),
        sample(
            arg((2, 3), 1, -2, Fraction(1, 2), 3, Fraction(1, 4), Fraction(-3, 2)),
            attrs={"mask": (1, 0, 1), "mask_shape": (3,)},
            kind="special",
            note="the masked column gives -inf",
        ),
    ),
)


# --------------------------------------------------------------------------- attention


def default_attention_scale(d: int) -> Fraction:
    """The binary64 value nearest 1/sqrt(d) (MPFR rec_sqrt, correctly rounded), exactly."""
    import gmpy2

    with gmpy2.context(gmpy2.ieee(64)):
        r = gmpy2.rec_sqrt(gmpy2.mpfr(d))
    n, q = r.as_integer_ratio()
    return Fraction(int(n), int(q))


_ATTN_MASK_ATTRS = (
    AttrSpec("mask", "ints", False),
    AttrSpec("causal", "nat", False),
)


def _keep_mask(op: str, a: Attrs, lq: int, lk: int) -> list[int] | None:
    mask = a.get("mask")
    causal = a.get("causal") or 0
    if causal not in (0, 1):
        raise op_error(GraphError, op, "causal must be 0 or 1", expected="0 or 1", got=causal)
    if mask is None and not causal:
        return None
    if mask is not None and len(mask) != lq * lk:
        raise op_error(
            GraphError, op, "mask must have Lq*Lk entries", expected=lq * lk, got=len(mask)
        )
    keep = list(mask) if mask is not None else [1] * (lq * lk)
    if causal:
        keep = [
            v if j <= i else 0 for i in range(lq) for j in range(lk) for v in [keep[i * lk + j]]
        ]
    return keep


def _sdpa(b: Any, q: int, k: int, v: int, a: Attrs, op: str) -> int:
    sq, sk, sv = b.shape_of(q), b.shape_of(k), b.shape_of(v)
    for i, s in enumerate((sq, sk, sv)):
        if len(s) < 2:
            raise shape_error(op, "q, k, v must have rank >= 2", i, "(..., L, d)", s)
    if sq[-1] != sk[-1]:
        raise shape_error(op, "q and k feature dims differ", 1, sq[-1], sk[-1])
    if sk[-2] != sv[-2]:
        raise shape_error(op, "k and v sequence lengths differ", 2, sk[-2], sv[-2])
    if sk[-2] < 1:
        raise shape_error(op, "keys must not be empty", 1, "Lk >= 1", sk[-2])
    lq, lk, d = sq[-2], sk[-2], sq[-1]
    scale = a.get("scale")
    c = scale if scale is not None else default_attention_scale(max(d, 1))
    s = b.node("scale", b.node("matmul", q, b.node("transpose", k)), c=c)
    keep = _keep_mask(op, a, lq, lk)
    if keep is not None:
        s = b.node("mask_neg_inf", s, mask=keep, mask_shape=(lq, lk))
    return b.node("matmul", b.node("softmax", s), v)


composite(
    name="scaled_dot_product_attention",
    family=FAMILY,
    arity=3,
    body=lambda b, x, a: _sdpa(b, x[0], x[1], x[2], a, "scaled_dot_product_attention"),
    attrs=(*_ATTN_MASK_ATTRS, AttrSpec("scale", "rational", False)),
    doc="softmax(scale·(q @ kᵀ) masked) @ v for q (..., Lq, d), k (..., Lk, d), v (..., Lk, "
    "dv), batch prefixes broadcast. Body: matmul(q, transpose(k)), scale by c (attribute "
    "`scale`, default the binary64 nearest 1/sqrt(d), an exact rational), mask_neg_inf with "
    "keep = mask (0/1, Lq*Lk, 1 = attend) and, with causal = 1, j <= i, then softmax "
    "(last axis, max-shifted) and matmul with v; all sums are left folds in index order. "
    "A fully masked row gives NaN (as PyTorch)",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 2), 1, -2, Fraction(1, 2), 1),
            arg((3, 2), 1, 0, -1, 2, Fraction(1, 2), 1),
            arg((3, 2), Fraction(1, 4), -3, 2, 1, -1, Fraction(1, 2)),
            attrs={"causal": 1},
            note="generic point",
        ),
        second_point(
            second_arg(),
            second_arg(),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            attrs={"causal": 1},
        ),
    ),
)


def _split_heads(b: Any, t: int, heads: int) -> int:
    s = b.shape_of(t)
    r = len(s)
    t = b.node("reshape", t, shape=(*s[:-1], heads, s[-1] // heads))
    return b.node("swap_adjacent", t, axis=r - 2)


def _mha_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "multi_head_attention"
    q_in, k_in, v_in, wq, wk, wv, wo = args
    heads = a["heads"]
    sq = b.shape_of(q_in)
    if len(sq) < 2:
        raise shape_error(op, "query must be (..., Lq, E)", 0, "rank >= 2", sq)
    e = sq[-1]
    for i in (3, 4, 5, 6):
        if b.shape_of(args[i]) != (e, e):
            raise shape_error(
                op, "projection weights must be (E, E)", i, (e, e), b.shape_of(args[i])
            )
    for i in (1, 2):
        s = b.shape_of(args[i])
        if len(s) < 2 or s[-1] != e:
            raise shape_error(op, "key and value must be (..., Lk, E)", i, f"(..., Lk, {e})", s)
    if heads < 1 or e % heads:
        raise op_error(
            GraphError, op, "heads must divide E", expected=f"a divisor of {e}", got=heads
        )

    def proj(x: int, w: int) -> int:
        return _split_heads(b, b.node("matmul", x, b.node("transpose", w)), heads)

    att = b.node(
        "scaled_dot_product_attention",
        proj(q_in, wq),
        proj(k_in, wk),
        proj(v_in, wv),
        mask=a.get("mask"),
        causal=a.get("causal"),
    )
    r = len(b.shape_of(att))
    o = b.node("swap_adjacent", att, axis=r - 3)
    o = b.node("reshape", o, shape=(*b.shape_of(o)[:-2], e))
    return b.node("matmul", o, b.node("transpose", wo))


composite(
    name="multi_head_attention",
    family=FAMILY,
    arity=7,
    body=_mha_body,
    attrs=(AttrSpec("heads", "nat"), *_ATTN_MASK_ATTRS),
    doc="multi_head_attention(query, key, value, wq, wk, wv, wo): inputs (..., L, E), "
    "weights (E, E) used as x @ wᵀ (no biases). Body: Q = matmul(query, transpose(wq)) "
    "etc., heads split on the last axis (reshape to (..., L, H, E/H), swap_adjacent to "
    "(..., H, L, E/H)), scaled_dot_product_attention per head (default scale, mask and "
    "causal passed on), heads merged back (swap_adjacent, reshape) and matmul with "
    "transpose(wo)",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
    samples=(
        sample(
            arg((2, 2), 1, -2, Fraction(1, 2), 1),
            arg((2, 2), 1, 0, -1, 2),
            arg((2, 2), Fraction(1, 4), -3, 2, 1),
            arg((2, 2), 1, Fraction(1, 2), 0, 1),
            arg((2, 2), Fraction(1, 2), 1, -1, 0),
            arg((2, 2), 1, -1, Fraction(1, 2), 2),
            arg((2, 2), Fraction(3, 4), 0, 1, -1),
            attrs={"heads": 2},
            note="generic point",
        ),
        second_point(
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            arg((2, 2), Fraction(1, 2), -1, 2, 0),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            arg((2, 2), 1, 2, Fraction(1, 2), -1),
            attrs={"heads": 2},
        ),
    ),
)
