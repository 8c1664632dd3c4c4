"""The shared part of model import: the `Emitter` that builds a spec graph from an
imported program, the value kinds it tracks, and the one error for unsupported ops.

Invariants:
- A value of the imported program is either `Dyn` (a spec graph value: a float tensor
  that gradients flow through) or `Static` (a NumPy array known at import time: integer
  index inputs, shape computations, constants). Static operands of a graph op are
  materialised as `const` nodes (exact rationals of the stored floats, one rounding into
  the run's dtype); integer statics become attributes (embedding / one_hot indices), as
  the op table requires (indices are never tensor arguments).
- Every graph node goes through `GraphBuilder.node`, so each is validated when added and
  the finished graph is a validated `spec.graph.Graph`.
- The emitter never builds a partial graph for a caller: a failed mapping is recorded
  (`Emitter.unsupported`) and the importer raises one `UnsupportedOpsError` listing every
  unsupported op, with its count and the nearest table op (`nearest_table_op`: an
  explicit synonym map, else a close spelling, else none). An invalid model (an axis out
  of range, duplicate axes, a perm that is not a permutation) raises `InvalidModelError`
  at once: it is the model's error, not a missing op.
- Axes are never wrapped: an axis must lie in [-rank, rank) (`axis_of`).
- Layout helpers decompose what the table lacks into table ops: an arbitrary permutation
  is a sequence of `swap_adjacent`; an op on any axis is the op on the table's axis
  (leading or last) between two permutations; `linear` on rank > 2 is reshape-linear-
  reshape; 1-D matmul operands are reshaped to 2-D and back.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import GraphError, TorchLeanError
from spec.graph import Graph, GraphBuilder
from spec.ops import LN_EPS, OPS
from spec.shape import Shape

__all__ = [
    "SYNONYMS",
    "Dyn",
    "Emitter",
    "InvalidModelError",
    "ModelImportError",
    "Static",
    "Unsupported",
    "UnsupportedOpsError",
    "axes_of",
    "axis_of",
    "nearest_table_op",
]


class ModelImportError(TorchLeanError):
    """A model cannot be imported (bad inputs, a missing package, an unmappable value)."""


class InvalidModelError(ModelImportError):
    """The model itself is invalid (an attribute or input outside its op's schema)."""


class UnsupportedOpsError(ModelImportError, GraphError):
    """The model uses ops (or op variants) the op table cannot express. `ops` maps each
    unsupported op name to (count, nearest table op, reason)."""

    def __init__(self, source: str, ops: dict[str, tuple[int, str, str]]) -> None:
        self.source = source
        self.ops = dict(ops)
        lines = [
            f"{source}: {len(ops)} unsupported op(s) "
            f"({sum(c for c, _, _ in ops.values())} node(s)); no graph was built:"
        ]
        for name, (count, near, why) in sorted(ops.items()):
            hint = f"nearest table op {near!r}" if near else "no similar table op"
            lines.append(f"  {name} x{count}: {hint}" + (f" ({why})" if why else ""))
        super().__init__("\n".join(lines))


class Unsupported(Exception):
    """Raised by a mapping rule for an op variant it cannot express (collected, not
    propagated: the importer reports every one at the end)."""


SYNONYMS: dict[str, tuple[str, ...]] = {
    # source op (snake case, ONNX or ATen) -> table ops it is related to, best first
    "leaky_relu": ("leaky_relu", "relu"),
    "prelu": ("prelu", "leaky_relu", "relu"),
    "elu": ("elu", "relu"),
    "selu": ("selu", "elu", "relu"),
    "celu": ("celu", "elu", "relu"),
    "relu6": ("hardtanh", "clamp"),
    "hardtanh": ("hardtanh", "clamp"),
    "clip": ("clamp",),
    "hard_sigmoid": ("hardsigmoid", "sigmoid"),
    "hardsigmoid": ("hardsigmoid", "sigmoid"),
    "hard_swish": ("hardswish", "silu"),
    "hardswish": ("hardswish", "silu"),
    "softsign": ("softsign",),
    "mish": ("mish", "softplus"),
    "erf": ("erf", "gelu"),
    "gelu": ("gelu",),
    "sign": ("sign",),
    "pow": ("pow", "mul", "sqrt"),
    "tile": ("tile", "broadcast_to", "concat"),
    "repeat": ("tile", "broadcast_to", "concat"),
    "expand": ("broadcast_to",),
    "split": ("split", "slice"),
    "chunk": ("split", "slice"),
    "pad": ("pad", "concat"),
    "constant_pad_nd": ("pad", "concat"),
    "where": ("where", "mask_neg_inf"),
    "sum": ("sum", "add"),
    "mean": ("mean", "add"),
    "max": ("maximum", "reduce_max"),
    "min": ("minimum",),
    "reduce_min": ("reduce_max",),
    "reduce_prod": ("mul",),
    "reduce_log_sum_exp": ("logsumexp", "log_softmax"),
    "logsumexp": ("logsumexp", "log_softmax"),
    "shrink": ("softshrink", "clamp"),
    "instance_normalization": ("instance_norm", "layer_norm"),
    "instance_norm": ("instance_norm", "layer_norm"),
    "group_norm": ("group_norm", "layer_norm"),
    "lrn": ("local_response_norm",),
    "conv": ("conv2d",),
    "conv_transpose": ("conv_transpose2d",),
    "max_pool": ("max_pool2d",),
    "average_pool": ("avg_pool2d",),
    "global_max_pool": ("max_pool2d",),
    "global_average_pool": ("avg_pool2d",),
    "batch_normalization": ("batch_norm",),
    "layer_normalization": ("layer_norm",),
    "gemm": ("linear", "matmul"),
    "mat_mul": ("matmul",),
    "arg_max": ("reduce_max",),
    "cumsum": ("cumsum",),
    "flip": ("flip", "index_select"),
    "gather_elements": ("gather",),
    "scatter_elements": ("scatter_add",),
    "one_hot": ("one_hot",),
    "resize": ("index_select",),
    "upsample": ("index_select",),
}
"""Explicit relations from source op names to table ops (see `nearest_table_op`)."""

NEAR_CUTOFF = 0.8
"""The difflib ratio a table op's name needs to be suggested without a synonym entry."""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def nearest_table_op(name: str) -> str:
    """A table op (`spec.ops.OPS`) related to `name` (an ATen name such as
    `aten.hardtanh.default`, or an ONNX op type such as `HardSigmoid`), or "" when none is:
    the op itself, else the first entry of `SYNONYMS` the table has, else a name spelled
    almost the same (difflib ratio >= `NEAR_CUTOFF`)."""
    parts = name.split(".")
    base = parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1]
    base = _snake(base).strip("_")
    if base in OPS:
        return base
    for cand in SYNONYMS.get(base, ()):
        if cand in OPS:
            return cand
    if base in SYNONYMS:
        return ""
    hit = difflib.get_close_matches(base, list(OPS), n=1, cutoff=NEAR_CUTOFF)
    return hit[0] if hit else ""


def axis_of(axis: Any, rank: int, what: str = "axis") -> int:
    """`axis` in [-rank, rank) as a non-negative axis; anything else is refused (never
    wrapped)."""
    a = int(axis)
    if not -rank <= a < rank:
        raise InvalidModelError(f"{what} {a} is out of range for rank {rank}")
    return a + rank if a < 0 else a


def axes_of(axes: Sequence[Any], rank: int, what: str = "axes") -> list[int]:
    """Distinct axes in range (see `axis_of`)."""
    out = [axis_of(a, rank, what) for a in axes]
    if len(set(out)) != len(out):
        raise InvalidModelError(f"{what} {list(axes)} repeat an axis (rank {rank})")
    return out


@dataclass(frozen=True)
class Dyn:
    """A value of the spec graph (its id)."""

    id: int


@dataclass(frozen=True, eq=False)
class Static:
    """A value known at import time (a NumPy array)."""

    value: np.ndarray


def is_float(a: np.ndarray) -> bool:
    return bool(np.issubdtype(a.dtype, np.floating))


def rationals(a: np.ndarray) -> tuple[Fraction, ...]:
    out = []
    for v in np.asarray(a).reshape(-1).tolist():
        if isinstance(v, float) and not np.isfinite(v):
            raise Unsupported(f"constant {v!r} has no exact rational (const holds rationals)")
        out.append(Fraction(v))
    return tuple(out)


class Emitter:
    """Builds one spec graph: declare every input first (`input`), then emit nodes."""

    def __init__(self) -> None:
        self.b = GraphBuilder()
        self._consts: dict[int, tuple[Static, int]] = {}
        self.unsupported: Counter[str] = Counter()
        self.reasons: dict[str, str] = {}

    # ------------------------------------------------------------------ bookkeeping
    def input(self, shape: Sequence[int]) -> Dyn:
        return Dyn(self.b.input(tuple(int(d) for d in shape)))

    def fail(self, name: str, why: str = "") -> None:
        self.unsupported[name] += 1
        if why and name not in self.reasons:
            self.reasons[name] = why

    def stand_in(self, shape: Sequence[int]) -> Dyn:
        """A zero of `shape` standing in for an unmapped node's value (error path only)."""
        z = self.node("const", shape=(), values=(Fraction(0),))
        return self.node("broadcast_to", z, shape=tuple(shape)) if tuple(shape) else z

    def raise_if_unsupported(self, source: str) -> None:
        if self.unsupported:
            raise UnsupportedOpsError(
                source,
                {
                    n: (c, nearest_table_op(n), self.reasons.get(n, "no mapping"))
                    for n, c in self.unsupported.items()
                },
            )

    def output_ids(self, outs: Sequence[Any]) -> tuple[int, ...]:
        """The graph ids of the model's outputs. Constants known at import time (float, or
        integer / boolean: shape arithmetic, sequence lengths) become const nodes of their
        exact values, rounded once into the run's dtype like every const."""
        ids = []
        for v in outs:
            if isinstance(v, Static) and v.value.dtype.kind not in "biuf":
                raise ModelImportError(f"a model output has dtype {v.value.dtype} (not a number)")
            ids.append(self.id(v))
        return tuple(ids)

    def build(self) -> Graph:
        return self.b.build()

    # ------------------------------------------------------------------ values
    def shape(self, v: Any) -> Shape:
        if isinstance(v, Dyn):
            return self.b.shape_of(v.id)
        if isinstance(v, Static):
            return tuple(v.value.shape)
        return ()

    def node(self, op: str, *args: Any, **attrs: Any) -> Dyn:
        return Dyn(self.b.node(op, *(self.id(a) for a in args), **attrs))

    def id(self, v: Any) -> int:
        """The graph id of v; a Static (or a Python number) becomes a const node."""
        if isinstance(v, Dyn):
            return v.id
        if not isinstance(v, Static):
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise Unsupported(f"operand {v!r} is not a tensor or a number")
            v = Static(np.asarray(v, dtype=np.float64))
        hit = self._consts.get(id(v))
        if hit is not None and hit[0] is v:
            return hit[1]
        arr = np.asarray(v.value)
        nid = self.b.node("const", shape=tuple(arr.shape), values=rationals(arr))
        self._consts[id(v)] = (v, nid)
        return nid

    def add_extended(self, x: Any, c: Static) -> Any:
        """x + c for a constant c that may hold -inf (an additive attention mask): the
        finite part is a const added to x, and the -inf positions are the table's
        `mask_neg_inf` (x + -inf = -inf for every finite x; its cotangent there is 0).
        +inf and NaN have no such form and are refused."""
        arr = np.asarray(c.value, dtype=np.float64)
        if np.isnan(arr).any() or np.isposinf(arr).any():
            raise Unsupported("a +inf or NaN constant (only -inf masks are modelled)")
        neg = np.isneginf(arr)
        if not neg.any():
            return self.node("add", x, c)
        y = self.node("add", x, Static(np.where(neg, 0.0, arr)))
        keep = tuple(int(not v) for v in neg.reshape(-1))
        return self.node("mask_neg_inf", y, mask=keep, mask_shape=tuple(arr.shape))

    @staticmethod
    def static_ints(v: Any, what: str) -> np.ndarray:
        if not isinstance(v, Static) or is_float(v.value):
            raise Unsupported(f"{what} must be an integer tensor known at import time")
        return np.asarray(v.value).astype(np.int64)

    # ------------------------------------------------------------------ layout
    def reshape(self, v: Any, shape: Sequence[int]) -> Any:
        shape = tuple(int(d) for d in shape)
        if isinstance(v, Static):
            return Static(np.asarray(v.value).reshape(shape))
        if self.shape(v) == shape:
            return v
        return self.node("reshape", v, shape=shape)

    def permute(self, v: Any, perm: Sequence[int]) -> Any:
        """Output axis k is input axis perm[k]: adjacent swaps (a bubble sort)."""
        n = len(self.shape(v))
        perm = [axis_of(p, n, "permutation entry") for p in perm]
        if sorted(perm) != list(range(n)):
            raise InvalidModelError(f"{list(perm)} is not a permutation of rank {n}")
        if isinstance(v, Static):
            return Static(np.transpose(v.value, perm))
        order = list(range(n))
        for k, want in enumerate(perm):
            p = order.index(want)
            while p > k:
                v = self.node("swap_adjacent", v, axis=p - 1)
                order[p - 1], order[p] = order[p], order[p - 1]
                p -= 1
        return v

    def move_axis(self, v: Any, src: int, dst: int) -> Any:
        n = len(self.shape(v))
        src, dst = axis_of(src, n), axis_of(dst, n)
        perm = [a for a in range(n) if a != src]
        perm.insert(dst, src)
        return self.permute(v, perm)

    def on_axis(self, v: Any, axis: int, where: int, fn: Any) -> Any:
        """fn applied with `axis` moved to `where` (0: leading, -1: last), moved back."""
        n = len(self.shape(v))
        axis, where = axis_of(axis, n), axis_of(where, n)
        y = fn(self.move_axis(v, axis, where))
        return self.move_axis(y, where, axis) if len(self.shape(y)) == n else y

    # ------------------------------------------------------------------ arithmetic
    def linear(self, x: Any, w: Any, b: Any | None) -> Any:
        """x @ wᵀ + b over the last axis of x (any rank)."""
        s = self.shape(x)
        out = self.shape(w)[0]
        if b is None:
            return self.matmul(x, self.node("transpose", w))
        if len(s) in (1, 2):
            return self.node("linear", x, w, b)
        flat = self.reshape(x, (int(np.prod(s[:-1])), s[-1]))
        return self.reshape(self.node("linear", flat, w, b), (*s[:-1], out))

    def matmul(self, a: Any, b: Any) -> Any:
        sa, sb = self.shape(a), self.shape(b)
        if len(sa) == 1 and len(sb) == 1:
            return self.node("sum", self.node("mul", a, b))
        if len(sa) == 1:
            y = self.node("matmul", self.reshape(a, (1, sa[0])), b)
            return self.reshape(y, (*self.shape(y)[:-2], self.shape(y)[-1]))
        if len(sb) == 1:
            y = self.node("matmul", a, self.reshape(b, (sb[0], 1)))
            return self.reshape(y, self.shape(y)[:-1])
        return self.node("matmul", a, b)

    def reduce(self, op: str, v: Any, axes: Sequence[int] | None, keepdim: bool) -> Any:
        """reduce_sum / reduce_max over `axes` (None: all), highest axis first;
        `keepdim` reshapes back to rank n with ones."""
        s = self.shape(v)
        n = len(s)
        ax = sorted(axes_of(axes, n) if axes else range(n), reverse=True)
        if op == "reduce_sum" and len(ax) == n and not keepdim and n > 0:
            return self.node("sum", v)
        for a in ax:
            v = self.node(op, v, axis=a)
        if keepdim:
            v = self.reshape(v, tuple(1 if i in ax else d for i, d in enumerate(s)))
        return v

    def mean(self, v: Any, axes: Sequence[int] | None, keepdim: bool) -> Any:
        s = self.shape(v)
        n = len(s)
        ax = set(axes_of(axes, n)) if axes else set(range(n))
        count = int(np.prod([s[a] for a in ax])) if ax else 1
        if len(ax) == 1 and not keepdim:
            return self.node("reduce_mean", v, axis=next(iter(ax)))
        if len(ax) == n and not keepdim:
            return self.node("mean", v)
        return self.node("div", self.reduce("reduce_sum", v, sorted(ax), keepdim), count)

    def layer_norm(
        self, x: Any, w: Any | None, b: Any | None, nshape: Sequence[int], eps: float
    ) -> Any:
        """Layer norm over the trailing `nshape` axes: the table's `layer_norm` when ε is
        its 1/100000, else the same body with ε as a const."""
        s = self.shape(x)
        k = len(nshape)
        d = int(np.prod(nshape))
        xf = self.reshape(x, (*s[:-k], d)) if k != 1 else x
        wf = self.reshape(w, (d,)) if w is not None else Static(np.ones(d))
        bf = self.reshape(b, (d,)) if b is not None else Static(np.zeros(d))
        if Fraction(eps) == Fraction(float(LN_EPS)):
            y = self.node("layer_norm", xf, wf, bf)
        else:
            keep = (*self.shape(xf)[:-1], 1)
            ax = len(keep) - 1
            mu = self.reshape(self.node("reduce_mean", xf, axis=ax), keep)
            xc = self.node("sub", xf, mu)
            var = self.reshape(self.node("reduce_mean", self.node("mul", xc, xc), axis=ax), keep)
            den = self.node("sqrt", self.node("add", var, eps))
            y = self.node("add", self.node("mul", self.node("div", xc, den), wf), bf)
        return self.reshape(y, s)

    def batch_norm_eval(
        self, x: Any, w: Any | None, b: Any | None, mean: Any, var: Any, eps: float
    ) -> Any:
        """Evaluation-mode batch norm with running statistics, channel axis 1:
        (x - mean) / sqrt(var + ε) * w + b, the statistics reshaped to (C, 1, ...)."""
        s = self.shape(x)
        c = s[1]
        bs = (c, *([1] * (len(s) - 2)))
        den = self.node("sqrt", self.node("add", self.reshape(var, bs), eps))
        y = self.node("div", self.node("sub", x, self.reshape(mean, bs)), den)
        return self.channel_affine(y, w, b)

    def channel_affine(self, y: Any, w: Any | None, b: Any | None) -> Any:
        """y * w + b with a per-channel (C,) weight and bias on axis 1 (either may be
        None), reshaped to (C, 1, ...): the tail of every batch/group norm."""
        s = self.shape(y)
        bs = (s[1], *([1] * (len(s) - 2)))
        if w is not None:
            y = self.node("mul", y, self.reshape(w, bs))
        if b is not None:
            y = self.node("add", y, self.reshape(b, bs))
        return y

    def cross_entropy(
        self,
        x: Any,
        target: Any,
        reduction: str,
        log_probs: bool = False,
        ignore_index: int | None = None,
    ) -> Any:
        """Cross entropy (or NLL when `log_probs`) of logits x (B, C) or (C,) against
        integer class ids known at import time: one_hot targets (attributes). Rows whose
        target is `ignore_index` are dropped first (`index_select` of the others), so a
        mean is over the rows kept, as torch defines it."""
        s = self.shape(x)
        if len(s) not in (1, 2):
            raise Unsupported(f"class axis layout {s} (only (C,) or (B, C))")
        ids = self.static_ints(target, "the target")
        if ignore_index is not None and np.any(ids == ignore_index):
            keep = np.flatnonzero(ids.reshape(-1) != ignore_index)
            if len(s) != 2 or reduction == "none" or keep.size == 0:
                raise Unsupported(
                    f"targets equal to ignore_index={ignore_index} "
                    "(only a (B, C) mean or sum over at least one kept row)"
                )
            x = self.node("index_select", x, indices=tuple(int(i) for i in keep))
            ids, s = ids.reshape(-1)[keep], (int(keep.size), s[1])
        onehot = self.node(
            "one_hot", indices=tuple(int(i) for i in ids.reshape(-1)), num_classes=s[-1]
        )
        onehot = self.reshape(onehot, s)
        if reduction == "mean" and not log_probs:
            return self.node("cross_entropy", x, onehot)
        lp = x if log_probs else self.node("log_softmax", x)
        picked = self.node("mul", onehot, lp)
        if reduction == "none":
            return self.node(
                "neg",
                self.node("reduce_sum", picked, axis=len(s) - 1)
                if len(s) == 2
                else self.node("sum", picked),
            )
        total = self.node("neg", self.node("sum", picked))
        if reduction == "mean" and len(s) == 2:
            return self.node("div", total, s[0])
        return total
