"""`float.ordered_bitwise`: the `ordered` kernels are bit-identical to spec in every IEEE format.

Invariants:
- The evidence is the conformance suite's properties "link" and "link_special_values"
  (`conformance.suite.default_properties([dtype], ["ordered"])`), run with
  `conformance.suite.run_property(prop, max_examples, seed=None)`: Hypothesis in
  derandomised mode, so two runs draw the same cases. Each case compares the runtime's
  values and `backward_dense_from` cotangents with spec's `eval_graph` and
  `backprop_all_ctx` evaluated in the format's exact emulation, bit for bit (NaN matches
  NaN, signed zeros must match).
- Budgets: `QUICK_CASES` per property in quick mode, `FULL_CASES` in full mode. The case
  counts of every (format, property) row are recorded; a property that is missing from the
  suite, or fails, fails the theorem.
- With `jobs > 1` the eight (format, property) rows run in worker processes; rows are
  reported in a fixed order.
"""

from __future__ import annotations

import multiprocessing
from typing import Any

from .records import CheckContext, CheckResult, Scope, Theorem
from .witnesses import graph_witnesses

__all__ = ["FORMATS", "FULL_CASES", "PROPERTIES", "QUICK_CASES", "theorems"]

FORMATS = (
    ("binary32", "float32"),
    ("bfloat16", "bfloat16"),
    ("float16", "float16"),
    ("binary64", "float64"),
)
"""(format name, runtime dtype) pairs."""
PROPERTIES = ("link", "link_special_values")
QUICK_CASES = 30
FULL_CASES = 200


def _row(job: tuple[str, str, int]) -> dict[str, Any]:
    """Run one conformance property for one dtype; never raises."""
    dtype, prop_name, n = job
    try:
        from conformance.suite import default_properties, run_property

        props = [p for p in default_properties([dtype], ["ordered"]) if p.name == prop_name]
        if not props:
            return {
                "cases": 0,
                "passed": 0,
                "failed": 1,
                "failure": f"conformance has no property {prop_name!r} for {dtype}",
            }
        r = run_property(props[0], n, seed=None)
        out: dict[str, Any] = {"cases": r.cases, "passed": r.passed, "failed": r.failed}
        if r.failure:
            out["failure"] = r.failure.get("message")
            out["graph"] = r.failure.get("graph_text")
        return out
    except Exception as e:  # an import or harness error fails the row, with its cause
        return {"cases": 0, "passed": 0, "failed": 1, "failure": f"{type(e).__name__}: {e}"}


def _check(ctx: CheckContext) -> CheckResult:
    n = QUICK_CASES if ctx.quick else FULL_CASES
    jobs = [(dt, p, n) for _, dt in FORMATS for p in PROPERTIES]
    if ctx.jobs > 1:
        with multiprocessing.get_context("fork").Pool(min(ctx.jobs, len(jobs))) as pool:
            rows = pool.map(_row, jobs, chunksize=1)
    else:
        rows = []
        for k, j in enumerate(jobs):
            rows.append(_row(j))
            ctx.report("float.ordered_bitwise", k + 1, len(jobs))
    details: dict[str, Any] = {"max_examples": n, "rows": {}}
    counts = {"cases": 0, "passed": 0, "failed": 0}
    for (fmt, dt), p in ((f, p) for f in FORMATS for p in PROPERTIES):
        r = rows[jobs.index((dt, p, n))]
        details["rows"][f"{fmt}/{p}"] = r
        counts["cases"] += r["cases"]
        counts["passed"] += r["passed"]
        counts["failed"] += r["failed"]
    ok = counts["failed"] == 0 and counts["cases"] > 0
    return CheckResult(ok, counts, details)


def theorems() -> list[Theorem]:
    return [
        Theorem(
            name="float.ordered_bitwise",
            statement=(
                "With the `ordered` kernel profile, the runtime's forward values and "
                "backward_dense_from cotangents of lower(g) are bit-identical to spec's eval_graph "
                "and backprop_all_ctx evaluated in the same IEEE format (binary32, bfloat16, "
                "float16, binary64; exact emulation with one rounding per operation), NaN "
                "matching NaN and signed zeros matching, including NaN/inf/subnormal/-0 inputs "
                "and seeds. Evidence: the conformance properties 'link' and "
                "'link_special_values' on random typed graphs (Hypothesis, derandomised)."
            ),
            formula="bits(backward_dense_from(lower(g, x), s)) = bits(backprop_all_ctx_F(g, x, s)) "
            "for F ∈ {binary32, bfloat16, float16, binary64}",
            scope=Scope(
                ("conformance DEFAULT_FLOAT_OPS",),
                tuple(f for f, _ in FORMATS),
                "conformance INPUT_SHAPES (scalars, size-1 dims, broadcast pairs, rank 3, "
                "zero-size)",
                f"random graphs of up to 6 nodes; {QUICK_CASES} cases per (format, "
                f"property) quick, {FULL_CASES} full",
            ),
            evidence=("random cases",),
            bounds=f"{QUICK_CASES} quick / {FULL_CASES} full derandomised Hypothesis cases per "
            f"(format, property), {len(FORMATS) * len(PROPERTIES)} rows",
            witness=graph_witnesses()["float.ordered_bitwise"],
            time_limit=(240.0, 900.0),
            check=_check,
            status="checked",
            sources=("spec", "runtime", "conformance", "proofs"),
        )
    ]
