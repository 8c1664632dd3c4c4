"""The conformance run as deterministic shards, and the merge of their rows.

Invariants:
- A shard is one Hypothesis run of `conformance.suite.run_properties`'s loop: a group of
  properties that share their draws (`suite.draw_groups`: each case drawn once, checked
  under every member), its dtype, backend, op focus, each member's case quota and the
  seed (`suite.shared_run`), or one run of the Session state machine. `plan` lists them
  in the order the serial run performs them: per group (in the order of its first
  member), the run over all ops, then one run focused on each op in turn (`--per-op`);
  with `seeds=K` every such run is repeated for the seeds `seed, seed+1, ..., seed+K-1`
  (`seed` defaults to 0 then), the seeds innermost. `seeds=1` keeps the serial run's seed
  (None: derandomised), so those shards run in order give exactly `conformance.cli.run`.
- A shard is self-contained: the worker rebuilds its properties by name from
  `default_properties` (as `replay` does) and loads the driver's Hypothesis profile, so the
  cases it draws depend only on the shard, never on the process or on the other shards.
  Every member runs in every shard of its group; a member's row does not depend on which
  other members are checked (`suite.shared_run`).
- `merge` folds the shard rows of each property in plan order, like the serial loop
  (`suite.fold_row`): counts add up, max ulp and bound ratio take the maximum, ops covered
  counts the focused runs, and it stops at the first failing shard of that property
  (later shards are not counted, as the serial run never runs them). A failing row's
  reproducer is the one the run wrote, so `python -m conformance --replay FILE` replays it
  locally.
- With `record_cases`, each shard also returns, per member, a short hash of every case it
  checked, in order (`case_hash`), so two runs can be compared case for case.
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

from ..suite import (
    Case,
    Outcome,
    Property,
    Row,
    default_properties,
    draw_groups,
    fold_row,
    group_runs,
    shared_run,
)

__all__ = ["Shard", "case_hash", "merge", "plan", "recording", "run_shard"]

SESSION = "session_state_machine"


@dataclass(frozen=True)
class Shard:
    """One unit of work: the run `focus` of a group of properties. `members` lists each
    member's (row position in the report, property name, kernels), `quotas` the cases
    each one checks."""

    members: tuple[tuple[int, str, str], ...]
    dtype: str
    backend: str
    against: str | None
    focus: str | None
    quotas: tuple[int, ...]
    seed: int | None
    profile: str = "default"
    record_cases: bool = False

    @property
    def id(self) -> str:
        focus = self.focus or "*"
        names = ",".join(f"{name}@{k}" for _, name, k in self.members)
        n = ",".join(map(str, self.quotas))
        return (
            f"{self.members[0][0]:03d}:{names}/{self.dtype}/{self.backend}"
            f"/op={focus}/n={n}/seed={self.seed}"
        )

    @property
    def cost(self) -> int:
        """A rough weight for packing: cases checked (a Session machine run is 20 steps)."""
        if self.members[0][1] == SESSION:
            return 20 * self.quotas[0]
        return max(self.quotas) * len(self.members)


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
    for idx in draw_groups(props):
        group = [props[i] for i in idx]
        members = tuple((i, props[i].name, props[i].kernels) for i in idx)
        lead = group[0]
        for focus, quotas in group_runs(group, max_examples, per_op):
            for s in seed_list:
                sh = Shard(members, lead.dtype, lead.backend, against, focus, tuple(quotas), s)
                out.append(dataclasses.replace(sh, profile=profile, record_cases=record_cases))
    if session_examples > 0:
        for s in seed_list:
            machine = ((len(props), SESSION, ""),)
            sh = Shard(machine, "", "numpy", None, None, (session_examples,), s)
            out.append(dataclasses.replace(sh, profile=profile, record_cases=record_cases))
    return out


@functools.cache
def _properties(dtype: str, kernels: str, backend: str, against: str | None) -> list[Property]:
    k = "ordered" if kernels == "exact" else kernels
    return default_properties([dtype], [k], backend, against)


def _property(sh: Shard, name: str, kernels: str) -> Property:
    for p in _properties(sh.dtype, kernels, sh.backend, sh.against):
        if p.name == name and p.kernels == kernels:
            return p
    raise ValueError(f"unknown property {name!r}/{sh.dtype!r}/{kernels!r}")


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
    {"rows": each member's Row as a dict (None for a member with no quota), "cases": each
    member's case hashes, or None}."""
    if load_profile:
        from .. import profiles  # noqa: F401  (registers the project's profiles)

        settings.load_profile(sh.profile)
    return _run(sh)


def _run(sh: Shard) -> dict[str, Any]:
    if sh.members[0][1] == SESSION:
        from ..session_machine import run_session_machine

        row = run_session_machine(sh.quotas[0], sh.seed)
        return {"rows": [dataclasses.asdict(row)], "cases": None}
    cases: list[list[str]] = [[] for _ in sh.members]
    group = [_property(sh, name, k) for _, name, k in sh.members]
    if sh.record_cases:
        group = [recording(p, c) for p, c in zip(group, cases, strict=True)]
    rows = shared_run(group, sh.focus, sh.quotas, sh.seed)
    return {
        "rows": [None if r is None else dataclasses.asdict(r) for r in rows],
        "cases": cases if sh.record_cases else None,
    }


def local_runner(sh: Shard) -> dict[str, Any]:
    """`run_shard` in the driver's own process (its Hypothesis profile is already loaded)."""
    return _run(sh)


def merge(
    shards: Sequence[Shard], results: dict[str, dict[str, Any]]
) -> tuple[list[Row], list[list[str]]]:
    """The report rows (and each row's case hashes) from the shard results, in plan order."""
    parts: dict[int, list[tuple[Shard, dict[str, Any] | None, list[str] | None]]] = {}
    for sh in shards:
        res = results[sh.id]
        for k, (order, _, _) in enumerate(sh.members):
            cases = res["cases"][k] if res["cases"] is not None else None
            parts.setdefault(order, []).append((sh, res["rows"][k], cases))
    rows, hashes = [], []
    for order in sorted(parts):
        row, seen = _fold(parts[order])
        rows.append(row)
        hashes.append(seen)
    return rows, hashes


def _fold(
    parts: Sequence[tuple[Shard, dict[str, Any] | None, list[str] | None]],
) -> tuple[Row, list[str]]:
    first = next(r for _, r, _ in parts if r is not None)
    row = Row(first["property"], first["dtype"], first["kernels"], first["backend"])
    seen: list[str] = []
    focused: set[str] = set()
    for sh, r, cases in parts:
        if r is None:
            continue
        fold_row(row, Row(**r), sh.focus)
        if sh.focus is not None:
            focused.add(sh.focus)
        seen += cases or []
        if r["failed"]:
            break
    row.ops_covered = len(focused)  # each op once, however many seeds
    return row, seen


Runner = Callable[[Shard], dict[str, Any]]
