"""`op.<name>.vjp_closed_form`: each op's spec VJP against the gradient of its independently
written definition, an obligation that shares no code with the spec rule.

Invariants:
- For every op with an independent `definition` in its law (`proofs.laws.<family>`) that is
  differentiable and has a smooth case (ψ exists), on every smooth case: with symbolic
  cotangent g, `vjp(x, g)_i[k]` equals ∂/∂X_i[k] Σ_j definition(x)_j · g_j, both sides
  rewritten in the region's coordinates X through ψ. sympy's `diff` of the definition is
  the closed form; nothing of `spec` but the VJP under test is evaluated.
- This is independent of the shared `push` of `spec.ops.builders.elementwise1` (whose JVP and VJP
  agree by construction, so the adjoint law cannot see a wrong push) and of a composite's
  body (which its runtime kernel runs, so the kernel laws cannot see a wrong body).
- Identities are decided by `proofs.decide.decide_zero`, with the numeric fallback where
  the law allows it for "derivative".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import sympy

from spec.domains import SYMBOLIC
from spec.errors import TorchLeanError
from spec.ops import OPS

from ..decide import as_array, decide_zero, symbols
from ..records import CheckContext, CheckResult, Scope, Theorem
from ..witnesses import op_witness
from .core import LAWS, Case, OpLaw

__all__ = ["eligible_cases", "theorems"]

S = SYMBOLIC


def eligible_cases(law: OpLaw) -> list[Case]:
    """The smooth cases of a law with a definition (the region's ψ exists)."""
    if law.definition is None:
        return []
    out = []
    for c in law.cases:
        if c.kind not in (None, "smooth"):
            continue
        try:
            if c.region(c.shapes).psi is not None:
                out.append(c)
        except (TorchLeanError, ValueError, TypeError):
            continue
    return out


def _case(op: Any, law: OpLaw, case: Case, numeric: bool, key: str) -> tuple[int, list[str]]:
    pt = case.region(case.shapes)
    assert pt.psi is not None and law.definition is not None
    attrs = dict(case.attrs)
    E = law.definition([as_array(v) for v in pt.values], attrs, case.env)
    out_shape = op.shape(list(case.shapes), attrs)
    g = symbols("g", out_shape)
    L = sum(
        (sympy.sympify(e) * gj for e, gj in zip(E.reshape(-1), g.data, strict=True)), sympy.S.Zero
    )
    L = sympy.sympify(L).subs(pt.psi, simultaneous=True)
    vj = op.vjp(S, pt.values, g, attrs, case.env)
    n, failures = 0, []
    for i, (V, X) in enumerate(zip(vj, pt.coords, strict=True)):
        for k, (v, x) in enumerate(zip(V.data, X.data, strict=True)):
            n += 1
            e = sympy.sympify(v).subs(pt.psi, simultaneous=True) - sympy.diff(L, x)
            if decide_zero(e, numeric=numeric, key=f"{key}/{i}/{k}") is None:
                failures.append(f"vjp[{i}][{k}] - ∂⟨definition, g⟩/∂x: {sympy.sstr(e)[:200]}")
    return n, failures


@dataclass(frozen=True)
class _Check:
    op: str

    def __call__(self, ctx: CheckContext) -> CheckResult:
        law, op = LAWS[self.op], OPS[self.op]
        numeric = "derivative" in law.numeric
        rows, ids, failed = [], 0, 0
        for case in eligible_cases(law):
            try:
                n, fails = _case(op, law, case, numeric, f"op.{self.op}.vjp_closed_form")
            except (TorchLeanError, TypeError, ValueError, ZeroDivisionError) as e:
                n, fails = 0, [f"raised {type(e).__name__}: {e}"]
            ids += n
            failed += bool(fails)
            row: dict[str, Any] = {"case": case.label(), "ok": not fails, "identities": n}
            if fails:
                row["failures"] = fails[:3]
            rows.append(row)
        counts = {
            "cases": len(rows),
            "cases_passed": len(rows) - failed,
            "cases_failed": failed,
            "identities": ids,
        }
        return CheckResult(failed == 0 and bool(rows), counts, {"cases": rows})


def theorems() -> list[Theorem]:
    """The closed-form VJP theorem of every differentiable op with smooth law cases."""
    out = []
    for name in OPS:
        law = LAWS.get(name)
        if law is None or not OPS[name].differentiable:
            continue
        cases = eligible_cases(law)
        if not cases:
            continue
        numeric = "derivative" in law.numeric
        out.append(
            Theorem(
                name=f"op.{name}.vjp_closed_form",
                statement=(
                    f"On every smooth case, the spec VJP of {name} equals the gradient of "
                    f"⟨definition(x), g⟩ for the independent definition ({law.definition_text}), "
                    "by sympy diff; independent of the spec's JVP, its shared push and any "
                    "composite body."
                ),
                formula="vjp(x, g)_i = ∂/∂x_i ⟨definition(x), g⟩",
                scope=Scope(
                    (name,),
                    ("symbolic",),
                    f"{len(cases)} cases: " + "; ".join(c.label() for c in cases),
                ),
                evidence=("symbolic identity", "numeric fallback")
                if numeric
                else ("symbolic identity",),
                check=_Check(name),
                sources=("spec", "proofs"),
                isolated=True,
                bounds=f"{len(cases)} representative smooth cases",
                witness=op_witness(name, "adjoint"),
            )
        )
    return out
