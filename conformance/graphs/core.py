"""Hypothesis strategies for random valid typed graphs, their inputs, tangents and seeds.

Public API (reused by the conformance suite and the unit tests):

- `graphs(ops=None, *, min_inputs=1, max_inputs=3, min_nodes=1, max_nodes=6,
  domain_kind="rational")`: random valid `spec.graph.Graph`s.
- `inputs_for(graph, domain, *, specials=False)`: one tensor per input of Γ (also usable as
  input tangents).
- `seeds_for(graph, domain, *, specials=False)`: a full seed `TensorPack` over every value
  (shapes = `graph.shapes`).
- `tensors_for(shapes, domain, *, specials=False)`, `scalars(domain, *, specials=False)`:
  the element and tensor strategies behind the two above.
- `graph_cases(domain, **graph_kwargs)`: `(graph, inputs, seed)` triples.
- `ALGEBRAIC_OPS` / `is_algebraic(op)`: ops usable over exact rationals (the `algebraic`
  flag of the op table); `GRAPH_OPS`: every op the generator can build, simplest first;
  `DEFAULT_FLOAT_OPS`: `GRAPH_OPS` without `log`; `domain_kind_of(domain)`.

Invariants of `graphs`:

1. Every drawn graph is valid: it is built with `spec.graph.GraphBuilder`, which validates
   each node against the op table. Arguments are *constructed* to satisfy each op's shape
   rule (no filtering); an op that cannot be satisfied from the current values within the
   node budget is skipped and another op is drawn.
2. Nodes are appended in topological order. Shrinking goes towards fewer nodes, earlier
   operand ids, ops earlier in `GRAPH_OPS` (simple elementwise ops first), input shapes
   earlier in `INPUT_SHAPES` (scalars first) and small attribute values.
3. At most `max_nodes` nodes, helper nodes included (`const`, `reshape`, `clamp` guards);
   every value has at most `MAX_ELEMENTS` elements. Input shapes come from `INPUT_SHAPES`,
   which covers scalars, size-1 dims, broadcastable pairs, rank 3 and zero-size shapes.
4. Fan-out and fan-in occur: operands are drawn from all earlier values (the first
   candidate of a binary op's second operand is the first operand itself, e.g. mul(x, x));
   concat and mse_loss may repeat an argument too.
5. `domain_kind="rational"` only admits ops with `algebraic=True`, and every division has a
   strictly positive denominator by construction: `div`'s right operand and `inv`'s
   argument are either `clamp(v, lo, hi)` with 0 < lo <= hi or a `const` with positive
   entries; `mean`/`reduce_mean` divide by a size >= 1. Evaluating, differentiating and
   transposing such a graph over `RATIONAL` never raises `DomainError`, for any inputs.
6. `domain_kind="float"` admits every op; denominators are unrestricted (IEEE division by
   zero is defined). `log` has a value precondition (x > 0, checked when the graph is
   evaluated), so it is excluded from the default op list (`DEFAULT_FLOAT_OPS`); when it is
   requested explicitly, its argument is always guarded as `clamp(v, lo, hi)` with lo > 0,
   which satisfies the precondition for every non-NaN value. A NaN can still reach it (from
   special input values, or from overflow such as inf - inf), so callers that request `log`
   must treat a `DomainError` from evaluation as a rejected example. `safe_log` is total and
   needs no guard.
7. `select` always uses a literal `index` (never `env_slot`), so every drawn graph
   evaluates with the empty environment `env=()`.

Inputs: over `RATIONAL` elements are n/d with -8 <= n <= 8 and 1 <= d <= 4; over an IEEE
domain they are finite binary64 numbers in [-8, 8] (or such small rationals), rounded once
with `from_float`/`from_rational`. With `specials=True` IEEE elements also include NaN,
+-inf, +-0, the smallest and largest subnormals and the largest finite value (`specials` has
no effect over `RATIONAL`, which has no special values).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from spec.domains import Domain, IEEEDomain
from spec.graph import Graph, GraphBuilder
from spec.ops import OPS
from spec.shape import Shape, broadcast_shapes, size
from spec.tensor import Tensor, TensorPack

from .graphs_model import model_builders

__all__ = [
    "ALGEBRAIC_OPS",
    "DEFAULT_FLOAT_OPS",
    "GRAPH_OPS",
    "INPUT_SHAPES",
    "MAX_ELEMENTS",
    "domain_kind_of",
    "graph_cases",
    "graphs",
    "inputs_for",
    "is_algebraic",
    "scalars",
    "seeds_for",
    "special_values",
    "tensors_for",
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

_RAT = st.builds(Fraction, st.integers(-8, 8), st.integers(1, 4))
_POS_RAT = st.builds(Fraction, st.integers(1, 8), st.integers(1, 4))
_NONNEG_RAT = st.builds(Fraction, st.integers(0, 8), st.integers(1, 4))


def _factorizations(n: int) -> list[Shape]:
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


def _broadcast_partners(s: Shape) -> list[Shape]:
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


def _broadcast_targets(s: Shape) -> list[Shape]:
    """Shapes that s broadcasts to (s itself first), within MAX_ELEMENTS."""
    cands: list[Shape] = [s]
    for i, d in enumerate(s):
        if d == 1:
            cands += [(*s[:i], k, *s[i + 1 :]) for k in (2, 3, 0)]
    cands += [(k, *s) for k in (2, 1, 3)]
    cands.append(tuple(2 if d == 1 else d for d in s))
    return [c for i, c in enumerate(cands) if c not in cands[:i] and size(c) <= MAX_ELEMENTS]


# --------------------------------------------------------------------------- the builder


class _Ctx:
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
        return int(self.draw(st.sampled_from(cands)))

    def const(self, shape: Shape, positive: bool = False) -> int:
        n = size(shape)
        vals = self.draw(st.lists(_POS_RAT if positive else _RAT, min_size=n, max_size=n))
        return self.add("const", shape=shape, values=vals)

    def positive(self, v: int) -> int:
        """clamp(v, lo, hi) with 0 < lo <= hi: strictly positive whenever v is not NaN."""
        lo = self.draw(_POS_RAT)
        hi = lo + self.draw(_NONNEG_RAT)
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
        how, i = self.draw(st.sampled_from(opts))
        i = int(i)
        if how == "id":
            return i
        if how == "reshape":
            return self.add("reshape", i, shape=shape)
        return self.const(shape)


Builder = Callable[[_Ctx], bool]


def _unary(op: str) -> Builder:
    def build(c: _Ctx) -> bool:
        x = c.pick()
        if x is None or not c.room(1):
            return False
        c.add(op, x)
        return True

    return build


def _binary(op: str, positive_rhs: bool = False) -> Builder:
    """A broadcasting binary op. With `positive_rhs` over rationals the right operand is
    made strictly positive (a guard clamp or a positive const)."""

    def build(c: _Ctx) -> bool:
        a = c.pick()
        if a is None or not c.room(1):
            return False
        sa = c.shapes[a]
        guard = positive_rhs and c.kind == "rational"
        use_const = c.room(2) and c.draw(st.integers(0, 3)) == 3
        if use_const:
            b = c.const(c.draw(st.sampled_from(_broadcast_partners(sa))), positive=guard)
        else:
            others = c.candidates(
                lambda s: (o := broadcast_shapes(sa, s)) is not None and size(o) <= MAX_ELEMENTS
            )
            b = c.draw(st.sampled_from([a] + [i for i in others if i != a]))
            if guard:
                if not c.room(2):
                    return False
                b = c.positive(b)
        if not positive_rhs and c.draw(st.booleans()):
            a, b = b, a
        c.add(op, a, b)
        return True

    return build


def _scale(c: _Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("scale", x, c=c.draw(_RAT | st.just(Fraction(1, 3))))
    return True


def _clamp(c: _Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    lo = c.draw(_RAT)
    hi = lo + c.draw(_NONNEG_RAT)
    c.add("clamp", x, lo=lo, hi=hi)
    return True


def _guarded_unary(op: str, always: bool) -> Builder:
    """An op whose argument must be positive: guarded always (log) or over rationals (inv)."""

    def build(c: _Ctx) -> bool:
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


def _const(c: _Ctx) -> bool:
    if not c.room(1):
        return False
    c.const(c.draw(st.sampled_from(INPUT_SHAPES)))
    return True


def _mean(c: _Ctx) -> bool:
    x = c.pick(lambda s: size(s) >= 1)
    if x is None or not c.room(1):
        return False
    c.add("mean", x)
    return True


def _reduce(op: str) -> Builder:
    def build(c: _Ctx) -> bool:
        need_nonempty = op == "reduce_mean"
        x = c.pick(lambda s: any(d >= 1 or not need_nonempty for d in s))
        if x is None or not c.room(1):
            return False
        s = c.shapes[x]
        axes = [i for i, d in enumerate(s) if d >= 1 or not need_nonempty]
        c.add(op, x, axis=c.draw(st.sampled_from(axes)))
        return True

    return build


def _reshape(c: _Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("reshape", x, shape=c.draw(st.sampled_from(_factorizations(size(c.shapes[x])))))
    return True


def _swap_adjacent(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 2)
    if x is None or not c.room(1):
        return False
    c.add("swap_adjacent", x, axis=c.draw(st.integers(0, len(c.shapes[x]) - 2)))
    return True


def _transpose(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 2)
    if x is None or not c.room(1):
        return False
    c.add("transpose", x)
    return True


def _broadcast_to(c: _Ctx) -> bool:
    x = c.pick()
    if x is None or not c.room(1):
        return False
    c.add("broadcast_to", x, shape=c.draw(st.sampled_from(_broadcast_targets(c.shapes[x]))))
    return True


def _concat(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    tail = c.shapes[x][1:]
    same = [x] + [i for i in c.candidates(lambda s: len(s) >= 1 and s[1:] == tail) if i != x]
    args = [x]
    total = size(c.shapes[x])
    for _ in range(c.draw(st.integers(0, 2))):
        y = c.draw(st.sampled_from(same))
        if total + size(c.shapes[y]) > MAX_ELEMENTS:
            break
        args.append(y)
        total += size(c.shapes[y])
    c.add("concat", *args)
    return True


def _slice(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    n = c.shapes[x][0]
    start = c.draw(st.integers(0, n))
    stop = c.draw(st.integers(start, n))
    c.add("slice", x, start=start, stop=stop)
    return True


def _select(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1 and s[0] >= 1)
    if x is None or not c.room(1):
        return False
    c.add("select", x, index=c.draw(st.integers(0, c.shapes[x][0] - 1)))
    return True


def _index_select(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    inner = size(s[1:])
    longest = 4 if inner == 0 else min(4, MAX_ELEMENTS // inner)
    if s[0] == 0:
        indices: list[int] = []
    else:
        indices = c.draw(st.lists(st.integers(0, s[0] - 1), max_size=longest))
    c.add("index_select", x, indices=indices)
    return True


def _scatter_add(c: _Ctx) -> bool:
    x = c.pick(lambda s: len(s) >= 1)
    if x is None or not c.room(1):
        return False
    s = c.shapes[x]
    inner = size(s[1:])
    biggest = 3 if inner == 0 else max(1, min(3, MAX_ELEMENTS // inner))
    n = c.draw(st.integers(1 if s[0] > 0 else 0, biggest))
    indices = c.draw(st.lists(st.integers(0, max(n - 1, 0)), min_size=s[0], max_size=s[0]))
    c.add("scatter_add", x, indices=indices, size=n)
    return True


def _last_axis(op: str) -> Builder:
    def build(c: _Ctx) -> bool:
        x = c.pick(lambda s: len(s) >= 1 and s[-1] >= 1)
        if x is None or not c.room(1):
            return False
        c.add(op, x)
        return True

    return build


def _two_d(c: _Ctx) -> int | None:
    """A value of rank >= 2: an existing one, or a 2-D reshape of an existing value."""
    existing = c.candidates(lambda s: len(s) >= 2)
    if existing and (not c.room(2) or c.draw(st.integers(0, 2)) != 2):
        return int(c.draw(st.sampled_from(existing)))
    if not c.room(2):
        return None
    x = c.draw(st.sampled_from(range(len(c.shapes))))
    shapes = [f for f in _factorizations(size(c.shapes[x])) if len(f) == 2]
    return c.add("reshape", x, shape=c.draw(st.sampled_from(shapes)))


def _matmul(c: _Ctx) -> bool:
    if not c.shapes or not c.room(1):
        return False
    a = _two_d(c)
    if a is None:
        return False
    sa = c.shapes[a]
    k, batch_a = sa[-1], sa[:-2]

    def fits(s: Shape) -> bool:
        if len(s) < 2 or s[-2] != k:
            return False
        batch = broadcast_shapes(batch_a, s[:-2])
        return batch is not None and size((*batch, sa[-2], s[-1])) <= MAX_ELEMENTS

    existing = c.candidates(fits)
    if existing and (not c.room(2) or c.draw(st.integers(0, 2)) != 2):
        b = c.draw(st.sampled_from(existing))
    else:
        shapes = [(k, n) for n in (1, 2, 3, 0)] + [(2, k, n) for n in (1, 2)]
        shapes = [s for s in shapes if fits(s) and size(s) <= MAX_ELEMENTS]
        if not shapes or not c.room(2):
            return False
        mb = c.materialize(c.draw(st.sampled_from(shapes)), reserve=1)
        if mb is None:
            return False
        b = mb
    c.add("matmul", a, b)
    return True


def _linear(c: _Ctx) -> bool:
    if not c.shapes or not c.room(1):
        return False
    existing = c.candidates(lambda s: len(s) in (1, 2))
    if existing and (not c.room(4) or c.draw(st.integers(0, 3)) != 3):
        x = c.draw(st.sampled_from(existing))
    elif c.room(2):
        y = c.draw(st.sampled_from(range(len(c.shapes))))
        x = c.add("reshape", y, shape=(size(c.shapes[y]),))
    else:
        return False
    sx = c.shapes[x]
    n_in, rows = sx[-1], (sx[0] if len(sx) == 2 else 1)
    outs = [o for o in (1, 2, 3) if o * n_in <= MAX_ELEMENTS and o * rows <= MAX_ELEMENTS]
    if not outs:
        return False
    w_existing = c.candidates(lambda s: len(s) == 2 and s[1] == n_in and s[0] in outs)
    use_existing: bool = c.draw(st.booleans())
    if w_existing and use_existing:
        w = int(c.draw(st.sampled_from(w_existing)))
    else:
        mw = c.materialize((c.draw(st.sampled_from(outs)), n_in), reserve=2)
        if mw is None:
            return False
        w = mw
    b = c.materialize((c.shapes[w][0],), reserve=1)
    if b is None:
        return False
    c.add("linear", x, w, b)
    return True


def _paired(op: str, pred: Callable[[Shape], bool]) -> Builder:
    """A two-argument op whose arguments share one shape (mse_loss, cross_entropy)."""

    def build(c: _Ctx) -> bool:
        y = c.pick(pred)
        if y is None or not c.room(1):
            return False
        t = c.materialize(c.shapes[y], reserve=1)
        if t is None:
            return False
        c.add(op, y, t)
        return True

    return build


_BUILDERS: dict[str, Builder] = {
    "add": _binary("add"),
    "mul": _binary("mul"),
    "neg": _unary("neg"),
    "sub": _binary("sub"),
    "scale": _scale,
    "relu": _unary("relu"),
    "abs": _unary("abs"),
    "maximum": _binary("maximum"),
    "minimum": _binary("minimum"),
    "clamp": _clamp,
    "detach": _unary("detach"),
    "const": _const,
    "sum": _unary("sum"),
    "reshape": _reshape,
    "broadcast_to": _broadcast_to,
    "slice": _slice,
    "select": _select,
    "concat": _concat,
    "swap_adjacent": _swap_adjacent,
    "transpose": _transpose,
    "reduce_sum": _reduce("reduce_sum"),
    "mean": _mean,
    "reduce_mean": _reduce("reduce_mean"),
    "index_select": _index_select,
    "scatter_add": _scatter_add,
    "matmul": _matmul,
    "linear": _linear,
    "div": _binary("div", positive_rhs=True),
    "inv": _guarded_unary("inv", always=False),
    "mse_loss": _paired("mse_loss", lambda s: size(s) >= 1),
    "sqrt": _unary("sqrt"),
    "exp": _unary("exp"),
    "tanh": _unary("tanh"),
    "sin": _unary("sin"),
    "cos": _unary("cos"),
    "safe_log": _unary("safe_log"),
    "log": _guarded_unary("log", always=True),
    "sigmoid": _unary("sigmoid"),
    "softplus": _unary("softplus"),
    "silu": _unary("silu"),
    "gelu": _unary("gelu"),
    "softmax": _last_axis("softmax"),
    "log_softmax": _last_axis("log_softmax"),
    "cross_entropy": _paired(
        "cross_entropy", lambda s: len(s) in (1, 2) and s[-1] >= 1 and (len(s) == 1 or s[0] >= 1)
    ),
}

_BUILDERS.update(model_builders(MAX_ELEMENTS))  # conv, pooling, norms, attention, ...

GRAPH_OPS: tuple[str, ...] = tuple(op for op in _BUILDERS if op in OPS)
"""Every op the generator can build, in sampling order (simplest first)."""

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
    unknown = sorted(wanted - set(_BUILDERS))
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
    inputs = [draw(st.sampled_from(INPUT_SHAPES)) for _ in range(n_inputs)]
    target = draw(st.integers(min_nodes, max_nodes))
    c = _Ctx(draw, domain_kind, inputs, target)
    while c.n_nodes < target:
        for _ in range(10):
            # With no value yet (min_inputs=0) only a const can start the graph.
            op = draw(st.sampled_from(op_list)) if c.shapes else "const"
            if _BUILDERS[op](c):
                break
        else:
            break  # nothing fits in what is left of the budget
    return c.b.build()


# --------------------------------------------------------------------------- values


def special_values(domain: IEEEDomain) -> list[Any]:
    """NaN, +-inf, +-0, the smallest and largest subnormals (both signs) and the largest
    finite value (both signs) of an IEEE domain."""
    sign = 1 << (domain.width - 1)
    mant = (1 << domain.mbits) - 1
    max_finite = ((2**domain.ebits - 2) << domain.mbits) | mant
    bits = [1, mant, max_finite, sign | 1, sign | mant, sign | max_finite]
    return [
        domain.from_float(float("nan")),
        domain.from_float(float("inf")),
        domain.from_float(float("-inf")),
        domain.from_float(0.0),
        domain.from_float(-0.0),
        *(domain.from_bits(b) for b in bits),
    ]


def scalars(domain: Domain, *, specials: bool = False) -> st.SearchStrategy[Any]:
    """Elements of a domain (see the module docstring)."""
    kind = domain_kind_of(domain)
    if kind == "rational":
        return _RAT.map(domain.from_rational)
    assert isinstance(domain, IEEEDomain)
    finite = _RAT.map(domain.from_rational) | st.floats(
        -8.0, 8.0, allow_nan=False, allow_infinity=False
    ).map(domain.from_float)
    if specials:
        return finite | st.sampled_from(special_values(domain))
    return finite


def _tensor(shape: Shape, elems: st.SearchStrategy[Any]) -> st.SearchStrategy[Tensor]:
    n = size(shape)
    return st.lists(elems, min_size=n, max_size=n).map(lambda v: Tensor(shape, tuple(v)))


def tensors_for(
    shapes: Sequence[Shape], domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    """One tensor per shape, elements drawn by `scalars`."""
    elems = scalars(domain, specials=specials)
    return st.tuples(*(_tensor(tuple(s), elems) for s in shapes)).map(list)


def inputs_for(
    graph: Graph, domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    """Input tensors for the graph's Γ (equally usable as input tangents)."""
    return tensors_for(graph.inputs, domain, specials=specials)


def seeds_for(
    graph: Graph, domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[TensorPack]:
    """A full seed over every value of the graph (shapes = graph.shapes)."""
    return tensors_for(graph.shapes, domain, specials=specials).map(
        lambda ts: TensorPack(graph.shapes, tuple(ts))
    )


@st.composite
def graph_cases(
    draw: st.DrawFn, domain: Domain, /, *, specials: bool = False, **graph_kwargs: Any
) -> tuple[Graph, list[Tensor], TensorPack]:
    """(graph, inputs, seed) with the graph drawn for the domain's kind."""
    graph_kwargs.setdefault("domain_kind", domain_kind_of(domain))
    g = draw(graphs(**graph_kwargs))
    xs = draw(inputs_for(g, domain, specials=specials))
    seed = draw(seeds_for(g, domain, specials=specials))
    return g, xs, seed
