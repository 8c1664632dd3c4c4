"""The conformance run as deterministic shards, and the merge of their rows.

Invariants:
- A shard is one Hypothesis run of `conformance.suite.run_property`'s loop: (property,
  dtype, kernels, backend, op focus, max_examples, seed), or one run of the Session state
  machine. `plan` lists them in the order the serial run performs them: per property, the
  run over all its ops, then one run focused on each op in turn (`--per-op`); with
  `seeds=K` every such run is repeated for the seeds `seed, seed+1, ..., seed+K-1` (`seed`
  defaults to 0 then), the seeds innermost. `seeds=1` keeps the serial run's seed (None:
  derandomised), so those shards run in order are exactly `conformance.cli.run`.
- A shard is self-contained: the worker rebuilds its property by name from
  `default_properties` (as `replay` does) and loads the driver's Hypothesis profile, so the
  cases it draws depend only on the shard, never on the process or on the other shards.
- `merge` folds the shard rows of each property in plan order, like the serial loop:
  counts add up, max ulp and bound ratio take the maximum, ops covered counts the distinct
  focused ops run, and it stops at the first failing shard (later shards of that property
  are not counted, as the serial run never runs them). A failing row's reproducer is the
  one `run_property` wrote, so `python -m conformance --replay FILE` replays it locally.
- With `record_cases`, each shard also returns a short hash of every case it checked, in
  order (`case_hash`), so two runs can be compared case for case.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import settings

from runtime.backends import DTYPE_DOMAIN
from spec.serialize import graph_to_dict, tensor_to_dict

from ..suite import Case, Outcome, Property, Row, default_properties, run_property

__all__ = ["Shard", "case_hash", "merge", "plan", "recording", "run_shard"]

SESSION = "session_state_machine"


@dataclass(frozen=True)
class Shard:
    """One unit of work; `order` is the position of its row in the report."""

    order: int
    property: str
    dtype: str
    kernels: str
    backend: str
    against: str | None
    focus: str | None
    max_examples: int
    seed: int | None
    profile: str = "default"
    record_cases: bool = False

    @property
    def id(self) -> str:
        focus = self.focus or "*"
        return (
            f"{self.order:03d}:{self.property}/{self.dtype}/{self.kernels}/{self.backend}"
            f"/op={focus}/n={self.max_examples}/seed={self.seed}"
        )

    @property
    def cost(self) -> int:
        return self.max_examples


def plan(
    props: Sequence[Property],
    *,
    max_examples: int,
    per_op: int,
    seed: int | None,
    seeds: int = 1,
    session_examples: int = 0,
    against: str | None = None,
    record_cases: bool = False,
) -> list[Shard]:
    """The shards of a run, in serial order (see the module invariants)."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    seed_list = [seed] if seeds == 1 else [(seed or 0) + k for k in range(seeds)]
    profile = settings.get_current_profile_name()
    out: list[Shard] = []
    for i, p in enumerate(props):
        runs: list[tuple[str | None, int]] = [(None, max_examples)]
        if per_op:
            runs += [(op, per_op) for op in p.ops]
        for focus, n in runs:
            if n <= 0:
                continue
            for s in seed_list:
                sh = Shard(i, p.name, p.dtype, p.kernels, p.backend, against, focus, n, s, profile)
                out.append(dataclasses.replace(sh, record_cases=record_cases))
    if session_examples > 0:
        for s in seed_list:
            sh = Shard(len(props), SESSION, "", "", "numpy", None, None, session_examples, s)
            out.append(dataclasses.replace(sh, profile=profile, record_cases=record_cases))
    return out


@functools.cache
def _properties(dtype: str, kernels: str, backend: str, against: str | None) -> list[Property]:
    k = "ordered" if kernels == "exact" else kernels
    return default_properties([dtype], [k], backend, against)


def _property(sh: Shard) -> Property:
    for p in _properties(sh.dtype, sh.kernels, sh.backend, sh.against):
        if p.name == sh.property and p.kernels == sh.kernels:
            return p
    raise ValueError(f"unknown property {sh.property!r}/{sh.dtype!r}/{sh.kernels!r}")


def case_hash(case: Case, dtype: str) -> str:
    """16 hex digits of SHA-256 over the case's graph, inputs, seed and env as JSON."""
    D = DTYPE_DOMAIN[dtype]
    doc = {
        "graph": graph_to_dict(case.graph),
        "inputs": [tensor_to_dict(D, x) for x in case.inputs],
        "seed": [tensor_to_dict(D, t) for t in case.seed.tensors],
        "env": list(case.env),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def recording(prop: Property, into: list[str]) -> Property:
    """`prop` whose check first appends the case's hash to `into`."""
    check = prop.check

    def recorded(c: Case) -> Outcome:
        into.append(case_hash(c, prop.dtype))
        return check(c)

    return dataclasses.replace(prop, check=recorded)


def run_shard(sh: Shard, *, load_profile: bool = True) -> dict[str, Any]:
    """Run one shard on a worker (loading the driver's Hypothesis profile);
    {"row": the Row as a dict, "cases": case hashes or None}."""
    if load_profile:
        from .. import profiles  # noqa: F401  (registers the project's profiles)

        settings.load_profile(sh.profile)
    return _run(sh)


def _run(sh: Shard) -> dict[str, Any]:
    cases: list[str] = []
    if sh.property == SESSION:
        from ..session_machine import run_session_machine

        row = run_session_machine(sh.max_examples, sh.seed)
        return {"row": dataclasses.asdict(row), "cases": None}
    prop = _property(sh)
    if sh.record_cases:
        prop = recording(prop, cases)
    if sh.focus is None:
        row = run_property(prop, sh.max_examples, sh.seed, per_op=0)
    else:
        row = run_property(
            dataclasses.replace(prop, ops=(sh.focus,)), 0, sh.seed, per_op=sh.max_examples
        )
    return {"row": dataclasses.asdict(row), "cases": cases if sh.record_cases else None}


def local_runner(sh: Shard) -> dict[str, Any]:
    """`run_shard` in the driver's own process (its Hypothesis profile is already loaded)."""
    return _run(sh)


def merge(
    shards: Sequence[Shard], results: dict[str, dict[str, Any]]
) -> tuple[list[Row], list[list[str]]]:
    """The report rows (and each row's case hashes) from the shard results, in plan order."""
    groups: dict[int, list[Shard]] = {}
    for sh in shards:
        groups.setdefault(sh.order, []).append(sh)
    rows, hashes = [], []
    for order in sorted(groups):
        rows_cases = [(results[sh.id]["row"], results[sh.id]["cases"]) for sh in groups[order]]
        row, seen = _fold(groups[order], rows_cases)
        rows.append(row)
        hashes.append(seen)
    return rows, hashes


def _fold(
    group: Sequence[Shard], parts: Sequence[tuple[dict[str, Any], list[str] | None]]
) -> tuple[Row, list[str]]:
    first = parts[0][0]
    row = Row(first["property"], first["dtype"], first["kernels"], first["backend"])
    focused: set[str] = set()
    seen: list[str] = []
    for sh, (r, cases) in zip(group, parts, strict=True):
        row.passed += r["passed"]
        row.failed += r["failed"]
        row.max_ulp = max(row.max_ulp, r["max_ulp"])
        row.worst_bound_ratio = max(row.worst_bound_ratio, r["worst_bound_ratio"])
        row.seconds += r["seconds"]
        if sh.focus is not None:
            focused.add(sh.focus)
        seen += cases or []
        if r["failed"]:
            row.failure = r["failure"]
            break
    row.ops_covered = len(focused)
    row.cases = row.passed + row.failed
    return row, seen


Runner = Callable[[Shard], dict[str, Any]]
