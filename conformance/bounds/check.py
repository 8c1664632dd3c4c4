"""`check_bounds`: run a graph on the runtime and check every primitive node's result
against its stated fast-profile bound.

Invariants:
- The graph is inlined first (composites run as their primitives), and each node is
  checked against the exact result *on the runtime's own inputs to that node*, computed by
  the spec forward in `HP` (256-bit MPFR); a slack of 2**-200·magnitude absorbs `HP`'s own
  rounding.
- A result may be ±inf only where the bound's magnitude reaches the overflow threshold (or
  the exact result is the same infinity); it must be NaN exactly where the exact result is.
- A check never raises on a violation: the `BoundReport` says `ok`, the worst error/bound
  ratio, the largest error in ulps and the first violation. A graph the runtime refuses
  (a `TorchLeanError` while lowering) is reported ok with `details["skipped"]`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend
from runtime.engine.context import KernelContext
from runtime.engine.lower import lower
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.inline import inline
from spec.ops import get_op
from spec.tensor import Tensor

from .core import HP, exact_q, fmt, libm_of, node_bound, ulp, ulp_budget

__all__ = ["BoundReport", "check_bounds"]


@dataclass
class BoundReport:
    ok: bool
    nodes: int = 0
    worst_ratio: float = 0.0
    max_ulp: float = 0.0
    first_violation: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _float(q: Fraction) -> float:
    try:
        return float(q)
    except OverflowError:
        return float("inf")


def _ratio(err: Fraction, bound: Fraction) -> float:
    if err == 0:
        return 0.0
    return _float(err / bound) if bound > 0 else float("inf")


def check_bounds(
    g: Graph,
    xs: Sequence[Tensor],
    env: Sequence[int] = (),
    *,
    dtype: str,
    kernels: str = "fast",
    backend: Backend = NUMPY,
) -> BoundReport:
    """Run g (inlined) on the runtime (on `backend`); check every primitive node against
    its bound, given the runtime's own inputs to that node."""
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    f = fmt(D)
    K = 0.5 if kernels == "ordered" else 0.0
    gi, _ = inline(g)
    if backend.guard is not None:
        backend.guard("bounds")  # e.g. CuPy with TF32 enabled: refuse, never "skip"
    try:
        ctx = KernelContext(dtype, kernels, backend)
        tape = lower(gi, [backend.from_spec(x, dtype) for x in xs], env, ctx=ctx)
    except TorchLeanError as e:
        return BoundReport(True, 0, details={"skipped": type(e).__name__})
    rep = BoundReport(True)
    vals = [backend.to_spec(n.value, dtype) for n in tape.nodes]
    for k, node in enumerate(gi.nodes):
        idx = gi.num_inputs + k
        args = [vals[a].map(HP.round_value) for a in node.args]  # exact: keeps -0, inf, NaN
        op = get_op(node.op)
        try:
            want = op.forward(HP, args, dict(node.attrs), env)
        except TorchLeanError:
            continue
        fn = libm_of(op)  # the libm function behind the op; None: the bound reads no K
        budget = K if kernels == "ordered" or fn is None else ulp_budget(dtype, fn)
        bounds = node_bound(node.op)(f, args, want, dict(node.attrs), budget)
        rep.nodes += 1
        for e, (w, got, (bnd, mag)) in enumerate(
            zip(want.data, vals[idx].data, bounds, strict=True)
        ):
            bnd = bnd + mag * Fraction(1, 2**200)
            wq, gq = exact_q(w), exact_q(got)
            if gmpy2.is_nan(w) or gmpy2.is_nan(got):
                good = bool(gmpy2.is_nan(w) and gmpy2.is_nan(got))
                ratio = 0.0 if good else float("inf")
            elif gq is None:  # runtime overflowed to ±inf
                good = (wq is None and w == got) or (
                    mag * (1 + 4 * f.u) >= f.threshold
                    and ((wq is not None and (wq > 0) == (got > 0)) or w == got)
                )
                ratio = 0.0 if good else float("inf")
            elif wq is None:
                good, ratio = False, float("inf")
            else:
                err = abs(gq - wq)
                ratio = _ratio(err, bnd)
                good = err <= bnd
                if err:
                    rep.max_ulp = max(rep.max_ulp, _float(err / ulp(f, wq)))
            rep.worst_ratio = max(rep.worst_ratio, ratio)
            if not good and rep.ok:
                rep.ok = False
                rep.first_violation = (
                    f"node %{idx} {node.op} element {e}: runtime {D.encode(got)} "
                    f"({float(got)!r}) vs exact {float(w)!r}, bound {_float(bnd)!r}"
                )
    return rep
