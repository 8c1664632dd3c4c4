"""How properties run: the property and case types, the Hypothesis runs, the folding of
their rows, and where a failure points.

Invariants:
- A property is (name, dtype, kernels, strategy of cases, check). `run_properties` drives
  properties with Hypothesis for a fixed budget; properties that draw the same cases from
  the same seed (`Property.draws`, `draw_groups`) share one run: each case is drawn once
  and checked under every member, in order (`shared_run`). Each member's row is what it
  gets when run alone on its group's draws: when a member fails, its case is shrunk
  against it alone and the run is repeated for the others from scratch.
- The run over all ops draws from salt 0, so members draw exactly what they drew when run
  alone; a group's focused runs use its first member's salt and draw as many cases as the
  members drew alone together (`group_runs`).
- The derandomised seed is fixed (`_BASE_SEED`: what Hypothesis derived from the suite's
  test function before it was fixed), so an edit of this module does not change drawn cases.
- A failing case is reported with the shrunk graph as text and as JSON (graph, inputs and
  seed) that reproduces it, the op it points at (`where_failed`); a crash in a check is a
  failure of the property. Nothing here prints except through the `progress` callback.
"""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN
from spec.graph import Graph, format_graph
from spec.inline import inline
from spec.serialize import graph_to_dict, tensor_to_dict
from spec.tensor import Tensor, TensorPack

from .determinism import seed_only_draws
from .locate import describe, locate, owner_of_inlined
from .profiles import run_settings
from .reports import Row

__all__ = [
    "Case",
    "Outcome",
    "Property",
    "draw_groups",
    "fold_row",
    "group_runs",
    "planned_cases",
    "run_properties",
    "run_property",
    "run_salt",
    "set_shrinking",
    "shared_run",
    "where_failed",
]


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
    if focus is not None:
        _fold_op(row.per_op, focus, part)


def _fold_op(per_op: dict[str, dict[str, float]], op: str, part: Row) -> None:
    e = per_op.setdefault(op, {"cases": 0, "failed": 0, "max_ulp": 0.0, "worst_bound_ratio": 0.0})
    e["cases"] += part.passed + part.failed
    e["failed"] += part.failed
    e["max_ulp"] = max(e["max_ulp"], part.max_ulp)
    e["worst_bound_ratio"] = max(e["worst_bound_ratio"], part.worst_bound_ratio)


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
from the digest of the suite's test function as it once was (`derandomize=True` seeds
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

    @run_settings(max(quotas), seed, shrink=_SHRINK[0])
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
