"""Plug-in namespaces are used as given, their calls are counted, and a namespace function
that raises or is wrong fails the suite; a namespace's own ordered fold is tested bitwise.

The namespaces below wrap NumPy (their arrays are NumPy arrays, the case that
array-api-compat used to swap for its own NumPy wrapper); each differs from NumPy in one
function only. A run expected to fail is focused on the ops whose kernels call that
function and does not shrink its failure (`suite.set_shrinking(False)`): the verdict is the
same, without the shrink phase's cost.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from conformance.suite import coverage_table, default_properties, run_property, set_shrinking
from runtime.backends import get_backend


class NumpyWrap:
    """A namespace forwarding to NumPy, except the functions set on the instance."""

    def __init__(self, **over: Any) -> None:
        self.__dict__.update(over)

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)


def _raise(*a: Any, **k: Any) -> Any:
    raise RuntimeError("this namespace's sum is broken")


GOOD = NumpyWrap()
BAD_SUM = NumpyWrap(sum=_raise)
OFF_EXP = NumpyWrap(exp=lambda x: np.exp(x) * x.dtype.type(1.01))
PAIRWISE_FOLD = NumpyWrap(torchlean_ordered_fold=lambda x: np.sum(x, axis=0, dtype=x.dtype))
LEFT_FOLD = NumpyWrap(
    torchlean_ordered_fold=lambda x: np.add.accumulate(x, axis=0, dtype=x.dtype)[-1]
)
NAME = __name__


def _row(
    attr: str, kernels: str, prop: str, n: int = 15, ops: tuple[str, ...] | None = None
) -> Any:
    """`prop` on namespace `attr`: n cases over every op then one per op, or, with `ops`,
    n cases focused on each of `ops` in turn."""
    props = default_properties(["float32"], [kernels], f"{NAME}:{attr}")
    (p,) = [q for q in props if q.name == prop]
    if ops is None:
        return run_property(p, n, per_op=1)
    return run_property(replace(p, ops=ops), 0, per_op=n)


@pytest.fixture
def no_shrinking() -> Iterator[None]:
    set_shrinking(False)
    try:
        yield
    finally:
        set_shrinking(True)


SUMMING = ("sum", "reduce_sum", "matmul", "linear")
"""Ops whose kernels fold with the namespace's sum or the ordered fold."""


def test_namespace_is_used_as_given() -> None:
    b = get_backend(f"{NAME}:GOOD")
    assert b.xp._xp is GOOD  # not array_api_compat.numpy
    b.xp.sum(np.ones(3))
    assert b.xp.calls == {"sum": 1}


def test_good_namespace_passes_and_reports_its_calls() -> None:
    row = _row("GOOD", "fast", "node_bounds")
    assert row.failed == 0, row.failure
    assert row.namespace_calls.get("sum", 0) > 0 and row.namespace_calls.get("exp", 0) > 0
    assert "| `sum` |" in coverage_table([row])


def test_a_raising_sum_fails_the_run(no_shrinking: None) -> None:
    row = _row("BAD_SUM", "fast", "node_bounds", 2, SUMMING)
    assert row.failed == 1 and "this namespace's sum is broken" in row.failure["message"]


def test_an_inexact_exp_fails_the_run(no_shrinking: None) -> None:
    # The failing node is exp or an op whose kernel calls the namespace's exp.
    callers = ("exp", "sigmoid", "softplus", "silu", "softmax", "log_softmax", "cross_entropy")
    row = _row("OFF_EXP", "fast", "node_bounds", 2, callers)
    assert row.failed == 1 and any(op in row.failure["message"] for op in callers), row.failure


def test_a_namespace_ordered_fold_is_tested_bitwise(no_shrinking: None) -> None:
    assert get_backend(f"{NAME}:LEFT_FOLD").ordered_fold is LEFT_FOLD.torchlean_ordered_fold
    good = _row("LEFT_FOLD", "ordered", "link_hard", 3, SUMMING)
    assert good.failed == 0 and good.cases == 3 * 2 * len(SUMMING)  # link_hard: 2 per focus
    bad = _row("PAIRWISE_FOLD", "ordered", "link_hard", 3, SUMMING)
    assert bad.failed == 1, "a pairwise fold passed as the ordered left fold"
