"""The kernel table: `Kernel`, `KERNELS`, registration, fan-in folding and composite kernels.

Invariants:
- `KERNELS[name]` exists for every `spec.ops.OPS` entry once `runtime.kernels` is imported
  (a test iterates the table). Each entry is registered by exactly one family module
  (`runtime.kernels.<family>`), recorded in `Kernel.family`; `register` refuses names that
  are not in the spec op table.
- A kernel is three functions over a `KernelContext`:
  `forward(ctx, xs, attrs, env) -> (y, saved)`, `vjp(ctx, saved, g, attrs, env) -> [g_i]`
  (one cotangent per argument) and `jvp(ctx, saved, dxs, attrs, env) -> dy`. `saved` is
  exactly what the forward keeps for the backward; each kernel says what it is.
- Every composite op of the table gets `composite_kernel`, derived from the table
  (`add_composite_kernels`, run once by `runtime.kernels` after the family modules): it
  runs the spec body's nodes through the kernels of `KERNELS` (looked up at call time), so
  the composition is the same sequence. `register` refuses a composite (its kernel is never
  written by hand). Bodies are built once per (op, argument shapes, attributes)
  (`composite_body`, cached).
- After loading, `KERNELS` iterates in the order of `spec.ops.OPS`.
- Fan-in is folded by the caller (`fold_fanin`), never by a kernel.
- This module imports no family module; the family modules import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from spec.errors import GraphError
from spec.ops import OPS, OpDef

from ..engine.context import KernelContext

__all__ = [
    "KERNELS",
    "Attrs",
    "Env",
    "Kernel",
    "add_composite_kernels",
    "composite_body",
    "composite_kernel",
    "fold_fanin",
    "kernel_for",
    "register",
]

Attrs = dict[str, Any]
Env = Sequence[int]


@dataclass(frozen=True)
class Kernel:
    name: str
    forward: Callable[[KernelContext, list[Any], Attrs, Env], tuple[Any, Any]]
    vjp: Callable[[KernelContext, Any, Any, Attrs, Env], list[Any]]
    jvp: Callable[[KernelContext, Any, list[Any], Attrs, Env], Any]
    saves: str
    check: Callable[[KernelContext, list[Any], Attrs], None] | None = None
    # Optional: vjp_some(ctx, saved, g, attrs, env, needs) computes only the cotangents of
    # the arguments with needs[i] True (None for the others); each one it computes is the
    # same array, bit for bit, as vjp's. The tape uses it when some argument is frozen
    # (PyTorch's needs_input_grad), e.g. to skip the input gradient of a first layer.
    vjp_some: (
        Callable[[KernelContext, Any, Any, Attrs, Env, tuple[bool, ...]], list[Any]] | None
    ) = None
    # The family module that registered the kernel (last component of its module name,
    # e.g. "elementwise"); "" for a kernel built outside the table (tests' substitutes).
    family: str = ""


KERNELS: dict[str, Kernel] = {}


def _family_of(module: str) -> str:
    return module.rpartition(".")[2]


def register(
    *,
    family: str,
    name: str,
    forward: Any,
    vjp: Any,
    jvp: Any,
    saves: str,
    check: Any = None,
    vjp_some: Any = None,
) -> None:
    """Registers the kernel of spec op `name`; `family` is the registering module's
    `__name__` (its last component is recorded)."""
    if name not in OPS:
        raise GraphError(f"kernel for {name!r}, which is not in the spec op table")
    if OPS[name].kind == "composite":
        raise GraphError(
            f"kernel for {name!r}: a composite op of the spec op table gets its kernel from "
            "its body (add_composite_kernels); register only primitives"
        )
    KERNELS[name] = Kernel(name, forward, vjp, jvp, saves, check, vjp_some, _family_of(family))


def fold_fanin(args: Sequence[int], per_arg: Sequence[Any]) -> dict[int, Any]:
    """Per distinct argument id: the left fold of its cotangents in argument order."""
    out: dict[int, Any] = {}
    for a, g in zip(args, per_arg, strict=True):
        out[a] = g if a not in out else out[a] + g
    return out


@lru_cache(maxsize=4096)
def composite_body(
    name: str, shapes: tuple[tuple[int, ...], ...], attrs_key: tuple[Any, ...]
) -> Any:
    op = OPS[name]
    assert op.body is not None
    return op.body(list(shapes), dict(attrs_key))


def composite_kernel(op: OpDef, *, family: str = "") -> Kernel:
    """Runs the spec body node by node through these kernels. The VJP mirrors spec's
    backprop_ctx of the body with seed (0, ..., 0, g): starting from +0, a cotangent slot is
    never -0 (+0 + -0 = +0 and exact cancellation gives +0), so adding the zero
    contributions of non-arguments is the identity and is skipped."""

    def body_of(xs: list[Any], attrs: Attrs) -> Any:
        key = tuple(sorted(attrs.items()))
        return composite_body(op.name, tuple(tuple(x.shape) for x in xs), key)

    def forward(ctx: KernelContext, xs: list[Any], attrs: Attrs, env: Env) -> tuple[Any, Any]:
        g = body_of(xs, attrs)
        vals, saves = list(xs), []
        for node in g.nodes:
            y, s = KERNELS[node.op].forward(
                ctx, [vals[a] for a in node.args], dict(node.attrs), env
            )
            vals.append(ctx.arr(y))
            saves.append(s)
        return vals[-1], (g, saves)

    def vjp(ctx: KernelContext, saved: Any, gout: Any, attrs: Attrs, env: Env) -> list[Any]:
        g, saves = saved
        n_in = g.num_inputs
        ct: list[Any] = [None] * (g.num_values - 1) + [gout]
        for k in range(len(g.nodes) - 1, -1, -1):
            node, idx = g.nodes[k], n_in + k
            seed = ct[idx] if ct[idx] is not None else ctx.zeros(g.shapes[idx])
            per_arg = [
                ctx.arr(c) for c in KERNELS[node.op].vjp(ctx, saves[k], seed, dict(node.attrs), env)
            ]
            for j, c in fold_fanin(node.args, per_arg).items():
                ct[j] = ctx.arr(ctx.zeros(g.shapes[j]) + c) if ct[j] is None else ct[j] + c
        return [ctx.zeros(g.shapes[j]) if ct[j] is None else ctx.arr(ct[j]) for j in range(n_in)]

    def jvp(ctx: KernelContext, saved: Any, dxs: list[Any], attrs: Attrs, env: Env) -> Any:
        g, saves = saved
        tans = list(dxs)
        for k, node in enumerate(g.nodes):
            tans.append(
                ctx.arr(
                    KERNELS[node.op].jvp(
                        ctx, saves[k], [tans[a] for a in node.args], dict(node.attrs), env
                    )
                )
            )
        return tans[-1]

    return Kernel(op.name, forward, vjp, jvp, "the body's saved values", family=_family_of(family))


def add_composite_kernels() -> None:
    """Gives every composite op of the table its body-running kernel (`composite_kernel`,
    family from the op table), then orders `KERNELS` as `OPS`. Run once, after the family
    modules registered the primitives; a primitive without a kernel stays absent (the
    table-completeness test names it, `kernel_for` raises)."""
    for op in OPS.values():
        if op.kind == "composite":
            KERNELS[op.name] = composite_kernel(op, family=op.family)
    ordered = [(n, KERNELS[n]) for n in OPS if n in KERNELS]
    extra = [(n, k) for n, k in KERNELS.items() if n not in OPS]
    KERNELS.clear()
    KERNELS.update(ordered + extra)


def kernel_for(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise GraphError(f"no runtime kernel for op {name!r}") from None
