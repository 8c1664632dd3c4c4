"""The version of the reference semantics, and the digest of the sources that define it.

Invariants:
- `__version__` names the semantics (the rules of `spec`), not the package: every report
  and certificate records it, so a result can be cited with the rules it was judged by.
- `RULE_SOURCES` are the modules whose code is the semantics (the op rules, the domains and
  their rounding, shapes, tensors, the graph IR and its eval / JVP / VJP, inlining, the
  RNG). `rules_digest()` hashes their syntax trees with docstrings removed, printed back as
  source (`ast.unparse`, stable across Python versions where `ast.dump` is not), so a change
  of formatting, comments or docs leaves it unchanged and any change of code changes it.
- `RULES_DIGESTS` maps each released version to the digest of its rules; the current
  `__version__` must map to `rules_digest()` (a test), so a rule change without a new
  version (and a new entry) fails; its message prints the current digest
  (`python -c 'import spec.version as v; print(v.rules_digest())'`).
"""

from __future__ import annotations

import ast
import hashlib
from pathlib import Path

__all__ = ["RULES_DIGESTS", "RULE_SOURCES", "__version__", "rule_files", "rules_digest"]

__version__ = "0.2.0"

_HERE = Path(__file__).resolve().parent

RULE_SOURCES: tuple[str, ...] = (
    "domains.py",
    "graph.py",
    "inline.py",
    "rng.py",
    "shape.py",
    "tensor.py",
    "ops/*.py",
)
"""Globs relative to the `spec` directory; their files in sorted order are the rules."""

RULES_DIGESTS: dict[str, str] = {
    "0.1.0": "65a2d19c4626452d6f25daf8f32fda340267ae74f08595b3be03ca73ed75c615",
    "0.2.0": "ba196354d288754fc81978c01d66f778755dba482135f0c7757a188687d30a4c",
}


def _strip_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            node.body = body[1:] or [ast.Pass()]
    return tree


def rule_files(root: Path = _HERE) -> list[Path]:
    """The files of `RULE_SOURCES` under `root` (the `spec` directory), sorted by path."""
    files = {p for pat in RULE_SOURCES for p in root.glob(pat)}
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def rules_digest(root: Path = _HERE) -> str:
    """SHA-256 over (relative path, syntax tree without docstrings) of every rule file
    under `root` (the `spec` directory; another root: a copy being compared)."""
    h = hashlib.sha256()
    for p in rule_files(root):
        tree = _strip_docstrings(ast.parse(p.read_text(), filename=str(p)))
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        h.update(ast.unparse(tree).encode() + b"\0")
    return h.hexdigest()
