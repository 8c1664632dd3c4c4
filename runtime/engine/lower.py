"""Lowering a spec graph to a tape, and a reusable compiled artifact.

Invariants:
- `lower(g, inputs, env)` makes |Γ| leaves (requires_grad True), then one node per graph
  node, in order. Every lowered node has requires_grad True, so every value takes part in
  the reverse pass (TorchLean's compile_aux_data), and its backward emits a dense
  `(id, grad)` pair for *every* earlier id in increasing id order: the fan-in fold of the
  rule's cotangents for arguments, zeros elsewhere. By default (`emission="zero_rest"`) the
  zeros are one `(ZERO_REST, None)` pair that the tape applies lazily with the same bits
  (runtime.engine.tape), so the reverse pass is linear in the tape length;
  `emission="dense"` emits every zero explicitly (the reference; a test compares them). Hence
  `backward_dense_from(lower(g), seed) == backprop_all_ctx(g, seed)` (the link theorem).
- Every lowered node also carries its kernel's JVP, so `tape.forward_tangents` of a lowered
  tape equals `spec.jvp_ctx` (checked by the suite's `link` property).
- The graph is validated (spec.validate) before anything runs; op preconditions (log's
  x > 0) are checked on the actual inputs as in `spec.eval_graph`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spec.errors import ShapeError, TorchLeanError
from spec.graph import Graph
from spec.validate import validate_graph

from ..kernels import fold_fanin, kernel_for
from .context import KernelContext, fp_quiet
from .tape import ZERO_REST, Tape

__all__ = ["Compiled", "compile_graph", "lower"]


def _dense_backward(
    ctx: KernelContext,
    kern: Any,
    saved: Any,
    args: tuple[int, ...],
    attrs: dict[str, Any],
    env: Sequence[int],
    shapes: Sequence[tuple[int, ...]],
    dense: bool,
) -> Any:
    def backward(g: Any) -> list[tuple[int, Any]]:
        per_arg = [ctx.arr(c) for c in kern.vjp(ctx, saved, g, attrs, env)]
        contrib = fold_fanin(args, per_arg)
        if not dense:
            return [(j, ctx.arr(contrib[j])) for j in sorted(contrib)] + [(ZERO_REST, None)]
        return [
            (j, ctx.arr(contrib[j]) if j in contrib else ctx.zeros(s)) for j, s in enumerate(shapes)
        ]

    return backward


def _jvp(ctx: KernelContext, kern: Any, saved: Any, attrs: dict[str, Any], env: Any) -> Any:
    def jvp(tangents: list[Any]) -> Any:
        return ctx.arr(kern.jvp(ctx, saved, tangents, attrs, env))

    return jvp


def _check_inputs(g: Graph, inputs: Sequence[Any], ctx: KernelContext) -> list[Any]:
    if len(inputs) != g.num_inputs:
        raise ShapeError(f"lower: expected {g.num_inputs} inputs, got {len(inputs)}")
    xs = []
    for i, (x, s) in enumerate(zip(inputs, g.inputs, strict=True)):
        x = ctx.backend.asarray(x, ctx.dtype)
        if tuple(x.shape) != s:
            raise ShapeError(f"lower: input {i} (expected shape {s}, got {tuple(x.shape)})")
        xs.append(x)
    return xs


def lower(
    g: Graph,
    inputs: Sequence[Any],
    env: Sequence[int] = (),
    *,
    dtype: str = "float32",
    kernels: str = "fast",
    ctx: KernelContext | None = None,
    emission: str = "zero_rest",
) -> Tape:
    """The tape of g on `inputs` (TorchLean's compile_aux_data); `emission` "zero_rest"
    (default, linear) or "dense" (every zero explicit, the reference)."""
    if emission not in ("zero_rest", "dense"):
        raise TorchLeanError(f"lower: emission must be 'zero_rest' or 'dense', got {emission!r}")
    ctx = ctx or KernelContext(dtype, kernels)
    dtype = ctx.dtype
    # A Graph is validated when built, but its fields can be reassigned: re-check here.
    shapes = validate_graph(g.inputs, g.nodes)
    xs = _check_inputs(g, inputs, ctx)
    tape = Tape(ctx)
    for x in xs:
        tape.leaf(x, requires_grad=True, name="input")
    for k, node in enumerate(g.nodes):
        idx = g.num_inputs + k
        kern = kernel_for(node.op)
        args = [tape.nodes[a].value for a in node.args]
        attrs = dict(node.attrs)
        with fp_quiet():
            if kern.check is not None:
                kern.check(ctx, args, attrs)
            y, saved = kern.forward(ctx, args, attrs, env)
        dense = emission == "dense"  # only the dense reference needs the shapes before idx
        bw = _dense_backward(
            ctx, kern, saved, node.args, attrs, env, shapes[:idx] if dense else (), dense
        )
        tape.add_node(node.op, ctx.arr(y), True, node.args, bw, _jvp(ctx, kern, saved, attrs, env))
    return tape


class Compiled:
    """A graph bound to a kernel context (its constants cached across calls); call it on
    new inputs. `run = compiled(inputs, env)` gives `run.values` (one array per value) and
    `run.backward(seeds)`, equal to `backward_dense_from(lower(g, inputs, env), seeds)`.
    Each call lowers the graph afresh (validating it again), so one artifact
    serves any number of input sets, where TorchLean's closures are baked per input.
    """

    def __init__(self, g: Graph, *, dtype: str = "float32", kernels: str = "fast") -> None:
        for n in g.nodes:
            kernel_for(n.op)  # fail at construction for an op without a kernel
        self.graph = g
        self.ctx = KernelContext(dtype, kernels)

    def __call__(self, inputs: Sequence[Any], env: Sequence[int] = ()) -> _Run:
        return _Run(self, lower(self.graph, inputs, env, ctx=self.ctx))


class _Run:
    def __init__(self, compiled: Compiled, tape: Tape) -> None:
        self.compiled = compiled
        self.tape = tape
        self.values = [n.value for n in tape.nodes]

    def backward(self, seeds: Sequence[Any]) -> list[Any]:
        return self.tape.backward_dense_from(seeds)


def compile_graph(g: Graph, *, dtype: str = "float32", kernels: str = "fast") -> Compiled:
    return Compiled(g, dtype=dtype, kernels=kernels)
