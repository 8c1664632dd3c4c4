"""`group_norm_folded_affine`: PyTorch's CPU group_norm folds the affine into
y = x·a + b (a = rstd·γ, b = β − mean·a rounded first); on a group of equal elements the
spec gives β exactly and the folded sum cancels. The convention explains exactly that
formula there (reported, a failure only under `--strict-conventions`) and nothing else."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conformance.engines.base import Engine
from conformance.engines.local import check_node
from spec.domains import BINARY32
from spec.tensor import Tensor


def _folded(x: Any, g: Any, b: Any, num_groups: int, eps: Any = None, *, bump: int = 0) -> Any:
    """group_norm as PyTorch's CPU kernel evaluates it, in float32 (opmath of float32);
    `bump` moves a by that many ulps (a formula the convention must not explain)."""
    n, c = x.shape[0], x.shape[1]
    e = 1e-5 if eps is None else float(eps)
    xg = x.reshape(n, num_groups, -1).astype(np.float64)
    mean = xg.mean(-1).astype(np.float32)
    var = xg.var(-1)
    rstd = (1.0 / np.sqrt(var + e)).astype(np.float32)
    per = c // num_groups
    a = (np.repeat(rstd, per, axis=1) * g[None, :]).astype(np.float32)
    for _ in range(bump):
        a = np.nextafter(a, np.float32(np.inf))
    m = np.repeat(mean, per, axis=1)
    bb = (b[None, :].astype(np.float64) - m.astype(np.float64) * a).astype(np.float32)
    shape = (n, c) + (1,) * (x.ndim - 2)
    y = x.astype(np.float64) * a.reshape(shape) + bb.reshape(shape)  # one rounding: fma
    return y.astype(np.float32)


class FoldedEngine(Engine):
    """A forward-only NumPy engine whose group_norm is the folded formula."""

    name = "numpy-folded-group-norm"
    dtypes = ("float32",)
    has_vjp = False
    bump = 0
    ops: ClassVar[dict[str, Callable[..., Any]]] = {"group_norm": _folded}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def forward(self, fn: Any, arrays: Sequence[Any]) -> Any:
        return _folded(*arrays, **fn.attrs, bump=self.bump)

    def vjp(self, fn: Any, arrays: Sequence[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        raise AssertionError("forward only")


class BumpedEngine(FoldedEngine):
    name = "numpy-folded-bumped"
    bump = 4


def b32(shape: tuple[int, ...], *bits: int) -> Tensor:
    return Tensor(shape, tuple(BINARY32.from_bits(v) for v in bits))


X = b32((2, 1), 0xC0F4909B, 0x00000000)  # -7.6426516, 0: one element per group
MINUS_ONE = b32((1,), 0xBF800000)


def test_one_element_groups_are_the_convention_not_a_failure() -> None:
    res = check_node(FoldedEngine(), "float32", "group_norm", {"num_groups": 1},
                     [X, MINUS_ONE, MINUS_ONE], X)  # fmt: skip
    # hand-worked: rstd = f32(1/sqrt(1e-5)) = 316.22775, a = -316.22775,
    # b = f32(-1 - 7.6426516 * 316.22775) = -2417.8396, y = fma(-7.6426516, a, b)
    assert res.output is not None
    assert BINARY32.to_bits(res.output.data[0]) == 0xBF7FFB27  # -0.99992603, spec: -1
    assert res.wrong is None and "group_norm_folded_affine" in res.conventions


def test_a_different_formula_on_the_same_group_stays_wrong() -> None:
    res = check_node(BumpedEngine(), "float32", "group_norm", {"num_groups": 1},
                     [X, MINUS_ONE, MINUS_ONE], X)  # fmt: skip
    assert res.wrong is not None and res.wrong.startswith("group_norm forward")


@settings(max_examples=15, deadline=None)
@given(
    x=st.floats(-100, 100, width=32),
    gb=st.tuples(st.floats(-4, 4, width=32), st.floats(-4, 4, width=32)),
)
def test_the_folded_formula_is_never_wrong_on_equal_groups(x: float, gb: Any) -> None:
    xs = b32((1, 2, 2), *[int(np.float32(x).view(np.uint32))] * 4)
    g = b32((2,), *[int(np.float32(v).view(np.uint32)) for v in gb])
    res = check_node(FoldedEngine(), "float32", "group_norm", {"num_groups": 2},
                     [xs, g, g], xs)  # fmt: skip
    assert res.wrong is None


def test_pytorch_cpu_group_norm_is_the_folded_formula() -> None:
    torch = pytest.importorskip("torch", reason="pip install torch")
    from conformance.engines.torch_engine import TorchEngine

    res = check_node(TorchEngine(), "float32", "group_norm", {"num_groups": 1, "eps": None},
                     [X, MINUS_ONE, MINUS_ONE], X)  # fmt: skip
    assert res.output is not None and torch is not None
    if BINARY32.to_bits(res.output.data[0]) == 0xBF800000:
        pytest.skip("this PyTorch's group_norm returns β exactly here (no folding)")
    assert res.wrong is None and "group_norm_folded_affine" in res.conventions


def test_pytorch_differs_at_the_conventions_defining_point() -> None:
    pytest.importorskip("torch", reason="pip install torch")
    from conformance.engines.run import probe_conventions
    from conformance.engines.torch_engine import TorchEngine

    rows = [r for r in probe_conventions(TorchEngine(), "float32", ["group_norm"])
            if r.convention == "group_norm_folded_affine"]  # fmt: skip
    assert len(rows) == 1 and rows[0].op == "group_norm"
    if rows[0].differs:  # the folding PyTorch's CPU kernel has (2.13): spec β, engine not
        assert rows[0].spec != rows[0].engine_value
