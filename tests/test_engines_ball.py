"""Engines judged on attention: the `ball` budget scale (conformance/engines/budgets.py).

An attention op's error depends on its inputs' conditioning (the softmax amplifies the
scores' rounding by exp), so beside its ulp budget an element is also accepted inside its
ball: what a direct evaluation of the spec's op sequence in the dtype can give
(`conformance.bounds.balls`). Oracles: an engine composed here from HIPS autograd's own
primitives (right, deliberately off by 2**-5, or NaN), hand-picked inputs whose scores
overflow float16, and the same check with the ball scale switched off.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip(
    "autograd", reason="the test engine is built on autograd (pip install autograd)"
)

import autograd.numpy as anp

import conformance.engines.local as local
from conformance.engines import budgets
from conformance.engines.autograd_engine import AutogradEngine
from conformance.engines.local import check_node
from spec.domains import BINARY32, FLOAT16
from spec.tensor import Tensor


def _sdpa(q: Any, k: Any, v: Any, mask: Any = None, causal: int = 0, scale: Any = None) -> Any:
    """Unmasked attention from autograd.numpy's own ops (the spec's max-shifted softmax)."""
    s = anp.matmul(q, anp.swapaxes(k, -1, -2)) * q.dtype.type(float(scale))
    e = anp.exp(s - anp.max(s, axis=-1, keepdims=True))
    return anp.matmul(e / anp.sum(e, axis=-1, keepdims=True), v)


class AttentionEngine(AutogradEngine):
    name = "autograd-attention-test"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        **AutogradEngine.ops,
        "scaled_dot_product_attention": _sdpa,
    }


class OffAttentionEngine(AutogradEngine):
    name = "autograd-attention-off"
    ops: ClassVar[dict[str, Callable[..., Any]]] = {
        **AutogradEngine.ops,
        "scaled_dot_product_attention": lambda *a, **k: _sdpa(*a, **k) * (1 + 2.0**-5),
    }


SDPA = "scaled_dot_product_attention"
ONE = {"scale": Fraction(1)}


def _t(D: Any, *vals: float) -> Tensor:
    return Tensor((2, 2), tuple(D.from_float(v) for v in vals))


def test_attention_budgets_use_the_ball() -> None:
    for op in (SDPA, "multi_head_attention"):
        for direction in ("forward", "vjp", "jvp"):
            assert budgets.budget_for("torch", "float32", op, direction).scale == "ball"
    assert budgets.budget_for("torch", "float32", "softmax", "forward").scale == "abs"


def test_an_overflowing_direct_evaluation_is_explained_not_failed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # scores 200*200 + 200*200 overflow float16: a direct evaluation gives NaN (inf - inf)
    q = k = _t(FLOAT16, 200, 200, 1, 2)
    v, g = _t(FLOAT16, 1, 2, 3, 4), _t(FLOAT16, 1, 1, 1, 1)
    r = check_node(AttentionEngine(), "float16", SDPA, ONE, [q, k, v], g)
    assert r.wrong is None and r.unconstrained > 0
    real = budgets.budget_for

    def abs_only(engine: str, dtype: str, op: str, direction: str) -> budgets.Budget:
        b = real(engine, dtype, op, direction)
        return budgets.Budget(b.ulps, b.per_term, "abs") if b.scale == "ball" else b

    # every op: an element beyond budget where the spec's own rule may overflow is counted
    # unconstrained, not failed (the ball scale adds the finite, ill-conditioned cases)
    monkeypatch.setattr(local, "budget_for", abs_only)
    r = check_node(AttentionEngine(), "float16", SDPA, ONE, [q, k, v], g)
    assert r.wrong is None and r.unconstrained > 0
    # ... but a NaN where no direct evaluation overflows is wrong
    nan_engine = type("NanAttention", (AutogradEngine,), {
        "name": "nan-attention",
        "ops": {**AutogradEngine.ops, SDPA: lambda *a, **kw: _sdpa(*a, **kw) * anp.nan},
    })  # fmt: skip
    small = _t(FLOAT16, 1, 2, 1, 2)
    r = check_node(nan_engine(), "float16", SDPA, ONE, [small, small, v], g)
    assert r.wrong is not None and r.wrong.startswith(f"{SDPA} forward element 0: engine nan")


finite = st.floats(-3, 3, allow_nan=False, width=32)


@settings(max_examples=15, deadline=None)
@given(st.lists(finite, min_size=12, max_size=12))
def test_right_attention_passes_and_two_percent_off_fails(vals: list[float]) -> None:
    q, k, v = (_t(BINARY32, *vals[i : i + 4]) for i in (0, 4, 8))
    g = _t(BINARY32, 1, -0.5, 0.25, 2)
    right = check_node(AttentionEngine(), "float32", SDPA, ONE, [q, k, v], g)
    assert right.wrong is None, right.wrong
    off = check_node(OffAttentionEngine(), "float32", SDPA, ONE, [q, k, v], g)
    y = right.output
    assert y is not None
    if any(abs(float(e)) > 2.0**-100 for e in y.data):  # a nonzero output shows the 3% error
        assert off.wrong is not None and off.wrong.startswith(f"{SDPA} forward element")
