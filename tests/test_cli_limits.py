"""Bad counts, addresses and certificates end the commands with a one-line error and exit
status 2, never a traceback: `--workers`/`--seeds`/`--jobs` capped at
`MAX_PER_CPU` per CPU, malformed `--scheduler` addresses, deeply nested JSON given to
`python -m proofs verify`."""

from __future__ import annotations

from pathlib import Path

import pytest

import conformance.sweep as sweep
from conformance.distributed.flags import MAX_PER_CPU, cpus, scheduler_address
from proofs.cli import main as proofs_main

LIMIT = MAX_PER_CPU * cpus()


def _error(capsys: pytest.CaptureFixture[str], run: object) -> str:
    with pytest.raises(SystemExit) as e:
        run()  # type: ignore[operator]
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


@pytest.mark.parametrize("flag", ["--workers"])
@pytest.mark.parametrize("value", ["0", "-3", str(LIMIT + 1), "100000", "two"])
def test_sweep_refuses_bad_worker_counts(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    line = _error(capsys, lambda: sweep.build_parser().parse_args([flag, value]))
    assert f"argument {flag}: {flag} must be" in line


def test_a_count_at_the_limit_is_accepted() -> None:
    a = sweep.build_parser().parse_args(["--workers", str(LIMIT)])
    assert a.workers == LIMIT


def test_proofs_check_refuses_a_huge_job_count(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, lambda: proofs_main(["check", "--jobs", "100000"]))
    assert line.endswith(
        f"argument --jobs: --jobs must be from 1 to {LIMIT} ({MAX_PER_CPU} per CPU, "
        f"{cpus()} CPUs), got 100000"
    )


@pytest.mark.parametrize(
    "address", ["tcp://host:port", "tcp://:8786", "host", "http://h:1", "h:0", "h:70000", ""]
)
def test_malformed_scheduler_addresses_are_refused(
    capsys: pytest.CaptureFixture[str], address: str
) -> None:
    line = _error(capsys, lambda: sweep.build_parser().parse_args(["--scheduler", address]))
    assert "argument --scheduler: --scheduler wants an existing scheduler file" in line


@pytest.mark.parametrize(
    "address", ["tcp://10.0.0.5:8786", "localhost:8786", "tls://[::1]:8786", "inproc://a:1"]
)
def test_well_formed_scheduler_addresses_pass(address: str) -> None:
    assert scheduler_address(address) == address


def test_a_scheduler_file_passes(tmp_path: Path) -> None:
    f = tmp_path / "scheduler.json"
    f.write_text("{}")
    assert scheduler_address(str(f)) == str(f)


def test_verify_refuses_deeply_nested_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert proofs_main(["verify", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: cannot read certificate {path}: JSON nested too deeply\n"


def test_seeds_count_repetitions_and_are_not_capped() -> None:
    import argparse

    from conformance.distributed.flags import add_cluster_arguments

    p = argparse.ArgumentParser()
    add_cluster_arguments(p, seeds=True)
    assert p.parse_args(["--seeds", str(LIMIT * 10)]).seeds == LIMIT * 10
