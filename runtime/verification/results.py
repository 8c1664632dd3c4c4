"""What `verify` returns: `Bounds` per soundness level, `VerificationResult`, and the JSON
certificate it writes.

Invariants:
- Every bound is exact (Fractions); `holds` is True only when every margin is > 0.
- `VerificationResult.holds` claims nothing (None) about a result whose kernels level 2
  does not model (`runtime_covered` False, e.g. kernels="fast") when level 1 proves the
  property.
- `certificate()` is canonical: the format CERT_FORMAT, `spec_version` (the semantics
  it was computed under, `spec.version`), the network JSON, the box, the
  algorithm and property, the result's "kernels", both levels' bounds as p/q strings (and
  CROWN's witness; the runtime level's `holds` is null when `runtime_covered` is False),
  and a `digest` = sha256 over every other field;
  `python -m proofs check-cert FILE` re-validates it without `runtime/`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from spec.safe_files import write_atomic
from spec.version import __version__ as SPEC_VERSION

from .core import CERT_FORMAT, frac_str, sha

__all__ = ["Bounds", "VerificationResult", "statement"]


@dataclass(frozen=True)
class Bounds:
    """Bounds at one soundness level. `lower`/`upper` are exact (Fractions); `ibp_*` are
    the IBP bounds (equal to lower/upper for algorithm "ibp"); with a top_label property,
    `margins[j]` is a lower bound of out_k - out_j (None for j = k) and `holds` says
    whether every margin is > 0."""

    level: str
    statement: str
    lower: tuple[Fraction, ...]
    upper: tuple[Fraction, ...]
    ibp_lower: tuple[Fraction, ...]
    ibp_upper: tuple[Fraction, ...]
    margins: tuple[Fraction | None, ...] | None = None
    holds: bool | None = None
    witness: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)
    # alpha-CROWN: {"witness": its own chain (as `witness`, with per-row slopes of the
    # intermediate bounds), "slopes": the final bounds' per-row slopes}
    alpha: dict[str, Any] | None = field(default=None, repr=False, compare=False)
    # branch and bound: the leaves of the closed split tree (certificate entries)
    branches: list[dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def widths(self) -> list[float]:
        return [float(h - lo) for lo, h in zip(self.lower, self.upper, strict=True)]

    def ibp_widths(self) -> list[float]:
        return [float(h - lo) for lo, h in zip(self.ibp_lower, self.ibp_upper, strict=True)]


@dataclass(frozen=True)
class VerificationResult:
    """What `verify` certifies: the box, the algorithm, and `real` (level 1) and
    `runtime` (level 2) bounds."""

    algorithm: str
    property: Any
    norm: str
    dtype: str
    kernels: str
    model_hash: str
    box_lower: tuple[Fraction, ...]
    box_upper: tuple[Fraction, ...]
    center: tuple[Fraction, ...]
    radius: tuple[Fraction, ...]
    real: Bounds
    runtime: Bounds
    network: dict[str, Any] = field(repr=False, compare=False)
    # algorithm "bab": an input at which the ordered-kernel runtime violates the property
    counterexample: dict[str, Any] | None = None
    branches: int = 0

    @property
    def runtime_covered(self) -> bool:
        """Whether the runtime level describes what `Result.predict` computes for this
        result: kernels "ordered", or dtype "exact" (exact arithmetic, order-independent).
        For other kernels ("fast") the runtime bounds are those of the ordered kernels."""
        return self.kernels == "ordered" or self.dtype == "exact"

    @property
    def holds(self) -> bool | None:
        """For a top_label property: True when it is proved at the real level and at the
        runtime level, and the runtime level covers the result's kernels
        (`runtime_covered`); False when the real level, or a covering runtime level, does
        not prove it; None for property "bounds", and for a result whose kernels are not
        covered (e.g. "fast") when the real level proves it: nothing is then claimed about
        what `predict` returns (`runtime.holds` still speaks of the ordered kernels).
        For algorithm "bab": False only with a counterexample, True when both levels prove
        it (and the kernels are covered), None otherwise (budget spent: unknown)."""
        if self.real.holds is None:
            return None
        if self.algorithm == "bab":  # proved, refuted by a counterexample, or unknown
            if self.counterexample is not None:
                return False
            proved = self.real.holds and self.runtime_covered and self.runtime.holds
            return True if proved else None
        if not self.real.holds:
            return False
        if not self.runtime_covered:
            return None
        return bool(self.runtime.holds)

    def summary(self) -> str:
        """One line per level: total width (and IBP's), and the property when one was asked;
        the runtime line says when the result's kernels are not covered."""
        lines = []
        for b in (self.real, self.runtime):
            s = f"{b.level}: {self.algorithm} width {sum(b.widths()):.6g}"
            if self.algorithm != "ibp":
                s += f" (ibp {sum(b.ibp_widths()):.6g})"
            if b.holds is not None:
                verdict = "holds" if b.holds else "not proved"
                s += f"; {self.property[0]} {self.property[1]} {verdict}"
            if b.level == "runtime" and not self.runtime_covered:
                s += f"; kernels={self.kernels!r} not covered (bounds for kernels='ordered')"
            lines.append(s)
        return "\n".join(lines)

    def certificate(self) -> dict[str, Any]:
        """The JSON certificate (see the module docstring); `digest` covers every field."""
        qs = lambda xs: [None if x is None else frac_str(x) for x in xs]  # noqa: E731
        levels = {}
        for b in (self.real, self.runtime):
            e: dict[str, Any] = {
                "statement": b.statement,
                "lower": qs(b.lower),
                "upper": qs(b.upper),
            }
            if b.margins is not None:
                e["margins"] = qs(b.margins)
                # no claim about kernels the runtime level does not model
                e["holds"] = b.holds if b.level == "real" or self.runtime_covered else None
            if b.witness is not None:
                e["witness"] = b.witness
            if b.alpha is not None:
                e["alpha_witness"] = b.alpha["witness"]
                e["alpha"] = b.alpha["slopes"]
            if b.branches is not None:
                e["branches"] = b.branches
            levels[b.level] = e
        prop = self.property if isinstance(self.property, str) else list(self.property)
        cert: dict[str, Any] = {
            "format": CERT_FORMAT,
            "spec_version": SPEC_VERSION,
            "model_hash": self.model_hash,
            "network": self.network,
            "box": {
                "norm": self.norm,
                "center": qs(self.center),
                "radius": qs(self.radius),
                "lower": qs(self.box_lower),
                "upper": qs(self.box_upper),
            },
            "algorithm": self.algorithm,
            "property": prop,
            "kernels": self.kernels,
            "levels": levels,
        }
        cert["digest"] = sha(cert)
        return cert

    def save_certificate(self, path: Any) -> None:
        """Write `certificate()` to `path` atomically (`spec.safe_files.write_atomic`: never
        through a symbolic link; any failure is a `FileWriteError`, the old file kept)."""
        text = json.dumps(self.certificate(), indent=1, sort_keys=True) + "\n"
        write_atomic(os.fspath(path), text)


def statement(level: str, dtype: str, kernels: str) -> str:
    """What a level's bounds mean, in words (stored in the certificate)."""
    if level == "real":
        return (
            "level 1: every output of the real-valued network (exact real arithmetic on the "
            "stored parameters) for every real input in the box lies in [lower, upper]; "
            "computed with outward rounding"
        )
    if dtype == "exact":
        return (
            "level 2: the runtime computes exactly in dtype 'exact', so its outputs for every"
            " rational input in the box lie in the level-1 bounds"
        )
    s = (
        f"level 2: Result.predict with kernels='ordered' in {dtype} returns, for every "
        "binary64 input in the box, outputs in [lower, upper] (directed rounding in the "
        f"{dtype} format following the ordered op order)"
    )
    if kernels != "ordered":
        s += (
            f"; this result uses kernels={kernels!r}, whose summation order and libm are not"
            " covered"
        )
    return s
