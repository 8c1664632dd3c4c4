"""Tests of the proofs package: registry coverage, checks that pass and checks that can fail,
reproducible certificates, staleness reports, the CLI and the README."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import sympy

from proofs import run_certificate
from proofs.catalogue import (
    EVIDENCE_KINDS,
    CheckContext,
    CheckResult,
    ProofError,
    Scope,
    Theorem,
    Witness,
    get,
    run_check,
    select,
    theorems,
)
from proofs.cli import main, readme_table
from proofs.decide import decide_zero, rational_points
from proofs.enumeration import GRAMMARS, count_tier, enumerate_tier
from proofs.graph_laws import check_graph
from proofs.kernel_laws import KNOWN_FAILURES
from proofs.laws import LAWS, OBLIGATIONS
from proofs.opaque_ops import OPAQUE_TIERS, check_shape, count_shapes, installed
from proofs.runner import run_theorem, run_theorems
from proofs.witnesses import fold_fanin_last_wins
from spec.errors import TorchLeanError
from spec.ops import OPS

ROOT = Path(__file__).resolve().parent.parent
GRAPH_THEOREMS = (
    "link.backward_dense_from_lower_eq_backprop_all_ctx",
    "link.lower_values_eq_eval_graph",
    "graph.backprop_correct",
    "tape.lowered_zero_preserving",
    "tape.backward_dense_all_eq_from_one_hot",
)
# A representative quick subset: every obligation of a few ops (linear, piecewise with
# kinks and ties, transcendental with a max-shift, structural, nullary, a composite with
# two inputs) plus every graph-level and float theorem in quick mode.
SUBSET = [
    "op.mul",
    "op.relu",
    "op.maximum",
    "op.clamp",
    "op.softmax",
    "op.matmul",
    "op.detach",
    "op.const",
    "op.select",
    "op.mse_loss",
    *GRAPH_THEOREMS,
    "float",
]


# --------------------------------------------------------------------------- registry


def test_every_op_has_its_three_obligations() -> None:
    names = {t.name for t in theorems()}
    for op in OPS:
        assert op in LAWS, f"op {op!r} has no law in proofs/laws/"
        for ob in OBLIGATIONS:
            th = get(f"op.{op}.{ob}")
            assert th.name in names
            assert th.status == "checked", f"{th.name} is {th.status}"
            assert th.scope.ops == (op,)


def test_theorems_are_well_formed() -> None:
    ths = theorems()
    assert len({t.name for t in ths}) == len(ths)
    closed = [t for t in ths if t.name.endswith(".vjp_closed_form")]
    assert len(ths) == 3 * len(OPS) + len(closed) + len(GRAPH_THEOREMS) + 4
    # the composites and the push-built one-input ops have a push-free, body-free check
    assert {"op.gelu.vjp_closed_form", "op.sigmoid.vjp_closed_form", "op.relu.vjp_closed_form",
            "op.mse_loss.vjp_closed_form", "op.layer_norm.vjp_closed_form"} <= {
        t.name for t in closed
    }  # fmt: skip
    for t in ths:
        assert t.statement and t.formula and t.evidence
        assert all(e in EVIDENCE_KINDS for e in t.evidence)
        assert t.name.count(".") >= 1 and t.name == t.name.strip()
    for name in (*GRAPH_THEOREMS, "float.ordered_bitwise", "link.kernels_eq_spec_rules"):
        assert get(name).name == name
    assert "written proof" in get(GRAPH_THEOREMS[0]).evidence
    assert get(GRAPH_THEOREMS[0]).status == "checked"
    # every theorem has a witness; the link theorem's scope is every op of the table
    assert all(t.witness is not None and t.witness.defect for t in ths)
    assert get(GRAPH_THEOREMS[0]).scope.ops == tuple(sorted(OPS))
    # the model-scale laws (the norm family and attention) that enable the numeric
    # fallback are labelled so, and no other law is
    numeric = {t.name.split(".")[1] for t in ths if "numeric fallback" in t.evidence}
    assert numeric == {"layer_norm", "batch_norm", "instance_norm", "group_norm",
                       "batch_norm_eval", "local_response_norm",
                       "scaled_dot_product_attention", "multi_head_attention"}  # fmt: skip
    assert "bounded enumeration" in get("graph.backprop_correct").evidence
    assert "30 quick / 200 full" in get("float.ordered_bitwise").evidence_label()


def test_select_by_prefix_and_unknown_names() -> None:
    relu = [t.name for t in select(["op.relu"])]
    assert relu == [
        "op.relu.adjoint",
        "op.relu.derivative",
        "op.relu.forward",
        "op.relu.vjp_closed_form",
    ]
    assert [t.name for t in select(["op.relu.forward"])] == ["op.relu.forward"]
    assert {t.name for t in select(["link"])} == {
        *(n for n in GRAPH_THEOREMS if n.startswith("link.")),
        "link.kernels_eq_spec_rules",
        "link.model_graphs_bitwise",
    }
    with pytest.raises(ProofError):
        select(["op.no_such_op"])
    assert issubclass(ProofError, TorchLeanError)


# --------------------------------------------------------------------------- checks can fail


def test_wrong_vjp_fails_the_adjoint_obligation(monkeypatch: pytest.MonkeyPatch) -> None:
    op = OPS["mul"]

    def doubled_vjp(D, xs, g, a, env):  # type: ignore[no-untyped-def]
        two = D.from_rational(2)
        return [t.map(lambda v: D.mul(two, v)) for t in op.vjp(D, xs, g, a, env)]

    monkeypatch.setitem(OPS, "mul", dataclasses.replace(op, vjp=doubled_vjp))
    ctx = CheckContext(quick=True)
    bad = run_check(get("op.mul.adjoint"), ctx)
    assert not bad.passed
    assert bad.counts["cases_failed"] == bad.counts["cases"] > 0
    assert any(
        "not shown to be 0" in f for c in bad.details["cases"] for f in c.get("failures", [])
    )
    # the forward and derivative laws do not involve the VJP
    assert run_check(get("op.mul.forward"), ctx).passed
    assert run_check(get("op.mul.derivative"), ctx).passed


def test_wrong_kink_convention_fails_the_derivative_obligation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    op = OPS["relu"]

    def jvp_one_at_zero(D, xs, dxs, a, env):  # type: ignore[no-untyped-def]
        # relu'(0) = 1 instead of the stated relu'(0) = 0; right on both smooth regions
        out = op.jvp(D, xs, dxs, a, env)
        return dataclasses.replace(
            out,
            data=tuple(
                t if x == 0 else o
                for x, t, o in zip(xs[0].data, dxs[0].data, out.data, strict=True)
            ),
        )

    monkeypatch.setitem(OPS, "relu", dataclasses.replace(op, jvp=jvp_one_at_zero))
    r = run_check(get("op.relu.derivative"), CheckContext())
    assert not r.passed
    failed = [c for c in r.details["cases"] if not c["ok"]]
    assert failed and all(c["kind"] == "convention" for c in failed)
    assert all(c["ok"] for c in r.details["cases"] if c["kind"] == "smooth")


def test_wrong_kernel_vjp_fails_the_link_check(monkeypatch: pytest.MonkeyPatch) -> None:
    import runtime.kernels as K

    k = K.KERNELS["mul"]

    def doubled(ctx, saved, g, attrs, env):  # type: ignore[no-untyped-def]
        return [c * ctx.const(2) for c in k.vjp(ctx, saved, g, attrs, env)]

    monkeypatch.setitem(K.KERNELS, "mul", dataclasses.replace(k, vjp=doubled))
    specs = [
        gs for gs in enumerate_tier(GRAMMARS["quick"][0]) if gs.nodes and gs.nodes[-1][0] == "mul"
    ][:5]
    assert specs
    for gs in specs:
        res = check_graph(gs, frozenset({"link", "values"}))
        assert not res["link"][0] and "cotangent" in (res["link"][2] or "")
        assert res["values"][0]


def test_kernels_eq_spec_rules_fails_only_on_reported_bugs() -> None:
    """Every runtime kernel equals its spec rule on every law case, except the runtime bugs
    listed in KNOWN_FAILURES (reported to the runtime's owners); once they are fixed the
    theorem passes and lists them as now passing."""
    r = run_check(get("link.kernels_eq_spec_rules"), CheckContext())
    assert r.counts["ops"] == len(OPS)
    failing = set(r.details["failing_ops"])
    assert failing <= set(KNOWN_FAILURES), f"unexplained kernel failures: {failing}"
    assert r.passed == (not failing)
    assert get("link.kernels_eq_spec_rules").status == (
        "known-failing" if KNOWN_FAILURES else "checked"
    )
    for name in failing:  # the failure is the reported one: a 0-d input only
        assert all("(())" in f for f in r.details["ops"][name]["failures"])


# --------------------------------------------------------------------------- quick runs


@pytest.fixture(scope="module")
def quick_certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict, str]:
    """Two consecutive quick runs of the representative subset (through the CLI) that saw
    the same sources. Other work may edit spec/, runtime/ or conformance/ while the tests
    run; a run is then repeated, since a certificate is reproducible only for fixed
    sources."""
    d = tmp_path_factory.mktemp("certs")
    certs: list[dict] = []
    for attempt in range(3):
        path = d / f"c{attempt}.json"
        argv = ["check", *SUBSET, "--quick", "--jobs", "2", "--no-progress"]
        assert main([*argv, "--certificate", str(path)]) == 0
        certs.append(run_certificate.load(path))
        if len(certs) >= 2 and certs[-1]["sources"] == certs[-2]["sources"]:
            return certs[-2], certs[-1], str(d / f"c{attempt - 1}.json")
    pytest.fail("the sources changed between every pair of runs")


def test_quick_subset_passes(quick_certs: tuple[dict, dict, str]) -> None:
    c1, _, _ = quick_certs
    assert c1["mode"] == "quick"
    assert c1["totals"]["failed"] == 0
    assert all(t["result"] == "pass" for t in c1["theorems"].values())
    link = c1["theorems"][GRAPH_THEOREMS[0]]
    expected = sum(sum(count_tier(t).values()) for t in GRAMMARS["quick"])
    opaque = sum(sum(count_shapes(t).values()) for t in OPAQUE_TIERS["quick"])
    assert link["counts"]["link_passed"] == expected
    assert link["counts"]["opaque_passed"] == link["counts"]["opaque_graphs"] == opaque
    assert link["counts"]["graphs"] == expected + opaque
    kinds = c1["totals"]["theorems_per_evidence_kind"]
    assert kinds["random cases"] == 1 and kinds["numeric fallback"] == 0  # not in SUBSET
    assert kinds["bounded enumeration"] == len(GRAPH_THEOREMS)
    assert c1["totals"]["undecided"] == 0
    assert link["details"]["max_nodes"] == max(t.max_nodes for t in GRAMMARS["quick"])
    fl = c1["theorems"]["float.ordered_bitwise"]
    assert set(fl["details"]["rows"]) == {
        f"{f}/{p}"
        for f in ("binary32", "bfloat16", "float16", "binary64")
        for p in ("link", "link_special_values")
    }
    assert fl["counts"]["cases"] >= 8 * 20


def test_certificate_contents(quick_certs: tuple[dict, dict, str]) -> None:
    c1, _, _ = quick_certs
    assert set(c1["versions"]) >= {"python", "sympy", "numpy", "gmpy2", "torchlean"}
    srcs = c1["sources"]
    for d in ("spec", "runtime"):
        on_disk = {
            p.relative_to(ROOT).as_posix()
            for p in (ROOT / d).rglob("*.py")
            if "__pycache__" not in p.parts
        }
        assert on_disk <= set(srcs)
    assert all(v.startswith("sha256:") and len(v) == 71 for v in srcs.values())
    assert "proofs/link_theorem.md" in srcs
    assert c1["certificate_digest"] == run_certificate.compute_digest(c1)
    assert "elapsed_seconds" in c1["timings"]


def test_certificate_is_reproducible(quick_certs: tuple[dict, dict, str]) -> None:
    c1, c2, _ = quick_certs
    assert c1["certificate_digest"] == c2["certificate_digest"]
    body1 = {k: v for k, v in c1.items() if k != "timings"}
    body2 = {k: v for k, v in c2.items() if k != "timings"}
    assert body1 == body2
    # the digest ignores timings but not results
    c3 = json.loads(json.dumps(c1))
    c3["timings"]["elapsed_seconds"] = 1e9
    assert run_certificate.compute_digest(c3) == c1["certificate_digest"]
    c3["theorems"]["op.mul.adjoint"]["result"] = "fail"
    assert run_certificate.compute_digest(c3) != c1["certificate_digest"]


def test_modified_source_hash_is_reported_stale(
    quick_certs: tuple[dict, dict, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    c1, c2, _ = quick_certs
    old = json.loads(json.dumps(c1))
    old["sources"]["spec/ops.py"] = "sha256:" + "0" * 64
    edited = tmp_path / "edited.json"
    run_certificate.write(old, edited)
    cmp = run_certificate.compare(run_certificate.load(edited), c2)
    assert not cmp.digest_ok
    assert cmp.changed_files == ["spec/ops.py"]
    stale = {s["name"] for s in cmp.stale}
    assert "op.relu.adjoint" in stale and GRAPH_THEOREMS[0] in stale
    assert "float.ordered_bitwise" in stale
    assert not cmp.changed
    # the same through the CLI: verify, and check --against
    assert main(["verify", str(edited)]) == 1
    out = capsys.readouterr().out
    assert "STALE   op.relu.adjoint" in out and "MISMATCH" in out
    rc = main(
        [
            "check",
            "op.relu",
            "--quick",
            "--jobs",
            "1",
            "--no-progress",
            "--certificate",
            str(tmp_path / "c3.json"),
            "--against",
            str(edited),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "STALE   op.relu.forward" in out and "spec/ops.py" in out
    assert "CHANGED" not in out


def test_result_change_is_reported(quick_certs: tuple[dict, dict, str]) -> None:
    c1, c2, _ = quick_certs
    old = json.loads(json.dumps(c1))
    old["theorems"]["op.relu.forward"]["result"] = "fail"
    old["certificate_digest"] = run_certificate.compute_digest(old)
    cmp = run_certificate.compare(old, c2)
    assert cmp.digest_ok and not cmp.stale
    assert cmp.changed == [{"name": "op.relu.forward", "old": "fail", "new": "pass"}]


def test_verify_clean_certificate(
    quick_certs: tuple[dict, dict, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, path = quick_certs
    rc = main(["verify", path])
    out = capsys.readouterr().out
    # a concurrent edit of the sources would make it stale; the digest must still match
    assert "digest of the earlier certificate: ok" in out
    assert rc in (0, 1)


# --------------------------------------------------------------------------- enumeration


def test_enumeration_is_systematic() -> None:
    quick = {t.name: count_tier(t) for t in GRAMMARS["quick"]}
    assert quick["breadth"] == {0: 3, 1: 19, 2: 367}
    full = {t.name: t.max_nodes for t in GRAMMARS["full"]}
    assert full["breadth"] >= 3 and full["depth"] >= 4
    used: set[str] = set()
    for t in GRAMMARS["quick"]:
        specs = list(enumerate_tier(t))
        assert len(specs) == len(set(specs)) == sum(count_tier(t).values())
        used |= {op for gs in specs for op, _, _ in gs.nodes}
    # linear needs a vector and a matrix at once: only the two-input contexts have both
    assert used == {o.op for t in GRAMMARS["quick"] for o in t.ops}
    breadth = list(enumerate_tier(GRAMMARS["quick"][0]))
    assert any(n[0] == "mul" and n[1][0] == n[1][1] for gs in breadth for n in gs.nodes)
    assert all(gs.build().num_inputs == len(gs.inputs) for gs in breadth[:50])


# --------------------------------------------------------------------------- decisions


def test_decide_zero_methods_and_numeric_fallback() -> None:
    x = sympy.Symbol("x", real=True)
    p = sympy.Symbol("p", positive=True)
    assert decide_zero(x - x) == "structural"
    assert decide_zero((x + 1) ** 2 - x**2 - 2 * x - 1) == "expand"
    assert decide_zero(sympy.tanh(x) - (sympy.exp(2 * x) - 1) / (sympy.exp(2 * x) + 1)) is not None
    assert decide_zero(x + 1) is None
    assert decide_zero(sympy.log(p) + 1, numeric=True, key="k") is None
    pts = rational_points([x, p], "key")
    assert pts == rational_points([p, x], "key")
    assert all(pt[p] > 0 for pt in pts)


# --------------------------------------------------------------------------- CLI and README


def test_cli_list_and_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for t in theorems():
        assert t.name in out
    assert main(["check", "no.such.theorem", "--certificate", "-"]) == 2
    assert "no theorem matches" in capsys.readouterr().err


def test_readme_lists_every_theorem() -> None:
    text = (ROOT / "proofs" / "README.md").read_text(encoding="utf-8")
    missing = [t.name for t in theorems() if f"`{t.name}`" not in text]
    assert not missing, (
        f"proofs/README.md does not mention {missing}; regenerate the table "
        "with `python -m proofs readme`"
    )
    assert "## How to cite" in text and "## What is not proved" in text
    assert readme_table().splitlines()[0] in text


# --------------------------------------------------------------------------- time limits


def _sleeper(ctx: CheckContext) -> CheckResult:
    import time

    time.sleep(60)
    return CheckResult(True)


def test_a_check_past_its_time_limit_is_undecided_and_fails() -> None:
    th = Theorem(
        name="test.sleeps",
        statement="sleeps",
        formula="-",
        scope=Scope(("add",), ("symbolic",), "-"),
        evidence=("random cases",),
        check=_sleeper,
        time_limit=(0.5, 0.5),
    )
    ok = dataclasses.replace(th, name="test.passes", check=lambda ctx: CheckResult(True))
    [(_, r), (_, r2)] = run_theorems([th, ok], quick=True, jobs=2)
    assert r.undecided and not r.passed and r.result == "undecided (time limit)"
    assert r.seconds < 30 and "time limit" in r.details["error"]
    assert r2.passed and r2.result == "pass"
    # a group stopped at its limit leaves the rest of the group undecided
    grouped = [dataclasses.replace(t, group="g") for t in (th, ok)]
    [(_, a), (_, b)] = run_theorems(grouped, quick=True, jobs=1)
    assert a.undecided and b.undecided and "not run" in b.details["error"]


# --------------------------------------------------------------------------- witnesses


def test_witnesses_fail_their_theorems_and_only_in_the_worker() -> None:
    before = OPS["mul"]
    for name in ("op.mul.forward", "op.mul.derivative", "op.mul.adjoint", "op.const.adjoint"):
        assert run_theorem(name, quick=True).passed
        assert run_theorem(name, quick=True, witness=True).result == "fail", name
    assert OPS["mul"] is before  # the defect lived in the worker only
    th = dataclasses.replace(get("op.mul.forward"), witness=Witness("nothing", lambda: None))
    [(_, r)] = run_theorems([th], quick=True, witness=True)
    assert r.passed  # a witness that changes nothing is not caught: --witnesses reports it


def test_opaque_link_check_catches_a_fan_in_defect(monkeypatch: pytest.MonkeyPatch) -> None:
    repeated = (("opaque2", (0, 0), (("node", 0),)),)
    chain = (("opaque1", (0,), (("node", 0),)), ("opaque2", (0, 1), (("node", 1),)))
    with installed():
        assert check_shape(1, repeated)[0] and check_shape(1, chain)[0]
        import runtime.engine.lower as L

        monkeypatch.setattr(L, "fold_fanin", L.fold_fanin)
        fold_fanin_last_wins()
        ok, _, msg = check_shape(1, repeated)
        assert not ok and "cotangent %0" in (msg or "")
        assert check_shape(1, chain)[0]  # no repeated argument: the defect is invisible
    assert "opaque1" not in OPS


def test_opaque_grammar_counts() -> None:
    full = {t.name: sum(count_shapes(t).values()) for t in OPAQUE_TIERS["full"]}
    assert full == {"values5": 24683, "nodes5": 26563, "ordered4": 2286}
    # one input, one node: opaque1(0), opaque2(0, 0), opaque3(0, 0, 0)
    assert count_shapes(OPAQUE_TIERS["quick"][0])["2"] == 4
