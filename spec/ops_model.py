"""Model-scale ops: convolution, pooling, normalisation, attention, embeddings.

Registered into `spec.ops.OPS` when `spec.ops` is imported (it imports this module last).

Invariants:
- Three new primitives, each with spec forward, JVP and VJP:
  `gather` (last-axis gather with a zero-padding index; VJP scatter-adds, a left fold in
  increasing output position per target), `reduce_max` (fold of maximum along an axis;
  the whole cotangent goes to the *first* maximal element, or the first NaN) and
  `mask_neg_inf` (−∞ where a constant mask is 0; cotangent 0 there).
- Every other op here is a composite whose body graph is normative (its operation
  sequence is the evaluation order the `ordered` kernels follow bit for bit):
  conv2d / conv_transpose2d = gather (im2col) + matmul, so each output is the matmul
  k-loop fold over (c_in, kh, kw) in row-major order, then + bias; pools = window gather +
  reduce_sum / div (avg) or reduce_max (max); norms = reduce_mean / sub / mul / sqrt / div
  with ε = 1/100000 as an exact `const`; attention = matmul, scale, mask, softmax, matmul.
- Non-differentiable data (window indices, masks, token ids, class ids) are attributes,
  never tensor arguments. Errors name the op, the input index and expected vs got.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from .domains import Domain
from .errors import DomainError, GraphError, ShapeError, op_error
from .ops import OPS, AttrSpec, OpDef, _c, _composite, _register
from .shape import Shape, broadcasts_to, ravel_index, size, sliding_window_out_dim, unravel_index
from .tensor import Tensor, fold_add

__all__ = ["LN_EPS", "conv_out_dim", "default_attention_scale", "neg_inf"]

Attrs = dict[str, Any]
Env = Sequence[int]

LN_EPS = Fraction(1, 100000)
"""ε of layer_norm and batch_norm: 1e-5 as an exact rational, cast once into the domain."""


def _err(op: str, check: str, index: int | None = None, expected: Any = None, got: Any = None):
    return op_error(ShapeError, op, check, index=index, expected=expected, got=got)


def neg_inf(D: Domain) -> Any:
    """−∞ of the domain (IEEE formats; `-oo` symbolically); rationals have none."""
    if D.name == "symbolic":
        import sympy

        return -sympy.oo
    try:
        return D.from_float(float("-inf"))
    except (ValueError, OverflowError, DomainError):
        raise DomainError(f"{D.name}: no -inf in this domain (mask_neg_inf)") from None


# --------------------------------------------------------------------------- gather


def _gather_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise _err("gather", "input must have rank >= 1", 0, "rank >= 1", s)
    if len(a["indices"]) != size(a["shape"]):
        raise _err(
            "gather", "index count does not fill `shape`", None, size(a["shape"]), len(a["indices"])
        )
    m = s[-1]
    for i in a["indices"]:
        if not 0 <= i <= m:
            raise _err("gather", "index out of range", 0, f"0 <= index <= {m} ({m} = pad)", i)
    return (*s[:-1], *a["shape"])


def _gather_fwd(D: Domain, x: Tensor, a: Attrs) -> Tensor:
    m = x.shape[-1]
    z = D.zero()
    data: list[Any] = []
    for b in range(size(x.shape[:-1])):
        row = x.data[b * m : (b + 1) * m]
        data.extend(row[i] if i < m else z for i in a["indices"])
    return Tensor((*x.shape[:-1], *a["shape"]), tuple(data))


def _gather_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    m, idx = x.shape[-1], a["indices"]
    p = len(idx)
    buckets: list[list[int]] = [[] for _ in range(m)]
    for k, i in enumerate(idx):
        if i < m:
            buckets[i].append(k)
    data: list[Any] = []
    for b in range(size(x.shape[:-1])):
        row = g.data[b * p : (b + 1) * p]
        data.extend(fold_add(D, (row[k] for k in bucket)) for bucket in buckets)
    return [Tensor(x.shape, tuple(data))]


_register(
    OpDef(
        "gather",
        1,
        (AttrSpec("indices", "ints"), AttrSpec("shape", "shape")),
        _gather_shape,
        lambda D, xs, a, env: _gather_fwd(D, xs[0], a),
        lambda D, xs, dxs, a, env: _gather_fwd(D, dxs[0], a),
        _gather_vjp,
        saves="input shape",
        doc="last-axis gather: out[..., p] = x[..., indices[p]] with output shape "
        "x.shape[:-1] + shape; index M = x.shape[-1] is the zero padding (reads +0, gets no "
        "cotangent); VJP scatter-adds: gx[..., m] = left fold over p ascending with "
        "indices[p] == m of g[..., p] (0 if none)",
        tags=frozenset({"structural", "index"}),
    )
)


# --------------------------------------------------------------------------- reduce_max


def _reduce_max_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, axis = shapes[0], a["axis"]
    if not 0 <= axis < len(s):
        raise _err("reduce_max", "axis out of range", 0, f"0 <= axis < {len(s)}", axis)
    if s[axis] < 1:
        raise _err("reduce_max", "max over an empty axis is undefined", 0, "dim >= 1", s[axis])
    return s[:axis] + s[axis + 1 :]


def _argmax_lanes(D: Domain, x: Tensor, axis: int) -> tuple[Shape, list[list[int]], list[int]]:
    """Per output position: the flat input positions along the axis, and the chosen one:
    the first NaN if any, else the first element attaining the maximum (the fold
    m = maximum(m, v) keeps m on ties, and a NaN once reached)."""
    out_shape = x.shape[:axis] + x.shape[axis + 1 :]
    lanes, pick = [], []
    for flat in range(size(out_shape)):
        o = unravel_index(flat, out_shape)
        lane = [ravel_index((*o[:axis], k, *o[axis:]), x.shape) for k in range(x.shape[axis])]
        j, m = 0, x.data[lane[0]]
        for k in range(1, len(lane)):
            v = x.data[lane[k]]
            if not D.is_nan(m) and (D.is_nan(v) or D.lt(m, v)):
                j, m = k, v
        lanes.append(lane)
        pick.append(j)
    return out_shape, lanes, pick


def _reduce_max_fwd(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x = xs[0]
    out, lanes, pick = _argmax_lanes(D, x, a["axis"])
    return Tensor(out, tuple(x.data[lane[j]] for lane, j in zip(lanes, pick, strict=True)))


def _reduce_max_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    out, lanes, pick = _argmax_lanes(D, xs[0], a["axis"])
    return Tensor(out, tuple(dxs[0].data[lane[j]] for lane, j in zip(lanes, pick, strict=True)))


def _reduce_max_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    _, lanes, pick = _argmax_lanes(D, x, a["axis"])
    data = [D.zero()] * size(x.shape)
    for o, (lane, j) in enumerate(zip(lanes, pick, strict=True)):
        data[lane[j]] = g.data[o]
    return [Tensor(x.shape, tuple(data))]


_register(
    OpDef(
        "reduce_max",
        1,
        (AttrSpec("axis", "nat"),),
        _reduce_max_shape,
        _reduce_max_fwd,
        _reduce_max_jvp,
        _reduce_max_vjp,
        saves="x (the arg-max positions)",
        doc="max over one axis (removed), the fold m = maximum(m, v) in index order: NaN "
        "propagates (the first NaN wins), ties keep the earlier element; tie rule for the "
        "derivative: the whole cotangent (and the tangent) goes to that one element "
        "(the first maximal one), the others get 0",
        tags=frozenset({"reduction"}),
    )
)


# --------------------------------------------------------------------------- mask_neg_inf


def _mask_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s, ms = shapes[0], a["mask_shape"]
    if len(a["mask"]) != size(ms):
        raise _err("mask_neg_inf", "mask does not fill mask_shape", None, size(ms), len(a["mask"]))
    if any(v not in (0, 1) for v in a["mask"]):
        raise op_error(
            GraphError,
            "mask_neg_inf",
            "mask entries must be 0 or 1",
            expected="0 or 1",
            got=sorted(set(a["mask"])),
        )
    if not broadcasts_to(ms, s):
        raise _err(
            "mask_neg_inf",
            "mask_shape does not broadcast to the input",
            0,
            f"a shape broadcasting to {s}",
            ms,
        )
    return s


def _mask_full(a: Attrs, shape: Shape) -> Tensor:
    from .ops import expand

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


_register(
    OpDef(
        "mask_neg_inf",
        1,
        (AttrSpec("mask", "ints"), AttrSpec("mask_shape", "shape")),
        _mask_shape,
        _mask_fwd,
        lambda D, xs, dxs, a, env: _mask_lin(D, dxs[0], a),
        lambda D, xs, g, a, env: [_mask_lin(D, g, a)],
        saves="nothing",
        doc="x where mask = 1, −∞ where mask = 0 (mask: 0/1 constants of mask_shape, which "
        "broadcasts to x); JVP and VJP pass the tangent/cotangent where mask = 1, else 0 "
        "(PyTorch's masked_fill(~mask, -inf))",
        algebraic=False,
        tags=frozenset({"elementwise", "index"}),
    )
)


# --------------------------------------------------------------------------- helpers


def conv_out_dim(op: str, n: int, k: int, stride: int, pad: int, dil: int) -> int:
    """The sliding-window rule with an effective kernel dil*(k-1)+1; >= 1 required."""
    eff = dil * (k - 1) + 1 if k else 0
    out = sliding_window_out_dim(n, eff, stride, pad)
    if out < 1:
        raise _err(
            op,
            "output would be empty",
            0,
            f"input + 2*padding >= dilation*(kernel-1)+1 = {eff}",
            n + 2 * pad,
        )
    return out


def _pair(op: str, a: Attrs, key: str, default: tuple[int, int], minimum: int) -> tuple[int, int]:
    v = a.get(key)
    if v is None:
        return default
    if len(v) != 2 or min(v) < minimum:
        raise op_error(
            GraphError,
            op,
            f"attribute {key!r} must be two ints >= {minimum}",
            expected=f"(h, w) >= {minimum}",
            got=v,
        )
    return int(v[0]), int(v[1])


def _image(op: str, b: Any, x: int, index: int = 0) -> tuple[Shape, Shape]:
    """(batch prefix, (C, H, W)) of an input (C, H, W) or (N, C, H, W)."""
    s = b.shape_of(x)
    if len(s) not in (3, 4):
        raise _err(op, "input must be (C, H, W) or (N, C, H, W)", index, "rank 3 or 4", s)
    return s[:-3], s[-3:]


_CONV_ATTRS = (
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
    AttrSpec("dilation", "ints", False),
    AttrSpec("groups", "nat", False),
)


def _im2col(b: Any, x: int, batch: Shape, chw: Shape, idx: list[int], shape: Shape) -> int:
    """gather(reshape(x, batch + (C*H*W,)), idx) with index C*H*W as the zero padding."""
    flat = b.node("reshape", x, shape=(*batch, size(chw)))
    return b.node("gather", flat, indices=idx, shape=shape)


def _bias(op: str, b: Any, y: int, args: list[int], cout: int) -> int:
    if len(args) == 2:
        return y
    if b.shape_of(args[2]) != (cout,):
        raise _err(op, "bias must be (C_out,)", 2, (cout,), b.shape_of(args[2]))
    return b.node("add", y, b.node("reshape", args[2], shape=(cout, 1, 1)))


def _arity23(op: str, args: list[int]) -> None:
    if len(args) not in (2, 3):
        raise op_error(
            GraphError, op, "takes (x, w) or (x, w, b)", expected="2 or 3 arguments", got=len(args)
        )


# --------------------------------------------------------------------------- conv2d


def _conv2d_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "conv2d"
    _arity23(op, args)
    batch, (cin, h, w) = _image(op, b, args[0])
    ws = b.shape_of(args[1])
    if len(ws) != 4:
        raise _err(op, "weight must be (C_out, C_in/groups, kh, kw)", 1, "rank 4", ws)
    groups = a.get("groups") or 1
    cout, cg, kh, kw = ws
    if cin % groups or cout % groups:
        raise _err(
            op, "groups must divide C_in and C_out", 1, f"divisible by {groups}", (cin, cout)
        )
    if cg != cin // groups:
        raise _err(op, "weight's input channels differ from C_in/groups", 1, cin // groups, cg)
    if kh < 1 or kw < 1:
        raise _err(op, "kernel must be at least 1x1", 1, ">= (1, 1)", (kh, kw))
    sh, sw = _pair(op, a, "stride", (1, 1), 1)
    ph, pw = _pair(op, a, "padding", (0, 0), 0)
    dh, dw = _pair(op, a, "dilation", (1, 1), 1)
    oh = conv_out_dim(op, h, kh, sh, ph, dh)
    ow = conv_out_dim(op, w, kw, sw, pw, dw)
    pad = cin * h * w
    idx: list[int] = []
    for g in range(groups):
        for c in range(g * cg, (g + 1) * cg):
            for i in range(kh):
                for j in range(kw):
                    for r in range(oh):
                        ih = r * sh - ph + i * dh
                        row_ok = 0 <= ih < h
                        for q in range(ow):
                            iw = q * sw - pw + j * dw
                            idx.append(c * h * w + ih * w + iw if row_ok and 0 <= iw < w else pad)
    k = cg * kh * kw
    cols = _im2col(b, args[0], batch, (cin, h, w), idx, (groups, k, oh * ow))
    wm = b.node("reshape", args[1], shape=(groups, cout // groups, k))
    y = b.node("matmul", wm, cols)
    y = b.node("reshape", y, shape=(*batch, cout, oh, ow))
    return _bias(op, b, y, args, cout)


_composite(
    "conv2d",
    None,
    _conv2d_body,
    attrs=_CONV_ATTRS,
    doc="2-D cross-correlation, channel first: x (C_in, H, W) or (N, C_in, H, W), w (C_out, "
    "C_in/groups, kh, kw), optional b (C_out,); stride, padding, dilation (pairs, defaults "
    "1, 0, 1), groups (default 1); output dims by the sliding-window rule with kernel "
    "dilation*(k-1)+1. Body: gather (im2col, zero padding) to (G, C_in/G*kh*kw, OH*OW), "
    "matmul with w as (G, C_out/G, C_in/G*kh*kw), reshape, add b. Sum order per output: "
    "matmul's left fold over (c_in, kh, kw) in row-major order (padding taps included as "
    "w*0), then + b",
    tags=frozenset({"reduction", "model"}),
)


# --------------------------------------------------------------------------- conv_transpose2d


def _conv_t_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "conv_transpose2d"
    _arity23(op, args)
    batch, (cin, h, w) = _image(op, b, args[0])
    ws = b.shape_of(args[1])
    if len(ws) != 4:
        raise _err(op, "weight must be (C_in, C_out/groups, kh, kw)", 1, "rank 4", ws)
    groups = a.get("groups") or 1
    wcin, cog, kh, kw = ws
    if wcin != cin:
        raise _err(op, "weight's leading dim differs from C_in", 1, cin, wcin)
    if cin % groups:
        raise _err(op, "groups must divide C_in", 1, f"divisible by {groups}", cin)
    if kh < 1 or kw < 1:
        raise _err(op, "kernel must be at least 1x1", 1, ">= (1, 1)", (kh, kw))
    sh, sw = _pair(op, a, "stride", (1, 1), 1)
    ph, pw = _pair(op, a, "padding", (0, 0), 0)
    dh, dw = _pair(op, a, "dilation", (1, 1), 1)
    oph, opw = _pair(op, a, "output_padding", (0, 0), 0)
    if oph >= max(sh, dh) or opw >= max(sw, dw):
        raise op_error(
            GraphError,
            op,
            "output_padding must be < max(stride, dilation)",
            expected=f"< {(max(sh, dh), max(sw, dw))}",
            got=(oph, opw),
        )
    oh = (h - 1) * sh - 2 * ph + dh * (kh - 1) + oph + 1
    ow = (w - 1) * sw - 2 * pw + dw * (kw - 1) + opw + 1
    if oh < 1 or ow < 1:
        raise _err(op, "output would be empty", 0, "padding small enough", (oh, ow))
    cig, cout = cin // groups, cog * groups
    pad = cin * h * w

    def src(o: int, t: int, s: int, p: int, d: int, n: int) -> int | None:
        u = o + p - t * d
        if u % s or not 0 <= u // s < n:
            return None
        return u // s

    idx: list[int] = []
    for g in range(groups):
        for c in range(g * cig, (g + 1) * cig):
            for i in range(kh):
                for j in range(kw):
                    for r in range(oh):
                        ih = src(r, i, sh, ph, dh, h)
                        for q in range(ow):
                            iw = src(q, j, sw, pw, dw, w)
                            ok = ih is not None and iw is not None
                            idx.append(c * h * w + ih * w + iw if ok else pad)  # type: ignore[operator]
    k = cig * kh * kw
    cols = _im2col(b, args[0], batch, (cin, h, w), idx, (groups, k, oh * ow))
    w4 = b.node("reshape", args[1], shape=(groups, cig, cog, kh * kw))
    wm = b.node("reshape", b.node("swap_adjacent", w4, axis=1), shape=(groups, cog, k))
    y = b.node("matmul", wm, cols)
    y = b.node("reshape", y, shape=(*batch, cout, oh, ow))
    return _bias(op, b, y, args, cout)


_composite(
    "conv_transpose2d",
    None,
    _conv_t_body,
    attrs=(*_CONV_ATTRS, AttrSpec("output_padding", "ints", False)),
    doc="transposed 2-D convolution (the adjoint of conv2d in x): x (C_in, H, W) or (N, C_in, "
    "H, W), w (C_in, C_out/groups, kh, kw), optional b (C_out,); OH = (H-1)*stride - "
    "2*padding + dilation*(kh-1) + output_padding + 1. Body: gather of the input taps "
    "feeding each output (zero where none) to (G, C_in/G*kh*kw, OH*OW), matmul with w "
    "rearranged to (G, C_out/G, C_in/G*kh*kw), reshape, add b; sum order per output: left "
    "fold over (c_in, kh, kw) row-major (taps without an input contribute w*0), then + b",
    tags=frozenset({"reduction", "model"}),
)


# --------------------------------------------------------------------------- pooling


def _pool_geometry(op: str, b: Any, x: int, a: Attrs) -> tuple[Shape, Shape, list[Any]]:
    lead, (c, h, w) = _image(op, b, x)
    kh, kw = _pair(op, a, "kernel_size", (0, 0), 1)
    sh, sw = _pair(op, a, "stride", (kh, kw), 1)
    ph, pw = _pair(op, a, "padding", (0, 0), 0)
    dh, dw = _pair(op, a, "dilation", (1, 1), 1)
    if 2 * ph > kh or 2 * pw > kw:
        raise op_error(
            GraphError,
            op,
            "padding must be at most half the kernel",
            expected=f"<= {(kh // 2, kw // 2)}",
            got=(ph, pw),
        )
    oh = conv_out_dim(op, h, kh, sh, ph, dh)
    ow = conv_out_dim(op, w, kw, sw, pw, dw)
    wins: list[list[int | None]] = []
    for r in range(oh):
        for q in range(ow):
            win: list[int | None] = []
            for i in range(kh):
                ih = r * sh - ph + i * dh
                for j in range(kw):
                    iw = q * sw - pw + j * dw
                    win.append(ih * w + iw if 0 <= ih < h and 0 <= iw < w else None)
            wins.append(win)
    return (*lead, c), (h, w, oh, ow, kh * kw), wins


def _avg_pool_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "avg_pool2d"
    if a.get("dilation") not in (None, (1, 1)):
        raise op_error(
            GraphError, op, "dilation is not supported", expected=(1, 1), got=a.get("dilation")
        )
    lead, (h, w, oh, ow, k), wins = _pool_geometry(op, b, args[0], a)
    idx = [h * w if v is None else v for win in wins for v in win]
    flat = b.node("reshape", args[0], shape=(*lead, h * w))
    cols = b.node("gather", flat, indices=idx, shape=(oh * ow, k))
    s = b.node("reduce_sum", cols, axis=len(lead) + 1)
    y = b.node("div", s, _c(b, k))
    return b.node("reshape", y, shape=(*lead, oh, ow))


_POOL_ATTRS = (
    AttrSpec("kernel_size", "ints"),
    AttrSpec("stride", "ints", False),
    AttrSpec("padding", "ints", False),
)

_composite(
    "avg_pool2d",
    1,
    _avg_pool_body,
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False)),
    doc="average pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = "
    "kernel), padding <= kernel/2 (zero padding, counted: PyTorch's count_include_pad); "
    "dilation must be (1, 1). Body: gather windows to (..., OH*OW, kh*kw), reduce_sum over "
    "the window (left fold in row-major (kh, kw) order), div by const kh*kw, reshape",
    tags=frozenset({"reduction", "model"}),
)


def _max_pool_body(b: Any, args: list[int], a: Attrs) -> int:
    op = "max_pool2d"
    lead, (h, w, oh, ow, k), wins = _pool_geometry(op, b, args[0], a)
    idx: list[int] = []
    for n, win in enumerate(wins):
        inside = [v for v in win if v is not None]
        if not inside:
            raise _err(op, "a window lies entirely in the padding", 0, "an in-bounds tap", n)
        idx.extend(inside[0] if v is None else v for v in win)
    flat = b.node("reshape", args[0], shape=(*lead, h * w))
    cols = b.node("gather", flat, indices=idx, shape=(oh * ow, k))
    y = b.node("reduce_max", cols, axis=len(lead) + 1)
    return b.node("reshape", y, shape=(*lead, oh, ow))


_composite(
    "max_pool2d",
    1,
    _max_pool_body,
    attrs=(*_POOL_ATTRS, AttrSpec("dilation", "ints", False)),
    doc="max pooling of x (C, H, W) or (N, C, H, W): kernel_size, stride (default = kernel), "
    "padding <= kernel/2, dilation (default 1). Body: gather windows to (..., OH*OW, "
    "kh*kw), reduce_max over the window, reshape. A padded tap reads the window's first "
    "in-bounds element (the same max as -inf padding). Ties: the first maximal element "
    "in window row-major (kh, kw) order gets the whole cotangent (PyTorch's CPU rule); "
    "NaN propagates (the first NaN wins)",
    tags=frozenset({"reduction", "model"}),
)


# --------------------------------------------------------------------------- normalisation


def _affine_args(op: str, b: Any, args: list[int], want: Shape) -> None:
    for i in (1, 2):
        if b.shape_of(args[i]) != want:
            raise _err(
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
        raise _err(op, "input must have a non-empty last axis", 0, "(..., D >= 1)", s)
    _affine_args(op, b, args, (s[-1],))
    ax, keep = len(s) - 1, (*s[:-1], 1)
    x = args[0]
    mu = b.node("reshape", b.node("reduce_mean", x, axis=ax), shape=keep)
    xc = b.node("sub", x, mu)
    var = b.node("reshape", b.node("reduce_mean", b.node("mul", xc, xc), axis=ax), shape=keep)
    den = b.node("sqrt", b.node("add", var, _c(b, LN_EPS)))
    return b.node("add", b.node("mul", b.node("div", xc, den), args[1]), args[2])


_composite(
    "layer_norm",
    3,
    _layer_norm_body,
    doc="layer_norm(x, γ, β) over the last axis (D = x.shape[-1], γ and β (D,)): mu = "
    "reduce_mean(x), xc = sub(x, mu), var = reduce_mean(mul(xc, xc)) (biased), y = "
    "add(mul(div(xc, sqrt(add(var, ε))), γ), β) with ε = 1/100000 an exact const",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
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
        raise _err(
            op, "input must be (N, C, ...) with N, C and spatial dims >= 1", 0, "(N, C, ...)", s
        )
    _affine_args(op, b, args, (s[1],))
    bshape = (s[1], *([1] * (len(s) - 2)))
    x = args[0]
    xc = b.node("sub", x, _channel_mean(b, x, s, bshape))
    var = _channel_mean(b, b.node("mul", xc, xc), s, bshape)
    den = b.node("sqrt", b.node("add", var, _c(b, LN_EPS)))
    gamma = b.node("reshape", args[1], shape=bshape)
    beta = b.node("reshape", args[2], shape=bshape)
    return b.node("add", b.node("mul", b.node("div", xc, den), gamma), beta)


_composite(
    "batch_norm",
    3,
    _batch_norm_body,
    doc="batch_norm(x, γ, β), training statistics: x (N, C, ...), γ and β (C,); per channel "
    "mu and biased var are reduce_mean over (N, spatial...) in row-major order (after "
    "swap_adjacent(x, 0) and a reshape to (C, -1)), y = add(mul(div(sub(x, mu), "
    "sqrt(add(var, ε))), γ), β), ε = 1/100000 an exact const; no running statistics",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
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
            raise _err(op, "q, k, v must have rank >= 2", i, "(..., L, d)", s)
    if sq[-1] != sk[-1]:
        raise _err(op, "q and k feature dims differ", 1, sq[-1], sk[-1])
    if sk[-2] != sv[-2]:
        raise _err(op, "k and v sequence lengths differ", 2, sk[-2], sv[-2])
    if sk[-2] < 1:
        raise _err(op, "keys must not be empty", 1, "Lk >= 1", sk[-2])
    lq, lk, d = sq[-2], sk[-2], sq[-1]
    scale = a.get("scale")
    c = scale if scale is not None else default_attention_scale(max(d, 1))
    s = b.node("scale", b.node("matmul", q, b.node("transpose", k)), c=c)
    keep = _keep_mask(op, a, lq, lk)
    if keep is not None:
        s = b.node("mask_neg_inf", s, mask=keep, mask_shape=(lq, lk))
    return b.node("matmul", b.node("softmax", s), v)


_composite(
    "scaled_dot_product_attention",
    3,
    lambda b, x, a: _sdpa(b, x[0], x[1], x[2], a, "scaled_dot_product_attention"),
    attrs=(*_ATTN_MASK_ATTRS, AttrSpec("scale", "rational", False)),
    doc="softmax(scale·(q @ kᵀ) masked) @ v for q (..., Lq, d), k (..., Lk, d), v (..., Lk, "
    "dv), batch prefixes broadcast. Body: matmul(q, transpose(k)), scale by c (attribute "
    "`scale`, default the binary64 nearest 1/sqrt(d), an exact rational), mask_neg_inf with "
    "keep = mask (0/1, Lq*Lk, 1 = attend) and, with causal = 1, j <= i, then softmax "
    "(last axis, max-shifted) and matmul with v; all sums are left folds in index order. "
    "A fully masked row gives NaN (as PyTorch)",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
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
        raise _err(op, "query must be (..., Lq, E)", 0, "rank >= 2", sq)
    e = sq[-1]
    for i in (3, 4, 5, 6):
        if b.shape_of(args[i]) != (e, e):
            raise _err(op, "projection weights must be (E, E)", i, (e, e), b.shape_of(args[i]))
    for i in (1, 2):
        s = b.shape_of(args[i])
        if len(s) < 2 or s[-1] != e:
            raise _err(op, "key and value must be (..., Lk, E)", i, f"(..., Lk, {e})", s)
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


_composite(
    "multi_head_attention",
    7,
    _mha_body,
    attrs=(AttrSpec("heads", "nat"), *_ATTN_MASK_ATTRS),
    doc="multi_head_attention(query, key, value, wq, wk, wv, wo): inputs (..., L, E), "
    "weights (E, E) used as x @ wᵀ (no biases). Body: Q = matmul(query, transpose(wq)) "
    "etc., heads split on the last axis (reshape to (..., L, H, E/H), swap_adjacent to "
    "(..., H, L, E/H)), scaled_dot_product_attention per head (default scale, mask and "
    "causal passed on), heads merged back (swap_adjacent, reshape) and matmul with "
    "transpose(wo)",
    algebraic=False,
    tags=frozenset({"reduction", "model"}),
)


# --------------------------------------------------------------------------- embeddings


def _embedding_body(b: Any, args: list[int], a: Attrs) -> int:
    s = b.shape_of(args[0])
    if len(s) != 2:
        raise _err("embedding", "table must be (V, D)", 0, "rank 2", s)
    idx = a["indices"]
    shape = a.get("shape")
    shape = (len(idx),) if shape is None else shape
    if size(shape) != len(idx):
        raise _err("embedding", "index count does not fill `shape`", None, size(shape), len(idx))
    rows = b.node("index_select", args[0], indices=idx)
    if shape == (len(idx),):
        return rows
    return b.node("reshape", rows, shape=(*shape, s[1]))


_composite(
    "embedding",
    1,
    _embedding_body,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("shape", "shape", False)),
    doc="table (V, D) rows at token ids `indices` (row-major over `shape`, default "
    "(len(indices),)), output shape + (D,): index_select then reshape; the VJP "
    "scatter-adds into the table (left fold in order of occurrence)",
    tags=frozenset({"structural", "index", "model"}),
)


def _one_hot_body(b: Any, args: list[int], a: Attrs) -> int:
    n = a["num_classes"]
    for i in a["indices"]:
        if not 0 <= i < n:
            raise _err("one_hot", "class id out of range", None, f"0 <= id < {n}", i)
    vals = [Fraction(int(i == j)) for i in a["indices"] for j in range(n)]
    return b.node("const", shape=(len(a["indices"]), n), values=vals)


_composite(
    "one_hot",
    0,
    _one_hot_body,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("num_classes", "nat")),
    doc="const (len(indices), num_classes) with 1 at [k, indices[k]] and 0 elsewhere "
    "(non-differentiable)",
    tags=frozenset({"index", "model"}),
)
OPS["one_hot"].differentiable = False
