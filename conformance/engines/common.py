"""The op entries the judged engines share, keyed by op; each adapter overrides only where
its spelling or convention differs.

Invariants:
- `operator_ops()` are the ops every adapter writes with Python operators and indexing
  (`a + b`, `x[start:stop]`, ...): the same entry serves torch, JAX, tinygrad and autograd.
- `namespace_ops(ns)` are the ops spelled alike in an array namespace `ns` (torch,
  jax.numpy, autograd.numpy): `ns.maximum`, `ns.abs`, `ns.reshape`, ...; `numpy_style_ops(ns)`
  the ones spelled alike in NumPy-style namespaces only (jax.numpy, autograd.numpy:
  `axis=`, `ddof=`, `swapaxes`, `concatenate`, `power`).
- `math_ops(engine, call)` derives one entry per op of the table that is one math function
  (`OpDef.math`) and whose record spells it for `engine` (`MathFn.engines`): x ->
  `call(spelling, x)`. An engine missing from the record does not cover the op.
- `ops_table(*parts)` merges the parts left to right (a later part overrides an earlier
  one): an adapter's table is `ops_table(shared..., its own entries)`. An elementwise
  composite of the table (tag "elementwise") that no part spells, and whose inlined body
  (at its first sample) holds no `const`, gets an entry derived from its body
  (`body_entry`): the body's primitives run in order, each through the engine's own entry,
  so the engine is judged on the spec's composition of its own primitives. A body node
  the engine does not spell raises `Unsupported` (the case's refusal).
- `Window` reads a convolution's or pool's attributes once (nd-int tuples, PyTorch's
  defaults), so every adapter's conv and pool entries take `**attrs`.
- A namespace is read when an entry is called, never at import: an adapter module imports
  without its package installed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial, reduce
from typing import Any

from spec.graph import Graph
from spec.inline import inline
from spec.ops import OPS

from .base import Unsupported, select_index

__all__ = [
    "Window",
    "body_entry",
    "dotted",
    "math_ops",
    "namespace_ops",
    "nd_ints",
    "numpy_style_ops",
    "operator_ops",
    "ops_table",
]

Table = dict[str, Callable[..., Any]]


def dotted(root: Any, path: str) -> Any:
    """`root.a.b.c` for path "a.b.c"."""
    return reduce(getattr, path.split("."), root)


def _sum_all(*xs: Any) -> Any:
    return reduce(lambda a, b: a + b, xs)


def operator_ops() -> Table:
    return {
        "add": lambda a, b: a + b,
        "sub": lambda a, b: a - b,
        "mul": lambda a, b: a * b,
        "div": lambda a, b: a / b,
        "neg": lambda x: -x,
        "scale": lambda x, c: x * float(c),
        "slice": lambda x, start, stop: x[start:stop],
        "select": lambda x, index=None, env_slot=None, env=(): x[
            select_index(index, env_slot, env)
        ],
        "add_n": _sum_all,
        "mean_n": lambda *xs: _sum_all(*xs) / len(xs),
    }


def namespace_ops(ns: Callable[[], Any]) -> Table:
    """`ns()` returns the namespace (called per entry call, so a missing package is only an
    error when an op runs)."""
    return {
        "maximum": lambda a, b: ns().maximum(a, b),
        "minimum": lambda a, b: ns().minimum(a, b),
        "abs": lambda x: ns().abs(x),
        "sqrt": lambda x: ns().sqrt(x),
        "inv": lambda x: ns().reciprocal(x),
        "sign": lambda x: ns().sign(x),
        "matmul": lambda a, b: ns().matmul(a, b),
        "reshape": lambda x, shape: ns().reshape(x, shape),
        "broadcast_to": lambda x, shape: ns().broadcast_to(x, shape),
        "maximum_n": lambda *xs: reduce(ns().maximum, xs),
        "minimum_n": lambda *xs: reduce(ns().minimum, xs),
        "sum": lambda x: ns().sum(x),
        "mean": lambda x: ns().mean(x),
    }


def numpy_style_ops(ns: Callable[[], Any]) -> Table:
    return {
        "reduce_sum": lambda x, axis: ns().sum(x, axis=axis),
        "reduce_mean": lambda x, axis: ns().mean(x, axis=axis),
        "reduce_max": lambda x, axis: ns().max(x, axis=axis),
        "swap_adjacent": lambda x, axis: ns().swapaxes(x, axis, axis + 1),
        "transpose": lambda x: ns().swapaxes(x, -2, -1),
        "concat": lambda *xs: ns().concatenate(xs, 0),
        "mse_loss": lambda y, t: ns().mean((y - t) ** 2),
        "var": lambda x, dim, correction=1: ns().var(x, axis=dim, ddof=correction),
        "std": lambda x, dim, correction=1: ns().std(x, axis=dim, ddof=correction),
        "pow_tensor": lambda a, b: ns().power(a, b),
    }


def math_ops(engine: str, call: Callable[[str, Any], Any]) -> Table:
    """One entry per math-function op of the table that `engine` spells (see above)."""
    out: Table = {}
    for name, op in OPS.items():
        fn = op.math
        if fn is not None and op.kind == "primitive" and engine in fn.engines:
            out[name] = partial(call, fn.engines[engine])
    return out


def _body(name: str, shapes: list[Any], attrs: Mapping[str, Any]) -> Graph:
    body = OPS[name].body
    assert body is not None
    g, value_map = inline(body(shapes, dict(attrs)))
    assert value_map[-1] == len(g.shapes) - 1
    return g


def body_entry(name: str, table: Mapping[str, Callable[..., Any]]) -> Callable[..., Any]:
    """The entry of composite `name` that runs its inlined body through `table`."""

    def run(*arrays: Any, **attrs: Any) -> Any:
        g = _body(name, [tuple(a.shape) for a in arrays], attrs)
        vals = list(arrays)
        for node in g.nodes:
            f = table.get(node.op)
            if f is None:
                raise Unsupported(f"{name}: its body's {node.op!r} has no entry in this engine")
            vals.append(f(*(vals[i] for i in node.args), **dict(node.attrs)))
        return vals[-1]

    return run


def _runs_by_body(name: str) -> bool:
    op = OPS[name]
    if op.kind != "composite" or "elementwise" not in op.tags or not op.samples:
        return False
    shapes = [tuple(shape) for shape, _ in op.samples[0].args]
    g = _body(name, shapes, op.samples[0].attrs)
    return all(n.op != "const" for n in g.nodes)


def nd_ints(v: Any, nd: int, default: Any) -> Any:
    """An nd-int attribute (one int meaning all nd), or `default` when absent."""
    return default if not v else tuple(int(t) for t in v) * (nd if len(v) == 1 else 1)


class Window:
    """The attributes of a convolution or pool over nd spatial axes, read once: every
    engine's conv and pool entries take `(x, w, b=None, **attrs)` / `(x, **attrs)` and read
    them here, each in its own spelling."""

    def __init__(
        self,
        nd: int,
        kernel_size: Any = None,
        stride: Any = None,
        padding: Any = None,
        dilation: Any = None,
        groups: Any = None,
        output_padding: Any = None,
        ceil_mode: Any = None,
        count_include_pad: Any = None,
        divisor_override: Any = None,
    ) -> None:
        self.nd = nd
        self.kernel = nd_ints(kernel_size, nd, (1,) * nd)
        self.given_stride = nd_ints(stride, nd, None)  # None: the op's default
        self.stride = self.given_stride or (1,) * nd
        self.padding = tuple(int(p) for p in padding) if padding else ()
        self.dilation = nd_ints(dilation, nd, (1,) * nd)
        self.groups = int(groups or 1)
        self.output_padding = nd_ints(output_padding, nd, (0,) * nd)
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = count_include_pad is not False
        self.divisor_override = int(divisor_override) if divisor_override else None

    @property
    def pool_stride(self) -> tuple[int, ...]:
        return self.given_stride or self.kernel

    @property
    def asymmetric(self) -> bool:
        p, nd = self.padding, self.nd
        return len(p) == 2 * nd and p[:nd] != p[nd:]

    def pads(self) -> list[tuple[int, int]]:
        """(begin, end) per axis from nd ints (symmetric) or 2*nd (begins, then ends)."""
        p, nd = self.padding, self.nd
        if len(p) == 2 * nd:
            return [(p[a], p[nd + a]) for a in range(nd)]
        return [(q, q) for q in nd_ints(p, nd, (0,) * nd)]

    def begins(self) -> tuple[int, ...]:
        return tuple(lo for lo, _ in self.pads())

    def flat_pads(self) -> tuple[int, ...]:
        """F.pad's (and tinygrad's) order: (begin, end) from the last axis backwards."""
        return tuple(v for lo, hi in reversed(self.pads()) for v in (lo, hi))


def ops_table(*parts: Mapping[str, Callable[..., Any]]) -> Table:
    out: Table = {}
    for part in parts:
        out.update(part)
    for name in OPS:
        if name not in out and _runs_by_body(name):
            out[name] = body_entry(name, out)
    return out
