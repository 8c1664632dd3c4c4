"""The core of the graph strategies: the builder context, the sampling order, the builder
table and `graphs()`.

Invariants (besides those of `conformance.graphs`, stated in its docstring):
- `SAMPLING_ORDER` is normative: `graphs` draws ops from it (filtered) in this order, so
  Hypothesis draws, and therefore every generated case and its reproducer, depend on it.
  Simplest ops come first, so shrinking goes towards them. Changing the order (or inserting
  an op anywhere but at the end) changes every case the suite generates.
- Each family module registers its builders with `register(name=..., build=...)`, once per
  op; `conformance.graphs` imports every family module and then checks that the builders
  registered are exactly the ops of `SAMPLING_ORDER`. `graphs()` looks builders up in
  `BUILDERS` only when it draws, after that import.
- A builder takes the graph under construction (`Ctx`), adds its op (and the helper nodes
  its arguments need) and returns True, or returns False (having added nothing it needs to
  undo: helper nodes stay, within the node budget) when nothing fits.
- A composite of the table that has no hand-written builder gets one derived from its
  table entry (`derived_builder`): its argument shapes and attributes are drawn from its
  `samples=` record, its argument values from the existing value strategies (earlier values
  of the graph, or `const`s of `RAT`). Those ops come after `SAMPLING_ORDER` in
  `GRAPH_OPS` (`DERIVED_ORDER`, in table order), so the draws of every seed over the ops of
  `SAMPLING_ORDER` are unchanged by them; while every composite has a hand-written builder
  `DERIVED_ORDER` is empty. A hand-written builder wins over the derived one (it adds hard
  cases). A primitive that is one math function (`OpDef.math`) without a hand-written
  builder gets one derived from its record's domain (`math_builder`), drawn in
  `DERIVED_ORDER` as well; every other primitive needs a hand-written one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from spec.domains import Domain, IEEEDomain
from spec.graph import Graph, GraphBuilder
from spec.inline import inline
from spec.ops import OPS, OpDef
from spec.shape import Shape, broadcast_shapes, size

__all__ = [
    "ALGEBRAIC_OPS",
    "BUILDERS",
    "DEFAULT_FLOAT_OPS",
    "DERIVED_ORDER",
    "GRAPH_OPS",
    "INPUT_SHAPES",
    "MAX_ELEMENTS",
    "NONNEG_RAT",
    "POS_RAT",
    "RAT",
    "SAMPLING_ORDER",
    "Builder",
    "Ctx",
    "broadcast_partners",
    "broadcast_targets",
    "configured",
    "derived_builder",
    "domain_kind_of",
    "factorizations",
    "graphs",
    "guarded_unary",
    "is_algebraic",
    "materialize_args",
    "math_builder",
    "register",
    "unary_builder",
]

MAX_ELEMENTS = 12
"""No value of a drawn graph has more elements than this."""


INPUT_SHAPES: tuple[Shape, ...] = (
    (),
    (3,),
    (2, 3),
    (1,),
    (1, 3),
    (2, 1),
    (2, 2),
    (0,),
    (2, 0),
    (2, 1, 3),
)
"""Shapes drawn for graph inputs and free-standing consts, simplest first."""


def is_algebraic(op: str) -> bool:
    """True when the op is usable over exact rationals (its table entry's `algebraic`)."""
    return OPS[op].algebraic


ALGEBRAIC_OPS: frozenset[str] = frozenset(name for name, d in OPS.items() if d.algebraic)
"""Ops whose `algebraic` flag is set: exact over `RATIONAL` (given nonzero denominators)."""


def domain_kind_of(domain: Domain) -> str:
    """The `domain_kind` for a domain: "rational" (exact rationals) or "float" (IEEE)."""
    if isinstance(domain, IEEEDomain):
        return "float"
    if domain.name == "rational":
        return "rational"
    raise ValueError(f"conformance.graphs: no strategy for domain {domain.name!r}")


# --------------------------------------------------------------------------- small values

RAT = st.builds(Fraction, st.integers(-8, 8), st.integers(1, 4))


POS_RAT = st.builds(Fraction, st.integers(1, 8), st.integers(1, 4))


NONNEG_RAT = st.builds(Fraction, st.integers(0, 8), st.integers(1, 4))


def factorizations(n: int) -> list[Shape]:
    """Shapes of size n (rank 0 to 3), simplest first, for reshape targets."""
    out: list[Shape] = [(n,)]
    if n == 1:
        out.insert(0, ())
    if n == 0:
        out += [(1, 0), (0, 1), (2, 0), (0, 3), (1, 0, 2)]
        return out
    out += [(1, n), (n, 1)]
    out += [(d, n // d) for d in range(2, n) if n % d == 0]
    out += [(1, d, n // d) for d in range(2, n) if n % d == 0]
    out += [(2, d, n // (2 * d)) for d in range(1, n) if n % (2 * d) == 0 and n // (2 * d) > 1]
    seen: list[Shape] = []
    for s in out:
        if s not in seen:
            seen.append(s)
    return seen


def broadcast_partners(s: Shape) -> list[Shape]:
    """Shapes that broadcast with s without exceeding MAX_ELEMENTS, simplest first."""
    cands: list[Shape] = [(), s, s[1:], tuple(1 for _ in s)]
    for i in range(len(s)):
        cands.append((*s[:i], 1, *s[i + 1 :]))
    cands += [(2, *s), (1, *s)]
    out: list[Shape] = []
    for c in cands:
        b = broadcast_shapes(s, c)
        if b is not None and size(b) <= MAX_ELEMENTS and size(c) <= MAX_ELEMENTS and c not in out:
            out.append(c)
    return out


def broadcast_targets(s: Shape) -> list[Shape]:
    """Shapes that s broadcasts to (s itself first), within MAX_ELEMENTS."""
    cands: list[Shape] = [s]
    for i, d in enumerate(s):
        if d == 1:
            cands += [(*s[:i], k, *s[i + 1 :]) for k in (2, 3, 0)]
    cands += [(k, *s) for k in (2, 1, 3)]
    cands.append(tuple(2 if d == 1 else d for d in s))
    return [c for i, c in enumerate(cands) if c not in cands[:i] and size(c) <= MAX_ELEMENTS]


_SAMPLED: dict[tuple[Any, ...], st.SearchStrategy[Any]] = {}
_CONSTS: dict[tuple[bool, int], st.SearchStrategy[list[Fraction]]] = {}


def _sampled(options: Sequence[Any]) -> st.SearchStrategy[Any]:
    """`st.sampled_from(options)`, one strategy object per tuple of (hashable) options
    (performance only: Hypothesis validates each new strategy object once, and these were
    built afresh for every draw; a strategy's draws depend on its options, not on the
    object)."""
    key = tuple(options)
    hit = _SAMPLED.get(key)
    if hit is None:
        if len(_SAMPLED) > 50_000:  # candidate lists are short; a bound all the same
            _SAMPLED.clear()
        hit = _SAMPLED[key] = st.sampled_from(key)
    return hit


def _const_values(positive: bool, n: int) -> st.SearchStrategy[list[Fraction]]:
    """The values of an n-element const (memoised like `_sampled`)."""
    hit = _CONSTS.get((positive, n))
    if hit is None:
        elems = POS_RAT if positive else RAT
        hit = _CONSTS[(positive, n)] = st.lists(elems, min_size=n, max_size=n)
    return hit


# --------------------------------------------------------------------------- the builder


class Ctx:
    """One graph under construction: the builder, the shapes so far and the node budget."""

    def __init__(self, draw: st.DrawFn, kind: str, inputs: Sequence[Shape], limit: int) -> None:
        self.draw = draw
        self.kind = kind
        self.limit = limit
        self.b = GraphBuilder()
        self.shapes: list[Shape] = []
        self.n_nodes = 0
        for s in inputs:
            self.shapes.append(s)
            self.b.input(s)

    def room(self, k: int) -> bool:
        return self.n_nodes + k <= self.limit

    def add(self, op: str, *args: int, **attrs: Any) -> int:
        i = self.b.node(op, *args, **attrs)
        self.shapes.append(self.b.shape_of(i))
        self.n_nodes += 1
        return i

    def candidates(self, pred: Callable[[Shape], bool]) -> list[int]:
        return [i for i, s in enumerate(self.shapes) if pred(s)]

    def pick(self, pred: Callable[[Shape], bool] = lambda s: True) -> int | None:
        cands = self.candidates(pred)
        if not cands:
            return None
        return int(self.draw(_sampled(cands)))

    def const(self, shape: Shape, positive: bool = False) -> int:
        n = size(shape)
        vals = self.draw(_const_values(positive, n))
        return self.add("const", shape=shape, values=vals)

    def positive(self, v: int) -> int:
        """clamp(v, lo, hi) with 0 < lo <= hi: strictly positive whenever v is not NaN."""
        lo = self.draw(POS_RAT)
        hi = lo + self.draw(NONNEG_RAT)
        return self.add("clamp", v, lo=lo, hi=hi)

    def materialize(self, shape: Shape, reserve: int) -> int | None:
        """A value of exactly `shape`: an existing one (free), a reshape of an existing value
        of equal size, or a fresh const (one node each, only when `reserve` more nodes still
        fit afterwards). None when nothing fits."""
        opts: list[tuple[str, int]] = [("id", i) for i in self.candidates(lambda s: s == shape)]
        if self.room(1 + reserve):
            opts += [
                ("reshape", i)
                for i in self.candidates(lambda s: s != shape and size(s) == size(shape))
            ]
            opts.append(("const", -1))
        if not opts:
            return None
        how, i = self.draw(_sampled(opts))
        i = int(i)
        if how == "id":
            return i
        if how == "reshape":
            return self.add("reshape", i, shape=shape)
        return self.const(shape)


Builder = Callable[[Ctx], bool]


# --------------------------------------------------------------------------- shared builders


def unary_builder(op: str) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick()
        if x is None or not c.room(1):
            return False
        c.add(op, x)
        return True

    return build


def guarded_unary(op: str, always: bool) -> Builder:
    """An op whose argument must be positive: guarded always (log) or over rationals (inv)."""

    def build(c: Ctx) -> bool:
        x = c.pick()
        if x is None:
            return False
        if always or c.kind == "rational":
            if not c.room(2):
                return False
            x = c.positive(x)
        elif not c.room(1):
            return False
        c.add(op, x)
        return True

    return build


def materialize_args(c: Ctx, shapes: list[Shape]) -> list[int] | None:
    """Materialise one value per shape (reusing values of an earlier equal shape)."""
    out: list[int] = []
    for k, s in enumerate(shapes):
        i = c.materialize(s, reserve=len(shapes) - k)
        if i is None:
            return None
        out.append(i)
    return out


def configured(op: str, configs: list[tuple[list[Shape], dict[str, Any]]]) -> Builder:
    choices = st.sampled_from(configs)  # built once per builder (performance only)

    def build(c: Ctx) -> bool:
        if not c.room(1):
            return False
        shapes, attrs = c.draw(choices)
        ids = materialize_args(c, list(shapes))
        if ids is None or not c.room(1):
            return False
        c.add(op, *ids, **attrs)
        return True

    return build


# --------------------------------------------------------------------------- the table

SAMPLING_ORDER: tuple[str, ...] = (
    "add",
    "mul",
    "neg",
    "sub",
    "scale",
    "relu",
    "abs",
    "maximum",
    "minimum",
    "clamp",
    "detach",
    "const",
    "sum",
    "reshape",
    "broadcast_to",
    "slice",
    "select",
    "concat",
    "swap_adjacent",
    "transpose",
    "reduce_sum",
    "mean",
    "reduce_mean",
    "index_select",
    "scatter_add",
    "matmul",
    "linear",
    "div",
    "inv",
    "mse_loss",
    "sqrt",
    "exp",
    "tanh",
    "sin",
    "cos",
    "safe_log",
    "log",
    "sigmoid",
    "softplus",
    "silu",
    "gelu",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "gather",
    "reduce_max",
    "one_hot",
    "embedding",
    "avg_pool2d",
    "max_pool2d",
    "conv2d",
    "conv_transpose2d",
    "mask_neg_inf",
    "layer_norm",
    "batch_norm",
    "scaled_dot_product_attention",
    "multi_head_attention",
    "conv1d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose3d",
    "avg_pool1d",
    "avg_pool3d",
    "max_pool1d",
    "max_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_max_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_max_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool3d",
    "pad",
    "leaky_relu",
    "sign",
    "hardtanh",
    "relu6",
    "hardsigmoid",
    "hardswish",
    "softsign",
    "add_n",
    "maximum_n",
    "minimum_n",
    "mean_n",
    "var",
    "erf",
    "log1p",
    "expm1",
    "elu",
    "celu",
    "selu",
    "mish",
    "logsumexp",
    "std",
    "instance_norm",
    "group_norm",
    "prelu",
    "where",
    "pow",
    "pow_tensor",
    "narrow",
    "flip",
    "roll",
    "tile",
    "repeat_interleave",
    "cumsum",
    "batch_norm_eval",
    "local_response_norm",
)
"""Every op the generator can build, in sampling order: simplest first (elementwise, then
structural, reductions, linear algebra, guarded and transcendental ops, then the model-scale
ops). The order is normative for reproducibility: draws index into it."""

BUILDERS: dict[str, Builder] = {}
"""Op name -> its builder, filled by the family modules through `register`."""


def register(*, name: str, build: Builder) -> None:
    """Register the hand-written graph builder of one op of `SAMPLING_ORDER` (once per
    op; a composite listed there gets no derived builder)."""
    if name not in SAMPLING_ORDER:
        raise ValueError(f"conformance.graphs: {name!r} is not in SAMPLING_ORDER")
    if name in BUILDERS:
        raise ValueError(f"conformance.graphs: builder for {name!r} registered twice")
    BUILDERS[name] = build


_DIVIDING = frozenset({"div", "inv"})
"""Primitives that may divide by a drawn value: a derived builder keeps them out of
rational graphs (invariant 5 of `conformance.graphs`)."""


def _derived_configs(op: OpDef) -> list[tuple[list[Shape], dict[str, Any], bool]]:
    """(argument shapes, attributes, usable over rationals) of each distinct sample of a
    composite, within `MAX_ELEMENTS`. Over rationals a configuration is usable when its
    inlined body divides only by nonzero consts and no argument is empty (no 0/0)."""
    out: list[tuple[list[Shape], dict[str, Any], bool]] = []
    seen: list[tuple[list[Shape], dict[str, Any]]] = []
    for smp in op.samples:
        shapes = [tuple(shape) for shape, _ in smp.args]
        attrs = dict(smp.attrs)
        if (shapes, attrs) in seen or any(size(s) > MAX_ELEMENTS for s in shapes):
            continue
        assert op.body is not None
        body, _ = inline(op.body(shapes, attrs))
        if size(body.shapes[-1]) > MAX_ELEMENTS:
            continue
        seen.append((shapes, attrs))
        exact = all(size(s) > 0 for s in shapes) and _divides_by_consts_only(body)
        out.append((shapes, attrs, exact))
    return out


def _divides_by_consts_only(body: Graph) -> bool:
    """Every division of `body` is by a `const` node without a zero (mean's 1/n)."""
    n_in = len(body.inputs)
    for node in body.nodes:
        if node.op not in _DIVIDING:
            continue
        den = node.args[-1] - n_in
        if den < 0 or body.nodes[den].op != "const":
            return False
        if any(v == 0 for v in dict(body.nodes[den].attrs)["values"]):
            return False
    return True


def derived_builder(op: OpDef) -> Builder | None:
    """The builder of a composite derived from its table entry: one of its samples'
    (argument shapes, attributes) drawn, each argument materialised (`Ctx.materialize`:
    an earlier value of that shape, a reshape of one, or a `const`). None when no sample
    fits in `MAX_ELEMENTS` (the op then has no builder, which the completeness check names)."""
    configs = _derived_configs(op)
    if not configs:
        return None
    exact = [(s, a) for s, a, ok in configs if ok]
    every = [(s, a) for s, a, _ in configs]
    float_build, exact_build = configured(op.name, every), configured(op.name, exact)

    def build(c: Ctx) -> bool:
        if c.kind == "rational":
            return bool(exact) and exact_build(c)
        return float_build(c)

    return build


def math_builder(op: OpDef) -> Builder | None:
    """The builder of a primitive that is one math function (`OpDef.math`), derived from
    its record: its operand any drawn value when the function is real on the whole line, a
    value clamped into (0, ∞) (`Ctx.positive`) when its domain is (lo, ∞) with lo <= 0;
    one time in four (within the node budget) a const of the record's finite hard points
    inside its domain (mixed with small rationals on the whole line). None for another
    domain (the op then needs a hand-written builder, which the completeness check names)."""
    if op.math is None or op.kind != "primitive":
        return None
    lo, hi = op.math.domain
    if hi is not None or (lo is not None and lo > 0):
        return None
    base = unary_builder(op.name) if lo is None else guarded_unary(op.name, always=True)
    hard = [Fraction(h) for h in op.math.hard if math.isfinite(h) and (lo is None or h > lo)]
    if not hard:
        return base
    points = st.sampled_from(hard) | RAT if lo is None else st.sampled_from(hard)

    def build(c: Ctx) -> bool:
        if not c.room(2) or c.draw(st.integers(0, 3)) != 3:
            return base(c)
        x = c.pick()
        if x is None:
            return False
        n = size(c.shapes[x])
        vals = c.draw(st.lists(points, min_size=n, max_size=n))
        c.add(op.name, c.add("const", shape=c.shapes[x], values=vals))
        return True

    return build


def _derived(op: OpDef) -> Builder | None:
    return derived_builder(op) if op.kind == "composite" else math_builder(op)


_DERIVED = {name: _derived(d) for name, d in OPS.items() if name not in SAMPLING_ORDER}

DERIVED_ORDER: tuple[str, ...] = tuple(name for name, b in _DERIVED.items() if b is not None)
"""The ops without a hand-written builder (not in `SAMPLING_ORDER`) whose builder is
derived from their table entry (composites from their samples, math primitives from their
record's domain), in table order; drawn after every op of `SAMPLING_ORDER`."""

for _name in DERIVED_ORDER:
    _b = _DERIVED[_name]
    assert _b is not None
    BUILDERS[_name] = _b

GRAPH_OPS: tuple[str, ...] = tuple(op for op in SAMPLING_ORDER if op in OPS) + DERIVED_ORDER
"""Every op the generator can build, in sampling order (simplest first), then the
composites whose builder is derived (`DERIVED_ORDER`)."""

DEFAULT_FLOAT_OPS: tuple[str, ...] = tuple(op for op in GRAPH_OPS if op != "log")
"""The default op list for domain_kind="float": every op but `log` (see invariant 6)."""


def _op_list(ops: Iterable[str] | None, domain_kind: str) -> list[str]:
    if domain_kind not in ("rational", "float"):
        raise ValueError(f"graphs: domain_kind must be 'rational' or 'float', got {domain_kind!r}")
    if ops is None:
        chosen = list(DEFAULT_FLOAT_OPS)
        if domain_kind == "rational":
            chosen = [op for op in chosen if is_algebraic(op)]
        return chosen
    wanted = set(ops)
    unknown = sorted(wanted - set(BUILDERS))
    if unknown:
        raise ValueError(f"graphs: no generator for ops {unknown}")
    if domain_kind == "rational":
        bad = sorted(op for op in wanted if not is_algebraic(op))
        if bad:
            raise ValueError(f"graphs: ops {bad} are not algebraic; use domain_kind='float'")
    chosen = [op for op in GRAPH_OPS if op in wanted]
    if not chosen:
        raise ValueError("graphs: empty op list")
    return chosen


def graphs(
    ops: Iterable[str] | None = None,
    *,
    min_inputs: int = 1,
    max_inputs: int = 3,
    min_nodes: int = 1,
    max_nodes: int = 6,
    domain_kind: str = "rational",
) -> st.SearchStrategy[Graph]:
    """A strategy for random valid graphs (see the module docstring for the invariants).
    Bad arguments (an unknown op, a non-algebraic op with domain_kind="rational", bad
    bounds) raise ValueError here, when the strategy is built."""
    op_list = _op_list(ops, domain_kind)
    if not 0 <= min_inputs <= max_inputs or not 0 <= min_nodes <= max_nodes:
        raise ValueError(
            f"graphs: need 0 <= min <= max (inputs {min_inputs}..{max_inputs}, "
            f"nodes {min_nodes}..{max_nodes})"
        )
    return _graphs(op_list, min_inputs, max_inputs, min_nodes, max_nodes, domain_kind)


@st.composite
def _graphs(
    draw: st.DrawFn,
    op_list: list[str],
    min_inputs: int,
    max_inputs: int,
    min_nodes: int,
    max_nodes: int,
    domain_kind: str,
) -> Graph:
    n_inputs = draw(st.integers(min_inputs, max_inputs))
    inputs = [draw(_sampled(INPUT_SHAPES)) for _ in range(n_inputs)]
    target = draw(st.integers(min_nodes, max_nodes))
    c = Ctx(draw, domain_kind, inputs, target)
    ops = _sampled(op_list)
    while c.n_nodes < target:
        for _ in range(10):
            # With no value yet (min_inputs=0) only a const can start the graph.
            op = draw(ops) if c.shapes else "const"
            if BUILDERS[op](c):
                break
        else:
            break  # nothing fits in what is left of the budget
    return c.b.build()
