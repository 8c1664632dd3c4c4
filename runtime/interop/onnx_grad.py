"""ONNX `ai.onnx.preview.training.Gradient`: derivatives computed by the project's own
reverse sweep over the imported graph.

Invariants:
- Per the ONNX spec, `xs` and `zs` name the independent variables of a sub-graph and `y`
  its target; the node's i-th input is the value at which the i-th name of `xs + zs` is
  taken; output k is dy/d(xs[k]). The sub-graph (the ancestors of `y`, cut at `xs + zs`)
  is emitted again with each `xs` value behind a fresh `reshape` node of its own, so the
  cotangent of that node, in a reverse sweep seeded with 1 at the new `y`, is exactly the
  partial derivative: only paths from the fresh node reach it (two `xs` given the same
  value, or one computed from another, stay separate; `zs` are held fixed).
- `y` must have one element (the spec defines a derivative of a scalar); every value the
  sub-graph reads besides `xs + zs` must be an initializer or a constant (a model input
  that is not named is outside "the minimal independent set" and is refused).
- A Gradient output is a `GradValue` (the ids of `y` and of the fresh node), never a graph
  value: it may only be a model output (`Imported.gradients`; `run` computes it by the
  sweep); a node reading one is refused, as is a `y` that is one (higher order).
- Everything else the spec leaves open is refused with `InvalidModelError` (a malformed
  node) or `Unsupported` (a form this importer does not compute), naming the attribute.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from .core import Dyn, Emitter, InvalidModelError, Unsupported

__all__ = ["GRADIENT", "GradValue", "gradient_step"]

GRADIENT = "ai.onnx.preview.training.Gradient"
"""The op's qualified name (the name refusals use)."""

Walk = Callable[[Any, Mapping[str, Any]], tuple[Any, ...]]
"""Emits one ONNX node, reading its inputs from the mapping; returns its output values."""


@dataclass(frozen=True)
class GradValue:
    """A Gradient output: d(value `y`)/d(value `x`) by a sweep seeded with 1 at `y`."""

    y: int
    x: int


def _names(a: dict[str, Any], key: str) -> list[str]:
    val = a.get(key, [])
    if isinstance(val, str | bytes) or not all(isinstance(s, str | bytes) for s in val):
        raise InvalidModelError(f"Gradient attribute {key!r} must be a list of strings")
    return [s.decode() if isinstance(s, bytes) else s for s in val]


def _parse(node: Any, a: dict[str, Any], version: int) -> tuple[list[str], list[str], str]:
    if version != 1:
        raise Unsupported(f"ai.onnx.preview.training opset {version} (only version 1 is known)")
    extra = sorted(k for k in a if k not in ("xs", "zs", "y", "_outputs"))
    if extra:
        raise InvalidModelError(f"Gradient attribute(s) {extra} (it has xs, zs, y)")
    xs, zs = _names(a, "xs"), _names(a, "zs")
    y = a.get("y")
    if not isinstance(y, str) or not y:
        raise InvalidModelError("Gradient needs the attribute 'y' (a value name)")
    if not xs:
        raise InvalidModelError("Gradient needs a non-empty attribute 'xs'")
    both = xs + zs
    if len(set(both)) != len(both) or "" in both:
        raise InvalidModelError(f"Gradient xs {xs} and zs {zs} must be distinct non-empty names")
    if y in both:
        raise InvalidModelError(f"Gradient y {y!r} is also named in xs or zs")
    if len(node.input) != len(both):
        raise InvalidModelError(
            f"Gradient has {len(node.input)} inputs; xs + zs name {len(both)} values"
        )
    if len(node.output) > len(xs):
        raise InvalidModelError(f"Gradient has {len(node.output)} outputs for {len(xs)} xs")
    return xs, zs, y


def _cut(
    y: str,
    stop: set[str],
    producers: Mapping[str, Any],
    free: set[str],
    known: Iterable[str],
    this: Any = None,
) -> list[Any]:
    """The nodes computing `y` from `stop`, in graph order; refuses a dependence on a model
    input outside `stop`, on a name nobody defines, or on the Gradient node `this` itself
    (a cycle through its own outputs)."""
    have = set(known)
    seen: set[str] = set()
    nodes: dict[int, Any] = {}
    todo = [y]
    while todo:
        name = todo.pop()
        if name in seen or name in stop or not name:
            continue
        seen.add(name)
        if name in free:
            raise InvalidModelError(
                f"Gradient: y depends on the model input {name!r}, which is not in xs or zs"
            )
        node = producers.get(name)
        if node is None:
            if name in have:
                continue  # an initializer: a constant of the sub-graph
            raise InvalidModelError(f"Gradient: {name!r} is not a value of the graph")
        if this is not None and node[1] == this:
            raise InvalidModelError(
                f"Gradient: y {y!r} depends on {name!r}, an output of the Gradient node itself"
            )
        nodes[node[0]] = node[1]
        todo.extend(node[1].input)
    return [nodes[k] for k in sorted(nodes)]


def gradient_step(
    E: Emitter,
    node: Any,
    attrs: dict[str, Any],
    env: Mapping[str, Any],
    producers: Mapping[str, tuple[int, Any]],
    free: set[str],
    version: int,
    walk: Walk,
) -> tuple[Any, ...]:
    """The outputs of one Gradient node (see the module docstring). `producers` maps each
    value name to (position, node) in the model's graph; `free` are the model's runtime
    inputs; `walk` emits one node of the sub-graph."""
    xs, zs, y = _parse(node, attrs, version)
    for name in xs + zs:
        if name not in producers and name not in env:
            raise InvalidModelError(f"Gradient: {name!r} (in xs or zs) is not a value of the graph")
    vals = [env[i] for i in node.input]
    for name, v in zip(xs + zs, vals, strict=True):
        if isinstance(v, GradValue):
            raise Unsupported(f"a Gradient output as the value of {name!r} (higher order)")
    local: dict[str, Any] = {}
    for name, v in zip(xs, vals, strict=False):
        if not isinstance(v, Dyn):
            raise Unsupported(
                f"xs {name!r} is a value known at import time (integer or constant), "
                "not a graph value to differentiate"
            )
        local[name] = E.node("reshape", v, shape=tuple(E.shape(v)))
    local.update(zip(zs, vals[len(xs) :], strict=True))
    scope = ChainMap(local, dict(env))
    for sub in _cut(y, set(xs + zs), producers, free, env, node):
        scope.update(zip(sub.output, walk(sub, scope), strict=False))
    yv = scope.get(y)
    if isinstance(yv, GradValue):
        raise Unsupported("y is a Gradient output (higher order needs a symbolic VJP graph)")
    if not isinstance(yv, Dyn):
        raise Unsupported(f"y {y!r} is not a graph value (known at import time or unmapped)")
    if int(np.prod(E.shape(yv))) != 1:
        raise InvalidModelError(
            f"Gradient y {y!r} has shape {list(E.shape(yv))}; the derivative is defined for "
            "a y of one element"
        )
    return tuple(GradValue(yv.id, local[x].id) for x in xs[: len(node.output)])
