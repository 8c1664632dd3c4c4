"""docs/ARCHITECTURE.md names every module of the tree, so its layout stays true: each
module (by its file name, or its package's name for `__init__`/`__main__`) of `spec`,
`runtime`, `conformance`, `proofs` and `benchmarks` appears as a word of the document, and
every `package/module.py` path the document writes exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
PACKAGES = ("spec", "runtime", "conformance", "proofs", "benchmarks")


def test_every_module_is_named() -> None:
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", DOC))
    missing = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            name = path.parent.name if path.stem in ("__init__", "__main__") else path.stem
            if name not in words:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_every_module_path_named_exists() -> None:
    alternatives = "|".join(PACKAGES)
    paths = set(re.findall(rf"\b((?:{alternatives})/[\w/]+\.py)\b", DOC))
    stale = sorted(p for p in paths if "F.py" not in p and not (ROOT / p).exists())
    assert stale == []
