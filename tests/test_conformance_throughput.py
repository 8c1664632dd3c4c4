"""The conformance run's throughput machinery reports what the plain run reports.

- `--workers auto` (a pool of processes, the default) gives the report of `--workers 1`.
- Properties that share their draws (`draw_groups`) are each given the row they get when
  run alone from the same seed, a failing member included: its failure is shrunk against
  it alone, and the others' rows do not change.
- A group's shards, merged, equal the serial run, with a failing member.
- The memoised strategies draw what freshly built ones draw (the case hashes of a run with
  every memo bypassed are the same), and a memo keyed wrongly shows: each requested shape
  and domain is what is drawn.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance import cli
from conformance.distributed import flags, suite_shards
from conformance.graphs import core, hard, values
from conformance.suite import (
    Case,
    Outcome,
    Property,
    default_properties,
    draw_groups,
    run_properties,
    run_property,
    set_shrinking,
)
from runtime.backends import DTYPE_DOMAIN


def _no_seconds(rows: Any) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        d = r if isinstance(r, dict) else dataclasses.asdict(r)
        out.append({k: v for k, v in d.items() if k != "seconds"})
    return out


def _props(dtype: str, kernels: list[str] | None = None) -> list[Property]:
    return default_properties([dtype], kernels or ["fast", "ordered"])


def test_groups_are_the_properties_with_equal_draws() -> None:
    props = _props("float32")
    names = [[props[i].name for i in g] for g in draw_groups(props)]
    assert names == [
        ["link", "node_bounds"],
        ["link_special_values"],
        ["link_hard", "link_compiled", "sparse_backward"],
        ["derivative_bounds"],
    ]
    exact = _props("exact", ["ordered"])
    assert [[exact[i].name for i in g] for g in draw_groups(exact)] == [
        ["link", "dense_all_vs_from"]
    ]
    # a property without a draw name is alone, even with an equal strategy
    alone = [dataclasses.replace(p, draws="") for p in props]
    assert draw_groups(alone) == [[i] for i in range(len(props))]


def _failing_over(n: int, prop: Property) -> Property:
    """`prop` with a planted bug: it fails on every graph of more than `n` nodes."""
    check = prop.check

    def broken(c: Case) -> Outcome:
        return Outcome(False, "planted") if len(c.graph.nodes) > n else check(c)

    return dataclasses.replace(prop, check=broken)


def test_a_shared_draw_gives_each_member_its_own_row() -> None:
    link, nb = (p for p in _props("float16") if p.name in ("link", "node_bounds"))
    set_shrinking(False)  # time: the shrunk failure is compared in the next test
    try:
        for planted in ([link, _failing_over(2, nb)], [_failing_over(2, link), nb]):
            together = run_properties(planted, 8)
            alone = [run_property(p, 8) for p in planted]  # the run over all ops: salt 0
            assert _no_seconds(together) == _no_seconds(alone)
            bad = next(r for r in together if r.failed)
            assert bad.failure["message"] == "planted"
            assert bad.failure["graph_text"].count("\n  %") > 2
            good = next(r for r in together if not r.failed)
            assert good.cases == good.passed == 8
    finally:
        set_shrinking(True)


def test_group_shards_merged_equal_the_serial_run_with_a_failing_member(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import conformance.suite as suite

    real = suite.check_link

    def broken(g: Any, *a: Any, **k: Any) -> Any:  # link and link_special_values fail
        if any(n.op == "neg" for n in g.nodes):
            return type("R", (), {"ok": False, "first_mismatch": "planted: neg"})()
        return real(g, *a, **k)

    monkeypatch.setattr(suite, "check_link", broken)
    props = [p for p in _props("float16") if p.draws in ("plain", "specials")]
    props = [dataclasses.replace(p, ops=("neg", "add", "abs")) for p in props]
    serial = run_properties(props, 6, per_op=1)
    assert [(r.property, r.failed) for r in serial] == [
        ("link", 1),
        ("link_special_values", 1),
        ("node_bounds", 0),  # its group's leader failed: its own cases go on
    ]
    assert serial[2].cases == 6 + 3 * 2 and serial[2].ops_covered == 3  # 1 + 1 per op
    shards = suite_shards.plan(props, max_examples=6, per_op=1, seed=None)
    monkeypatch.setattr(suite_shards, "_property", lambda sh, name, k: _by_name(props, name, k))
    results = {sh.id: suite_shards.local_runner(sh) for sh in shards}
    rows, _ = suite_shards.merge(shards, results)
    assert _no_seconds(rows) == _no_seconds(serial)


def _by_name(props: list[Property], name: str, kernels: str) -> Property:
    return next(p for p in props if p.name == name and p.kernels == kernels)


def test_workers_auto_report_equals_the_serial_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(flags, "cpus", lambda: 2)  # a pool of 2 even on a 1-CPU runner
    argv = ["--dtype", "exact,bfloat16", "--max-examples", "4", "--per-op", "0"]
    argv += ["--session-examples", "2"]
    reports = []
    for workers in ("auto", "1"):
        a = cli.parse_args([*argv, "--workers", workers, "--report", str(tmp_path / workers)])
        assert flags.pool_size(a) == (2 if workers == "auto" else 1)
        backend, props = cli.select(a)
        rows = cli.run_rows(a, backend, props)
        assert cli.report(a, backend, rows) == 0
        reports.append(json.loads((tmp_path / f"{workers}.json").read_text()))
    pooled, serial = reports
    assert pooled["meta"].pop("command") != serial["meta"].pop("command")  # --workers differs
    assert pooled["meta"] == serial["meta"]
    assert _no_seconds(pooled["rows"]) == _no_seconds(serial["rows"])
    assert sum(r["cases"] for r in serial["rows"]) >= 4 * 7 + 2


def test_workers_flag_defaults() -> None:
    assert cli.parse_args([]).workers == "auto"
    assert cli.parse_args(["--workers", "3"]).workers == 3
    with pytest.raises(SystemExit):
        cli.parse_args(["--workers", "many"])
    from conformance import sweep

    # other commands keep running in this process by default
    assert sweep.build_parser().parse_args([]).workers == 1


def _hashes(prop: Property, n: int) -> list[str]:
    seen: list[str] = []
    run_property(suite_shards.recording(prop, seen), n, per_op=0)
    return seen


def test_memoised_strategies_draw_what_fresh_ones_draw(monkeypatch: pytest.MonkeyPatch) -> None:
    (hard_prop,) = (p for p in _props("bfloat16", ["ordered"]) if p.name == "link_hard")
    (plain,) = (p for p in _props("float32", ["ordered"]) if p.name == "link")
    cached = _hashes(hard_prop, 12), _hashes(plain, 12)
    # every memo bypassed: each strategy built afresh for each draw
    monkeypatch.setattr(hard, "_memo", lambda key, make: make())
    monkeypatch.setattr(core, "_sampled", lambda options: st.sampled_from(list(options)))

    def const_values(positive: bool, n: int) -> Any:
        return st.lists(core.POS_RAT if positive else core.RAT, min_size=n, max_size=n)

    monkeypatch.setattr(core, "_const_values", const_values)
    monkeypatch.setattr(values, "_TENSOR_LISTS", _Forgetful())
    monkeypatch.setattr(values, "_SEEDS", _Forgetful())
    fresh = _hashes(hard_prop, 12), _hashes(plain, 12)
    assert cached == fresh
    assert len(set(cached[0])) > 6  # the runs drew distinct cases


class _Forgetful(dict):  # type: ignore[type-arg]
    """A memo that never remembers."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass


SHAPES = [(), (3,), (2, 3), (2, 0), (1, 2, 2)]


@settings(max_examples=25)
@given(st.data())
def test_a_memo_returns_the_strategy_of_its_key(data: Any) -> None:
    """Each memoised strategy draws the shapes and the domain asked for, whatever was
    asked before (a key missing the domain or a shape would hand back another's)."""
    for _ in range(3):
        shapes = data.draw(st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))
        dtype = data.draw(st.sampled_from(["float64", "float32", "bfloat16", "float16"]))
        D = DTYPE_DOMAIN[dtype]
        finite = data.draw(st.booleans())
        strats = [
            hard.hard_tensors_for(shapes, D, finite=finite),
            hard.rounding_tensors_for(shapes, D),
            hard.signed_zero_tensors_for(shapes, D),
            values.tensors_for(shapes, D, specials=finite),
        ]
        for k, strat in enumerate(strats):
            ts = data.draw(strat)
            assert [t.shape for t in ts] == [tuple(s) for s in shapes]
            for v in (v for t in ts for v in t.data):
                assert D.is_nan(v) or D.round_value(v) == v  # a value of D, not of another
                if finite and k == 0:  # the hard values' `finite` is part of the key
                    assert gmpy2.is_finite(v)
    opts = data.draw(st.lists(st.integers(0, 5), min_size=1, max_size=4))
    assert data.draw(core._sampled(opts)) in opts
    assert core._sampled(opts) is core._sampled(tuple(opts))
