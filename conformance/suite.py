"""The conformance suite: properties, their runner, and the report.

Invariants:
- A property is (name, dtype, kernel profile, strategy of cases, check). `run_property`
  drives it with Hypothesis for a fixed budget; a failing case is shrunk by Hypothesis and
  reported with the shrunk graph as text and as JSON (graph, inputs and seed) that
  reproduces it.
- Comparison policy: "exact" dtype -> exact equality; IEEE dtypes with `ordered` kernels ->
  bit equality (NaN matches NaN, signed zeros must match); IEEE dtypes with `fast` kernels
  -> per-node error bounds (`conformance.bounds`).
- Per IEEE dtype with `ordered`: `link`, `link_special_values`, `link_hard` (hard-case
  values and graphs, `graphs.hard`) and `sparse_backward` (the eager tape's
  `backward_dense`, `sparse_property`); with `fast`: `node_bounds` (forward values) and
  `derivative_bounds` (VJPs, JVPs and accumulated cotangents, `bounds.derivatives`).
- A failure is a dict with `message`, `op` (the op, and the step inside a composite's
  body, the message points at: `where_failed`), `graph_text` and `repro` (JSON); the Session
  state machine's failures have the same keys.
- On a plug-in namespace each row records the namespace functions its cases called
  (`Row.namespace_calls`); the Markdown report has them as a coverage table.
- Nothing here prints except through the `progress` callback; the CLI owns the terminal.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend, get_backend, np_dtype
from runtime.engine import compiled as compiled_kernels
from runtime.session.link import compare_sides, runtime_side
from spec.errors import TorchLeanError
from spec.graph import Graph, format_graph
from spec.inline import inline
from spec.serialize import graph_to_dict, tensor_to_dict
from spec.tensor import Tensor, TensorPack

from .bounds import check_bounds, check_derivative_bounds
from .determinism import seed_only_draws
from .graphs import ALGEBRAIC_OPS, DEFAULT_FLOAT_OPS, GRAPH_OPS, graphs, inputs_for, seeds_for
from .graphs.hard import (
    BROADCAST_OPS,
    FANIN_OPS,
    REDUCTION_OPS,
    broadcast_graphs,
    direct_graphs,
    fanin_graphs,
    hard_inputs_for,
    hard_seeds_for,
    long_reduction_graphs,
    rounding_tensors_for,
)
from .link_property import check_dense_all_vs_from, check_link
from .locate import describe, locate, owner_of_inlined
from .reports import Row, coverage_table, write_reports
from .reproducer import Reproducer, ReproducerError, check_backends, validate
from .sparse_property import check_sparse

__all__ = [
    "IEEE_DTYPES",
    "Case",
    "Outcome",
    "Property",
    "Row",
    "coverage_table",
    "default_properties",
    "differential_check",
    "draw_groups",
    "fold_row",
    "group_runs",
    "planned_cases",
    "replay",
    "run_properties",
    "run_property",
    "run_salt",
    "set_shrinking",
    "shared_run",
    "write_reports",
]

IEEE_DTYPES = ("float64", "float32", "bfloat16", "float16")


@dataclass(frozen=True)
class Case:
    graph: Graph
    inputs: tuple[Tensor, ...]
    seed: TensorPack
    env: tuple[int, ...] = ()


@dataclass
class Outcome:
    ok: bool
    message: str | None = None
    max_ulp: float = 0.0
    worst_ratio: float = 0.0


@dataclass
class Property:
    """`cases(focus)` draws cases; with `focus` (a list of ops) the graphs use only those
    ops (plus the helper nodes the generator inserts), which is how `run_property`
    guarantees that every op of `ops` is exercised."""

    name: str
    dtype: str
    kernels: str
    cases: Callable[[Sequence[str] | None], st.SearchStrategy[Case]]
    check: Callable[[Case], Outcome]
    description: str = ""
    ops: tuple[str, ...] = ()
    backend: str = "numpy"
    # the plug-in namespace's call counter (`registry.CountingNamespace.calls`), if any
    counter: dict[str, int] | None = None
    # focused cases per op = per_op * focus_factor (properties aimed at rare cases)
    focus_factor: int = 1
    # properties of one dtype, backend and op list with the same non-empty `draws` draw
    # the same cases from the same seed: a run draws each case once and checks it under
    # all of them (`draw_groups`); "" draws alone
    draws: str = ""


def _ops_for(dtype: str) -> tuple[str, ...]:
    if dtype == "exact":
        return tuple(op for op in GRAPH_OPS if op in ALGEBRAIC_OPS)
    return tuple(DEFAULT_FLOAT_OPS)


def _cases(
    dtype: str, *, specials: bool = False, max_nodes: int = 6
) -> Callable[[Sequence[str] | None], st.SearchStrategy[Case]]:
    D = DTYPE_DOMAIN[dtype]
    kind = "rational" if dtype == "exact" else "float"
    default_ops = _ops_for(dtype)

    # Performance only (the same draws in the same order): the composite is defined once
    # per property, not once per run (Hypothesis parses its source when it decorates), and
    # the graph strategy is built once per run, not once per case.
    @st.composite
    def build(draw: Any, gs: st.SearchStrategy[Graph]) -> Case:
        g = draw(gs)
        xs = draw(inputs_for(g, D, specials=specials))
        seed = draw(seeds_for(g, D, specials=specials))
        return Case(g, tuple(xs), seed)

    def strategy(focus: Sequence[str] | None) -> st.SearchStrategy[Case]:
        ops = list(focus) if focus is not None else list(default_ops)
        return build(graphs(ops, max_nodes=max_nodes, domain_kind=kind))

    return strategy


def _hard_graphs(
    ops: Sequence[str], focus: Sequence[str] | None, max_nodes: int
) -> st.SearchStrategy[Graph]:
    """Random graphs over `ops`, or graphs cut at the focused op, or multi-axis broadcast
    graphs, or long reductions, or repeated arguments (`graphs.hard`)."""
    gs = graphs(list(ops), max_nodes=max_nodes, domain_kind="float")
    f = list(ops) if focus is not None else None
    if focus is not None:  # also graphs that end at the focused op (seed lands on it)
        gs = st.one_of(gs, direct_graphs(gs, list(ops)))
    if focus is None or any(o in BROADCAST_OPS for o in ops):
        gs = st.one_of(gs, broadcast_graphs(f))
    if focus is None or any(o in REDUCTION_OPS for o in ops):
        gs = st.one_of(gs, long_reduction_graphs(f))
    if focus is None or any(o in FANIN_OPS for o in ops):
        gs = st.one_of(gs, fanin_graphs(f))
    return gs


def _graph_cases(
    dtype: str,
    values: Callable[[Any, Graph, Any], tuple[list[Tensor], TensorPack]],
    max_nodes: int = 6,
) -> Callable[[Sequence[str] | None], st.SearchStrategy[Case]]:
    """Cases over the hard graphs (`_hard_graphs`), inputs and seeds drawn by
    `values(draw, graph, domain)`."""
    D = DTYPE_DOMAIN[dtype]
    default_ops = _ops_for(dtype)

    def strategy(focus: Sequence[str] | None) -> st.SearchStrategy[Case]:
        ops = list(focus) if focus is not None else list(default_ops)
        return _graph_case(_hard_graphs(ops, focus, max_nodes), values, D)

    return strategy


@st.composite
def _graph_case(
    draw: Any,
    gs: st.SearchStrategy[Graph],
    values: Callable[[Any, Graph, Any], tuple[list[Tensor], TensorPack]],
    D: Any,
) -> Case:
    # defined once, not once per run (performance only: Hypothesis parses a composite's
    # source each time it decorates one; the draws are the same)
    g = draw(gs)
    xs, seed = values(draw, g, D)
    return Case(g, tuple(xs), seed)


def _hard_values(draw: Any, g: Graph, D: Any) -> tuple[list[Tensor], TensorPack]:
    """Pooled values (ties, ±0, NaN/inf lanes), kink, boundary and transcendental-hard
    values (`graphs.hard`)."""
    return draw(hard_inputs_for(g, D)), draw(hard_seeds_for(g, D))


def _rounding_values(draw: Any, g: Graph, D: Any) -> tuple[list[Tensor], TensorPack]:
    """Finite inputs and seeds, ordinary or with full-width significands (so every sum and
    product rounds): the cases of the `fast` derivative bounds."""
    xs = draw(st.one_of(inputs_for(g, D), rounding_tensors_for(g.inputs, D)))
    seeds = draw(st.one_of(seeds_for(g, D).map(lambda p: list(p.tensors)),
                           rounding_tensors_for(g.shapes, D)))  # fmt: skip
    return xs, TensorPack(g.shapes, tuple(seeds))


def _hard_cases(dtype: str) -> Callable[[Sequence[str] | None], st.SearchStrategy[Case]]:
    return _graph_cases(dtype, _hard_values)


def _rounding_cases(dtype: str) -> Callable[[Sequence[str] | None], st.SearchStrategy[Case]]:
    return _graph_cases(dtype, _rounding_values)


def _sparse(dtype: str, kernels: str, backend: Backend = NUMPY) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_sparse(
            c.graph,
            c.inputs,
            c.seed.tensors[-1],
            c.env,
            dtype=dtype,
            kernels=kernels,
            backend=backend,
        )
        return Outcome(r.ok, r.first_mismatch)

    return check


def _link(
    dtype: str, kernels: str, backend: Backend = NUMPY, compiled: bool | None = None
) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_link(
            c.graph,
            c.inputs,
            c.seed,
            c.env,
            dtype=dtype,
            kernels=kernels,
            backend=backend,
            compiled=compiled,
        )
        return Outcome(r.ok, r.first_mismatch)

    return check


def differential_check(
    dtype: str, kernels: str, backend: Backend, against: Backend
) -> Callable[[Case], Outcome]:
    """The same case on two backends. `ordered`: values and cotangents bit-equal, node by
    node (the message names the first diverging node). `fast`: both backends' nodes within
    their per-node bounds (the first node out of bounds is named, with its backend)."""

    def check(c: Case) -> Outcome:
        if kernels == "fast":
            worst, ulp = 0.0, 0.0
            for b in (backend, against):
                r = check_bounds(c.graph, c.inputs, c.env, dtype=dtype, kernels="fast", backend=b)
                if not r.ok:
                    return Outcome(False, f"{b.name}: {r.first_violation}", r.max_ulp)
                worst, ulp = max(worst, r.worst_ratio), max(ulp, r.max_ulp)
            return Outcome(True, None, ulp, worst)
        sides = []
        for b in (backend, against):
            try:
                sides.append(runtime_side(c.graph, c.inputs, c.env, c.seed, dtype, kernels, b))
            except TorchLeanError as e:
                sides.append(type(e).__name__)  # type: ignore[arg-type]
        a, b_ = sides
        if isinstance(a, str) or isinstance(b_, str):
            ok = a == b_
            msg = None if ok else f"{backend.name} gave {a!r:.60}, {against.name} {b_!r:.60}"
            return Outcome(ok, msg)
        mism = compare_sides(dtype, a, b_)
        if mism is not None:
            mism = mism.replace("runtime", backend.name).replace("spec", against.name)
        return Outcome(mism is None, mism)

    return check


def _dense_all(c: Case) -> Outcome:
    out_seed = c.seed.tensors[-1]
    r = check_dense_all_vs_from(c.graph, c.inputs, out_seed, c.env, dtype="exact")
    return Outcome(r.ok, r.first_mismatch)


def _derivative_bounds(dtype: str, backend: Backend = NUMPY) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_derivative_bounds(c.graph, c.inputs, c.seed, c.env, dtype=dtype, backend=backend)
        return Outcome(r.ok, r.first_violation, r.max_ulp, r.worst_ratio)

    return check


def _bounds(dtype: str, kernels: str, backend: Backend = NUMPY) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_bounds(c.graph, c.inputs, c.env, dtype=dtype, kernels=kernels, backend=backend)
        return Outcome(r.ok, r.first_violation, r.max_ulp, r.worst_ratio)

    return check


@dataclass(frozen=True)
class _PropertySpec:
    """One IEEE property of the suite as data: it runs for every IEEE dtype when its kernel
    profile is selected and `applies(dtype, backend)` holds."""

    name: str
    kernels: str
    cases: Callable[[str], Callable[[Sequence[str] | None], st.SearchStrategy[Case]]]
    check: Callable[[str, Backend], Callable[[Case], Outcome]]
    description: str
    focus_factor: int = 1
    applies: Callable[[str, Backend], bool] = lambda dtype, backend: True
    draws: str = ""  # the name of `cases`: equal names, equal draws (`Property.draws`)


def _compiled_enabled(dtype: str, backend: Backend) -> bool:
    return backend.is_numpy and compiled_kernels.enabled(np_dtype(dtype))


_IEEE_PROPERTIES = (
    _PropertySpec(
        "link",
        "ordered",
        _cases,
        lambda dt, B: _link(dt, "ordered", B),
        "bit equality of values and cotangents with spec",
        draws="plain",
    ),
    _PropertySpec(
        "link_special_values",
        "ordered",
        lambda dt: _cases(dt, specials=True),
        lambda dt, B: _link(dt, "ordered", B),
        "bit equality with NaN/inf/subnormal/-0 inputs and seeds",
        draws="specials",
    ),
    _PropertySpec(
        "link_hard",
        "ordered",
        _hard_cases,
        lambda dt, B: _link(dt, "ordered", B),
        "bit equality on hard cases: ties, ±0, kinks, rounding and range "
        "boundaries, transcendental hard ranges, multi-axis broadcasting",
        focus_factor=2,
        draws="hard",
    ),
    _PropertySpec(
        "link_compiled",
        "ordered",
        _hard_cases,
        lambda dt, B: _link(dt, "ordered", B, compiled=True),
        "bit equality on hard cases with the compiled ordered kernels at "
        "every size (numba folds and k-loop matmul; elsewhere they serve "
        f"problems of {compiled_kernels.MIN_WORK}+ operations only)",
        applies=_compiled_enabled,
        draws="hard",
    ),
    _PropertySpec(
        "sparse_backward",
        "ordered",
        _hard_cases,
        lambda dt, B: _sparse(dt, "ordered", B),
        "eager tape backward_dense (first contribution stored as is) == spec, "
        "bitwise, hard-case inputs and seeds (−0 included)",
        focus_factor=2,
        draws="hard",
    ),
    _PropertySpec(
        "node_bounds",
        "fast",
        _cases,
        lambda dt, B: _bounds(dt, "fast", B),
        "every primitive node within its stated error bound",
        draws="plain",
    ),
    _PropertySpec(
        "derivative_bounds",
        "fast",
        _rounding_cases,
        _derivative_bounds,
        "every VJP contribution, JVP tangent and accumulated cotangent within "
        "the ball of its spec rule (bounds derived from the rule's operations)",
        draws="rounding",
    ),
)
"""The IEEE properties, in the order a run lists them (ordered profile first, then fast)."""


def _exact_properties() -> list[Property]:
    ops = _ops_for("exact")
    return [
        Property(
            "link",
            "exact",
            "exact",
            _cases("exact"),
            _link("exact", "ordered"),
            "runtime backward_dense_from(lower g) == spec "
            "backprop_all_ctx, values == eval_graph (exact)",
            ops,
            draws="plain",
        ),
        Property(
            "dense_all_vs_from",
            "exact",
            "exact",
            _cases("exact"),
            _dense_all,
            "backward_dense_all(out, seed) == backward_dense_from(one_hot(out, seed))",
            ops,
            draws="plain",
        ),
    ]


def _differential_properties(
    dt: str, kernels: Sequence[str], B: Backend, A: Backend, backend: str
) -> list[Property]:
    return [
        Property(
            f"differential_{A.name}",
            dt,
            k,
            _cases(dt, specials=k == "ordered"),
            differential_check(dt, k, B, A),
            f"{B.name} vs {A.name}: "
            + ("bit-equal per node" if k == "ordered" else "both within node bounds"),
            _ops_for(dt),
            backend,
            draws="specials" if k == "ordered" else "plain",
        )
        for k in kernels
    ]


def _ieee_properties(dt: str, kernels: Sequence[str], B: Backend, backend: str) -> list[Property]:
    ops = _ops_for(dt)
    return [
        Property(
            spec.name,
            dt,
            spec.kernels,
            spec.cases(dt),
            spec.check(dt, B),
            spec.description,
            ops,
            backend,
            focus_factor=spec.focus_factor,
            draws=spec.draws,
        )
        for spec in _IEEE_PROPERTIES
        if spec.kernels in kernels and spec.applies(dt, B)
    ]


def default_properties(
    dtypes: Sequence[str],
    kernels: Sequence[str],
    backend: str = "numpy",
    against: str | None = None,
) -> list[Property]:
    """The suite's properties. On a backend other than NumPy, the IEEE properties run on
    that backend (the exact dtype is NumPy-only and is refused); with `against`, every case
    of a `differential` property also runs on the reference backend and is compared."""
    B = get_backend(backend)
    A = get_backend(against) if against else None
    for dt in dtypes:
        if dt not in B.dtypes:
            raise TorchLeanError(
                f"backend {backend!r} does not support dtype {dt!r} (it has {list(B.dtypes)})"
            )
    props: list[Property] = []
    for dt in dtypes:
        if A is not None and dt != "exact":
            props += _differential_properties(dt, kernels, B, A, backend)
        props += _exact_properties() if dt == "exact" else _ieee_properties(dt, kernels, B, backend)
    counter = getattr(B.xp, "calls", None) if not B.is_numpy else None
    if isinstance(counter, dict):
        for p in props:
            p.counter = counter
    return props


class _CaseFailure(Exception):
    def __init__(self, case: Case, outcome: Outcome) -> None:
        super().__init__(outcome.message)
        self.case, self.outcome = case, outcome


def _repro(case: Case, prop: Property) -> dict[str, Any]:
    D = DTYPE_DOMAIN[prop.dtype]
    return {
        "property": prop.name,
        "dtype": prop.dtype,
        "kernels": prop.kernels,
        "backend": prop.backend,
        "graph": graph_to_dict(case.graph),
        "inputs": [tensor_to_dict(D, x) for x in case.inputs],
        "seed": [tensor_to_dict(D, t) for t in case.seed.tensors],
        "env": list(case.env),
    }


def _inlined_case(c: Case, gi: Graph, vmap: list[int], dtype: str) -> Case:
    """The case on the inlined graph: original seeds at mapped values, +0 elsewhere."""
    D = DTYPE_DOMAIN[dtype]
    where = {j: i for i, j in enumerate(vmap)}
    seeds = [
        c.seed.tensors[where[j]]
        if j in where
        else Tensor(s, tuple(D.zero() for _ in range(_size(s))))
        for j, s in enumerate(gi.shapes)
    ]
    return Case(gi, c.inputs, TensorPack.of(seeds), c.env)


def _size(shape: tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def where_failed(prop: Property, c: Case, message: str | None) -> str:
    """The op (and composite body step) a failure message points at (never raises)."""
    try:
        if prop.name in ("node_bounds", "derivative_bounds") or (
            prop.name.startswith("differential_") and prop.kernels == "fast"
        ):
            gi, vmap = inline(c.graph)
            m = re.search(r"%(\d+)", message or "")
            if m is None:
                return ""
            j = int(m.group(1))
            o = owner_of_inlined(vmap, j)
            own = (
                ""
                if vmap[o] == j
                and gi.nodes[j - gi.num_inputs].op
                == (c.graph.nodes[o - c.graph.num_inputs].op if o >= c.graph.num_inputs else "")
                else f" of {describe(c.graph, o)}"
            )
            return f"step {describe(gi, j)}{own}"

        def recheck(gi: Graph, vmap: list[int]) -> str | None:
            return prop.check(_inlined_case(c, gi, vmap, prop.dtype)).message

        return locate(c.graph, message, recheck if prop.dtype != "exact" else None)
    except Exception as e:  # a help for the reader: never hides the failure
        return f"(could not locate: {type(e).__name__})"


def draw_groups(props: Sequence[Property]) -> list[list[int]]:
    """The properties (indices into `props`) that share their draws, in the order of each
    group's first member: equal non-empty `draws`, dtype, backend and ops (their strategies
    then draw the same cases for the same seed). A property with `draws=""` is alone."""
    groups: dict[Any, list[int]] = {}
    for i, p in enumerate(props):
        key: Any = (p.draws, p.dtype, p.backend, p.ops) if p.draws else i
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def group_runs(
    group: Sequence[Property], max_examples: int, per_op: int
) -> list[tuple[str | None, list[int]]]:
    """The runs of a group, in order: (focus op or None, each member's case quota): the
    run over all ops (`max_examples` cases, the draws each member drew alone: salt 0),
    then one per op of the group, drawing as many cases as the members drew alone
    together (the sum of `per_op` times each one's `focus_factor`: no fewer distinct
    cases per op than before the draws were shared), each checked under every member.
    Runs with no quota are left out."""
    runs: list[tuple[str | None, list[int]]] = [(None, [max_examples] * len(group))]
    if per_op:
        n = sum(per_op * p.focus_factor for p in group)
        runs += [(op, [n] * len(group)) for op in group[0].ops]
    return [(f, q) for f, q in runs if max(q) > 0]


def planned_cases(props: Sequence[Property], max_examples: int, per_op: int) -> int:
    """The cases a run of `props` checks when nothing fails (for a progress bar)."""
    total = 0
    for idx in draw_groups(props):
        for _, quotas in group_runs([props[i] for i in idx], max_examples, per_op):
            total += sum(quotas)
    return total


def run_properties(
    props: Sequence[Property],
    max_examples: int,
    seed: int | None = None,
    progress: Callable[[], None] | None = None,
    per_op: int = 0,
    stop: Callable[[Sequence[Row]], bool] | None = None,
) -> list[Row]:
    """Run properties, each case drawn once for the properties that share its draws
    (`draw_groups`); one row per property, in `props` order. A property stops at its first
    failing run, like `run_property` (each row is what `run_property` gives it when run
    with its group). `stop(rows so far)` true after a group ends the run early (the rows of
    the groups run so far, in `props` order)."""
    rows: dict[int, Row] = {}
    for idx in draw_groups(props):
        group = [props[i] for i in idx]
        group_rows = _run_group(group, max_examples, seed, progress, per_op)
        for i, row in zip(idx, group_rows, strict=True):
            rows[i] = row
        done = [rows[i] for i in sorted(rows)]
        if stop is not None and stop(done):
            return done
    return [rows[i] for i in range(len(props))]


def run_property(
    prop: Property,
    max_examples: int,
    seed: int | None = None,
    progress: Callable[[], None] | None = None,
    per_op: int = 0,
) -> Row:
    """Run one property: `max_examples` cases over all its ops, then `per_op` cases
    focused on each op in turn (so every op is exercised). Never raises on a failing case;
    stops at the first failing run and reports its shrunk case."""
    return run_properties([prop], max_examples, seed, progress, per_op)[0]


def _run_group(
    group: Sequence[Property],
    max_examples: int,
    seed: int | None,
    progress: Callable[[], None] | None,
    per_op: int,
) -> list[Row]:
    rows = [Row(p.name, p.dtype, p.kernels, p.backend) for p in group]
    live = [True] * len(group)
    for focus, quotas in group_runs(group, max_examples, per_op):
        parts = shared_run(group, focus, quotas, seed, progress, live)
        for k, part in enumerate(parts):
            if part is not None:
                fold_row(rows[k], part, focus)
                live[k] = live[k] and not part.failed
        if not any(live):
            break
    return rows


def fold_row(row: Row, part: Row, focus: str | None) -> None:
    """Add one run's row to a property's row (the serial loop's fold; `merge` of the
    shards folds the same way)."""
    row.passed += part.passed
    row.failed += part.failed
    row.max_ulp = max(row.max_ulp, part.max_ulp)
    row.worst_bound_ratio = max(row.worst_bound_ratio, part.worst_bound_ratio)
    row.seconds += part.seconds
    row.ops_covered += focus is not None
    row.cases = row.passed + row.failed
    if part.failure is not None:
        row.failure = part.failure
    calls = dict(row.namespace_calls)
    for k, v in part.namespace_calls.items():
        calls[k] = calls.get(k, 0) + v
    row.namespace_calls = dict(sorted(calls.items()))


def run_salt(prop: Property, focus: str | None) -> int:
    """The seed salt of a run: 0 for the run over all ops; a focused run gets its own draws
    per (property, dtype, kernels, op) — with one seed for all, every op's few focused
    cases repeated one choice sequence everywhere. A group's runs use its first member's."""
    if focus is None:
        return 0
    return zlib.crc32(f"{prop.name}/{prop.dtype}/{prop.kernels}/{focus}".encode())


def shared_run(
    group: Sequence[Property],
    focus: str | None,
    quotas: Sequence[int],
    seed: int | None,
    progress: Callable[[], None] | None = None,
    live: Sequence[bool] | None = None,
) -> list[Row | None]:
    """One Hypothesis run of a group (the first `quotas[k]` cases drawn checked under
    member k; the leader's strategy and salt), a row per live member (None for the
    others). Draws depend on (the group, focus, max quota, seed) only, so each member's row
    is the same whichever members are live: when a member fails, its case is shrunk
    against it alone, and the run is repeated for the members that had not failed, from
    scratch (their counts of the interrupted attempt are dropped)."""
    live = [True] * len(group) if live is None else list(live)
    pending = [k for k in range(len(group)) if live[k] and quotas[k] > 0]
    out: list[Row | None] = [None] * len(group)
    strategy = group[0].cases([focus] if focus is not None else None)
    salt = run_salt(group[0], focus)
    while pending:
        t0 = time.perf_counter()
        rows = {k: Row(group[k].name, group[k].dtype, group[k].kernels, group[k].backend)
                for k in pending}  # fmt: skip
        failed = _attempt(group, quotas, pending, rows, strategy, seed, salt, progress)
        share = (time.perf_counter() - t0) / len(pending)
        for k in pending:
            rows[k].seconds = share
            rows[k].cases = rows[k].passed + rows[k].failed
            out[k] = rows[k]
        if failed is None:
            break
        pending = [k for k in pending if k != failed]
    return out


_SHRINK = [True]
"""Whether property runs shrink a failing case (one slot; `set_shrinking` sets it)."""


def set_shrinking(enabled: bool) -> None:
    """With `enabled` False, property runs stop at the first failing case: the shrink phase
    is replaced by a second generate phase (the witness runs of `proofs`, where shrinking a
    failure the witness caused only costs time). True restores the default."""
    _SHRINK[0] = enabled


_BASE_SEED = int(
    "3515825968864443819716188868553731642293667238399018783082991454554802636610287929945"
    "3989522773774160612858822482586"
)
"""The seed of a derandomised run (salted per focused run): the one Hypothesis derived
from the digest of the suite's test function up to issue 33 (`derandomize=True` seeds
`Random(int_from_bytes(function_digest(test)))`), fixed here so that the drawn cases no
longer change whenever the runner's source does."""


def _attempt(
    group: Sequence[Property],
    quotas: Sequence[int],
    pending: Sequence[int],
    rows: dict[int, Row],
    strategy: st.SearchStrategy[Case],
    seed: int | None,
    salt: int,
    progress: Callable[[], None] | None,
) -> int | None:
    """One Hypothesis run checking the pending members; the member that failed (its row
    has the shrunk failure), or None."""
    state: dict[str, Any] = {"k": 0, "target": None}
    failing: list[_CaseFailure] = []

    @settings(
        max_examples=max(quotas),
        database=None,
        deadline=None,
        derandomize=seed is None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
        phases=(Phase.explicit, Phase.generate, Phase.shrink if _SHRINK[0] else Phase.generate),
    )
    @given(strategy)
    def test(case: Case) -> None:
        k, state["k"] = state["k"], state["k"] + 1
        target = state["target"]
        for m in [target] if target is not None else [m for m in pending if k < quotas[m]]:
            out = _check(group[m], case, rows[m])
            if not out.ok:
                state["target"] = m
                failure = _CaseFailure(case, out)
                failing.append(failure)
                raise failure
            rows[m].passed += 1
            if progress is not None:
                progress()

    test = hyp_seed((_BASE_SEED if seed is None else seed) ^ salt)(test)
    # No example database (database=None above): the key Hypothesis would digest the
    # test's source for on every run is never read.
    test._hypothesis_internal_database_key = None  # type: ignore[attr-defined]
    try:
        with seed_only_draws():
            test()
    except (_CaseFailure, BaseExceptionGroup) as exc:
        e = exc if isinstance(exc, _CaseFailure) else failing[-1]
        m = state["target"]
        prop = group[m]
        rows[m].failed = 1
        rows[m].failure = {
            "message": e.outcome.message,
            "op": where_failed(prop, e.case, e.outcome.message),
            "graph_text": format_graph(e.case.graph),
            "repro": _repro(e.case, prop),
        }
        return int(m)
    return None


def _check(prop: Property, case: Case, row: Row) -> Outcome:
    """`prop.check(case)`, a crash as a failing outcome; the row's worst ulp, bound ratio
    and (on a plug-in namespace) the calls the check made."""
    before = dict(prop.counter) if prop.counter is not None else None
    try:
        out = prop.check(case)
    except Exception as e:  # a crash is a failure of the property, reported with its case
        out = Outcome(False, f"crashed: {type(e).__name__}: {e}")
    row.max_ulp = max(row.max_ulp, out.max_ulp)
    row.worst_bound_ratio = max(row.worst_bound_ratio, out.worst_ratio)
    if before is not None and prop.counter is not None:
        for k, v in prop.counter.items():
            if v - before.get(k, 0) > 0:
                row.namespace_calls[k] = row.namespace_calls.get(k, 0) + v - before.get(k, 0)
    return out


def replay(repro: dict[str, Any], backend: str = "numpy", against: str | None = None) -> Outcome:
    """Re-run the check of a JSON reproducer (as written in a failure report) on `backend`
    (and `against` for a differential property), which come from the caller, never from
    the file: `conformance.reproducer` validates the file and refuses one naming other
    backends before anything is imported or run (`ReproducerError`)."""
    r = repro if isinstance(repro, Reproducer) else validate(repro)
    B = get_backend(backend)
    A = get_backend(against) if against else None
    check_backends(r, backend, B.name, against, A.name if A else None)
    kernels = ["ordered" if r.kernels == "exact" else r.kernels]
    props = [
        p
        for p in default_properties([r.dtype], kernels, backend, against)
        if p.name == r.property and p.kernels == r.kernels
    ]
    if not props:
        known = sorted({f"{p.name}/{p.kernels}" for p in default_properties(
            [r.dtype], ["fast", "ordered"], backend, against)})  # fmt: skip
        raise ReproducerError(
            f"unknown property {r.property!r:.80}/{r.dtype}/{r.kernels} for backend "
            f"{backend!r}; known for dtype {r.dtype}: {known}"
        )
    try:
        return props[0].check(Case(r.graph, r.inputs, r.seed, r.env))
    except TorchLeanError as e:
        raise ReproducerError(f"the case does not fit property {r.property!r}: {e}") from None
