"""A citable reference: CITATION.cff validates against the Citation File Format schema
and cites the current semantics version; `spec.__version__` is bumped whenever a rule's
code changes (the rules digest is pinned per version); docs/THEOREMS.md is generated and
has one anchor per theorem of `python -m proofs list` and per op rule."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

import spec
from proofs.cli import main as proofs_main
from proofs.theorem_index import html, markdown
from spec.ops import OPS
from spec.version import RULES_DIGESTS, rule_files, rules_digest

ROOT = Path(__file__).resolve().parent.parent
CFF = (ROOT / "CITATION.cff").read_text()


def test_citation_cff_validates_against_the_schema() -> None:
    cffconvert = pytest.importorskip("cffconvert", reason="pip install cffconvert")
    from jsonschema.exceptions import ValidationError

    cffconvert.Citation(CFF).validate()
    broken = re.sub(r"authors:\n(  - .*\n)+", "", CFF)
    assert broken != CFF
    with pytest.raises(ValidationError, match="authors"):
        cffconvert.Citation(broken).validate()


def test_citation_cites_the_current_semantics_version() -> None:
    (v,) = re.findall(r'^version: "([^"]+)"$', CFF, flags=re.M)
    assert v == spec.__version__


def test_a_rule_change_needs_a_new_version() -> None:
    now = rules_digest()
    assert RULES_DIGESTS.get(spec.__version__) == now, (
        f"the rules of spec changed (digest {now}): bump spec.version.__version__ and add "
        f"the new version with this digest to RULES_DIGESTS"
    )
    assert len(set(RULES_DIGESTS.values())) == len(RULES_DIGESTS)


def test_the_digest_sees_code_not_docs(tmp_path: Path) -> None:
    root = tmp_path / "spec"
    shutil.copytree(Path(spec.__file__).parent, root)
    base = rules_digest()
    target = root / "ops" / "elementwise.py"
    src = target.read_text()
    body = src.split('"""', 2)
    target.write_text(f'"""{body[1]} (reworded)"""' + body[2] + "\n# a comment\n")
    assert rules_digest(root) == base
    target.write_text(src.replace("def ", "def _renamed_", 1))
    assert rules_digest(root) != base
    assert {p.name for p in rule_files()} >= {"graph.py", "domains.py", "elementwise.py"}


def _listed_theorems(capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    assert proofs_main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [ln.split()[0] for ln in lines[2:] if ln.strip() and not ln.endswith(" theorems")]
    assert lines[0].startswith("name") and len(names) > 300
    return names


def test_theorems_md_is_generated() -> None:
    assert (ROOT / "docs" / "THEOREMS.md").read_text() == markdown(), (
        "regenerate: python -m proofs readme"
    )


def test_every_listed_theorem_and_op_rule_has_an_anchor(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "THEOREMS.md").read_text()
    anchors = re.findall(r'<a id="([^"]+)"></a>', doc)
    assert len(anchors) == len(set(anchors))
    want = [*_listed_theorems(capsys), *(f"rule.{op}" for op in OPS)]
    assert sorted(anchors) == sorted(want)
    page = html()
    assert all(f'id="{a}"' in page for a in want)
    for link in set(re.findall(r"\]\(#([^)]+)\)", doc)):
        assert link in anchors, link


def test_certificates_record_the_semantics_version() -> None:
    import numpy as np

    from proofs.bounds_certificate_check import check_certificate
    from proofs.run_certificate import versions
    from runtime.nn import Linear, ReLU, Sequential
    from runtime.trainer import Result

    assert versions()["spec"] == spec.__version__
    model = Sequential(Linear(2, 2), ReLU(), Linear(2, 1))
    state = [np.asarray(a, dtype=np.float32) for a in ([[1, 1], [1, -1]], [0, 0], [[1, 1]], [0])]
    res = Result(model, "mse", "float32", "eager", "ordered", False, state)
    cert = res.verify([0.0, 0.0], 1.0, algorithm="crown").certificate()
    assert cert["spec_version"] == spec.__version__
    assert check_certificate(cert)  # a valid certificate with the field (raises otherwise)
