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
  unsupported op, with its count and the nearest table op (difflib).
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
    "Dyn",
    "Emitter",
    "ModelImportError",
    "Static",
    "Unsupported",
    "UnsupportedOpsError",
    "nearest_table_op",
]


class ModelImportError(TorchLeanError):
    """A model cannot be imported (bad inputs, a missing package, an unmappable value)."""


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
            lines.append(
                f"  {name} x{count}: nearest table op {near!r}" + (f" ({why})" if why else "")
            )
        super().__init__("\n".join(lines))


class Unsupported(Exception):
    """Raised by a mapping rule for an op variant it cannot express (collected, not
    propagated: the importer reports every one at the end)."""


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def nearest_table_op(name: str) -> str:
    """The op of `spec.ops.OPS` whose name is closest to `name` (an ATen name such as
    `aten.hardtanh.default`, or an ONNX op type such as `HardSigmoid`)."""
    parts = name.split(".")
    base = parts[1] if parts[0] == "aten" and len(parts) > 1 else parts[-1]
    base = _snake(base).strip("_")
    hit = difflib.get_close_matches(base, list(OPS), n=1, cutoff=0.0)
    return hit[0] if hit else ""


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
        """The graph ids of the model's outputs (float constants become const nodes)."""
        ids = []
        for v in outs:
            if isinstance(v, Static) and not is_float(v.value):
                raise ModelImportError("a model output is an integer tensor (no gradient to take)")
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
        perm = [p % n if n else p for p in perm]
        if sorted(perm) != list(range(n)):
            raise Unsupported(f"permutation {list(perm)} of rank {n}")
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
        src, dst = src % n, dst % n
        perm = [a for a in range(n) if a != src]
        perm.insert(dst, src)
        return self.permute(v, perm)

    def on_axis(self, v: Any, axis: int, where: int, fn: Any) -> Any:
        """fn applied with `axis` moved to `where` (0: leading, -1: last), moved back."""
        n = len(self.shape(v))
        axis, where = axis % n, where % n
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
        ax = sorted({a % n for a in axes} if axes else range(n), reverse=True)
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
        ax = {a % n for a in axes} if axes else set(range(n))
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
        if w is not None:
            y = self.node("mul", y, self.reshape(w, bs))
        if b is not None:
            y = self.node("add", y, self.reshape(b, bs))
        return y

    def cross_entropy(self, x: Any, target: Any, reduction: str, log_probs: bool = False) -> Any:
        """Cross entropy (or NLL when `log_probs`) of logits x (B, C) or (C,) against
        integer class ids known at import time: one_hot targets (attributes)."""
        s = self.shape(x)
        if len(s) not in (1, 2):
            raise Unsupported(f"class axis layout {s} (only (C,) or (B, C))")
        ids = self.static_ints(target, "the target")
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
