"""The per-op obligations: `op.<name>.adjoint`, `op.<name>.derivative`, `op.<name>.forward`
for every op of `spec.ops.OPS`, checked as sympy identities over `spec.domains.SYMBOLIC`.

Invariants:
- `register_all` iterates the op table: every op gets its three obligations. An op without
  an entry in `proofs.laws.core.LAWS` gets obligations with status "missing" whose checks
  fail, so a new op cannot slip through unlawed. The checks fetch the op from `OPS` when
  they run (a patched table is what gets checked).
- adjoint: ⟨jvp(x, dx), δ⟩ = Σ_i ⟨dx_i, vjp(x, δ)_i⟩ (spec.tensor.dot, left folds) on every
  case, with symbolic dx and δ.
- derivative: on smooth cases, jvp(x, dx) = d/dt forward(x + t·dx)|_{t=0} (sympy diff).
  On free regions (no comparisons) the spec forward is evaluated at x + t·dx itself; on
  constrained regions the region's forward expression is rewritten in coordinates via ψ
  (φ(ψ(X)) = X is checked as an identity) and differentiated along dx. On convention
  cases the JVP (and, where stated, the VJP) is compared with the law's stated
  convention, written independently of the spec.
- forward: the spec forward equals the law's independent definition or satisfies its
  characterisation.
- Identities are decided by `proofs.decide.decide_zero`; the numeric fallback is enabled
  only for the obligations listed in a law's `numeric` field, and results count how each
  identity was decided. The obligations are the same in quick and full mode.
- Theorem names, statements, scopes and results do not depend on which family module a
  law lives in.
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from spec.domains import SYMBOLIC
from spec.errors import TorchLeanError
from spec.ops import OPS
from spec.shape import Shape
from spec.tensor import Tensor, dot, fold_add

from ..decide import as_array, decide_zero, symbols
from ..records import CheckContext, CheckResult, Scope, Theorem
from ..witnesses import op_witness
from .core import LAWS, OBLIGATIONS, Case, OpLaw, Point, arr

__all__ = ["check_obligation", "theorems"]

S = SYMBOLIC


_T = sympy.Symbol("t", real=True)


class _Tally:
    def __init__(self, numeric: bool, key: str) -> None:
        self.numeric = numeric
        self.key = key
        self.n = 0
        self.methods: collections.Counter[str] = collections.Counter()
        self.failures: list[str] = []

    def zero(self, e: Any, what: str) -> None:
        self.n += 1
        m = decide_zero(e, numeric=self.numeric, key=f"{self.key}/{self.n}")
        if m is None:
            self.failures.append(f"{what}: not shown to be 0: {sympy.sstr(e)[:300]}")
        else:
            self.methods[m] += 1

    def flag(self, ok: bool, what: str) -> None:
        self.n += 1
        if ok:
            self.methods["assumption"] += 1
        else:
            self.failures.append(f"{what}: does not hold")

    def same(self, got: Tensor, want: Any, what: str) -> None:
        want = arr(want)
        if got.shape != tuple(want.shape):
            self.n += 1
            self.failures.append(f"{what}: shape {got.shape}, expected {tuple(want.shape)}")
            return
        for k, (p, q) in enumerate(zip(got.data, want.reshape(-1), strict=True)):
            self.zero(sympy.sympify(p) - sympy.sympify(q), f"{what}[{k}]")


def _tangents(prefix: str, shapes: Sequence[Shape]) -> list[Tensor]:
    return [symbols(f"{prefix}{i}", s) for i, s in enumerate(shapes)]


def _subs(t: Tensor, m: Mapping[Any, Any]) -> Tensor:
    return Tensor(t.shape, tuple(sympy.sympify(v).subs(m, simultaneous=True) for v in t.data))


def _case_kind(case: Case, pt: Point) -> str:
    if case.kind is not None:
        return case.kind
    return "smooth" if pt.psi is not None else "convention"


def _check_adjoint(op: Any, law: OpLaw, case: Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    out_shape = op.shape(list(case.shapes), attrs)
    dxs = _tangents("d", case.shapes)
    g = symbols("g", out_shape)
    jv = op.jvp(S, pt.values, dxs, attrs, case.env)
    vj = op.vjp(S, pt.values, g, attrs, case.env)
    if (
        jv.shape != out_shape
        or len(vj) != len(case.shapes)
        or any(v.shape != s for v, s in zip(vj, case.shapes, strict=True))
    ):
        tally.flag(False, f"jvp/vjp shapes {jv.shape}/{[v.shape for v in vj]}")
        return
    lhs = dot(S, jv, g)
    rhs = fold_add(S, (dot(S, d, v) for d, v in zip(dxs, vj, strict=True)))
    tally.zero(lhs - rhs, "<jvp, g> - <dx, vjp>")


def _directional(F: Tensor, coords: list[Tensor], dxs: list[Tensor]) -> list[Any]:
    m = {
        x: x + _T * d
        for X, D in zip(coords, dxs, strict=True)
        for x, d in zip(X.data, D.data, strict=True)
    }
    return [sympy.diff(sympy.sympify(f).subs(m, simultaneous=True), _T).subs(_T, 0) for f in F.data]


def _check_derivative(op: Any, law: OpLaw, case: Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    dxs = _tangents("d", case.shapes)
    kind = _case_kind(case, pt)
    jv = op.jvp(S, pt.values, dxs, attrs, case.env)
    if kind == "smooth" and pt.direct:
        shifted = [
            Tensor(X.shape, tuple(x + _T * d for x, d in zip(X.data, D.data, strict=True)))
            for X, D in zip(pt.coords, dxs, strict=True)
        ]
        F = op.forward(S, shifted, attrs, case.env)
        want = [sympy.diff(f, _T).subs(_T, 0) for f in F.data]
        tally.same(
            jv,
            np.array(want, dtype=object).reshape(jv.shape)
            if want
            else np.empty(jv.shape, dtype=object),
            "jvp - d/dt forward(x + t dx)",
        )
        return
    if kind == "smooth":
        assert pt.psi is not None
        for V, X in zip(pt.values, pt.coords, strict=True):  # φ(ψ(X)) = X
            for v, x in zip(V.data, X.data, strict=True):
                tally.zero(sympy.sympify(v).subs(pt.psi, simultaneous=True) - x, "φ(ψ(X)) - X")
        F = _subs(op.forward(S, pt.values, attrs, case.env), pt.psi)
        want = _directional(F, pt.coords, dxs)
        tally.same(
            _subs(jv, pt.psi),
            np.array(want, dtype=object).reshape(jv.shape),
            "jvp - d/dt forward(x + t dx) [region]",
        )
        return
    vals = [as_array(v) for v in pt.values]
    dvals = [as_array(d) for d in dxs]
    if law.conv_jvp is None:
        tally.flag(False, "no convention stated for a non-smooth case")
        return
    if law.conv_jvp == "definition":
        assert law.definition is not None
        shifted_vals = [arr(v + _T * d) for v, d in zip(vals, dvals, strict=True)]
        E = law.definition(shifted_vals, attrs, case.env)
        want = arr(
            np.array(
                [sympy.diff(sympy.sympify(e), _T).subs(_T, 0) for e in E.reshape(-1)], dtype=object
            ).reshape(E.shape)
        )
    else:
        want = law.conv_jvp(vals, dvals, attrs, case.env)
    tally.same(jv, want, "jvp - stated convention")
    if law.conv_vjp is not None:
        g = symbols("g", jv.shape)
        vj = op.vjp(S, pt.values, g, attrs, case.env)
        for i, (v, w) in enumerate(
            zip(vj, law.conv_vjp(vals, as_array(g), attrs, case.env), strict=True)
        ):
            tally.same(v, w, f"vjp[{i}] - stated convention")


def _check_forward(op: Any, law: OpLaw, case: Case, tally: _Tally) -> None:
    pt = case.region(case.shapes)
    attrs = dict(case.attrs)
    out = op.forward(S, pt.values, attrs, case.env)
    want_shape = op.shape(list(case.shapes), attrs)
    if out.shape != want_shape:
        tally.flag(False, f"forward shape {out.shape}, shape rule {want_shape}")
        return
    if law.definition is not None:
        tally.same(
            out,
            law.definition([as_array(v) for v in pt.values], attrs, case.env),
            "forward - definition",
        )
    if law.characterize is not None:
        for k, e in enumerate(law.characterize(pt.values, pt.coords, out, attrs)):
            if isinstance(e, bool):
                tally.flag(e, f"characterisation[{k}]")
            else:
                tally.zero(e, f"characterisation[{k}]")


_CHECKS = {"adjoint": _check_adjoint, "derivative": _check_derivative, "forward": _check_forward}


def check_obligation(op_name: str, obligation: str, ctx: CheckContext) -> CheckResult:
    """Run `op.<op_name>.<obligation>` over every case of the op's law (the per-op
    obligations are the same in quick and full mode)."""
    law = LAWS.get(op_name)
    if law is None:
        return CheckResult(False, {"cases": 0}, {"error": f"no law written for op {op_name!r}"})
    if op_name not in OPS:
        return CheckResult(False, {"cases": 0}, {"error": f"op {op_name!r} not in the op table"})
    op = OPS[op_name]
    cases = [c for c in law.cases if obligation != "forward" or c.forward]
    numeric = obligation in law.numeric
    rows: list[dict[str, Any]] = []
    total = collections.Counter[str]()
    identities = failed = 0
    for i, case in enumerate(cases):
        tally = _Tally(numeric, f"op.{op_name}.{obligation}/{case.label()}")
        try:
            _CHECKS[obligation](op, law, case, tally)
        except (TorchLeanError, TypeError, ValueError, ZeroDivisionError) as e:
            tally.failures.append(f"raised {type(e).__name__}: {e}")
        ok = not tally.failures
        failed += not ok
        identities += tally.n
        total.update(tally.methods)
        row: dict[str, Any] = {
            "case": case.label(),
            "ok": ok,
            "identities": tally.n,
            "methods": dict(sorted(tally.methods.items())),
        }
        if obligation == "derivative":
            row["kind"] = _case_kind(case, case.region(case.shapes))
        if not ok:
            row["failures"] = tally.failures[:3]
        rows.append(row)
        ctx.report(f"op.{op_name}.{obligation}", i + 1, len(cases))
    counts = {
        "cases": len(cases),
        "cases_passed": len(cases) - failed,
        "cases_failed": failed,
        "identities": identities,
    }
    counts.update({f"decided_by_{k}": v for k, v in sorted(total.items())})
    details = {"cases": rows, "numeric_fallback_allowed": numeric}
    return CheckResult(failed == 0 and len(cases) > 0, counts, details)


_STATEMENTS = {
    "adjoint": (
        "The spec JVP and VJP of {op} are adjoint on every representative case "
        "(each region of a piecewise op, and its kinks): ⟨jvp(x, dx), δ⟩ = "
        "Σ_i ⟨dx_i, vjp(x, δ)_i⟩ as a sympy identity in symbolic x, dx and δ.",
        "⟨J_x·dx, δ⟩ = Σ_i ⟨dx_i, (J_xᵀ·δ)_i⟩",
    ),
    "derivative": (
        "On each smooth region the spec JVP of {op} is the directional derivative "
        "of its spec forward, d/dt forward(x + t·dx) at t = 0 (sympy diff); on "
        "kinks and ties it equals the stated convention. Stated derivative: {deriv}.",
        "jvp(x, dx) = d/dt|₀ forward(x + t·dx)  (smooth regions)",
    ),
    "forward": (
        "The spec forward of {op} over SYMBOLIC equals the independent definition: {defn}.",
        "forward(x) = {defn}",
    ),
}


def _cases(law: OpLaw, obligation: str) -> list[Case]:
    return [c for c in law.cases if obligation != "forward" or c.forward]


def _scope(law: OpLaw | None, op: str, obligation: str) -> Scope:
    if law is None:
        return Scope((op,), ("symbolic",), "none (no law written)")
    labels = [c.label() for c in law.cases if obligation != "forward" or c.forward]
    return Scope((op,), ("symbolic",), f"{len(labels)} cases: " + "; ".join(labels))


def theorems() -> list[Theorem]:
    """The three obligations of every op in the op table, in its order."""
    out = []
    for name in OPS:
        law = LAWS.get(name)
        for ob in OBLIGATIONS:
            words, formula = _STATEMENTS[ob]
            if law is None:
                words = f"MISSING: no law is written for op {name!r}. " + words
            fmt = {
                "op": name,
                "deriv": law.derivative_text if law else "?",
                "defn": law.definition_text if law else "?",
            }
            evidence: tuple[str, ...] = ("symbolic identity",)
            if law is not None and ob in law.numeric:
                evidence = ("symbolic identity", "numeric fallback")
                words += (
                    " Identities sympy cannot decide are checked at exact rational "
                    "points with 60-digit evaluation (numeric fallback)."
                )
            out.append(
                Theorem(
                    name=f"op.{name}.{ob}",
                    statement=words.format(**fmt),
                    formula=formula.format(**fmt),
                    scope=_scope(law, name, ob),
                    evidence=evidence,
                    check=_OpCheck(name, ob),
                    status="checked" if law is not None else "missing",
                    sources=("spec", "proofs"),
                    isolated=True,
                    bounds=f"{len(_cases(law, ob))} representative cases" if law else "",
                    witness=op_witness(name, ob),
                )
            )
    return out


@dataclass(frozen=True)
class _OpCheck:
    """A picklable check callable for one per-op obligation."""

    op: str
    obligation: str

    def __call__(self, ctx: CheckContext) -> CheckResult:
        return check_obligation(self.op, self.obligation, ctx)
