"""`check_derivative_bounds`: the `fast` profile's VJPs, cotangent accumulation and JVPs,
node by node, against bounds derived mechanically from the spec rules (`balls`).

Invariants:
- The graph is inlined (composites run as their primitives) and lowered with the `fast`
  kernels; the reverse pass runs from a full seed (the case's seeds at the original graph's
  values, +0 at the values inlining adds), the forward tangents from the seeds of the
  inputs.
- Per primitive node, on the runtime's *own* inputs to that node (primal values, the
  cotangent the sweep handed it, the tangents of its arguments), all exact:
  1. `vjp`: each cotangent the node emitted (fan-in folded per argument id) lies in the
     ball of the spec VJP rule run over `BallDomain`, fan-in folded the same way;
  2. `jvp`: the node's tangent lies in the ball of the spec JVP rule;
  3. `accumulation`: each value's final cotangent lies in the ball of the sum of its seed
     and every contribution emitted to it (any order: the bound is order-free).
  There is no per-op backward bound to write: a new op is covered by its spec rules.
- Wild elements (possible overflow) are counted, not compared. A comparison the balls
  cannot decide is answered both ways (`balls.all_branches`) and each element is checked
  against the union of the paths' balls; a node needing more than 64 paths is counted as
  undecided and skipped. Both counts are in `details`; the suite's tests keep them rare.
- A check never raises on a violation: the `BoundReport` names the first one (node, op,
  which derivative, argument, element, runtime vs center ± bound). Its `worst_ratio` is
  the largest error/bound; `max_ulp` the largest error in ulps of the center among the
  elements whose radius is under 1/256 of the center (where a sum cancelled, ulps of the
  result mean little).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gmpy2

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend
from runtime.engine.context import KernelContext, fp_quiet
from runtime.engine.lower import lower
from runtime.engine.tape import ZERO_REST
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.graph import Graph
from spec.inline import inline
from spec.ops import get_op
from spec.tensor import Tensor, TensorPack

from .balls import BallDomain, Value, all_branches, contains_any
from .check import BoundReport
from .core import ULP_BUDGET

__all__ = ["ball_domain", "check_derivative_bounds", "seeds_on_inlined"]

_DOMAINS: dict[str, BallDomain] = {}


def ball_domain(dtype: str) -> BallDomain:
    """The `BallDomain` of the `fast` runtime in `dtype` (libm budgets `ULP_BUDGET`)."""
    hit = _DOMAINS.get(dtype)
    if hit is None:
        F = DTYPE_DOMAIN[dtype]
        if not isinstance(F, IEEEDomain):
            raise TorchLeanError(f"derivative bounds need an IEEE dtype, got {dtype!r}")
        hit = _DOMAINS[dtype] = BallDomain(dtype, F, ULP_BUDGET[dtype])
    return hit


def seeds_on_inlined(gi: Graph, vmap: Sequence[int], seeds: Sequence[Tensor], D: Any) -> list:
    """The seeds of a graph moved onto its inlined graph (`vmap`: original value -> inlined
    value): the original seeds at mapped values, +0 at the values inlining adds."""
    where = {j: i for i, j in enumerate(vmap)}
    return [
        seeds[where[j]] if j in where else Tensor.zeros(D, tuple(s))
        for j, s in enumerate(gi.shapes)
    ]


class _Tally:
    """Collects the comparisons of one check into its report."""

    def __init__(self, D: BallDomain, dtype: str) -> None:
        self.D, self.F = D, DTYPE_DOMAIN[dtype]
        self.rep = BoundReport(True)
        self.rep.details.update(checked=0, wild=0, undecided=0)

    def fail(self, message: str) -> None:
        if self.rep.ok:
            self.rep.ok, self.rep.first_violation = False, message

    def compare(self, what: str, want: Sequence[Sequence[Value]], got: Tensor) -> None:
        """`want[e]`: element e's ball on each path of `all_branches`."""
        rep = self.rep
        for e, (ws, v) in enumerate(zip(want, got.data, strict=True)):
            ok, err, bound = contains_any(self.D, ws, v)
            if ok is None:
                rep.details["wild"] += 1
                continue
            rep.details["checked"] += 1
            b = self.D.settle(ws[0])
            if err:
                ratio = float(err / bound) if bound else float("inf")
                rep.worst_ratio = max(rep.worst_ratio, ratio)
                if gmpy2.is_finite(err) and 256 * b.r < abs(b.c):  # ulps: no cancellation
                    rep.max_ulp = max(rep.max_ulp, float(err / _ulp(self.F, b.c)))
            if not ok and rep.ok:
                self.fail(
                    f"{what} element {e}: runtime {self.F.encode(v)} ({float(v)!r}) vs "
                    f"{float(b.c)!r} ± {float(bound):.6g} (the spec rule's ball in "
                    f"{self.D.dtype}; error {float(err):.6g})"
                )


def _ulp(F: IEEEDomain, v: Any) -> Any:
    """ulp(v) in the format (MPFR exponents: v = m·2**e, 1/2 <= m < 1); η at zero."""
    e = gmpy2.get_exp(v) if v else F.emin
    return gmpy2.mul_2exp(gmpy2.mpfr(1), max(e, F.emin + F.precision - 1) - F.precision)


def _fold(D: BallDomain, per_arg: Sequence[Tensor], args: Sequence[int]) -> dict[int, list]:
    """Fan-in: the cotangents of arguments naming the same id, added in argument order."""
    out: dict[int, list] = {}
    for a, t in zip(args, per_arg, strict=True):
        prev = out.get(a)
        out[a] = (
            list(t.data)
            if prev is None
            else [D.add(p, q) for p, q in zip(prev, t.data, strict=True)]
        )
    return out


def _node_rules(
    op: Any,
    ids: Sequence[int],
    args: list[Tensor],
    g: Tensor,
    tangents: list[Tensor],
    attrs: dict[str, Any],
    env: Sequence[int],
) -> Any:
    """One node's VJP (fan-in folded per argument id) and JVP over a ball domain."""

    def rules(B: BallDomain) -> tuple[dict[int, list], Tensor]:
        return _fold(B, op.vjp(B, args, g, attrs, env), ids), op.jvp(B, args, tangents, attrs, env)

    return rules


def check_derivative_bounds(
    g: Graph,
    xs: Sequence[Tensor],
    seed: TensorPack,
    env: Sequence[int] = (),
    *,
    dtype: str,
    backend: Backend = NUMPY,
) -> BoundReport:
    """Run g (inlined) with the `fast` kernels on `backend`; check every primitive node's
    VJP contributions and JVP tangent, and every accumulated cotangent, against its ball."""
    D = ball_domain(dtype)
    F = DTYPE_DOMAIN[dtype]
    gi, vmap = inline(g)
    if backend.guard is not None:
        backend.guard("bounds")
    try:
        ctx = KernelContext(dtype, "fast", backend)
        tape = lower(gi, [backend.from_spec(x, dtype) for x in xs], env, ctx=ctx)
        seeds = seeds_on_inlined(gi, vmap, seed.tensors, F)
        grads = tape.backward_dense_from([backend.from_spec(s, dtype) for s in seeds])
        tans = tape.forward_tangents(
            {i: backend.from_spec(seeds[i], dtype) for i in range(gi.num_inputs)}
        )
    except TorchLeanError as e:
        return BoundReport(True, 0, details={"skipped": type(e).__name__})
    vals = [backend.to_spec(n.value, dtype) for n in tape.nodes]
    gvals = [backend.to_spec(x, dtype) for x in grads]
    tvals = [backend.to_spec(x, dtype) for x in tans]
    exact = D.exact_ball
    tally = _Tally(D, dtype)
    received: list[list[Value]] = [[exact(v) for v in s.data] for s in seeds]
    for k, node in enumerate(gi.nodes):
        i = gi.num_inputs + k
        op = get_op(node.op)
        attrs = dict(node.attrs)
        args = [Tensor(vals[a].shape, tuple(exact(v) for v in vals[a].data)) for a in node.args]
        with fp_quiet():
            pairs = tape.nodes[i].backward(grads[i]) if tape.nodes[i].backward else []
        emitted = {j: backend.to_spec(c, dtype) for j, c in pairs if j != ZERO_REST}
        for j, t in emitted.items():
            acc = received[j]
            for e, v in enumerate(t.data):
                acc[e] = D.add(acc[e], exact(v))
        tally.rep.nodes += 1
        gb = Tensor(gvals[i].shape, tuple(exact(v) for v in gvals[i].data))
        tb = [Tensor(tvals[a].shape, tuple(exact(v) for v in tvals[a].data)) for a in node.args]
        paths = all_branches(_node_rules(op, node.args, args, gb, tb, attrs, env), D)
        if paths is None:
            tally.rep.details["undecided"] += 1
            continue
        for j in dict.fromkeys(node.args):
            what = f"node %{i} {node.op} vjp (argument {node.args.index(j)}, to %{j})"
            got = emitted.get(j)
            if got is None:
                tally.fail(f"{what}: the runtime emitted no cotangent")
                continue
            tally.compare(what, list(zip(*(p[0][j] for p in paths), strict=True)), got)
        tans = list(zip(*(p[1].data for p in paths), strict=True))
        tally.compare(f"node %{i} {node.op} jvp (tangent)", tans, tvals[i])
    for j, acc in enumerate(received):
        tally.compare(f"node %{j} accumulated cotangent", [[b] for b in acc], gvals[j])
    return tally.rep
