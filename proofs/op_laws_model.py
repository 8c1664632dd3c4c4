"""Per-op laws of the model-scale ops (spec/ops_model.py), added to `proofs.op_laws.LAWS`.

Invariants (those of `proofs.op_laws`):
- Each op gets representative cases on small shapes and an independent definition written
  here with NumPy object arrays and sympy (explicit loops over windows, heads and rows; no
  spec code), or a characterisation where the value is −∞.
- Linear ops (gather, conv2d, conv_transpose2d, avg_pool2d, embedding, one_hot) and the
  norms use free symbols: the derivative is checked by differentiating the spec forward.
  Ops with comparisons (reduce_max, max_pool2d) use regions that fix the order (smooth)
  plus tie cases (convention: the first maximal element gets the whole tangent).
  Attention fixes the inputs that feed the softmax comparisons at rational points and
  compares the JVP with the derivative of the independent (unshifted) definition in every
  direction, softmax being smooth.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import sympy

from spec.shape import Shape
from spec.tensor import Tensor

from .decide import lt, symbols
from .op_laws import _arr, _Case, _free, _law, _pat, _Point, _rat, _rows, _vmax

__all__: list[str] = []

Arr = np.ndarray
_ALL = frozenset({"adjoint", "derivative", "forward"})


def _fixed(values: Mapping[int, Sequence[Any]]) -> Any:
    """Arguments named in `values` at those exact rational points, the others free."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        vals = [
            Tensor(s, tuple(_rat(v) for v in values[i])) if i in values else coords[i]
            for i, s in enumerate(shapes)
        ]
        return _Point(vals, coords, None)

    make.__doc__ = "args " + ",".join(str(i) for i in sorted(values)) + " at rational points"
    return make


def _chain(*ranks: int) -> Any:
    """Argument 0's element k is the ranks[k]-th smallest of a strict chain: value
    c + p_1 + ... + p_r for rank r (p > 0), so every pair is ordered; other args free."""

    def make(shapes: tuple[Shape, ...]) -> _Point:
        coords = [symbols(f"x{i}", s) for i, s in enumerate(shapes)]
        X = coords[0]
        n = len(X.data)
        assert sorted(ranks[:n]) == list(range(n)), "ranks must be a permutation"
        c = sympy.Symbol("c", real=True)
        ps = [sympy.Symbol(f"p0_{r}", positive=True) for r in range(n)]
        by_rank = {r: k for k, r in enumerate(ranks[:n])}
        data = tuple(c + sympy.Add(*ps[1 : ranks[k] + 1]) for k in range(n))
        psi: dict[Any, Any] = {c: X.data[by_rank[0]]}
        psi.update({ps[r]: X.data[by_rank[r]] - X.data[by_rank[r - 1]] for r in range(1, n)})
        return _Point([Tensor(X.shape, data), *coords[1:]], coords, psi)

    make.__doc__ = "x0 element ranks " + ",".join(str(r) for r in ranks)
    return make


def _zeros(shape: Shape) -> Arr:
    return _arr(np.full(shape, sympy.Integer(0), dtype=object))


def _pair(a: Mapping[str, Any], key: str, default: tuple[int, int]) -> tuple[int, int]:
    v = a.get(key)
    return default if v is None else (int(v[0]), int(v[1]))


# --------------------------------------------------------------------------- gather


def _gather_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = v[0]
    padded = np.concatenate([x, _zeros((*x.shape[:-1], 1))], axis=-1)
    idx = list(a["indices"])
    out = padded[..., idx] if idx else _zeros((*x.shape[:-1], 0))
    return _arr(out.reshape((*x.shape[:-1], *a["shape"])))


_law(
    "gather",
    [
        _Case(((3,),), _free(), {"indices": (2, 0, 3, 2), "shape": (2, 2)}),
        _Case(((2, 3),), _free(), {"indices": (1, 1, 0), "shape": (1, 3)}),
        _Case(((2, 2),), _free(), {"indices": (), "shape": (0,)}),
    ],
    "x padded with one zero column, then NumPy x[..., indices] reshaped to shape",
    "jvp = gather(dx) (linear); the VJP scatter-adds (its adjoint)",
    definition=_gather_def,
)


# --------------------------------------------------------------------------- reduce_max


def _first_max(lane: Sequence[Any]) -> int:
    best = 0
    for k in range(1, len(lane)):
        if lt(lane[best], lane[k]):
            best = k
    return best


def _rmax_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x = np.moveaxis(v[0], a["axis"], -1)
    out = np.empty(x.shape[:-1], dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        m = x[idx][0]
        for w in x[idx][1:]:
            m = _vmax(m, w)[()]
        out[idx] = m
    return _arr(out)


def _rmax_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, dx = np.moveaxis(v[0], a["axis"], -1), np.moveaxis(d[0], a["axis"], -1)
    out = np.empty(x.shape[:-1], dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx] = dx[idx][_first_max(list(x[idx]))]
    return _arr(out)


def _rmax_conv_vjp(v: list[Arr], g: Arr, a: Mapping[str, Any], e: Any) -> list[Arr]:
    x = np.moveaxis(v[0], a["axis"], -1)
    out = np.full(x.shape, sympy.Integer(0), dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        out[idx][_first_max(list(x[idx]))] = g[idx]
    return [_arr(np.moveaxis(out, -1, a["axis"]))]


_law(
    "reduce_max",
    [
        _Case(((3,),), _rows("inc"), {"axis": 0}),
        _Case(((3,),), _rows("mid"), {"axis": 0}),
        _Case(((3,),), _rows("tie"), {"axis": 0}),
        _Case(((2, 3),), _rows("dec", "tie"), {"axis": 1}),
        _Case(((2, 2),), _chain(1, 2, 3, 0), {"axis": 0}),
    ],
    "the maximum along the axis, max written as (a + b + |a - b|)/2",
    "jvp = dx at the arg-max (smooth where the maximum is strict); at ties the whole "
    "tangent (and cotangent) goes to the first maximal element",
    definition=_rmax_def,
    conv_jvp=_rmax_conv,
    conv_vjp=_rmax_conv_vjp,
)


# --------------------------------------------------------------------------- mask_neg_inf


def _mask_char(v: list[Tensor], c: list[Tensor], out: Tensor, a: Mapping[str, Any]) -> list[Any]:
    keep = np.broadcast_to(np.asarray(a["mask"]).reshape(a["mask_shape"]), v[0].shape)
    res: list[Any] = []
    for k, (x, y) in enumerate(zip(v[0].data, out.data, strict=True)):
        if keep.reshape(-1)[k]:
            res.append(sympy.sympify(y) - x)
        else:
            res.append(bool(y == -sympy.oo))
    return res


_law(
    "mask_neg_inf",
    [
        _Case(((3,),), _free(), {"mask": (1, 0, 1), "mask_shape": (3,)}),
        _Case(((2, 2),), _free(), {"mask": (0, 1), "mask_shape": (2,)}),
        _Case(((2,),), _free(), {"mask": (1, 1), "mask_shape": (2,)}),
    ],
    "x where the (broadcast) mask is 1, -oo where it is 0",
    "jvp = dx where mask = 1, 0 where mask = 0 (the masked value is the constant -oo)",
    characterize=_mask_char,
)


# --------------------------------------------------------------------------- convolution


def _batched(v: Arr) -> tuple[Arr, bool]:
    return (v[None], True) if v.ndim == 3 else (v, False)


def _conv_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, single = _batched(v[0])
    w = v[1]
    sh, sw = _pair(a, "stride", (1, 1))
    ph, pw = _pair(a, "padding", (0, 0))
    dh, dw = _pair(a, "dilation", (1, 1))
    groups = a.get("groups") or 1
    n, _, h, wd = x.shape
    cout, cg, kh, kw = w.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    y = np.full((n, cout, oh, ow), sympy.Integer(0), dtype=object)
    for b, o, r, q in np.ndindex(n, cout, oh, ow):
        g = o // (cout // groups)
        acc = sympy.Integer(0)
        for c, i, j in np.ndindex(cg, kh, kw):
            ih, iw = r * sh - ph + i * dh, q * sw - pw + j * dw
            if 0 <= ih < h and 0 <= iw < wd:
                acc += w[o, c, i, j] * x[b, g * cg + c, ih, iw]
        y[b, o, r, q] = acc + (v[2][o] if len(v) == 3 else 0)
    return _arr(y[0] if single else y)


_law(
    "conv2d",
    [
        _Case(((1, 3, 3), (1, 1, 2, 2), (1,)), _free()),
        _Case(((2, 2, 3), (2, 1, 2, 2)), _free(), {"padding": (1, 0), "groups": 2}),
        _Case(((1, 1, 3, 3), (1, 1, 2, 2)), _free(), {"stride": (2, 1), "padding": (1, 1)}),
        _Case(((1, 3, 3), (1, 1, 2, 2)), _free(), {"dilation": (2, 1)}),
    ],
    "y[n,o,r,q] = Σ_{c,i,j} w[o,c,i,j]·x[n, g·C_in/G + c, r·s - p + i·d, q·s - p + j·d] + b[o] "
    "over in-bounds taps (zero padding), g the group of o",
    "jvp = conv2d(dx, w) + conv2d(x, dw) + db (bilinear)",
    definition=_conv_def,
)


def _conv_t_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, single = _batched(v[0])
    w = v[1]
    sh, sw = _pair(a, "stride", (1, 1))
    ph, pw = _pair(a, "padding", (0, 0))
    dh, dw = _pair(a, "dilation", (1, 1))
    oph, opw = _pair(a, "output_padding", (0, 0))
    groups = a.get("groups") or 1
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    cig = cin // groups
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (wd - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    y = np.full((n, cog * groups, oh, ow), sympy.Integer(0), dtype=object)
    for b, c, ih, iw in np.ndindex(n, cin, h, wd):  # scatter form: each input feeds taps
        g = c // cig
        for o, i, j in np.ndindex(cog, kh, kw):
            r, q = ih * sh - ph + i * dh, iw * sw - pw + j * dw
            if 0 <= r < oh and 0 <= q < ow:
                y[b, g * cog + o, r, q] += x[b, c, ih, iw] * w[c, o, i, j]
    if len(v) == 3:
        y = y + v[2].reshape(-1, 1, 1)
    return _arr(y[0] if single else y)


_law(
    "conv_transpose2d",
    [
        _Case(((1, 2, 2), (1, 1, 2, 2), (1,)), _free()),
        _Case(((2, 1, 2), (2, 1, 1, 2)), _free(), {"groups": 2, "stride": (2, 1)}),
        _Case(
            ((1, 1, 2, 1), (1, 1, 2, 1)),
            _free(),
            {"stride": (2, 2), "padding": (1, 0), "output_padding": (1, 1)},
        ),
    ],
    "scatter form: y[n, g·C_out/G + o, ih·s - p + i·d, iw·s - p + j·d] += x[n,c,ih,iw]·w[c,o,i,j] "
    "over in-range outputs, then + b",
    "jvp = conv_transpose2d(dx, w) + conv_transpose2d(x, dw) + db (bilinear)",
    definition=_conv_t_def,
)


# --------------------------------------------------------------------------- pooling


def _windows(x: Arr, a: Mapping[str, Any]) -> tuple[Arr, list[list[list[tuple[Any, ...]]]]]:
    """(x as (B, H, W), per output (r, q) the in-bounds (b-free) positions (ih, iw))."""
    kh, kw = _pair(a, "kernel_size", (1, 1))
    sh, sw = _pair(a, "stride", (kh, kw))
    ph, pw = _pair(a, "padding", (0, 0))
    dh, dw = _pair(a, "dilation", (1, 1))
    h, w = x.shape[-2:]
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    wins = [
        [
            [
                (r * sh - ph + i * dh, q * sw - pw + j * dw)
                for i in range(kh)
                for j in range(kw)
                if 0 <= r * sh - ph + i * dh < h and 0 <= q * sw - pw + j * dw < w
            ]
            for q in range(ow)
        ]
        for r in range(oh)
    ]
    return x.reshape(-1, h, w), wins


def _avg_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    kh, kw = _pair(a, "kernel_size", (1, 1))
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        out[b, r, q] = sympy.Add(*[x[b, i, j] for i, j in wins[r][q]]) / (kh * kw)
    return _arr(out.reshape((*v[0].shape[:-2], oh, ow)))


_law(
    "avg_pool2d",
    [
        _Case(((1, 2, 2),), _free(), {"kernel_size": (2, 2)}),
        _Case(((1, 3, 3),), _free(), {"kernel_size": (2, 2), "stride": (1, 1), "padding": (1, 1)}),
        _Case(((2, 1, 2, 3),), _free(), {"kernel_size": (1, 2)}),
    ],
    "Σ of the in-bounds window elements / (kh·kw) (zero padding counted)",
    "jvp = avg_pool2d(dx) (linear)",
    definition=_avg_def,
)


def _max_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        vals = [x[b, i, j] for i, j in wins[r][q]]
        m = vals[0]
        for w in vals[1:]:
            m = _vmax(m, w)[()]
        out[b, r, q] = m
    return _arr(out.reshape((*v[0].shape[:-2], oh, ow)))


def _max_conv(v: list[Arr], d: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, wins = _windows(v[0], a)
    dx = d[0].reshape(x.shape)
    oh, ow = len(wins), len(wins[0])
    out = np.empty((x.shape[0], oh, ow), dtype=object)
    for b, r, q in np.ndindex(x.shape[0], oh, ow):
        taps = wins[r][q]
        i, j = taps[_first_max([x[b, i, j] for i, j in taps])]
        out[b, r, q] = dx[b, i, j]
    return _arr(out.reshape((*v[0].shape[:-2], oh, ow)))


_ORDER9 = (4, 1, 7, 2, 6, 3, 0, 8, 5)
_law(
    "max_pool2d",
    [
        _Case(((1, 3, 3),), _chain(*_ORDER9), {"kernel_size": (2, 2), "stride": (1, 1)}),
        _Case(((1, 3, 3),), _chain(*_ORDER9), {"kernel_size": (2, 2), "padding": (1, 1)}),
        _Case(((1, 2, 2),), _pat(("at", 1)), {"kernel_size": (2, 2)}),
        _Case(
            ((1, 2, 3),),
            _pat(("at", 0), ("at", 2), ("at", 2)),
            {"kernel_size": (1, 3), "padding": (0, 1), "stride": (1, 1)},
        ),
    ],
    "the maximum of the in-bounds window elements (-oo padding), max as (a + b + |a - b|)/2",
    "jvp = dx at the window's arg-max (strict maxima); at ties the first maximal in-bounds "
    "element in row-major window order gets the whole tangent",
    definition=_max_def,
    conv_jvp=_max_conv,
)


# --------------------------------------------------------------------------- normalisation

_EPS = sympy.Rational(1, 100000)


def _ln_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, gamma, beta = v
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        mu = sympy.Add(*row) / len(row)
        var = sympy.Add(*[(r - mu) ** 2 for r in row]) / len(row)
        out[idx] = [
            (r - mu) / sympy.sqrt(var + _EPS) * g + bb
            for r, g, bb in zip(row, gamma, beta, strict=True)
        ]
    return _arr(out)


_law(
    "layer_norm",
    [
        _Case(((2,), (2,), (2,)), _free()),
        _Case(((2, 2), (2,), (2,)), _fixed({0: (1, -2, Fraction(1, 2), 3)})),
    ],
    "(x - mean)/sqrt(var + 1/100000)·γ + β over the last axis (biased variance)",
    "jvp = the derivative of that expression (smooth: var + ε > 0)",
    definition=_ln_def,
    conv_jvp="definition",
    numeric=_ALL,
)


def _bn_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    x, gamma, beta = v
    out = np.empty(x.shape, dtype=object)
    for c in range(x.shape[1]):
        vals = list(x[:, c].reshape(-1))
        mu = sympy.Add(*vals) / len(vals)
        var = sympy.Add(*[(t - mu) ** 2 for t in vals]) / len(vals)
        out[:, c] = (x[:, c] - mu) * (1 / sympy.sqrt(var + _EPS)) * gamma[c] + beta[c]
    return _arr(out)


_law(
    "batch_norm",
    [
        _Case(((2, 1), (1,), (1,)), _free()),
        _Case(((2, 2, 1), (2,), (2,)), _fixed({0: (1, -2, Fraction(1, 2), 3)})),
    ],
    "per channel c: (x - mean_c)/sqrt(var_c + 1/100000)·γ_c + β_c, statistics over the batch "
    "and spatial axes (biased variance)",
    "jvp = the derivative of that expression (smooth: var + ε > 0)",
    definition=_bn_def,
    conv_jvp="definition",
    numeric=_ALL,
)


# --------------------------------------------------------------------------- attention


def _scale_for(d: int, a: Mapping[str, Any]) -> Any:
    if a.get("scale") is not None:
        return _rat(a["scale"])
    with mpmath.workdps(60):
        return _rat(Fraction(float(1 / mpmath.sqrt(d))))  # binary64 nearest 1/sqrt(d)


def _attend(q: Arr, k: Arr, v: Arr, a: Mapping[str, Any]) -> Arr:
    lq, lk = q.shape[-2], k.shape[-2]
    keep = np.ones((lq, lk), dtype=bool)
    if a.get("mask") is not None:
        keep &= np.asarray(a["mask"], dtype=bool).reshape(lq, lk)
    if a.get("causal"):
        keep &= np.tril(np.ones((lq, lk), dtype=bool))
    c = _scale_for(q.shape[-1], a)
    out = np.empty(
        (*np.broadcast_shapes(q.shape[:-2], k.shape[:-2]), lq, v.shape[-1]), dtype=object
    )
    qb = np.broadcast_to(q, (*out.shape[:-2], *q.shape[-2:]))
    kb = np.broadcast_to(k, (*out.shape[:-2], *k.shape[-2:]))
    vb = np.broadcast_to(v, (*out.shape[:-2], *v.shape[-2:]))
    for idx in np.ndindex(*out.shape[:-2]):
        for i in range(lq):
            ws = [
                sympy.exp(c * sympy.Add(*(qb[idx][i] * kb[idx][j]))) if keep[i, j] else 0
                for j in range(lk)
            ]
            s = sympy.Add(*ws)
            for t in range(v.shape[-1]):
                out[idx][i, t] = sympy.Add(*[ws[j] * vb[idx][j, t] for j in range(lk)]) / s
    return _arr(out)


_law(
    "scaled_dot_product_attention",
    [
        _Case(((1, 1), (2, 1), (2, 1)), _fixed({0: (1,), 1: (2, -1)})),
        _Case(
            ((2, 1), (2, 1), (2, 1)), _fixed({0: (1, Fraction(1, 2)), 1: (-1, 2)}), {"causal": 1}
        ),
        _Case(
            ((1, 2), (2, 2), (2, 1)),
            _fixed({0: (1, 2), 1: (0, 1, 1, -1)}),
            {"mask": (0, 1), "scale": Fraction(1, 2)},
        ),
    ],
    "Σ_j w_j·v_j / Σ_j w_j with w_j = exp(c·⟨q_i, k_j⟩) over kept keys (mask, causal j <= i), "
    "c = scale or the binary64 nearest 1/sqrt(d) (no max-shift)",
    "jvp = the derivative of that expression in q, k and v (softmax is smooth; masked keys "
    "contribute nothing)",
    definition=lambda v, a, e: _attend(v[0], v[1], v[2], a),
    conv_jvp="definition",
    numeric=_ALL,
)


def _mha_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    q_in, k_in, v_in, wq, wk, wv, wo = v
    heads, emb = a["heads"], q_in.shape[-1]
    dh = emb // heads

    def split(t: Arr) -> Arr:
        return np.swapaxes(t.reshape((*t.shape[:-1], heads, dh)), -2, -3)

    q, k, vv = split(q_in @ wq.T), split(k_in @ wk.T), split(v_in @ wv.T)
    o = _attend(q, k, vv, {"mask": a.get("mask"), "causal": a.get("causal")})
    o = np.swapaxes(o, -2, -3).reshape(q_in.shape)
    return _arr(o @ wo.T)


_law(
    "multi_head_attention",
    [
        _Case(
            ((1, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2), (2, 2)),
            _fixed({0: (1, -1), 1: (1, 0, 0, 2), 3: (1, 0, 0, 1), 4: (1, 1, 0, 1)}),
            {"heads": 2},
        ),
    ],
    "heads split on the last axis of x·wqᵀ, x·wkᵀ, x·wvᵀ; per head the attention above; "
    "heads merged and multiplied by woᵀ",
    "jvp = the derivative of that expression in every input (smooth)",
    definition=_mha_def,
    conv_jvp="definition",
    numeric=_ALL,
)


# --------------------------------------------------------------------------- embeddings


def _emb_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    t, idx = v[0], list(a["indices"])
    shape = a.get("shape") or (len(idx),)
    return _arr(t[idx].reshape((*shape, t.shape[1])))


_law(
    "embedding",
    [
        _Case(((3, 2),), _free(), {"indices": (2, 0, 2)}),
        _Case(((2, 1),), _free(), {"indices": (1, 1, 0, 1), "shape": (2, 2)}),
    ],
    "table[indices] (NumPy rows) reshaped to shape + (D,)",
    "jvp = embedding(dtable) (linear); the VJP scatter-adds rows",
    definition=_emb_def,
)


def _one_hot_def(v: list[Arr], a: Mapping[str, Any], e: Any) -> Arr:
    out = _zeros((len(a["indices"]), a["num_classes"]))
    for k, i in enumerate(a["indices"]):
        out[k, i] = sympy.Integer(1)
    return out


_law(
    "one_hot",
    [
        _Case((), _free(), {"indices": (2, 0, 1), "num_classes": 3}),
        _Case((), _free(), {"indices": (), "num_classes": 2}),
    ],
    "the identity rows eye(num_classes)[indices]",
    "no arguments: jvp = 0 and the VJP is the empty list",
    definition=_one_hot_def,
)
