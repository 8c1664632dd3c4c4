"""conformance.distributed: sharded runs on a 2-worker loopback Dask LocalCluster.

- A sharded conformance run equals the serial run (`conformance.cli.run`, unchanged) row for
  row and case for case (the hash of every case checked, in order); so do the sweep and a
  selection of proof theorems.
- A shard that kills its worker process the first time it runs is re-run on another
  worker; every shard is counted once.
- A worker started from a copy of the sources with one changed byte is refused, with a
  message naming the source hash, and gets no shard.
- The sweep's progress file resumes: recorded shards are not re-run.
- A failing shard's reproducer replays locally (`python -m conformance --replay`).
- `--scheduler ADDRESS` writes the serial report; without Dask the message names it.
Skipped, naming the package, when `dask[distributed]` is not installed.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "distributed", reason="needs dask[distributed] (pip install 'torchlean[distributed]')"
)

import conformance.sweep as sweep
from conformance import cli
from conformance.distributed import cluster, env, suite_shards, sweep_shards
from proofs.theorem_shards import plan as theorem_plan
from proofs.theorem_shards import run_theorem_shard

ROOT = Path(__file__).resolve().parent.parent
WORKER = [sys.executable, "-m", "distributed.cli.dask_worker"]
FLAGS = ["--dtype", "exact,float32", "--max-examples", "3", "--per-op", "1"]


@pytest.fixture(scope="module")
def client() -> Any:
    with cluster.open_client(workers=2) as c:
        c.wait_for_workers(2, timeout=60)
        yield c


def _no_seconds(rows: Any) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        d = dataclasses.asdict(r)
        d.pop("seconds")
        out.append(d)
    return out


def _serial(argv: list[str]) -> tuple[list[Any], list[list[str]]]:
    """`conformance.cli.run` as `python -m conformance` runs it, each case's hash recorded."""
    a = cli.parse_args(argv)
    backend, props = cli.select(a)
    seen: list[list[str]] = [[] for _ in props]
    props = [suite_shards.recording(p, s) for p, s in zip(props, seen, strict=True)]
    rows = cli.run(a, backend, props)
    return rows, seen + [[]] * (len(rows) - len(props))  # the Session machine: no case hashes


def _shards(argv: list[str]) -> list[suite_shards.Shard]:
    a = cli.parse_args(argv)
    _, props = cli.select(a)
    return suite_shards.plan(
        props,
        max_examples=a.max_examples,
        per_op=a.per_op,
        seed=a.seed,
        seeds=a.seeds,
        session_examples=a.session_examples,
        record_cases=True,
    )


@pytest.mark.parametrize(
    "extra",
    [
        ["--kernels", "fast", "--session-examples", "2"],
        "--dtype float32 --kernels ordered --per-op 0 --max-examples 8 --seed 1".split(),
    ],
)
def test_sharded_run_equals_serial_case_for_case(client: Any, extra: list[str]) -> None:
    argv = [*FLAGS, "--session-examples", "0", *extra]
    rows, seen = _serial(argv)
    shards = _shards(argv)
    results = cluster.run_shards(client, [(sh.id, sh) for sh in shards], suite_shards.run_shard)
    got_rows, got_seen = suite_shards.merge(shards, results)
    assert _no_seconds(got_rows) == _no_seconds(rows)
    assert got_seen == seen
    n_cases = sum(r.cases for r in rows if r.property != suite_shards.SESSION)
    assert sum(len(s) for s in seen) >= n_cases >= 16
    if "--seed" in extra:  # the same shards run in order in this process: the serial run too
        local = cluster.run_local([(sh.id, sh) for sh in shards], suite_shards.local_runner)
        assert suite_shards.merge(shards, local)[1] == got_seen


def test_several_seeds_are_the_serial_runs_of_each_seed() -> None:
    argv = ["--dtype", "exact,float32", "--max-examples", "5", "--per-op", "0"]
    argv += ["--session-examples", "0"]
    a_rows = [_serial([*argv, "--seed", s]) for s in ("3", "4")]
    shards = _shards([*argv, "--seed", "3", "--seeds", "2"])
    rows, seen = suite_shards.merge(
        shards, cluster.run_local([(sh.id, sh) for sh in shards], suite_shards.local_runner)
    )
    for k, r in enumerate(rows):
        assert r.passed == sum(x[0][k].passed for x in a_rows)
        assert seen[k] == a_rows[0][1][k] + a_rows[1][1][k]  # seed 3's cases, then seed 4's


def _kill_first_time(payload: tuple[str, suite_shards.Shard]) -> dict[str, Any]:
    """Kill this worker process the first time any worker runs it (marker file)."""
    marker, sh = payload
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return suite_shards.run_shard(sh)
    os.write(fd, str(os.getpid()).encode())
    os.close(fd)
    os._exit(1)


def test_killed_worker_shards_are_rerun(client: Any, tmp_path: Path) -> None:
    argv = [*FLAGS, "--dtype", "exact", "--session-examples", "0"]
    shards = _shards(argv)
    victim = shards[len(shards) // 2].id
    marker = str(tmp_path / "killed")
    payloads = [(sh.id, (marker if sh.id == victim else str(tmp_path / "x"), sh)) for sh in shards]
    # only the victim's marker is absent when it runs; pre-create the others
    Path(tmp_path / "x").write_text("not a kill")
    before = set(client.scheduler_info()["workers"])
    results = cluster.run_shards(client, payloads, _kill_first_time)
    assert Path(marker).exists(), "the victim shard never killed its worker"
    assert set(results) == {sh.id for sh in shards}
    rows, seen = suite_shards.merge(shards, results)
    want_rows, want_seen = _serial(argv)
    assert _no_seconds(rows) == _no_seconds(want_rows)
    assert seen == want_seen
    client.wait_for_workers(2, timeout=60)  # the nanny restarts the killed worker
    assert set(client.scheduler_info()["workers"]) != before


def _where(x: int) -> str:
    from distributed import get_worker

    return f"{x}@{get_worker().address}"


def _worker(cmd: list[str], tree: Path) -> subprocess.Popen[bytes]:
    """A `dask worker` process importing torchlean from `tree`."""
    return subprocess.Popen(
        cmd,
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_worker_with_other_sources_or_threads_is_refused(client: Any, tmp_path: Path) -> None:
    copy = tmp_path / "tree"
    for pkg in env.PACKAGES:
        shutil.copytree(ROOT / pkg, copy / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    with open(copy / "spec" / "__init__.py", "a") as f:
        f.write("# one changed line\n")
    assert env.source_hash(copy) != env.source_hash()
    addr = client.scheduler.address
    good = set(client.scheduler_info()["workers"])
    flags = ["--no-nanny", "--no-dashboard", "--host", "127.0.0.1"]
    procs = [  # other sources, one thread; this checkout, two threads
        _worker([*WORKER, addr, "--nthreads", "1", *flags], copy),
        _worker([*WORKER, addr, "--nthreads", "2", *flags], ROOT),
    ]
    try:
        client.wait_for_workers(len(good) + 2, timeout=60)
        info = client.scheduler_info()["workers"]
        other = {a for a in set(info) - good if info[a]["nthreads"] == 1}
        threaded = {a for a in set(info) - good if info[a]["nthreads"] == 2}
        assert len(other) == len(threaded) == 1
        logged: list[str] = []
        vet = cluster.Vetting(log=logged.append)
        results = cluster.run_shards(client, [(f"s{i}", i) for i in range(12)], _where, vet=vet)
        assert set(vet.refused) == other | threaded and vet.accepted == good
        (o,), (t,) = other, threaded
        assert "source hash: worker" in vet.refused[o]
        assert "runs 2 threads" in vet.refused[t] and "source hash" not in vet.refused[t]
        assert any("source hash" in s and o in s for s in logged)
        assert sorted(results) == sorted(f"s{i}" for i in range(12))
        used = {v.split("@", 1)[1] for v in results.values()}
        assert used <= good
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=30)


def test_fingerprint_differences_name_the_key() -> None:
    here = env.fingerprint()
    assert here["float_probe"] == "ok"
    there = {**here, "mpfr": "MPFR 3.0", "float_probe": "FAILED: flushes"}
    diffs = env.differences(here, there)
    assert any(d.startswith("mpfr: worker MPFR 3.0 vs here") for d in diffs)
    assert any(d.startswith("float probe: worker FAILED") for d in diffs)
    assert env.differences(here, dict(here)) == []


def test_sweep_shards_equal_serial_and_resume(client: Any, tmp_path: Path) -> None:
    fns, lo, hi, chunk = ["exp", "sin"], 0x3F7F0000, 0x3F818000, 2**13
    serial = sweep.run_sweep(fns, lo, hi, chunk)
    shards = sweep_shards.plan(fns, lo, hi, chunk, 2**14)
    got = cluster.run_shards(client, [(s.id, s) for s in shards], sweep_shards.run_sweep_shard)
    merged = sweep_shards.merge(shards, got)

    def strip(d: dict[str, Any]) -> dict[str, Any]:
        return {k: {**dataclasses.asdict(v), "seconds": 0} for k, v in d.items()}

    assert strip(merged) == strip(serial)
    # resume: a progress file holding the first three shards (and a torn line) re-runs the rest
    head = sweep_shards.header(fns, lo, hi, chunk, 2**14)
    path = str(tmp_path / "progress.jsonl")
    log = sweep_shards.ProgressFile(path, head)
    for s in shards[:3]:
        log.add(s.id, got[s.id])
    log.close()
    with open(path, "a") as f:
        f.write('{"id": "torn')
    ran: list[str] = []

    def execute(pairs: Any, fn: Any, on_result: Any) -> dict[str, Any]:
        ran.extend(sid for sid, _ in pairs)
        return cluster.run_local(pairs, fn, on_result)

    again = sweep_shards.run_planned(shards, path, head, execute)
    assert ran == [s.id for s in shards[3:]]
    assert strip(again) == strip(serial)
    assert len(sweep_shards.load_progress(path, head)) == len(shards)
    with pytest.raises(sweep_shards.SweepProgressError, match="stop"):
        sweep_shards.load_progress(path, {**head, "stop": hi + 1})


def test_proof_theorems_as_shards_equal_serial(client: Any) -> None:
    from proofs.catalogue import select
    from proofs.runner import run_theorems

    ths = select(["op.relu", "op.exp", "op.add"])
    serial = run_theorems(ths, quick=True, jobs=1)
    shards = theorem_plan([t.name for t in ths], [t.isolated for t in ths], True)
    got = cluster.run_shards(client, shards, run_theorem_shard)
    by_name = {n: r for rs in got.values() for n, r in rs}
    assert [t.name for t in ths] and set(by_name) == {t.name for t in ths}
    for t, r in serial:
        assert (by_name[t.name].passed, by_name[t.name].counts, by_name[t.name].details) == (
            r.passed,
            r.counts,
            r.details,
        )


def test_cli_on_a_scheduler_writes_the_serial_report(client: Any, tmp_path: Path) -> None:
    from conformance.__main__ import main

    argv = [*FLAGS, "--dtype", "exact", "--session-examples", "0", "--per-op", "0"]
    assert main([*argv, "--report", str(tmp_path / "a")]) == 0
    addr = client.scheduler.address
    assert main([*argv, "--report", str(tmp_path / "b"), "--scheduler", addr]) == 0

    ra = json.loads((tmp_path / "a.json").read_text())["rows"]
    rb = json.loads((tmp_path / "b.json").read_text())["rows"]
    for r in (*ra, *rb):
        r.pop("seconds")
    assert ra == rb


def test_missing_dask_names_the_package(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    from conformance.__main__ import main

    monkeypatch.setitem(sys.modules, "distributed", None)
    assert main([*FLAGS, "--workers", "2", "--report", os.devnull]) == 2
    assert "dask[distributed]" in capsys.readouterr().err


def test_failing_shard_reproducer_replays_locally(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import types

    import conformance.suite as suite

    real = suite.check_link

    def broken(g: Any, *a: Any, **k: Any) -> Any:  # "fails" on any graph with a mul node
        if any(n.op == "mul" for n in g.nodes):
            return types.SimpleNamespace(ok=False, first_mismatch="planted: mul")
        return real(g, *a, **k)

    monkeypatch.setattr(suite, "check_link", broken)
    argv = ["--dtype", "exact", "--max-examples", "30", "--per-op", "1", "--session-examples", "0"]
    shards = _shards(argv)
    rows, _ = suite_shards.merge(
        shards, cluster.run_local([(sh.id, sh) for sh in shards], suite_shards.local_runner)
    )
    link = next(r for r in rows if r.property == "link")
    assert link.failed == 1 and link.failure["message"] == "planted: mul"
    path = tmp_path / "repro.json"
    path.write_text(json.dumps(link.failure["repro"]))
    assert cli.replay_file(str(path)) == 1  # still failing with the planted bug
    monkeypatch.setattr(suite, "check_link", real)
    assert cli.replay_file(str(path)) == 0  # and passes once it is gone
