"""The conformance suite: its properties (and, re-exported, their runner and the report).

Invariants:
- A property is (name, dtype, kernel profile, strategy of cases, check); how properties
  run, share their draws (`draws`: equal names, equal strategies) and report a shrunk
  failure is `conformance.runner` (`run_properties`, `run_property`).
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend, get_backend, np_dtype
from runtime.engine import compiled as compiled_kernels
from runtime.session.link import compare_sides, runtime_side
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.tensor import Tensor, TensorPack

from .bounds import check_bounds, check_derivative_bounds
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
from .reports import Row, coverage_table, write_reports
from .reproducer import Reproducer, ReproducerError, check_backends, validate
from .runner import (
    Case,
    Outcome,
    Property,
    draw_groups,
    fold_row,
    group_runs,
    planned_cases,
    run_properties,
    run_property,
    run_salt,
    set_shrinking,
    shared_run,
)
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
