"""A run's verdict on a node is the replay's verdict on that node's reproducer.

The judge is one function of a case: `run_engine` checks every node of its random graphs,
grid, environment cases and convention probes by `local.check_node`, and a reproducer
(`replay.make_repro`, written as JSON) carries the same op, attributes, inputs,
cotangent, tangents and environment, so `--replay` must reach the same verdict (wrong or
not, with the same message, the same conventions, the same max ulps). Checked here on
every node check of small runs of two NumPy engines that deliberately hit conventions
(and fail): every call the runner makes to `check_node` is recorded, its reproducer is
written out as JSON, read back and replayed. (An earlier docs/ENGINES.md table listed
group_norm FAILs whose reproducers replayed as a convention; its report had been made by
a judge that did not have that convention yet, which its `meta.conventions` shows.)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import pytest

import conformance.engines.run as run_mod
from conformance.engines.base import Engine
from conformance.engines.local import NodeResult, check_node
from conformance.engines.replay import make_repro, replay_node
from spec.graph import Node


def _sqrt_vjp(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    # IEEE propagation through g/(2*sqrt(x)): +inf at 0, NaN below (two conventions)
    return (g / (2 * np.sqrt(x))).astype(x.dtype)


def _abs_vjp(x: np.ndarray, g: np.ndarray) -> np.ndarray:
    # abs'(0) = 1 (the right derivative: `abs_grad_at_zero_pass`)
    return (np.where(x >= 0, 1, -1) * g).astype(x.dtype)


def _exp(x: np.ndarray) -> np.ndarray:
    # exp 2**-12 too large above 1: a real failure for the run to find and shrink
    y = np.exp(x.astype(np.float64))
    return np.where(x > 1, y * (1 + 2.0**-12), y).astype(x.dtype)


class ConventionEngine(Engine):
    """sqrt, abs and a wrong exp in NumPy with derivatives by hand, VJP and JVP."""

    name = "numpy-conventions"
    dtypes = ("float64", "float32")
    has_jvp = True
    ops: ClassVar[dict[str, Callable[..., Any]]] = {"sqrt": np.sqrt, "abs": np.abs, "exp": _exp}
    _d: ClassVar[dict[str, Callable[..., Any]]] = {
        "sqrt": _sqrt_vjp,
        "abs": _abs_vjp,
        "exp": lambda x, g: (_exp(x) * g).astype(x.dtype),
    }

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(self, fn: Any, arrays: Sequence[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        (x,) = arrays
        return fn(x), [self._d[fn.op](x, cotangent)]

    def jvp(self, fn: Any, arrays: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
        (x,), (t,) = arrays, tangents
        return fn(x), self._d[fn.op](x, t)


def _q(v: Any) -> Fraction:
    return Fraction(float(v))


def _folded(x: Any, g: Any, b: Any, num_groups: int, eps: Any = None) -> Any:
    """group_norm folded as PyTorch's CPU kernel does: rstd, a = rstd·γ and b' = β − mean·a
    rounded in the opmath type (binary64 for float64, binary32 for float32), then
    y = x·a + b' rounded once (an FMA), per element with exact rationals."""
    op_t = np.float64 if x.dtype == np.float64 else np.float32
    n, c = x.shape[0], x.shape[1]
    e = 1e-5 if eps is None else float(eps)
    xg = x.reshape(n, num_groups, -1).astype(np.float64)
    mean, var = xg.mean(-1).astype(op_t), xg.var(-1)
    rstd = (1.0 / np.sqrt(var + e)).astype(op_t)
    per = c // num_groups
    y = np.empty(x.shape, dtype=x.dtype)
    for i in range(n):
        for ch in range(c):
            gi = ch // per
            a = op_t(_q(rstd[i, gi]) * _q(g[ch]))
            bb = op_t(_q(b[ch]) - _q(mean[i, gi]) * _q(a))
            for idx in np.ndindex(*x.shape[2:]):
                v = _q(x[(i, ch, *idx)]) * _q(a) + _q(bb)
                y[(i, ch, *idx)] = float(v)  # one rounding to binary64, then the dtype
    return y


class FoldedEngine(Engine):
    """A forward-only NumPy engine whose group_norm is the folded formula."""

    name = "numpy-folded"
    dtypes = ("float64", "float32")
    has_vjp = False
    ops: ClassVar[dict[str, Callable[..., Any]]] = {"group_norm": _folded}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(self, fn: Any, arrays: Sequence[Any], cotangent: Any) -> tuple[Any, list[Any]]:
        raise AssertionError("forward only")


def _verdict(res: NodeResult) -> tuple[Any, ...]:
    return (
        res.covered,
        res.refused,
        res.wrong,
        res.jvp_refused,
        sorted(res.conventions),
        sorted(res.max_ulp.items()),
        res.unconstrained,
    )


def _recorded_run(
    monkeypatch: Any, engine: Engine, ops: list[str]
) -> tuple[run_mod.EngineRun, list[tuple[tuple[Any, ...], NodeResult]]]:
    calls: list[tuple[tuple[Any, ...], NodeResult]] = []

    def recording(*args: Any) -> NodeResult:
        res = check_node(*args)
        calls.append((args, res))
        return res

    monkeypatch.setattr(run_mod, "check_node", recording)
    run = run_mod.run_engine(
        engine, list(engine.dtypes), ops, max_examples=3, per_op=1, shrink_seconds=2.0
    )
    return run, calls


def _replayed(engine: Engine, args: tuple[Any, ...]) -> NodeResult:
    _, dtype, op, attrs, xs, g, *rest = args
    ts = rest[0] if rest else None
    env = rest[1] if len(rest) > 1 else ()
    node = Node(op, tuple(range(len(xs))), attrs)
    repro = make_repro(engine, dtype, node, xs, g, list(ts) if ts is not None else [g], env)
    return replay_node(engine, json.loads(json.dumps(repro)))


@pytest.mark.parametrize(
    ("engine", "ops", "expected"),
    [
        (ConventionEngine(), ["sqrt", "abs", "exp"], {"sqrt_grad_at_zero", "nan_propagation"}),
        (FoldedEngine(), ["group_norm"], {"group_norm_folded_affine"}),
    ],
    ids=["conventions", "folded-group-norm"],
)
def test_every_node_check_of_a_run_replays_to_the_same_verdict(
    monkeypatch: Any, engine: Engine, ops: list[str], expected: set[str]
) -> None:
    run, calls = _recorded_run(monkeypatch, engine, ops)
    seen: set[str] = set()
    for args, res in calls:
        if not res.covered:
            continue
        assert _verdict(_replayed(engine, args)) == _verdict(res), args[2]
        seen.update(res.conventions)
    # the runs reach what they are meant to: the conventions, and exp's failure
    assert expected <= seen
    failed = [r for r in run.ops if r.failure]
    assert [r.op for r in failed] == (["exp", "exp"] if "exp" in ops else [])
    for r in failed:  # the reported reproducer replays to the reported message
        assert r.failure is not None
        assert (
            replay_node(engine, json.loads(json.dumps(r.failure["repro"]))).wrong
            == (r.failure["message"])
        )
