"""Proof-run certificates (`python -m proofs check`): what was checked, against which
sources, with which result. (Not to be confused with the output-bound certificates of
`runtime.verification`, which `proofs.bounds_certificate_check` re-validates.)

Invariants:
- A certificate is a JSON object with `format`, `mode`, `selection`, `versions` (python,
  sympy, numpy, gmpy2, mpmath, hypothesis, torchlean, and `spec`: `spec.__version__`, the
  version of the semantics), `sources` (sha256 of every `.py`
  file under spec/, runtime/, conformance/ and proofs/, and of proofs/*.md, keyed by
  POSIX path relative to the repository root), `theorems` (per theorem: statement,
  formula, scope, evidence, bounds, witness, status, sources, result ("pass", "fail" or
  "undecided (time limit)"), counts, details), `totals` (theorems passed, failed and
  undecided, theorems per evidence kind, sums of counts), with `--witnesses` a
  `witnesses` section (per theorem: the defect and the result on it), then
  `certificate_digest` and `timings`.
- `certificate_digest` = "sha256:" + sha256 of the canonical JSON (sorted keys, no
  whitespace, UTF-8) of the certificate without `timings` and without the digest itself.
  Everything under the digest is deterministic, so two runs over the same sources in the
  same mode give the same digest; timings (and the wall-clock start) are outside it.
- `compare(old, new)` reports theorems whose result changed, theorems that are *stale*
  (some source file under one of the theorem's source directories was added, removed or
  changed since `old`), added and removed theorems, and whether `old`'s digest still
  matches its content.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spec.safe_files import read_text, write_atomic
from spec.version import __version__ as SPEC_VERSION

from .records import EVIDENCE_KINDS, CheckResult, ProofError, Theorem

__all__ = [
    "FORMAT",
    "SOURCE_DIRS",
    "Comparison",
    "build",
    "canonical_json",
    "compare",
    "compute_digest",
    "load",
    "repo_root",
    "source_hashes",
    "stale_against_tree",
    "versions",
    "write",
]

FORMAT = "torchlean-proofs-certificate/1"
SOURCE_DIRS = ("spec", "runtime", "conformance", "proofs")
_UNDIGESTED = ("timings", "certificate_digest")


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def source_hashes(root: Path | None = None) -> dict[str, str]:
    """sha256 of every source file the checks read, keyed by relative POSIX path."""
    root = root or repo_root()
    out: dict[str, str] = {}
    for d in SOURCE_DIRS:
        base = root / d
        files = sorted(base.rglob("*.py"))
        if d == "proofs":
            files = sorted([*files, *base.glob("*.md")])
        for f in files:
            if "__pycache__" in f.parts:
                continue
            out[f.relative_to(root).as_posix()] = (
                "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest()
            )
    return dict(sorted(out.items()))


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def versions() -> dict[str, str]:
    return {
        "python": platform.python_version(),
        "sympy": _version("sympy"),
        "numpy": _version("numpy"),
        "gmpy2": _version("gmpy2"),
        "mpmath": _version("mpmath"),
        "hypothesis": _version("hypothesis"),
        "torchlean": _version("torchlean"),
        "spec": SPEC_VERSION,
    }


def canonical_json(obj: Any) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def compute_digest(cert: Mapping[str, Any]) -> str:
    body = {k: v for k, v in cert.items() if k not in _UNDIGESTED}
    return "sha256:" + hashlib.sha256(canonical_json(body)).hexdigest()


def _totals(results: Sequence[tuple[Theorem, CheckResult]]) -> dict[str, Any]:
    sums: dict[str, int] = {}
    for _, r in results:
        for k, v in r.counts.items():
            if isinstance(v, int):
                sums[k] = sums.get(k, 0) + v
    passed = sum(r.passed for _, r in results)
    kinds: dict[str, int] = dict.fromkeys(EVIDENCE_KINDS, 0)
    for th, _ in results:
        for e in th.evidence:
            kinds[e] += 1
    return {
        "theorems": len(results),
        "passed": passed,
        "failed": len(results) - passed,
        "undecided": sum(r.undecided for _, r in results),
        "theorems_per_evidence_kind": kinds,
        "count_sums": dict(sorted(sums.items())),
    }


def build(
    mode: str,
    selection: Sequence[str],
    results: Sequence[tuple[Theorem, CheckResult]],
    *,
    elapsed: float,
    started: str,
    jobs: int,
    witnesses: Sequence[tuple[Theorem, CheckResult]] | None = None,
) -> dict[str, Any]:
    """A certificate for the given results (see the module invariants); with `witnesses`,
    each theorem's result on its witness (which must be "fail") as well."""
    theorems = {}
    for th, r in results:
        entry = th.to_json()
        entry.update(r.to_json())
        theorems[th.name] = entry
    cert: dict[str, Any] = {
        "format": FORMAT,
        "mode": mode,
        "selection": list(selection) or ["<all>"],
        "versions": versions(),
        "sources": source_hashes(),
        "theorems": theorems,
        "totals": _totals(results),
    }
    if witnesses is not None:
        cert["witnesses"] = {
            th.name: {"defect": th.witness.defect if th.witness else None, "result": r.result}
            for th, r in witnesses
        }
    # Round-trip through JSON so the digest is over exactly what is written.
    cert = json.loads(canonical_json(cert))
    cert["certificate_digest"] = compute_digest(cert)
    cert["timings"] = {
        "started_utc": started,
        "elapsed_seconds": round(elapsed, 3),
        "jobs": jobs,
        "per_theorem_seconds": {th.name: round(r.seconds, 3) for th, r in results},
    }
    return cert


MAX_BYTES = 64 * 2**20
"""The largest proof-run certificate `load` reads."""


def write(cert: Mapping[str, Any], path: str | Path) -> None:
    """Write atomically (`spec.safe_files.write_atomic`: no link followed; a full disk is
    one `ProofError`)."""
    text = json.dumps(cert, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
    write_atomic(str(path), text, error=ProofError)


def load(path: str | Path) -> dict[str, Any]:
    text = read_text(str(path), MAX_BYTES, error=ProofError)
    try:
        cert = json.loads(text)
    except ValueError as e:
        raise ProofError(f"cannot read certificate {path}: {e}") from None
    except RecursionError:
        raise ProofError(f"cannot read certificate {path}: JSON nested too deeply") from None
    if not isinstance(cert, dict) or cert.get("format") != FORMAT:
        raise ProofError(f"{path} is not a {FORMAT} certificate")
    for key in ("sources", "theorems", "certificate_digest"):
        if key not in cert:
            raise ProofError(f"certificate {path} lacks {key!r}")
    return cert


def _dirs_of(path: str) -> str:
    return path.split("/", 1)[0]


def _changed_files(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    return sorted(p for p in set(old) | set(new) if old.get(p) != new.get(p))


@dataclass
class Comparison:
    """How an old certificate relates to a new one (or to the current tree)."""

    digest_ok: bool
    changed: list[dict[str, str]] = field(default_factory=list)
    stale: list[dict[str, Any]] = field(default_factory=list)
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed_files: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.digest_ok and not (self.changed or self.stale)

    def lines(self) -> list[str]:
        state = "ok" if self.digest_ok else "MISMATCH (edited after it was written)"
        out = [f"digest of the earlier certificate: {state}"]
        if self.changed_files:
            out.append(
                f"source files changed since: {len(self.changed_files)}: "
                + ", ".join(self.changed_files[:10])
                + (" ..." if len(self.changed_files) > 10 else "")
            )
        for c in self.changed:
            out.append(f"CHANGED {c['name']}: {c['old']} -> {c['new']}")
        for s in self.stale:
            files = s["files"]
            out.append(
                f"STALE   {s['name']}: {len(files)} source file(s) changed under "
                f"{', '.join(s['dirs'])}: {', '.join(files[:3])}"
                + (" ..." if len(files) > 3 else "")
            )
        out += [f"ADDED   {n}" for n in self.added]
        out += [f"REMOVED {n}" for n in self.removed]
        if self.clean and not (self.added or self.removed):
            out.append("no theorem changed result; none is stale")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "digest_ok": self.digest_ok,
            "changed": self.changed,
            "stale": self.stale,
            "added": self.added,
            "removed": self.removed,
            "changed_files": self.changed_files,
        }


def _stale(old_th: Mapping[str, Any], name: str, changed: Sequence[str]) -> dict[str, Any] | None:
    dirs = list(old_th.get("sources") or SOURCE_DIRS)
    files = [p for p in changed if _dirs_of(p) in dirs]
    return {"name": name, "dirs": dirs, "files": files} if files else None


def compare(old: Mapping[str, Any], new: Mapping[str, Any]) -> Comparison:
    """Theorems of `old` whose result changed in `new`, or whose sources changed."""
    cmp = Comparison(digest_ok=compute_digest(old) == old.get("certificate_digest"))
    cmp.changed_files = _changed_files(old.get("sources", {}), new.get("sources", {}))
    old_t, new_t = old.get("theorems", {}), new.get("theorems", {})
    for name in sorted(old_t):
        if name not in new_t:
            continue
        a, b = old_t[name].get("result"), new_t[name].get("result")
        if a != b:
            cmp.changed.append({"name": name, "old": str(a), "new": str(b)})
        s = _stale(old_t[name], name, cmp.changed_files)
        if s:
            cmp.stale.append(s)
    cmp.added = sorted(set(new_t) - set(old_t))
    if list(new.get("selection", [])) == ["<all>"]:  # a partial run removes nothing
        cmp.removed = sorted(set(old_t) - set(new_t))
    return cmp


def stale_against_tree(old: Mapping[str, Any]) -> Comparison:
    """`old` against the current sources, without re-running any check."""
    cmp = Comparison(digest_ok=compute_digest(old) == old.get("certificate_digest"))
    cmp.changed_files = _changed_files(old.get("sources", {}), source_hashes())
    for name in sorted(old.get("theorems", {})):
        s = _stale(old["theorems"][name], name, cmp.changed_files)
        if s:
            cmp.stale.append(s)
    return cmp
