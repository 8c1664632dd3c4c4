"""conformance.engines: the adapters of gather, conv_transpose2d, multi_head_attention (and
conv2d, scaled_dot_product_attention where new), tinygrad's and JAX's model-scale ops
(linear, norms, pools, losses, indexing, attention) and `select` with `env_slot`, checked
against the spec end to end (HIPS autograd and tinygrad in CI; PyTorch and JAX when
installed), an engine that ignores the environment caught and named, and max_pool2d's
tie-split convention worked by hand."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import gmpy2
import pytest

from conformance.__main__ import main
from conformance.engines import load_engine
from conformance.engines.conventions import CONVENTIONS
from conformance.engines.local import check_node
from conformance.engines.run import ENV_CASES, replay_node, run_engine
from runtime.backends import DTYPE_DOMAIN
from spec.ops import get_op
from spec.tensor import Tensor

pytest.importorskip("autograd", reason="pip install autograd")
from conformance.engines.autograd_engine import AutogradEngine

NEW_OPS = ("gather", "conv_transpose2d", "multi_head_attention", "select")
TINYGRAD_MODEL_OPS = (
    "linear",
    "layer_norm",
    "batch_norm",
    "conv2d",
    "avg_pool2d",
    "max_pool2d",
    "cross_entropy",
    "mask_neg_inf",
    "index_select",
    "scatter_add",
    "embedding",
    "safe_log",
    "scaled_dot_product_attention",
)
JAX_MODEL_OPS = ("layer_norm", "batch_norm", "avg_pool2d", "max_pool2d", "cross_entropy")


def _sample_cases(op: str, dtype: str) -> list[tuple[list[Tensor], Tensor, list[Tensor], dict]]:
    """The op table's sample points in `dtype`, cotangent cos(j), tangents sin(j + 1)."""
    D = DTYPE_DOMAIN[dtype]
    out = []
    for smp in get_op(op).samples:
        xs = [Tensor(s, tuple(D.from_rational(Fraction(v)) for v in vals)) for s, vals in smp.args]
        y = get_op(op).forward(D, xs, dict(smp.attrs), ())
        g = Tensor(y.shape, tuple(D.from_float(math.cos(j)) for j in range(len(y.data))))
        ts = [Tensor(x.shape, tuple(D.from_float(math.sin(j + 1)) for j in range(len(x.data))))
              for x in xs]  # fmt: skip
        out.append((xs, g, ts, dict(smp.attrs)))
    return out


def _check_samples(engine: Any, ops: tuple[str, ...], dtypes: tuple[str, ...]) -> None:
    for dtype in dtypes:
        for op in ops:
            for xs, g, ts, attrs in _sample_cases(op, dtype):
                res = check_node(engine, dtype, op, attrs, xs, g, ts)
                assert res.covered and res.refused is None, (op, dtype, res.refused)
                assert res.wrong is None, (op, dtype, res.wrong)
                assert res.jvp_refused is None, (op, dtype, res.jvp_refused)


# ---------------------------------------------------------------- CI engines


def test_autograd_gather_and_select_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    args = ["--engine", "autograd", "--dtype", "float32,float16", "--ops", "gather,select",
            "--max-examples", "4", "--per-op", "1", "--report", str(tmp_path / "r")]  # fmt: skip
    assert main(args) == 0
    rows = {(r["dtype"], r["op"]): r for r in json.loads((tmp_path / "r.json").read_text())["ops"]}
    for dtype in ("float32", "float16"):
        assert rows[dtype, "gather"]["cases"] > 0 and rows[dtype, "gather"]["covered"]
        assert rows[dtype, "select"]["cases"] >= len(ENV_CASES)  # the env cases are recorded
    assert {"conv_transpose2d", "multi_head_attention"}.isdisjoint(AutogradEngine.ops)


def test_tinygrad_new_ops_end_to_end() -> None:
    pytest.importorskip("tinygrad", reason="pip install tinygrad")
    e = load_engine("tinygrad")
    run = run_engine(e, ["float32"], ["gather", "conv_transpose2d", "select"], max_examples=2,
                     per_op=1)  # fmt: skip
    assert not run.failed(), [r.failure for r in run.ops if r.failure]
    rows = {r.op: r for r in run.ops}
    assert all(rows[op].cases > 0 and rows[op].refused == 0 for op in rows)
    assert run.graphs[0].graphs > 0
    # multi_head_attention (slow to draw on tinygrad's interpreter): the op table's samples
    _check_samples(e, ("multi_head_attention",), ("float32",))


class IgnoresEnvEngine(AutogradEngine):
    """select reads row 0 whenever it is given an environment."""

    name = "autograd-ignores-env"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        **AutogradEngine.ops,
        "select": lambda x, index=None, env_slot=None, env=(): x[index if env_slot is None else 0],
    }


def test_select_with_env_slot_is_checked_and_a_wrong_engine_named() -> None:
    run = run_engine(IgnoresEnvEngine(), ["float64"], ["select"], max_examples=3, per_op=1)
    (row,) = [r for r in run.ops if r.op == "select"]
    assert row.failures == 1 and row.failure is not None
    assert row.failure["message"].startswith("select forward")
    repro = json.loads(json.dumps(row.failure["repro"]))
    assert repro["env"] and repro["graph"]["nodes"][0]["attrs"]["env_slot"] is not None
    assert replay_node(IgnoresEnvEngine(), repro).wrong is not None
    assert replay_node(AutogradEngine(), repro).wrong is None


def test_select_env_slot_reads_the_environment_in_the_spec_and_the_engine() -> None:
    D = DTYPE_DOMAIN["float32"]
    x = Tensor((3, 2), tuple(D.from_float(v) for v in (1, 2, 3, 4, 5, 6)))
    g = Tensor((2,), (D.from_float(1.0), D.from_float(-1.0)))
    res = check_node(AutogradEngine(), "float32", "select", {"env_slot": 1}, [x], g, None, (0, 2))
    assert res.wrong is None and [float(v) for v in res.output.data] == [5.0, 6.0]


def test_tinygrad_model_ops_match_the_spec_on_the_samples() -> None:
    pytest.importorskip("tinygrad", reason="pip install tinygrad")
    e = load_engine("tinygrad")
    assert set(TINYGRAD_MODEL_OPS) <= set(e.ops)
    _check_samples(e, TINYGRAD_MODEL_OPS, ("float32",))


def test_tinygrad_attention_with_an_explicit_scale_is_refused_not_faked() -> None:
    pytest.importorskip("tinygrad", reason="pip install tinygrad")
    D = DTYPE_DOMAIN["float32"]
    q = Tensor((2, 2), tuple(D.from_float(v) for v in (0.5, -1.0, 2.0, 0.25)))
    attrs = {"scale": Fraction(1, 3)}
    g = get_op("scaled_dot_product_attention").forward(D, [q, q, q], attrs, ())
    res = check_node(load_engine("tinygrad"), "float32", "scaled_dot_product_attention", attrs,
                     [q, q, q], g)  # fmt: skip
    assert res.refused is not None and "no scale argument" in res.refused
    assert res.wrong is None


def _max_pool_split() -> Any:
    (c,) = [c for c in CONVENTIONS if c.name == "max_pool2d_tie_split"]
    return c.alt


def test_max_pool_tie_split_alternative_by_hand() -> None:
    # x = [[2, 2, 1], [0, 2, 5]], 2x2 windows at stride 1: window 0 (columns 0-1) holds
    # 2, 2, 0, 2, a three-way tie, so each 2 gets g0/3 = 1; window 1 (columns 1-2) holds
    # 2, 1, 2, 5, no tie: 5 gets g1 = 7. Only elements a tied window reaches are predicted.
    x = Tensor((1, 2, 3), tuple(gmpy2.mpfr(v) for v in (2, 2, 1, 0, 2, 5)))
    g = Tensor((1, 1, 2), (gmpy2.mpfr(3), gmpy2.mpfr(7)))
    (out,) = _max_pool_split()([x], g, {"kernel_size": (2, 2), "stride": (1, 1)})
    got = [None if v is None else float(v) for v in out.data]
    assert got == [1.0, 1.0, None, None, 1.0, None]


def test_tinygrad_max_pool_tie_is_a_convention_not_a_failure() -> None:
    pytest.importorskip("tinygrad", reason="pip install tinygrad")
    D = DTYPE_DOMAIN["float32"]
    x = Tensor((1, 2, 2), tuple(D.from_float(v) for v in (1.0, 1.0, 0.0, 1.0)))
    g = Tensor((1, 1, 1), (D.from_float(3.0),))
    res = check_node(load_engine("tinygrad"), "float32", "max_pool2d", {"kernel_size": (2, 2)},
                     [x], g)  # fmt: skip
    assert res.wrong is None and "max_pool2d_tie_split" in res.conventions
    ex = res.conventions["max_pool2d_tie_split"]
    assert ex["spec"] == 3.0 and ex["engine"] == 1.0 and ex["element"] == 0


# ---------------------------------------------------------------- optional engines


@pytest.mark.parametrize(
    ("engine", "module", "ops", "dtypes"),
    [("torch", "torch", NEW_OPS, ("float64", "float32", "bfloat16")),
     ("jax", "jax", (*NEW_OPS, "conv2d", "scaled_dot_product_attention"), ("float32",)),
     ("jax", "jax", JAX_MODEL_OPS, ("float32", "float16")),
     ("jax-jit", "jax", (*NEW_OPS, *JAX_MODEL_OPS), ("float64", "bfloat16"))],
)  # fmt: skip
def test_optional_engines_match_the_spec_on_the_samples(
    engine: str, module: str, ops: tuple[str, ...], dtypes: tuple[str, ...]
) -> None:
    pytest.importorskip(module, reason=f"pip install {module}")
    _check_samples(load_engine(engine), ops, dtypes)
