"""The conformance suite as a CI job: every default property across scalar types and kernel
profiles, a planted runtime bug that it must catch (with a usable reproducer), and the CLI.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conformance.link_property import check_link
from conformance.suite import Property, default_properties, replay, run_property
from runtime.kernels import KERNELS, Kernel
from spec.graph import format_graph
from spec.ops import FAMILIES as SPEC_FAMILIES
from spec.ops import OPS, families_holding
from spec.serialize import graph_from_dict, tensor_from_dict
from spec.tensor import TensorPack

ALL_DTYPES = ["exact", "float64", "float32", "bfloat16", "float16"]
PROPS = default_properties(ALL_DTYPES, ["fast", "ordered"])
ROOT = Path(__file__).resolve().parents[1]


def test_default_properties_cover_every_dtype_and_profile() -> None:
    keys = {(p.name, p.dtype, p.kernels) for p in PROPS}
    assert ("link", "exact", "exact") in keys
    assert ("dense_all_vs_from", "exact", "exact") in keys
    for dt in ALL_DTYPES[1:]:
        assert ("link", dt, "ordered") in keys
        assert ("link_special_values", dt, "ordered") in keys
        assert ("node_bounds", dt, "fast") in keys
        # hard cases and the sparse (first contribution as is) backward
        assert ("link_hard", dt, "ordered") in keys
        assert ("sparse_backward", dt, "ordered") in keys
        # fast-profile VJPs, JVPs and accumulation against mechanically derived bounds
        assert ("derivative_bounds", dt, "fast") in keys
    for dt in ("float64", "float32"):  # the compiled (numba) ordered kernels, at every size
        assert ("link_compiled", dt, "ordered") in keys
    assert len(keys) == len(PROPS) == 2 + 6 * 4 + 2


@pytest.mark.parametrize("prop", PROPS, ids=lambda p: f"{p.name}-{p.dtype}-{p.kernels}")
def test_property_holds(prop: Property) -> None:
    row = run_property(prop, max_examples=25, per_op=1)
    assert row.failed == 0, f"{row.failure and row.failure['message']}\n" + (
        row.failure["graph_text"] if row.failure else ""
    )
    assert row.cases == row.passed >= 25  # Hypothesis really ran cases
    assert row.ops_covered == len(prop.ops)  # and every op of the table was exercised


def _planted_mul_bug(monkeypatch: pytest.MonkeyPatch) -> None:
    """mul's VJP for its first argument becomes g*b*2 (instead of g*b)."""
    real = KERNELS["mul"]

    def vjp(ctx: Any, saved: Any, g: Any, attrs: Any, env: Any) -> list[Any]:
        ga, gb = real.vjp(ctx, saved, g, attrs, env)
        return [ga * ctx.const(2), gb]

    monkeypatch.setitem(
        KERNELS, "mul", Kernel("mul", real.forward, vjp, real.jvp, real.saves, real.check)
    )


def test_planted_kernel_bug_is_caught_with_a_reproducer(monkeypatch: pytest.MonkeyPatch) -> None:
    link_exact = next(p for p in PROPS if p.name == "link" and p.dtype == "exact")
    _planted_mul_bug(monkeypatch)
    row = run_property(link_exact, max_examples=100)
    assert row.failed == 1 and row.failure is not None
    f = row.failure
    assert "cotangent" in f["message"]
    assert "mul(" in f["graph_text"] and f["graph_text"].startswith("graph(")
    repro = json.loads(json.dumps(f["repro"]))  # plain JSON
    assert (repro["property"], repro["dtype"]) == ("link", "exact")
    g = graph_from_dict(repro["graph"])
    assert any(n.op == "mul" for n in g.nodes)
    assert format_graph(g) == f["graph_text"]
    xs = [tensor_from_dict(d)[1] for d in repro["inputs"]]
    seed = TensorPack.of([tensor_from_dict(d)[1] for d in repro["seed"]])
    # the reproducer reproduces (directly and through `replay`) ...
    assert not check_link(g, xs, seed, repro["env"], dtype="exact").ok
    assert not replay(repro).ok
    monkeypatch.undo()
    # ... and only with the planted bug
    assert check_link(g, xs, seed, repro["env"], dtype="exact").ok
    assert replay(repro).ok


def test_cli_writes_reports(tmp_path: Path) -> None:
    prefix = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "conformance",
            "--max-examples",
            "5",
            "--per-op",
            "1",
            "--session-examples",
            "2",
            "--dtype",
            "float32",
            "--report",
            str(prefix),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    props = default_properties(["float32"], ["fast", "ordered"])
    data = json.loads((tmp_path / "report.json").read_text())
    assert len(data["rows"]) == len(props) + 1 == 8
    assert [(r["property"], r["dtype"], r["kernels"]) for r in data["rows"]] == [
        *((p.name, p.dtype, p.kernels) for p in props),
        ("session_state_machine", "exact+float32", "ordered"),
    ]
    assert {p.name for p in props} == {
        "link",
        "link_special_values",
        "link_hard",
        "sparse_backward",
        "node_bounds",
        "derivative_bounds",
        "link_compiled",
    }
    assert data["meta"]["max_examples"] == 5
    for r in data["rows"]:
        assert r["failed"] == 0 and r["failure"] is None
        assert r["cases"] == r["passed"] >= 2
    assert all(r["ops_covered"] == len(p.ops) for r, p in zip(data["rows"], props, strict=False))
    md = (tmp_path / "report.md").read_text()
    table_rows = [
        line for line in md.splitlines() if line.startswith("| ") and "| float32 |" in line
    ]
    assert len(table_rows) == len(props)
    assert "FAILED" not in md
    assert "link_special_values" in proc.stdout


# The op families (docs/ARCHITECTURE.md), read from the op table (the single source of truth).
FAMILIES: dict[str, tuple[str, ...]] = {
    family: tuple(name for name, op in OPS.items() if op.family == family)
    for family in SPEC_FAMILIES
}


def test_graph_sampling_order_is_pinned() -> None:
    """The draw order of ops is normative: every generated case depends on it. Its prefix
    as of today is pinned (an op is appended, never inserted); the ops with a derived
    builder follow it, in table order."""
    from conformance.graphs import DERIVED_ORDER, GRAPH_OPS, SAMPLING_ORDER
    from conformance.graphs.core import BUILDERS

    pinned = (
        *("add", "mul", "neg", "sub", "scale", "relu", "abs", "maximum", "minimum", "clamp"),
        *("detach", "const", "sum", "reshape", "broadcast_to", "slice", "select", "concat"),
        *("swap_adjacent", "transpose", "reduce_sum", "mean", "reduce_mean", "index_select"),
        *("scatter_add", "matmul", "linear", "div", "inv", "mse_loss", "sqrt", "exp", "tanh"),
        *("sin", "cos", "safe_log", "log", "sigmoid", "softplus", "silu", "gelu", "softmax"),
        *("log_softmax", "cross_entropy", "gather", "reduce_max", "one_hot", "embedding"),
        *("avg_pool2d", "max_pool2d", "conv2d", "conv_transpose2d", "mask_neg_inf"),
        *("layer_norm", "batch_norm", "scaled_dot_product_attention", "multi_head_attention"),
        *("conv1d", "conv3d", "conv_transpose1d", "conv_transpose3d", "avg_pool1d"),
        *("avg_pool3d", "max_pool1d", "max_pool3d", "adaptive_avg_pool1d"),
        *("adaptive_max_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool2d"),
        *("adaptive_avg_pool3d", "adaptive_max_pool3d", "pad"),
        *("leaky_relu", "sign", "hardtanh", "relu6", "hardsigmoid", "hardswish"),
        *("softsign", "add_n", "maximum_n", "minimum_n", "mean_n", "var", "erf"),
        *("log1p", "expm1", "elu", "celu", "selu", "mish", "logsumexp", "std"),
        *("instance_norm", "group_norm"),
        *("prelu", "where", "pow", "pow_tensor"),
        *("narrow", "flip", "roll", "tile", "repeat_interleave", "cumsum", "batch_norm_eval"),
        *("local_response_norm",),
    )
    assert SAMPLING_ORDER[: len(pinned)] == pinned
    assert GRAPH_OPS == SAMPLING_ORDER + DERIVED_ORDER
    assert list(DERIVED_ORDER) == [n for n in OPS if n in DERIVED_ORDER]  # table order
    assert set(BUILDERS) == set(GRAPH_OPS)


@pytest.mark.parametrize(
    ("package", "table", "kinds"),
    [
        ("conformance.bounds", "BOUNDS", ("primitive",)),
        ("conformance.graphs", "BUILDERS", ("primitive", "composite")),
    ],
)
def test_each_family_module_registers_only_its_family(
    package: str, table: str, kinds: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Re-running each family module against an empty table shows what it registers; the
    entries no family module registers are derived from the op table (`DERIVED_ORDER`'s
    builders, the math primitives' bounds)."""
    import importlib

    core = importlib.import_module(f"{package}.core")
    full = dict(getattr(core, table))
    seen: dict[str, str] = {}
    for family in families_holding(kinds):
        ops = FAMILIES[family]
        monkeypatch.setattr(core, table, {})
        importlib.reload(importlib.import_module(f"{package}.{family}"))
        registered = set(getattr(core, table))
        assert registered <= set(ops), (family, sorted(registered - set(ops)))
        seen.update(dict.fromkeys(registered, family))
    assert set(seen) <= set(full)
    derived = set(full) - set(seen)
    if package == "conformance.bounds":
        assert all(OPS[n].math is not None for n in derived), sorted(derived)
    else:
        from conformance.graphs import DERIVED_ORDER

        assert derived == set(DERIVED_ORDER)


def _planted_mul_tangent_bug(monkeypatch: pytest.MonkeyPatch) -> Kernel:
    """mul's JVP becomes twice the right tangent; returns the real kernel."""
    real = KERNELS["mul"]

    def jvp(ctx: Any, saved: Any, dxs: Any, attrs: Any, env: Any) -> Any:
        return real.jvp(ctx, saved, dxs, attrs, env) * ctx.const(2)

    monkeypatch.setitem(
        KERNELS, "mul", Kernel("mul", real.forward, real.vjp, jvp, real.saves, real.check)
    )
    return real


def test_a_wrong_tangent_is_caught_by_link(monkeypatch: pytest.MonkeyPatch) -> None:
    link_exact = next(p for p in PROPS if p.name == "link" and p.dtype == "exact")
    _planted_mul_tangent_bug(monkeypatch)
    row = run_property(link_exact, max_examples=100)
    assert row.failed == 1 and row.failure is not None
    assert row.failure["message"].startswith("tangent of value %"), row.failure["message"]
    assert "mul(" in row.failure["op"]


def test_the_session_machine_checks_the_sessions_own_forward_mode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A JVP bug only on the Session's path (`Tape.op`): lowered tapes keep the right rule,
    so `Session.check_link` cannot see it; the machine's tangent invariant must."""
    import runtime.engine.lower as lowering
    from conformance.session_machine import run_session_machine

    real = _planted_mul_tangent_bug(monkeypatch)
    real_jvp = lowering._jvp

    def right_rule(ctx: Any, kern: Kernel, saved: Any, attrs: Any, env: Any) -> Any:
        return real_jvp(ctx, real if kern.name == "mul" else kern, saved, attrs, env)

    monkeypatch.setattr(lowering, "_jvp", right_rule)
    row = run_session_machine(30, shrink=False)
    assert row.failed == 1 and row.failure is not None
    # caught by the machine's tangent check against the spec's jvp_ctx: the invariant
    # `newest_value_tangents` or the forward-mode rule at non-grad leaves (both call it)
    msg = row.failure["message"]
    assert "newest_value_tangents" in msg or "_check_tangent" in msg, msg[:2000]
