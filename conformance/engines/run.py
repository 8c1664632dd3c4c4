"""The engine runner: per-node checks over random graphs, convention probes at their
defining points, whole-graph checks, and the report rows.

Invariants:
- Cases come from `conformance.graphs` (`graphs`, `inputs_for`, `seeds_for`, float
  domain, finite inputs in [-8, 8]); Hypothesis draws `max_examples` cases over all the
  checked ops, then `per_op` cases focused on each op, then (the hard phase) `per_op`
  more per op with inputs and seeds from the hard-case pools without NaN or ±inf
  (`hard_inputs_for(..., finite=True)`: ties, ±0, kinks, rounding boundaries, subnormals,
  the largest finite values, each transcendental's hard ranges); whole graphs are checked
  on the ordinary cases only. Each node of a case is checked by
  `local.check_node` on the engine's own outputs of the earlier nodes (the spec's value in
  the dtype where the engine does not cover a helper node). The first *wrong* node stops
  that run, Hypothesis shrinks the case, and the shrunk node is reported with a JSON
  reproducer (one-node graph, inputs, cotangent, tangents) naming the op.
- Statistics are recorded only until a run's first failure (shrinking does not inflate
  them). A whole-graph check runs on every case whose ops the engine all covers and where
  no node differed by a convention (other than signed zeros).
- Grid: the elementwise ops without attributes are also checked on a fixed grid of 48
  points of [-8, 8] (away from ties, zeros and bounds); a wrong grid element is reported as
  its one-element case.
- Probes: every convention of a checked op is evaluated at its defining points in every
  dtype; the row says whether spec and engine differ there, with both values.
- Conventions are reported, never failures, unless `strict_conventions` is set; then any
  convention other than `signed_zero` that differs fails the run.
- Shrinking is capped: `shrink_seconds` (default `SHRINK_SECONDS`) after a run's first
  failure the run stops, and the reported reproducer is the last failing case found (a
  real failing case, possibly not the smallest); the row's note says so.
- Environment cases: the graph generator draws `select` with a literal `index` only, so
  `select` is also checked on fixed inputs with `env_slot` and an integer environment
  (`ENV_CASES`), recorded in its row; a wrong one is reported with `env` in the reproducer.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import assume, given
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

from spec.errors import TorchLeanError
from spec.graph import Node
from spec.ops import OPS, get_op
from spec.tensor import Tensor
from spec.validate import normalize_attrs

from ..determinism import seed_only_draws
from ..graphs import GRAPH_OPS, graphs, inputs_for, seeds_for
from ..graphs.hard import hard_inputs_for, hard_seeds_for
from ..profiles import run_settings
from .base import Engine, OpCall, ieee_domain
from .conventions import (
    CONVENTIONS,
    NONFINITE_POINTS,
    SIGNED_ZERO,
    SUBNORMAL_FLUSH,
    nan_probe,
)
from .local import NodeResult, check_node, flush_probe, lift
from .replay import make_repro, replay_node
from .whole import CONSTANT_OPS, check_graph, check_graph_forward

__all__ = [
    "ENV_CASES",
    "SHRINK_SECONDS",
    "ConventionRow",
    "EngineRun",
    "GraphRow",
    "OpRow",
    "probe_conventions",
    "replay_node",
    "run_engine",
]


@dataclass
class OpRow:
    engine: str
    dtype: str
    op: str
    covered: bool = True
    cases: int = 0
    forward_max_ulp: float = 0.0
    backward_max_ulp: float | None = 0.0  # None: a forward-only engine (never checked)
    jvp_max_ulp: float | None = None
    # the worst element's error / its budget per direction (> 1: beyond budget)
    forward_ratio: float = 0.0
    backward_ratio: float | None = 0.0
    jvp_ratio: float | None = None
    conventions: list[str] = field(default_factory=list)
    failures: int = 0
    refused: int = 0
    note: str | None = None
    failure: dict[str, Any] | None = None
    unconstrained: int = 0  # elements (`ball` scale) where a direct evaluation may overflow


@dataclass
class GraphRow:
    engine: str
    dtype: str
    graphs: int = 0
    max_ratio: float = 0.0
    max_ulp: float = 0.0
    nonfinite: int = 0
    refused: int = 0
    worst: str | None = None


@dataclass
class ConventionRow:
    engine: str
    dtype: str
    convention: str
    op: str
    differs: bool
    spec: list[str]
    engine_value: list[str]
    sentence: str


@dataclass
class EngineRun:
    ops: list[OpRow]
    graphs: list[GraphRow]
    conventions: list[ConventionRow]
    forward_only: bool = False  # the engine has no autograd: only forwards were judged

    @property
    def node_checks(self) -> int:
        return sum(r.cases for r in self.ops)

    def failed(self, strict_conventions: bool = False) -> bool:
        if any(r.failures for r in self.ops):
            return True
        return (
            strict_conventions
            and any(c.differs for c in self.conventions if c.convention != SIGNED_ZERO.name)
        ) or (
            strict_conventions
            and any(n != SIGNED_ZERO.name for r in self.ops for n in r.conventions)
        )


SHRINK_SECONDS = 30.0
# select's environment cases: (input shape, env, env_slot), env[env_slot] in range
ENV_CASES: tuple[tuple[tuple[int, ...], tuple[int, ...], int], ...] = (
    ((3,), (2, 0), 0),
    ((3, 2), (2, 0), 1),
    ((2, 2, 2), (0, 1), 1),
    ((4, 1), (5, 3, 1), 2),
)


class _Failure(Exception):
    pass


class _ShrinkCapped(BaseException):
    """Raised through Hypothesis (not an `Exception`, so not a test failure) to end a
    shrink that ran past its time cap."""


@dataclass
class _State:
    rows: dict[str, OpRow]
    graph: GraphRow
    recording: bool = True
    failure: dict[str, Any] | None = None
    shrink_seconds: float | None = None  # the cap on shrinking (None: no cap)
    shrink_until: float | None = None  # perf_counter deadline, set at the first failure
    whole_graphs: bool = True  # off in the hard phase (the first-order bound is no guide)


def _check_case(engine: Engine, dtype: str, case: tuple, st_: _State) -> None:
    """Check every node of one case; raise `_Failure` at a wrong node (starting the shrink
    clock at a run's first) and `_ShrinkCapped` once that clock ran out."""
    if st_.shrink_until is not None and time.perf_counter() > st_.shrink_until:
        raise _ShrinkCapped
    g, xs, seed = case
    D = ieee_domain(dtype)
    vals: list[Tensor] = list(xs)
    results: list[NodeResult] = []
    all_covered, clean = True, True
    for k, node in enumerate(g.nodes):
        idx = g.num_inputs + k
        args = [vals[a] for a in node.args]
        attrs = dict(node.attrs)
        res: NodeResult | None = None
        if node.op not in CONSTANT_OPS:
            res = check_node(
                engine,
                dtype,
                node.op,
                attrs,
                args,
                seed.tensors[idx],
                [seed.tensors[a] for a in node.args],
            )
            results.append(res)
            if st_.recording:
                _record(st_.rows, engine, dtype, res)
            if res.wrong is not None:
                st_.failure = {
                    "op": node.op,
                    "message": res.wrong,
                    "repro": make_repro(
                        engine,
                        dtype,
                        node,
                        args,
                        seed.tensors[idx],
                        [seed.tensors[a] for a in node.args],
                    ),
                }
                if st_.shrink_until is None and st_.shrink_seconds is not None:
                    st_.shrink_until = time.perf_counter() + st_.shrink_seconds
                raise _Failure(res.wrong)
            all_covered &= res.covered and res.refused is None
            clean &= not any(n != SIGNED_ZERO.name for n in res.conventions)
        if res is not None and res.output is not None and res.output.shape == g.shapes[idx]:
            vals.append(res.output)
        else:
            try:
                vals.append(get_op(node.op).forward(D, args, attrs, ()))
            except TorchLeanError:
                return
    if all_covered and clean and g.nodes and st_.recording and st_.whole_graphs:
        if engine.has_vjp:
            gr = check_graph(engine, dtype, g, list(xs), seed.tensors[-1])
        else:
            gr = check_graph_forward(engine, dtype, g, list(xs))
        st_.graph.graphs += 1
        if gr.ratio > st_.graph.max_ratio:
            st_.graph.max_ratio, st_.graph.worst = gr.ratio, gr.worst
        st_.graph.max_ulp = max(st_.graph.max_ulp, gr.max_ulp)
        st_.graph.nonfinite += gr.nonfinite
        st_.graph.refused += gr.refused is not None


def op_row(rows: dict[str, OpRow], engine: Engine, dtype: str, op: str) -> OpRow:
    """The row of `op` in `rows`, created empty (backward `None` for a forward-only
    engine: its backward is never checked)."""
    r = rows.get(op)
    if r is None:
        r = rows[op] = OpRow(engine.name, dtype, op)
        if not engine.has_vjp:
            r.backward_max_ulp = r.backward_ratio = None
    return r


def _record(rows: dict[str, OpRow], engine: Engine, dtype: str, res: NodeResult) -> None:
    r = op_row(rows, engine, dtype, res.op)
    if not res.covered:
        return
    if res.refused is not None:
        r.refused += 1
        r.note = r.note or f"refused: {res.refused}"
        return
    r.cases += 1
    r.unconstrained += res.unconstrained
    r.forward_max_ulp = max(r.forward_max_ulp, res.max_ulp.get("forward", 0.0))
    if r.backward_max_ulp is not None:
        r.backward_max_ulp = max(r.backward_max_ulp, res.max_ulp.get("vjp", 0.0))
    if "jvp" in res.max_ulp:
        r.jvp_max_ulp = max(r.jvp_max_ulp or 0.0, res.max_ulp["jvp"])
    r.forward_ratio = max(r.forward_ratio, res.max_ratio.get("forward", 0.0))
    if r.backward_ratio is not None:
        r.backward_ratio = max(r.backward_ratio, res.max_ratio.get("vjp", 0.0))
    if "jvp" in res.max_ratio:
        r.jvp_ratio = max(r.jvp_ratio or 0.0, res.max_ratio["jvp"])
    if res.jvp_refused:
        r.note = r.note or f"jvp refused: {res.jvp_refused}"
    for n in res.conventions:
        if n not in r.conventions:
            r.conventions.append(n)


def _strategy(ops: Sequence[str], dtype: str, max_nodes: int, hard: bool) -> st.SearchStrategy:
    D = ieee_domain(dtype)

    @st.composite
    def build(draw: Any) -> tuple:
        g = draw(graphs(list(ops), max_nodes=max_nodes, domain_kind="float"))
        assume(any(n.op in ops for n in g.nodes))
        if hard:
            xs = draw(hard_inputs_for(g, D, finite=True))
            seed = draw(hard_seeds_for(g, D, finite=True))
        else:
            xs = draw(inputs_for(g, D))
            seed = draw(seeds_for(g, D))
        return g, tuple(xs), seed

    return build()


DRAW_SEED = int(
    "34317ff5027be0411a7640c8d7b2fbb87b85a6f75d446a3fce14cd3ec072305e"
    "633362962d001ac07a5e8ab7ee143fd0",
    16,
)
"""The seed of derandomised runs (no `--seed`): the digest Hypothesis's `derandomize`
took of `_run`'s test while its settings were written out in the decorator (so the
cases are the same as before they moved to `profiles.run_settings`, and editing the test
no longer changes them)."""


def _run(
    engine: Engine,
    dtype: str,
    ops: Sequence[str],
    n: int,
    seed: int | None,
    st_: _State,
    progress: Callable[[], None] | None,
    max_nodes: int,
    shrink_seconds: float | None,
    hard: bool = False,
) -> None:
    st_.recording, st_.failure, st_.whole_graphs = True, None, not hard
    st_.shrink_seconds, st_.shrink_until = shrink_seconds, None

    @run_settings(n, seed)
    @given(_strategy(ops, dtype, max_nodes, hard))
    def test(case: tuple) -> None:
        try:
            _check_case(engine, dtype, case, st_)
        except _Failure:
            st_.recording = False
            raise
        if progress is not None and st_.recording:
            progress()

    test = hyp_seed(DRAW_SEED if seed is None else seed)(test)
    capped = False
    try:
        with seed_only_draws():
            test()
    except _ShrinkCapped:
        capped = True
    except (_Failure, BaseExceptionGroup):
        pass
    f = st_.failure
    if f is None:
        return
    r = op_row(st_.rows, engine, dtype, f["op"])
    r.failures += 1
    r.failure = r.failure or f
    if capped and r.failure is f:
        r.note = (r.note + "; " if r.note else "") + (
            f"shrinking stopped after {shrink_seconds:g} s: the reproducer is the last "
            "failing case found"
        )


_GRID_FAMILIES = ("elementwise", "transcendental")


def _grid_inputs(D: Any, op: str, batch: int) -> tuple[list[Tensor], Tensor]:
    """Batch `batch` of the grid: 12 points of [-8, 8] at an irrational offset (so no point
    is a tie, zero or bound), positive for log; the cotangent is cos(j) per element."""
    n = 12
    phi = 0.6180339887498949
    pts = [-8.0 + 16.0 * (batch * n + j + phi) / (4 * n) for j in range(n)]
    if op == "log":
        pts = [abs(v) + 0.0625 for v in pts]
    x = Tensor((n,), tuple(D.from_float(v) for v in pts))
    y = Tensor((n,), tuple(D.from_float(v * 0.75 - 1.0) for v in reversed(pts)))
    g = Tensor((n,), tuple(D.from_float(math.cos(j + batch)) for j in range(n)))
    arity = get_op(op).arity
    return ([x] if arity == 1 else [x, y]), g


def _grid(engine: Engine, dtype: str, ops: Sequence[str], st_: _State) -> None:
    """Deterministic grid cases for the elementwise ops without attributes (4 batches of
    12 points each): the max-ulp columns then measure the kernels away from special
    points. A wrong element is reported as the one-element case that fails."""
    D = ieee_domain(dtype)
    for op in ops:
        d = get_op(op)
        if d.family not in _GRID_FAMILIES or d.attrs or d.arity not in (1, 2):
            continue
        for batch in range(4):
            xs, g = _grid_inputs(D, op, batch)
            res = check_node(engine, dtype, op, {}, xs, g, [g] * len(xs))
            _record(st_.rows, engine, dtype, res)
            if res.wrong is None:
                continue
            for i in range(len(g.data)):
                xi = [Tensor((), (x.data[i],)) for x in xs]
                gi = Tensor((), (g.data[i],))
                one = check_node(engine, dtype, op, {}, xi, gi, [gi] * len(xi))
                if one.wrong is not None:
                    r = st_.rows[op]
                    r.failures += 1
                    node = Node(op, tuple(range(len(xi))), {})
                    r.failure = r.failure or {
                        "op": op,
                        "message": one.wrong,
                        "repro": make_repro(engine, dtype, node, xi, gi, [gi] * len(xi)),
                    }
                    break
            break


def _env_cases(engine: Engine, dtype: str, st_: _State) -> None:
    """`select` with `env_slot` on `ENV_CASES` (grid-like values, cotangent and tangent
    cos(j)); a wrong case is reported with its environment."""
    D = ieee_domain(dtype)
    for shape, env, slot in ENV_CASES:
        n = math.prod(shape)
        x = Tensor(shape, tuple(D.from_float(-8.0 + 16.0 * (j + 0.618) / n) for j in range(n)))
        t = Tensor(shape, tuple(D.from_float(math.cos(j)) for j in range(n)))
        g = Tensor(shape[1:], t.data[: n // shape[0]])
        attrs = normalize_attrs("select", {"env_slot": slot})
        res = check_node(engine, dtype, "select", attrs, [x], g, [t], env)
        _record(st_.rows, engine, dtype, res)
        if res.wrong is not None:
            r = st_.rows["select"]
            r.failures += 1
            r.failure = r.failure or {
                "op": "select",
                "message": res.wrong,
                "repro": make_repro(engine, dtype, Node("select", (0,), attrs), [x], g, [t], env),
            }
            return


def probe_conventions(engine: Engine, dtype: str, ops: Sequence[str]) -> list[ConventionRow]:
    """Evaluate every convention of `ops` at its defining points (and `flush_subnormals`
    at its probe, `local.flush_probe`)."""
    D = ieee_domain(dtype)
    out: list[ConventionRow] = []
    flushes, got, want = flush_probe(engine, dtype)
    if got:
        out.append(
            ConventionRow(
                engine.name,
                dtype,
                SUBNORMAL_FLUSH.name,
                "mul" if "mul" in engine.ops else "add",
                flushes,
                [" ".join(f"{v:.6g}" for v in want)],
                [" ".join(f"{v:.6g}" for v in got)],
                SUBNORMAL_FLUSH.sentence,
            )
        )
    nan_probes = [nan_probe(op) for op in NONFINITE_POINTS if op in ops and engine.has_vjp]
    for c in (*CONVENTIONS, *nan_probes):
        if c.op not in ops or c.op not in engine.ops:
            continue
        if any(r.convention == c.name and r.op == c.op for r in out):
            continue
        if not engine.has_vjp and "forward" not in c.directions:
            continue  # a forward-only engine: only the forward conventions are probed
        for inputs, attrs in [c.point]:
            shapes = c.point_shapes or [(len(v),) for v in inputs]
            xs = [
                Tensor(tuple(s), tuple(D.from_float(f) for f in v))
                for s, v in zip(shapes, inputs, strict=True)
            ]
            a = normalize_attrs(c.op, attrs)  # as a graph holds them (the scales build one)
            y = get_op(c.op).forward(D, xs, a, ())
            g = Tensor(y.shape, (D.one(),) * len(y.data))
            res = check_node(
                engine,
                dtype,
                c.op,
                a,
                xs,
                g,
                [Tensor(x.shape, (D.one(),) * len(x.data)) for x in xs],
            )
            spec_v, eng_v = _side_by_side(engine, dtype, c, xs, g, a)
            out.append(
                ConventionRow(
                    engine.name,
                    dtype,
                    c.name,
                    c.op,
                    c.name in res.conventions,
                    spec_v,
                    eng_v,
                    c.sentence,
                )
            )
    return out


def _side_by_side(
    engine: Engine, dtype: str, c: Any, xs: list[Tensor], g: Tensor, attrs: dict[str, Any]
) -> tuple[list[str], list[str]]:
    from ..bounds.core import HP
    from .base import from_numpy, to_numpy

    d = get_op(c.op)
    fn = OpCall(c.op, engine.ops[c.op], attrs)
    arrs = [engine.asarray(to_numpy(x, dtype), dtype) for x in xs]
    try:
        if engine.has_vjp:
            out, cts = engine.vjp(fn, arrs, engine.asarray(to_numpy(g, dtype), dtype))
        else:
            out, cts = engine.forward(fn, arrs), []
    except Exception as e:
        return [], [f"refused: {e}"]
    if c.directions == ("forward",) or c.name == "softplus_threshold" or not engine.has_vjp:
        want = [d.forward(HP, [lift(x) for x in xs], attrs, ())]
        got = [from_numpy(engine.to_numpy(out, dtype), dtype)]
    else:
        want = d.vjp(HP, [lift(x) for x in xs], lift(g), attrs, ())
        got = [from_numpy(engine.to_numpy(t, dtype), dtype) for t in cts]
    fmt_ = lambda ts: [" ".join(f"{float(v):.6g}" for v in t.data) for t in ts]  # noqa: E731
    return fmt_(want), fmt_(got)


def run_engine(
    engine: Engine,
    dtypes: Sequence[str],
    ops: Sequence[str] | None = None,
    *,
    max_examples: int = 30,
    per_op: int = 2,
    seed: int | None = None,
    max_nodes: int = 4,
    progress: Callable[[], None] | None = None,
    shrink_seconds: float | None = SHRINK_SECONDS,
) -> EngineRun:
    """Run every check for one engine over `dtypes` (those it supports) and `ops` (default:
    every op the graph generator builds); a failing run shrinks for at most
    `shrink_seconds` (None: no cap)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # engines warn on inf/NaN; the checks report them
        return _run_engine(
            engine, dtypes, ops, max_examples, per_op, seed, max_nodes, progress, shrink_seconds
        )


def _run_engine(
    engine: Engine,
    dtypes: Sequence[str],
    ops: Sequence[str] | None,
    max_examples: int,
    per_op: int,
    seed: int | None,
    max_nodes: int,
    progress: Callable[[], None] | None,
    shrink_seconds: float | None,
) -> EngineRun:
    wanted = [op for op in (ops or GRAPH_OPS) if op in OPS]
    checked = [op for op in wanted if op in engine.ops and op in GRAPH_OPS and op != "log"]
    run = EngineRun([], [], [], forward_only=not engine.has_vjp)
    for dt in dtypes:
        st_ = _State({}, GraphRow(engine.name, dt))
        if checked:
            _run(engine, dt, checked, max_examples, seed, st_, progress, max_nodes, shrink_seconds)
            for hard in (False, True):
                for op in checked if per_op else ():
                    _run(engine, dt, [op], per_op, seed, st_, progress, max_nodes,
                         shrink_seconds, hard)  # fmt: skip
        _grid(engine, dt, [op for op in wanted if op in engine.ops], st_)
        if "select" in wanted and "select" in engine.ops:
            _env_cases(engine, dt, st_)
        for op in wanted:
            if op not in engine.ops and op not in CONSTANT_OPS:
                r = op_row(st_.rows, engine, dt, op)
                r.covered, r.note = False, "not covered"
        order = {op: i for i, op in enumerate(OPS)}
        run.ops += sorted(
            (r for r in st_.rows.values() if r.op in wanted or r.op in OPS),
            key=lambda r: order[r.op],
        )
        run.graphs.append(st_.graph)
        run.conventions += probe_conventions(engine, dt, checked)
    return run
