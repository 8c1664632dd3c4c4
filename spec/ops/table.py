"""The op table's core: `OpDef`, `AttrSpec`, `Sample`, the table `OPS` and `register`.

Invariants (the normative evaluation order the runtime's `ordered` kernels must follow):
- Every rule is generic over a `Domain`; each scalar operation is one domain call, rounded
  once. The operand order of every call is as written in the family modules.
- Reductions (sum, reduce_sum, matmul/linear inner products, softmax denominators, the
  reduction of broadcast cotangents) are left folds in row-major index order starting from
  the first element; an empty fold is the domain's zero.
- Binary elementwise ops broadcast centrally (`builders.elementwise2`): the rule sees one
  output position at a time; the cotangent of a broadcast operand is reduced back by
  `unbroadcast`.
- A rule's VJP returns one cotangent per argument; the graph layer folds them into the
  dense context cotangent (fan-in), never the rule.
- Composite ops (`kind == "composite"`) are defined by a body graph of other ops; their
  forward, JVP and VJP *are* eval_graph / jvp_ctx / backprop_ctx of the body. Preconditions
  (e.g. log's x > 0) are checked on graph nodes only, not inside composite bodies.
- Every op is registered once, by keyword (`register(name=..., family=..., ...)`), from the
  module `spec.ops.<family>` of its family; a second registration of a name raises.
- Every op carries its samples (`Sample`): the first is an ordinary point (generic, smooth,
  no ties or kinks); the others are edge points of the kinds listed in `SAMPLE_KINDS`.
- Every layer loads its family modules through `load_families`, for exactly the families
  the table says it needs (`families_holding`): `spec.ops` every family, the runtime kernels
  and the fast-profile bounds the families holding a primitive (composites get their kernel
  from their body and have no bound of their own), the graph builders and the proof laws
  every family holding an op. A needed module that is missing raises `ImportError` naming
  the layer and the family; nothing falls back to a default.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import ModuleType
from typing import Any

from ..domains import Domain
from ..errors import GraphError, ShapeError
from ..mathfns import MathFn
from ..shape import Shape, broadcasts_to, ravel_index, size, unravel_index
from ..tensor import Tensor, fold_add

__all__ = [
    "FAMILIES",
    "OPS",
    "SAMPLE_KINDS",
    "AttrSpec",
    "Attrs",
    "Env",
    "ForwardFn",
    "JvpFn",
    "OpDef",
    "Sample",
    "SampleArg",
    "ShapeFn",
    "VjpFn",
    "arg",
    "expand",
    "families_holding",
    "get_op",
    "load_families",
    "register",
    "sample",
    "unbroadcast",
]

Env = Sequence[int]
Attrs = dict[str, Any]
ForwardFn = Callable[[Domain, list[Tensor], Attrs, Env], Tensor]
JvpFn = Callable[[Domain, list[Tensor], list[Tensor], Attrs, Env], Tensor]
VjpFn = Callable[[Domain, list[Tensor], Tensor, Attrs, Env], list[Tensor]]
ShapeFn = Callable[[list[Shape], Attrs], Shape]

FAMILIES = (
    "elementwise",
    "transcendental",
    "reduce",
    "linalg",
    "shape",
    "index",
    "softmax",
    "loss",
    "conv",
    "pool",
    "norm",
    "attention",
    "embed",
    "piecewise",
)
"""The op families, in registration order; each is the module `spec.ops.<family>`."""


@dataclass(frozen=True)
class AttrSpec:
    """An attribute: `kind` is one of int, nat, ints (non-negative), sints (signed ints),
    bool, str (a word chosen from a list the op's rule checks, e.g. gelu's `approximate`,
    pad's `mode`), shape, rational, rationals."""

    name: str
    kind: str
    required: bool = True
    default: Any = None


SAMPLE_KINDS = {
    "ordinary": "a generic point: no ties, no kinks, away from every boundary; the op is "
    "smooth in a neighbourhood (finite differences apply)",
    "tie": "two or more candidates of a max/min-like choice are equal (the tie rule decides "
    "the value or the derivative)",
    "signed_zero": "some operand is +0 or -0 where the sign of a zero matters (the sign of "
    "the result, or which side a kink is taken from)",
    "boundary": "an operand sits on a bound of the op (clamp's lo/hi, safe_log's eps, sqrt's "
    "domain edge 0) where a one-sided convention decides the derivative",
    "kink": "an operand sits where the op is not differentiable (relu and abs at 0); the "
    "documented convention gives the derivative",
    "special": "non-finite values (NaN, ±inf) appear in the inputs or in the result",
}
"""The kinds of `Sample`, each with what it means."""

SampleValue = Fraction | float
SampleArg = tuple[Shape, tuple[SampleValue, ...]]


@dataclass(frozen=True)
class Sample:
    """One sample point of an op: `args` is one (shape, row-major values) pair per tensor
    argument, each value an exact `Fraction` or, only where no rational says it (−0.0, ±inf,
    NaN), a Python float; `attrs` the attributes; `kind` one of `SAMPLE_KINDS`; `note` what
    the point exercises."""

    args: tuple[SampleArg, ...]
    attrs: Mapping[str, Any]
    kind: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.kind not in SAMPLE_KINDS:
            raise GraphError(f"sample kind {self.kind!r} is not one of {sorted(SAMPLE_KINDS)}")
        for shape, values in self.args:
            if len(values) != size(shape):
                raise GraphError(f"sample argument of shape {shape} has {len(values)} values")
            for v in values:
                if not isinstance(v, Fraction | float):
                    raise GraphError(f"sample value {v!r} is neither a Fraction nor a float")
                if isinstance(v, float) and not _needs_float(v):
                    raise GraphError(f"sample value {v!r}: finite values are exact Fractions")


def _needs_float(v: float) -> bool:
    """−0.0, ±inf and NaN: the floats no Fraction says."""
    return math.isnan(v) or math.isinf(v) or (v == 0 and math.copysign(1.0, v) < 0)


def _sample_value(v: Any) -> SampleValue:
    if isinstance(v, float) and _needs_float(v):
        return v
    return Fraction(v)


def arg(shape: Shape, *values: Any) -> SampleArg:
    """A sample argument: `values` row-major (ints, Fractions, or floats; finite floats other
    than −0.0 are stored as the exact Fraction they denote)."""
    return tuple(shape), tuple(_sample_value(v) for v in values)


def sample(
    *args: SampleArg, attrs: Mapping[str, Any] | None = None, kind: str = "ordinary", note: str = ""
) -> Sample:
    """A `Sample` from `arg(...)` arguments."""
    return Sample(args=tuple(args), attrs=dict(attrs or {}), kind=kind, note=note)


@dataclass
class OpDef:
    """One entry of the op table. `arity` None means variadic (at least one argument);
    `family` names the module `spec.ops.<family>` that defines the op; `tags` are read by
    the judged engines' budgets ("elementwise", "broadcast": see `spec.ops.builders`);
    `math` is the `spec.mathfns.MathFn` record of an op that is one math function
    elementwise (its domain methods, crmath evaluation, bound, graph builder, law and
    engine spellings are derived from it)."""

    name: str
    arity: int | None
    attrs: tuple[AttrSpec, ...]
    shape: ShapeFn
    forward: ForwardFn
    jvp: JvpFn
    vjp: VjpFn
    saves: str
    doc: str
    kind: str = "primitive"
    body: Callable[[list[Shape], Attrs], Any] | None = None
    precondition: Callable[[Domain, list[Tensor], Attrs], None] | None = None
    algebraic: bool = True
    differentiable: bool = True
    tags: frozenset[str] = field(default_factory=frozenset)
    family: str = ""
    samples: tuple[Sample, ...] = ()
    math: MathFn | None = None


OPS: dict[str, OpDef] = {}


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown op {name!r}; known ops: {', '.join(sorted(OPS))}") from None


def register(
    *,
    name: str,
    family: str,
    arity: int | None,
    attrs: tuple[AttrSpec, ...],
    shape: ShapeFn,
    forward: ForwardFn,
    jvp: JvpFn,
    vjp: VjpFn,
    saves: str,
    doc: str,
    kind: str = "primitive",
    body: Callable[[list[Shape], Attrs], Any] | None = None,
    precondition: Callable[[Domain, list[Tensor], Attrs], None] | None = None,
    algebraic: bool = True,
    differentiable: bool = True,
    tags: frozenset[str] = frozenset(),
    samples: tuple[Sample, ...] = (),
    math: MathFn | None = None,
) -> OpDef:
    """Declare one op into `OPS` (a name declared twice raises)."""
    if name in OPS:
        raise GraphError(f"op {name!r} declared twice")
    if family not in FAMILIES:
        raise GraphError(f"op {name!r}: unknown family {family!r}")
    op = OpDef(
        name=name,
        arity=arity,
        attrs=attrs,
        shape=shape,
        forward=forward,
        jvp=jvp,
        vjp=vjp,
        saves=saves,
        doc=doc,
        kind=kind,
        body=body,
        precondition=precondition,
        algebraic=algebraic,
        differentiable=differentiable,
        tags=tags,
        family=family,
        samples=tuple(samples),
        math=math,
    )
    OPS[name] = op
    return op


def families_holding(kinds: Iterable[str] = ("primitive", "composite")) -> tuple[str, ...]:
    """The families, in `FAMILIES` order, that hold at least one op of `OPS` of one of
    `kinds` (the op table decides which family modules a layer needs)."""
    wanted = set(kinds)
    held = {op.family for op in OPS.values() if op.kind in wanted}
    return tuple(f for f in FAMILIES if f in held)


def load_families(package: str, families: Iterable[str]) -> dict[str, ModuleType]:
    """Imports `<package>.<family>` for each of `families`, in order (each family module
    registers its entries on import); returns the modules by family. A missing module
    raises `ImportError` naming the package and the family."""
    out: dict[str, ModuleType] = {}
    for family in families:
        name = f"{package}.{family}"
        try:
            out[family] = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name != name:
                raise
            raise ImportError(
                f"{package}: the op table needs the family module {name} (family "
                f"{family!r} holds ops this layer must register), but there is none"
            ) from None
    return out


# --------------------------------------------------------------------------- central helpers


def expand(t: Tensor, shape: Shape) -> Tensor:
    """Broadcast `t` to `shape` (t.shape must broadcast to shape)."""
    if t.shape == shape:
        return t
    if not broadcasts_to(t.shape, shape):
        raise ShapeError(f"expand: {t.shape} does not broadcast to {shape}")
    off = len(shape) - len(t.shape)
    out = []
    for flat in range(size(shape)):
        idx = unravel_index(flat, shape)
        src = tuple(0 if d == 1 else idx[off + i] for i, d in enumerate(t.shape))
        out.append(t.data[ravel_index(src, t.shape)])
    return Tensor(shape, tuple(out))


def unbroadcast(domain: Domain, g: Tensor, shape: Shape) -> Tensor:
    """Reduce a cotangent of the broadcast shape back to `shape`: each element is the left
    fold, in row-major order of g's positions, of the entries that map to it."""
    if g.shape == shape:
        return g
    off = len(g.shape) - len(shape)
    buckets: list[list[Any]] = [[] for _ in range(size(shape))]
    for flat in range(size(g.shape)):
        idx = unravel_index(flat, g.shape)
        src = tuple(0 if d == 1 else idx[off + i] for i, d in enumerate(shape))
        buckets[ravel_index(src, shape)].append(g.data[flat])
    return Tensor(shape, tuple(fold_add(domain, b) for b in buckets))
