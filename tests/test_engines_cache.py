"""conformance.engines: the compile cache keys (a compiled function is never reused for
another op, attribute, attribute type, shape, dtype, callable or environment), a cache
with a wrong key is caught by the per-node check, JAX's jit cache (when JAX is installed),
and the cap on shrinking time."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any, ClassVar

import numpy as np
import pytest

from conformance.engines.base import CompileCache, KeyedCall, OpCall
from conformance.engines.local import check_node
from conformance.engines.run import replay_node, run_engine
from spec.domains import BINARY32, FLOAT64
from spec.tensor import Tensor

pytest.importorskip("autograd", reason="pip install autograd")
from conformance.engines.autograd_engine import AutogradEngine

F32 = np.dtype(np.float32)


def _tensor(D: Any, *v: float) -> Tensor:
    return Tensor((len(v),), tuple(D.from_float(x) for x in v))


def _key(fn: Callable[..., Any], *arrays: np.ndarray) -> Any:
    return CompileCache().key("vjp", fn, arrays)


# ---------------------------------------------------------------- keys


def test_keys_differ_whenever_the_computation_differs() -> None:
    ops = AutogradEngine.ops
    a2, a3 = np.zeros(2, F32), np.zeros(3, F32)
    base = _key(OpCall("scale", ops["scale"], {"c": Fraction(2)}), a2)
    variants = {
        "same": _key(OpCall("scale", ops["scale"], {"c": Fraction(2)}), a2),
        "attribute value": _key(OpCall("scale", ops["scale"], {"c": Fraction(3)}), a2),
        "attribute type": _key(OpCall("scale", ops["scale"], {"c": 2}), a2),
        "attribute float": _key(OpCall("scale", ops["scale"], {"c": 2.0}), a2),
        "shape": _key(OpCall("scale", ops["scale"], {"c": Fraction(2)}), a3),
        "dtype": _key(OpCall("scale", ops["scale"], {"c": Fraction(2)}), a2.astype(np.float64)),
        "op": _key(OpCall("neg", ops["scale"], {"c": Fraction(2)}), a2),
        "callable": _key(OpCall("scale", lambda x, c: x * 2, {"c": Fraction(2)}), a2),
    }
    assert variants.pop("same") == base
    assert len({base, *variants.values()}) == len(variants) + 1, variants
    # nested attribute containers: a tuple and a list of the same ints differ, as do orders
    t = _key(OpCall("reshape", ops["reshape"], {"shape": (2, 1)}), a2)
    assert t != _key(OpCall("reshape", ops["reshape"], {"shape": [2, 1]}), a2)
    assert t != _key(OpCall("reshape", ops["reshape"], {"shape": (1, 2)}), a2)


def test_the_environment_is_part_of_the_key_only_where_it_is_read() -> None:
    sel, x = AutogradEngine.ops["select"], np.zeros((3, 2), F32)
    k0 = _key(OpCall("select", sel, {"env_slot": 0}, (2, 1)), x)
    assert k0 != _key(OpCall("select", sel, {"env_slot": 0}, (1, 1)), x)
    assert k0 != _key(OpCall("select", sel, {"env_slot": 1}, (2, 1)), x)
    lit = OpCall("select", sel, {"index": 1}, (2, 1))
    assert lit.env == () and _key(lit, x) == _key(OpCall("select", sel, {"index": 1}), x)
    assert float(OpCall("select", sel, {"env_slot": 1}, (0, 2))(np.arange(3.0))) == 2.0


def test_unkeyed_and_unhashable_calls_are_compiled_afresh() -> None:
    cache = CompileCache()
    builds: list[int] = []

    def build() -> Callable[..., Any]:
        builds.append(1)
        return lambda *a: a

    cache.get("vjp", lambda x: x, [np.zeros(1)], build)
    cache.get("vjp", lambda x: x, [np.zeros(1)], build)
    odd = OpCall("reshape", AutogradEngine.ops["reshape"], {"shape": {1, 2}})  # a set
    cache.get("vjp", odd, [np.zeros(1)], build)
    cache.get("vjp", odd, [np.zeros(1)], build)
    assert len(builds) == 4 and cache.stats() == {"compiled": 0, "reused": 0, "uncached": 4}


def test_cache_capacity_drops_the_least_recently_used() -> None:
    cache = CompileCache(capacity=2)
    calls = [OpCall("scale", AutogradEngine.ops["scale"], {"c": Fraction(i)}) for i in range(3)]
    x = [np.zeros(1)]
    for c in (calls[0], calls[1], calls[0], calls[2]):  # 1 is least recent when 2 arrives
        cache.get("vjp", c, x, lambda: lambda *a: a)
    assert cache.key("vjp", calls[0], x) in cache.entries
    assert cache.key("vjp", calls[1], x) not in cache.entries
    assert cache.stats() == {"compiled": 3, "reused": 1, "uncached": 0}


# ---------------------------------------------------------------- a compiling engine in CI


class CachedAutogradEngine(AutogradEngine):
    """HIPS autograd with every VJP 'compiled' (a closure over the first call's function)
    through a `CompileCache`, as `JaxJitEngine` does with `jax.jit`."""

    name = "autograd-cached"
    cache_class: ClassVar[type[CompileCache]] = CompileCache

    def __init__(self) -> None:
        super().__init__()
        self.cache = self.cache_class()

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        def build() -> Callable[..., Any]:
            return lambda xs, g: AutogradEngine.vjp(self, fn, xs, g)

        return self.cache.get("vjp", fn, [*arrays, cotangent], build)(arrays, cotangent)


class AttrBlindCache(CompileCache):
    """A wrong key: the op and the shapes, not the attributes."""

    def key(self, kind: str, fn: Callable[..., Any], arrays: Sequence[Any]) -> Any:
        if not isinstance(fn, KeyedCall):
            return None
        return (kind, getattr(fn, "op", None), tuple(a.shape for a in arrays))


class AttrBlindEngine(CachedAutogradEngine):
    name = "autograd-attr-blind-cache"
    cache_class = AttrBlindCache


def _scale_checks(engine: Any) -> list[Any]:
    x, g = _tensor(BINARY32, 1.5, -2.0), _tensor(BINARY32, 1.0, 0.5)
    return [check_node(engine, "float32", "scale", {"c": c}, [x], g) for c in (2, 3, 2)]


def test_a_compiling_engine_reuses_only_identical_calls() -> None:
    e = CachedAutogradEngine()
    assert [r.wrong for r in _scale_checks(e)] == [None, None, None]
    assert e.cache.stats() == {"compiled": 2, "reused": 1, "uncached": 0}
    x64, g64 = _tensor(FLOAT64, 1.5, -2.0), _tensor(FLOAT64, 1.0, 0.5)
    assert check_node(e, "float64", "scale", {"c": 2}, [x64], g64).wrong is None
    assert e.cache.stats()["compiled"] == 3  # another dtype: compiled again


def test_a_cache_with_a_wrong_key_is_caught() -> None:
    wrong = [r.wrong for r in _scale_checks(AttrBlindEngine())]
    assert wrong[0] is None and wrong[1] is not None and "scale forward" in wrong[1]


# ---------------------------------------------------------------- JAX's jit cache


def test_jax_jit_compiles_once_per_op_attributes_shape_and_dtype() -> None:
    pytest.importorskip("jax", reason="pip install jax")
    from conformance.engines.jax_engine import JaxJitEngine

    e = JaxJitEngine()
    assert [r.wrong for r in _scale_checks(e)] == [None, None, None]
    assert e.cache.stats() == {"compiled": 2, "reused": 1, "uncached": 0}  # c=2, c=3, c=2
    x3, g3 = _tensor(BINARY32, 1.5, -2.0, 4.0), _tensor(BINARY32, 1.0, 0.5, 2.0)
    res = check_node(e, "float32", "scale", {"c": 2}, [x3], g3, [g3])
    assert res.wrong is None and "jvp" in res.max_ulp  # another shape: a VJP and a JVP
    x64, g64 = _tensor(FLOAT64, 1.5, -2.0), _tensor(FLOAT64, 1.0, 0.5)
    assert check_node(e, "float64", "scale", {"c": 2}, [x64], g64, [g64]).wrong is None
    assert e.describe()["compile_cache"] == {"compiled": 6, "reused": 1, "uncached": 0}


# ---------------------------------------------------------------- shrinking cap


def test_shrinking_past_its_cap_reports_a_real_failing_case() -> None:
    from test_engines import WrongVjpEngine  # a tanh VJP 25 % off

    run = run_engine(WrongVjpEngine(), ["float32"], ["tanh"], max_examples=6, per_op=0,
                     shrink_seconds=0.0)  # fmt: skip
    (row,) = [r for r in run.ops if r.op == "tanh"]
    assert row.failures >= 1 and "shrinking stopped after 0 s" in (row.note or "")
    assert row.failure is not None and replay_node(WrongVjpEngine(), row.failure["repro"]).wrong
    assert not math.isnan(row.forward_max_ulp)
