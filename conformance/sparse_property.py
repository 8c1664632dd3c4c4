"""The sparse-backward check: the eager tape's `backward_dense` (the Session's path) against
a spec reference with the same accumulation rule.

Invariants:
- The runtime side records the graph with `Tape.op` (as the Session does: one leaf per
  input, requires_grad True; a node requires grad when a parent does, so `const` nodes are
  frozen) and runs `backward_dense(out, seed)` from the last value: a slot receives only the
  contributions of the nodes that use it, the first one stored *as is* (so a VJP's −0
  survives), later ones added on the right; unreached slots stay None.
- The reference does the same walk over spec: per node, the fan-in-folded cotangents of its
  distinct arguments (`spec.graph.node_vjp_dense`, increasing id order), contributions into
  frozen values dropped.
- Comparison is bitwise (NaN matches NaN, signed zeros must match); None must match None.
  Errors that both sides raise identically count as agreement. Never raises on a mismatch.
"""

from __future__ import annotations

from collections.abc import Sequence

from runtime.backends import DTYPE_DOMAIN, NUMPY, Backend
from runtime.engine.context import KernelContext
from runtime.engine.tape import Tape
from spec.errors import TorchLeanError
from spec.graph import Graph, eval_graph, node_vjp_dense
from spec.tensor import Tensor

from .link_property import LinkReport

__all__ = ["check_sparse", "sparse_reference"]


def sparse_reference(
    dtype: str, g: Graph, xs: Sequence[Tensor], seed: Tensor, env: Sequence[int] = ()
) -> list[Tensor | None]:
    D = DTYPE_DOMAIN[dtype]
    vals = eval_graph(D, g, xs, env).tensors
    rg = [True] * g.num_inputs
    for n in g.nodes:
        rg.append(any(rg[a] for a in n.args))
    out = g.num_values - 1
    grads: list[Tensor | None] = [None] * g.num_values
    grads[out] = seed
    for k in range(len(g.nodes) - 1, -1, -1):
        idx = g.num_inputs + k
        gk = grads[idx]
        if gk is None or not rg[idx]:
            continue
        node = g.nodes[k]
        dense = node_vjp_dense(D, node, g.shapes[:idx], vals, gk, env)
        for j in sorted(set(node.args)):
            if not rg[j]:
                continue
            old = grads[j]
            c = dense[j]
            grads[j] = (
                c
                if old is None
                else Tensor(
                    c.shape, tuple(D.add(p, q) for p, q in zip(old.data, c.data, strict=True))
                )
            )
    return grads


def _runtime(
    dtype: str,
    kernels: str,
    backend: Backend,
    g: Graph,
    xs: Sequence[Tensor],
    seed: Tensor,
    env: Sequence[int],
) -> list[Tensor | None]:
    tape = Tape(KernelContext(dtype, kernels, backend))
    for x in xs:
        tape.leaf(backend.from_spec(x, dtype), requires_grad=True, name="input")
    for n in g.nodes:
        tape.op(n.op, list(n.args), env, **dict(n.attrs))
    grads = tape.backward_dense(len(tape) - 1, backend.from_spec(seed, dtype))
    return [None if a is None else backend.to_spec(a, dtype) for a in grads]


def check_sparse(
    g: Graph,
    xs: Sequence[Tensor],
    seed: Tensor,
    env: Sequence[int] = (),
    *,
    dtype: str,
    kernels: str = "ordered",
    backend: Backend = NUMPY,
) -> LinkReport:
    D = DTYPE_DOMAIN[dtype]
    errs = []
    sides = []
    for f in (
        lambda: sparse_reference(dtype, g, xs, seed, env),
        lambda: _runtime(dtype, kernels, backend, g, xs, seed, env),
    ):
        try:
            sides.append(f())
            errs.append(None)
        except TorchLeanError as e:
            sides.append(None)
            errs.append(type(e).__name__)
    if errs[0] or errs[1]:
        ok = errs[0] == errs[1]
        return LinkReport(ok, 0, None if ok else f"spec raised {errs[0]}, runtime {errs[1]}")
    want, got = sides
    assert want is not None and got is not None
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        if (a is None) != (b is None):
            return LinkReport(
                False,
                i,
                f"sparse cotangent of value %{i}: expected "
                f"{'none (unreached)' if b is None else b.data}, got "
                f"{'none (unreached)' if a is None else a.data}",
            )
        if a is not None and b is not None and not a.same(D, b):
            return LinkReport(
                False,
                i,
                f"sparse cotangent of value %{i}: expected {[D.encode(v) for v in b.data]}, "
                f"got {[D.encode(v) for v in a.data]} (first contribution stored as is)",
            )
    return LinkReport(True, len(got))
