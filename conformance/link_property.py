"""The link check: runtime `backward_dense_from(lower(g))` against spec `backprop_all_ctx(g)`.

Invariants: a check never raises on a mismatch; it returns a `LinkReport` whose `ok` says
whether every value and every cotangent matched under the comparison policy of the dtype
(exact equality for "exact", bit equality with NaN matching NaN for IEEE dtypes with the
`ordered` kernels) and whose `first_mismatch` names the first differing entry. Errors that
both sides raise identically (e.g. log on a non-positive input) count as agreement.

For IEEE dtypes the spec side has two evaluators: the pure-Python reference
(`spec.graph`) and the array evaluator `spec.vector`. `spec="both"` computes both and
requires all three sides to agree bit for bit, so every case of the suite's draw also tests
`spec.vector` against its reference; `spec="vector"` uses the array evaluator only;
`spec="python"` the reference only. The default `spec="auto"` is "both" for graphs of at
most `BOTH_MAX_ELEMENTS` elements over all values (every graph the suite draws) and
"vector" above (model-scale graphs, where the pure-Python reference would take hours).

(Named for the suite's "link" property it checks; the comparison machinery it shares with
`Session.check_link` lives in `runtime.session.link`.)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.backends import DTYPE_DOMAIN, NUMPY, OBJECT_DTYPES, Backend, from_spec, to_spec
from runtime.engine.lower import lower
from runtime.session.link import (
    array_sides,
    compare_sides,
    first_mismatch,
    runtime_side,
    spec_side,
    spec_stats_text,
)
from spec import vector
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.tensor import Tensor, TensorPack

__all__ = [
    "BOTH_MAX_ELEMENTS",
    "LinkReport",
    "check_dense_all_vs_from",
    "check_link",
    "elements",
    "one_hot_seeds",
    "vector_side",
]

BOTH_MAX_ELEMENTS = 200_000
"""`spec="auto"` runs both spec evaluators up to this many elements (all values together)."""


def elements(g: Graph) -> int:
    """The number of elements over all values of g."""
    return sum(math.prod(s) for s in g.shapes)


@dataclass
class LinkReport:
    ok: bool
    checked: int = 0
    first_mismatch: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return "ok" if self.ok else f"MISMATCH: {self.first_mismatch}"


Sides = tuple[list[Any], list[Any], list[Any]]


def vector_side(
    g: Graph, xs: Sequence[Tensor], env: Sequence[int], seed: TensorPack, dtype: str
) -> tuple[Sides, vector.Stats]:
    """The spec side by `spec.vector`, as float64 arrays, and the evaluator's stats."""
    F = vector.format_of(DTYPE_DOMAIN[dtype])
    st = vector.Stats()
    sides = vector.link_sides(
        F.domain, g, [F.array(x) for x in xs], env, [F.array(t) for t in seed.tensors], st
    )
    return sides, st


def _arrays(dtype: str, sides: Sides) -> Sides:
    F = vector.format_of(DTYPE_DOMAIN[dtype])
    a, b, c = ([F.array(t) for t in side] for side in sides)
    return a, b, c


def _array_mismatch(what: str, got: Sides, want: Sides) -> str | None:
    for kind, a, b in zip(("value", "cotangent", "tangent"), got, want, strict=True):
        d = vector.first_difference(a, b)
        if d is not None:
            return f"{what}: {kind} of value %{d[0]}, element {d[1]}"
    return None


def _guard(f: Callable[[], Any]) -> tuple[Any, str | None]:
    """f()'s result and None, or None and the name of the TorchLeanError it raised."""
    try:
        return f(), None
    except TorchLeanError as e:
        return None, type(e).__name__


def _array_check(
    g: Graph,
    xs: Sequence[Tensor],
    seed: TensorPack,
    env: Sequence[int],
    dtype: str,
    spec: str,
    run: Callable[[list[Any], list[Any]], Sides],
) -> LinkReport:
    """The IEEE link check on arrays: spec.vector (and, for "both", the reference, which
    must agree with it: equal arrays or the same error) against the runtime `run`."""
    F = vector.format_of(DTYPE_DOMAIN[dtype])
    got_v, err = _guard(lambda: vector_side(g, xs, env, seed, dtype))
    want: Any = got_v[0] if got_v else None
    details = {"spec.vector": spec_stats_text(got_v[1])} if got_v else {}
    if spec == "both":
        ref, ref_err = _guard(lambda: _arrays(dtype, spec_side(g, xs, env, seed, dtype)))
        if ref_err != err:
            return LinkReport(False, 0, f"spec.vector raised {err}, the spec reference {ref_err}")
        mism = None if err else _array_mismatch("spec.vector vs the spec reference", want, ref)
        if mism is not None:
            return LinkReport(False, 0, mism, details)
    got: Any
    got, run_err = _guard(lambda: run([F.array(x) for x in xs], [F.array(t) for t in seed.tensors]))
    if err or run_err:
        ok = err == run_err
        return LinkReport(ok, 0, None if ok else f"spec raised {err}, runtime {run_err}")
    mism = _array_mismatch("runtime vs spec", got, want)
    return LinkReport(mism is None, 3 * len(want[1]), mism, details)


def check_link(
    g: Graph,
    xs: Sequence[Tensor],
    seed: TensorPack,
    env: Sequence[int] = (),
    *,
    dtype: str,
    kernels: str = "ordered",
    backend: Backend = NUMPY,
    compiled: bool | None = None,
    spec: str = "auto",
) -> LinkReport:
    """Values, all cotangents and all tangents of runtime (on `backend`; `compiled`: see
    `KernelContext`) vs spec in the dtype's domain; `spec` picks the spec evaluators (see
    the module docstring)."""
    if spec not in ("auto", "both", "vector", "python"):
        raise TorchLeanError(f"check_link: spec must be auto, both, vector or python, got {spec!r}")
    if spec == "auto":
        spec = "both" if elements(g) <= BOTH_MAX_ELEMENTS else "vector"
    if dtype not in OBJECT_DTYPES and spec != "python":

        def run(xa: list[Any], sa: list[Any]) -> Sides:
            return array_sides(g, xa, env, sa, dtype, kernels, backend, compiled)

        return _array_check(g, xs, seed, env, dtype, spec, run)
    try:
        want = spec_side(g, xs, env, seed, dtype)
        spec_err: str | None = None
    except TorchLeanError as e:
        spec_err = f"{type(e).__name__}"
    try:
        got = runtime_side(g, xs, env, seed, dtype, kernels, backend, compiled)
        run_err: str | None = None
    except TorchLeanError as e:
        run_err = f"{type(e).__name__}"
    if spec_err or run_err:
        ok = spec_err == run_err
        return LinkReport(ok, 0, None if ok else f"spec raised {spec_err}, runtime {run_err}")
    mism = compare_sides(dtype, got, want)
    return LinkReport(mism is None, 3 * len(want[1]), mism)


def one_hot_seeds(ctx_zeros: Any, shapes: Sequence[tuple[int, ...]], out: int, seed: Any) -> list:
    return [seed if i == out else ctx_zeros(s) for i, s in enumerate(shapes)]


def check_dense_all_vs_from(
    g: Graph,
    xs: Sequence[Tensor],
    out_seed: Tensor,
    env: Sequence[int] = (),
    *,
    dtype: str = "exact",
) -> LinkReport:
    """backward_dense_all(out, seed) == backward_dense_from(one_hot(out, seed)) on the
    (zero-preserving) lowered tape."""
    D = DTYPE_DOMAIN[dtype]
    try:
        tape = lower(g, [from_spec(x, dtype) for x in xs], env, dtype=dtype, kernels="ordered")
    except TorchLeanError as e:
        return LinkReport(True, 0, None, {"skipped": type(e).__name__})
    out = len(tape) - 1
    s = from_spec(out_seed, dtype)
    a = tape.backward_dense_all(out, s)
    b = tape.backward_dense_from(
        one_hot_seeds(tape.ctx.zeros, [tuple(n.value.shape) for n in tape.nodes], out, s)
    )
    mism = first_mismatch(
        D, "dense_all vs from", [to_spec(x, dtype) for x in a], [to_spec(x, dtype) for x in b]
    )
    return LinkReport(mism is None, len(a), mism)
