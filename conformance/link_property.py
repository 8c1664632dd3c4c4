"""The link check: runtime `backward_dense_from(lower(g))` against spec `backprop_all_ctx(g)`.

Invariants: a check never raises on a mismatch; it returns a `LinkReport` whose `ok` says
whether every value and every cotangent matched under the comparison policy of the dtype
(exact equality for "exact", bit equality with NaN matching NaN for IEEE dtypes with the
`ordered` kernels) and whose `first_mismatch` names the first differing entry. Errors that
both sides raise identically (e.g. log on a non-positive input) count as agreement.

(Named for the suite's "link" property it checks; the comparison machinery it shares with
`Session.check_link` lives in `runtime.session.link`.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend, from_spec, to_spec
from runtime.engine.lower import lower
from runtime.session.link import compare_sides, first_mismatch, runtime_side, spec_side
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.tensor import Tensor, TensorPack

__all__ = ["LinkReport", "check_dense_all_vs_from", "check_link", "one_hot_seeds"]


@dataclass
class LinkReport:
    ok: bool
    checked: int = 0
    first_mismatch: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return "ok" if self.ok else f"MISMATCH: {self.first_mismatch}"


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
) -> LinkReport:
    """Values, all cotangents and all tangents of runtime (on `backend`; `compiled`: see
    `KernelContext`) vs spec in the dtype's domain."""
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
