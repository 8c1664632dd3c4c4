"""The tape (a Wengert list) and its reverse passes, with TorchLean's accumulation rules.

Invariants:
- A node's id is its index; `add_node` returns the old length. Op constructors validate
  before appending, so a failed op leaves the tape unchanged.
- A node's requires_grad is the OR of its parents' (leaves choose); a node without it is
  *frozen*: reverse passes skip it and drop contributions into it.
- A node's backward maps its output cotangent to `(id, grad)` pairs; the passes fold them
  into a dense list in emission order: the first contribution into an empty slot is stored
  as is, later ones as `existing + new`.
- Gradients are returned, never stored on nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from spec.errors import GraphError, HookError, ShapeError
from spec.validate import check_node

from .context import KernelContext
from .kernels import fold_fanin, kernel_for

__all__ = ["Backward", "Tape", "TapeNode"]

Backward = Callable[[Any], Sequence[tuple[int, Any]]]
Hook = Callable[[int, Any], Any]


@dataclass(slots=True)
class TapeNode:
    name: str
    value: Any
    requires_grad: bool
    parents: tuple[int, ...]
    backward: Backward | None
    jvp: Callable[[list[Any]], Any] | None = None


class Tape:
    """A list of nodes plus the kernel context they were computed in."""

    def __init__(self, ctx: KernelContext | None = None) -> None:
        self.ctx = ctx or KernelContext()
        self.nodes: list[TapeNode] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def value(self, i: int) -> Any:
        return self.nodes[self._check_id(i, "value")].value

    def add_node(self, name: str, value: Any, requires_grad: bool, parents: Sequence[int],
                 backward: Backward | None) -> int:
        for p in parents:
            self._check_id(p, f"add_node({name!r}) parent")
        self.nodes.append(TapeNode(name, value, requires_grad, tuple(parents), backward))
        return len(self.nodes) - 1

    def leaf(self, value: Any, requires_grad: bool = True, name: str = "leaf") -> int:
        return self.add_node(name, self.ctx.arr(value), requires_grad, (), None)

    def op(self, name: str, args: Sequence[int], env: Sequence[int] = (), **attrs: Any) -> int:
        """Append one op node: validate, compute, then append (nothing on failure)."""
        for k, a in enumerate(args):
            self._check_id(a, f"{name}: input {k}")
        ctx = self.ctx
        shapes = [tuple(self.nodes[a].value.shape) for a in args]
        norm, _ = check_node(name, list(range(len(args))), attrs, shapes)
        kern = kernel_for(name)
        xs = [self.nodes[a].value for a in args]
        if kern.check is not None:
            kern.check(ctx, xs, norm)
        with np.errstate(all="ignore"):
            y, saved = kern.forward(ctx, xs, norm, env)
        y = ctx.arr(y)
        rg = any(self.nodes[a].requires_grad for a in args)
        arg_ids = tuple(args)

        def backward(g: Any) -> list[tuple[int, Any]]:
            per_arg = [ctx.arr(c) for c in kern.vjp(ctx, saved, g, norm, env)]
            return [(j, ctx.arr(c)) for j, c in sorted(fold_fanin(arg_ids, per_arg).items())]

        def jvp(tangents: list[Any]) -> Any:
            return ctx.arr(kern.jvp(ctx, saved, tangents, norm, env))

        i = self.add_node(name, y, rg, arg_ids, backward if rg else None)
        self.nodes[i].jvp = jvp
        return i

    # ------------------------------------------------------------------ reverse passes
    def _check_id(self, i: Any, what: str) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.nodes):
            raise GraphError(f"{what}: invalid tape id {i!r} (tape has {len(self.nodes)} nodes)")
        return i

    def _check_grad(self, i: int, g: Any, what: str) -> None:
        v = self.nodes[i].value
        if tuple(getattr(g, "shape", ())) != tuple(v.shape) or getattr(g, "dtype", None) != v.dtype:
            raise ShapeError(
                f"{what}: gradient for node {i} ({self.nodes[i].name}) has shape "
                f"{tuple(getattr(g, 'shape', ()))} dtype {getattr(g, 'dtype', type(g).__name__)}"
                f"; expected shape {tuple(v.shape)} dtype {v.dtype}"
            )

    def _sweep(self, grads: list[Any], start: int, run_all: bool,
               hook: Hook | None = None) -> list[Any]:
        with np.errstate(all="ignore"):  # IEEE overflow/invalid are values here, not errors
            return self._sweep_inner(grads, start, run_all, hook)

    def _sweep_inner(self, grads: list[Any], start: int, run_all: bool,
                     hook: Hook | None) -> list[Any]:
        for i in range(start, -1, -1):
            node = self.nodes[i]
            if hook is not None and grads[i] is not None and (node.requires_grad or i == start):
                grads[i] = self._apply_hook(hook, i, grads[i])
            if not node.requires_grad or node.backward is None:
                continue
            g = grads[i]
            if g is None:
                if not run_all:
                    continue
                g = self.ctx.zeros(tuple(node.value.shape))
            for pid, contrib in node.backward(self.ctx.arr(g)):
                if pid >= i or pid < 0:
                    raise GraphError(f"node {i} ({node.name}) emitted a gradient for id {pid}")
                if not self.nodes[pid].requires_grad:
                    continue
                self._check_grad(pid, contrib, f"node {i} ({node.name}) backward")
                grads[pid] = contrib if grads[pid] is None else self.ctx.arr(grads[pid] + contrib)
        return grads

    def _apply_hook(self, hook: Hook, i: int, g: Any) -> Any:
        h = hook(i, g)
        if tuple(getattr(h, "shape", ())) != tuple(g.shape) or getattr(h, "dtype", None) != g.dtype:
            raise HookError(
                f"gradient hook changed the gradient of node {i} ({self.nodes[i].name}): "
                f"shape {tuple(g.shape)} dtype {g.dtype} became shape "
                f"{tuple(getattr(h, 'shape', ()))} dtype {getattr(h, 'dtype', type(h).__name__)}"
            )
        return h

    def backward_dense(self, out: int, seed: Any, hook: Hook | None = None) -> list[Any | None]:
        """Reverse pass from `out`: one entry per id, None where nothing arrived. `hook(i, g)`
        may replace each reached gradient just before node i propagates it (same shape and
        dtype, or `HookError`)."""
        self._check_id(out, "backward_dense output")
        self._check_grad(out, seed, "backward_dense seed")
        grads: list[Any] = [None] * len(self.nodes)
        grads[out] = seed
        return self._sweep(grads, out, run_all=False, hook=hook)

    def backward_dense_all(self, out: int, seed: Any, hook: Hook | None = None) -> list[Any]:
        """`backward_dense`, then unreached slots become zeros: one gradient per id."""
        grads = self.backward_dense(out, seed, hook)
        return [self.ctx.zeros(tuple(n.value.shape)) if g is None else g
                for g, n in zip(grads, self.nodes, strict=True)]

    def backward_dense_from(self, grads0: Sequence[Any]) -> list[Any]:
        """Run every non-frozen node in reverse id order from a full list of cotangents."""
        if len(grads0) != len(self.nodes):
            raise ShapeError(f"backward_dense_from: {len(grads0)} cotangents for a tape of "
                             f"{len(self.nodes)} nodes")
        for i, g in enumerate(grads0):
            self._check_grad(i, g, "backward_dense_from seed")
        return self._sweep(list(grads0), len(self.nodes) - 1, run_all=True)

    def forward_tangents(self, leaf_tangents: dict[int, Any]) -> list[Any]:
        """Forward mode over the recorded nodes: the tangent of every id given tangents of
        leaves (missing leaves and frozen nodes contribute zero)."""
        tans: list[Any] = []
        with np.errstate(all="ignore"):
            for i, node in enumerate(self.nodes):
                zero = self.ctx.zeros(tuple(node.value.shape))
                if not node.parents:
                    t = leaf_tangents.get(i, zero) if node.requires_grad else zero
                    if t is not zero:
                        self._check_grad(i, t, "forward tangent")
                elif not node.requires_grad or node.jvp is None:
                    t = zero
                else:
                    t = node.jvp([tans[p] for p in node.parents])
                tans.append(t)
        return tans
