"""A seed names the same conformance cases whatever modules the process imported
(`conformance.determinism`): Hypothesis's pool of local constants is off while the suite
draws. Without it, importing one more local module changed the drawn cases (found as a
sharded run disagreeing with the serial one inside the pytest process)."""

from __future__ import annotations

import contextlib
import importlib
import sys
from pathlib import Path

import pytest

import conformance.runner as runner
from conformance.distributed.suite_shards import recording
from conformance.suite import default_properties, run_property


def _cases(prop_name: str) -> list[str]:
    (prop,) = [p for p in default_properties(["float32"], ["ordered"], "numpy", None)
               if p.name == prop_name]  # fmt: skip
    seen: list[str] = []
    run_property(recording(prop, seen), 30, 7, per_op=0)
    return seen


def _import_module_with_constants(tmp_path: Path, name: str, salt: int) -> None:
    """A local module full of float and int literals, imported (so in sys.modules)."""
    # A few new literals (Hypothesis ignores a module with too many constants), all in the
    # range the float32 values are drawn from.
    lits = ", ".join(f"{k}.{salt}{k}5e-3, -{k}.{salt}{k}25" for k in range(1, 8))
    (tmp_path / f"{name}.py").write_text(f"VALUES = [{lits}]\n")
    sys.path.insert(0, str(tmp_path))
    try:
        importlib.import_module(name)
    finally:
        sys.path.remove(str(tmp_path))


def test_importing_a_module_does_not_change_the_cases(tmp_path: Path) -> None:
    before = _cases("link")
    _import_module_with_constants(tmp_path, "tl_constants_probe_a", 1)
    after = _cases("link")
    assert len(before) >= 30
    assert after == before


def test_without_the_guard_the_cases_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The guard is what keeps them equal: with it replaced by a no-op, the same import
    changes what is drawn (so the test above can fail)."""
    monkeypatch.setattr(runner, "seed_only_draws", contextlib.nullcontext)
    before = _cases("link")
    _import_module_with_constants(tmp_path, "tl_constants_probe_b", 2)
    after = _cases("link")
    assert after != before
