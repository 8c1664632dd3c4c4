"""The op-agnostic link check: every small DAG shape with *uninterpreted* ops.

Invariants:
- An opaque op `opaque<r>` (arity r = 1, 2, 3) applied at node k has forward
  `F_k(x_1, ..., x_r)`, JVP `J_k(x_1..x_r, dx_1..dx_r)` and per-argument VJPs
  `V_k_i(x_1..x_r, c)` (i = 1..r): distinct sympy `Function` symbols per node, so nothing
  about them is known but their names. The spec side (`spec.ops.table.OpDef`) and the
  runtime side (`runtime.kernels.table.Kernel`, run on symbolic object arrays) call the same
  symbols: that is assumption (K2) of proofs/link_theorem.md, made literally true, and the
  check is about everything else: `lower`, the dense backward closures, `fold_fanin`,
  `Tape.backward_dense_from`'s accumulation against `spec.graph.backprop_all_ctx`'s snoc
  recursion and `node_vjp_dense`.
- Because the functions are opaque, an equality that holds here is an identity of the free
  term algebra (sums of applications of the V's): it holds under *every* interpretation of
  the symbols, in particular for every op of the table whose kernel VJP equals its spec rule
  (K2, checked per op by `link.kernels_eq_spec_rules`).
- The ops are installed into `spec.ops.OPS` and `runtime.kernels.KERNELS` only inside
  `installed()` and removed afterwards (a failed check leaves the tables unchanged).
- `enumerate_shapes(max_values, ordered_upto)` yields every graph over scalar inputs with
  at least one input and at most `max_values` values (inputs plus nodes), every node an
  opaque op of arity 1-3 on a *multiset* of earlier ids (repetitions included; argument
  positions sorted, the enumeration is up to a permutation of each node's argument
  positions, which renames that node's opaque VJPs), and, for graphs of at most
  `ordered_upto` values, every *ordered* argument tuple as well. Deterministic order.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import sympy

from spec.domains import Domain
from spec.ops import OPS
from spec.ops.table import OpDef
from spec.shape import Shape
from spec.tensor import Tensor

__all__ = [
    "ARITIES",
    "OPAQUE_TIERS",
    "OpaqueTier",
    "count_shapes",
    "enumerate_shapes",
    "installed",
    "op_name",
    "tiers_summary",
]

ARITIES = (1, 2, 3)


def op_name(r: int) -> str:
    return f"opaque{r}"


_FN_CACHE: dict[str, Any] = {}


def _fn(name: str) -> Any:
    f = _FN_CACHE.get(name)
    if f is None:
        f = _FN_CACHE[name] = sympy.Function(name)
    return f


def _scalars(ts: list[Any]) -> list[Any]:
    return [t.data[0] if isinstance(t, Tensor) else t[()] for t in ts]


def _shape(shapes: list[Shape], attrs: dict[str, Any]) -> Shape:
    from spec.errors import ShapeError

    if any(s != () for s in shapes):
        raise ShapeError(f"opaque op: scalar arguments only, got {shapes}")
    return ()


def _spec_op(r: int) -> OpDef:
    def forward(D: Domain, xs: list[Tensor], a: dict[str, Any], env: Any) -> Tensor:
        return Tensor((), (_fn(f"F_{a['node']}")(*_scalars(xs)),))

    def jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: dict[str, Any], env: Any) -> Tensor:
        return Tensor((), (_fn(f"J_{a['node']}")(*_scalars(xs), *_scalars(dxs)),))

    def vjp(D: Domain, xs: list[Tensor], g: Tensor, a: dict[str, Any], env: Any) -> list[Tensor]:
        x = _scalars(xs)
        return [Tensor((), (_fn(f"V_{a['node']}_{i}")(*x, g.data[0]),)) for i in range(1, r + 1)]

    from spec.ops.table import AttrSpec

    return OpDef(
        name=op_name(r),
        arity=r,
        attrs=(AttrSpec("node", "nat"),),
        shape=_shape,
        forward=forward,
        jvp=jvp,
        vjp=vjp,
        saves="inputs",
        doc=f"an uninterpreted op of arity {r} (proofs.opaque_ops)",
        family="elementwise",
    )


def _obj(v: Any) -> Any:
    out = np.empty((), dtype=object)
    out[()] = v
    return out


def _kernel(r: int) -> Any:
    from runtime.kernels.table import Kernel

    def forward(ctx: Any, xs: list[Any], a: dict[str, Any], env: Any) -> tuple[Any, Any]:
        x = _scalars(xs)
        return _obj(_fn(f"F_{a['node']}")(*x)), x

    def vjp(ctx: Any, saved: Any, g: Any, a: dict[str, Any], env: Any) -> list[Any]:
        c = g[()]
        return [_obj(_fn(f"V_{a['node']}_{i}")(*saved, c)) for i in range(1, r + 1)]

    def jvp(ctx: Any, saved: Any, dxs: list[Any], a: dict[str, Any], env: Any) -> Any:
        return _obj(_fn(f"J_{a['node']}")(*saved, *_scalars(dxs)))

    return Kernel(name=op_name(r), forward=forward, vjp=vjp, jvp=jvp, saves="inputs")


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """The opaque ops in the spec and runtime tables for the duration of the block."""
    from runtime.kernels import KERNELS

    names = [op_name(r) for r in ARITIES]
    clash = [n for n in names if n in OPS or n in KERNELS]
    if clash:
        raise RuntimeError(f"opaque ops already installed: {clash}")
    try:
        for r in ARITIES:
            OPS[op_name(r)] = _spec_op(r)
            KERNELS[op_name(r)] = _kernel(r)
        yield
    finally:
        for n in names:
            OPS.pop(n, None)
            KERNELS.pop(n, None)


def _arg_tuples(n_values: int, r: int, ordered: bool) -> Iterator[tuple[int, ...]]:
    if ordered:
        return itertools.product(range(n_values), repeat=r)
    return itertools.combinations_with_replacement(range(n_values), r)


Node = tuple[str, tuple[int, ...], tuple[tuple[str, Any], ...]]


@dataclass(frozen=True)
class OpaqueTier:
    """Every graph over `n` scalar inputs (n in `inputs`) with at most `max_nodes` opaque
    nodes and at most `max_values` values, each node of an arity in `arities` on a multiset
    of earlier ids (`ordered` False) or on any ordered tuple (`ordered` True)."""

    name: str
    inputs: tuple[int, ...]
    max_nodes: int
    max_values: int
    arities: tuple[int, ...]
    ordered: bool

    def text(self) -> str:
        args = "ordered argument tuples" if self.ordered else "argument multisets"
        return (
            f"{self.name}: {'/'.join(map(str, self.inputs))} scalar input(s), "
            f"≤ {self.max_nodes} nodes, ≤ {self.max_values} values, arity "
            f"{'/'.join(map(str, self.arities))}, {args}"
        )


def _extend(
    n_in: int, nodes: list[Node], tier: OpaqueTier
) -> Iterator[tuple[int, tuple[Node, ...]]]:
    yield n_in, tuple(nodes)
    n_values = n_in + len(nodes)
    if n_values >= tier.max_values or len(nodes) >= tier.max_nodes:
        return
    for r in tier.arities:
        for args in _arg_tuples(n_values, r, tier.ordered):
            node = (op_name(r), args, (("node", len(nodes)),))
            yield from _extend(n_in, [*nodes, node], tier)


def enumerate_shapes(tier: OpaqueTier) -> Iterator[tuple[int, tuple[Node, ...]]]:
    """(number of scalar inputs, nodes) for every graph of the tier, deterministic order."""
    for n_in in tier.inputs:
        yield from _extend(n_in, [], tier)


def count_shapes(tier: OpaqueTier) -> dict[str, int]:
    """Graphs per number of values."""
    out: dict[str, int] = {}
    for n, nodes in enumerate_shapes(tier):
        key = str(n + len(nodes))
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


OPAQUE_TIERS: dict[str, tuple[OpaqueTier, ...]] = {
    "full": (
        OpaqueTier("values5", (1, 2, 3, 4, 5), 4, 5, ARITIES, False),
        OpaqueTier("nodes5", (1,), 5, 6, (1, 2), False),
        OpaqueTier("ordered4", (1, 2, 3, 4), 3, 4, ARITIES, True),
    ),
    "quick": (
        OpaqueTier("values4", (1, 2, 3, 4), 3, 4, ARITIES, False),
        OpaqueTier("nodes4", (1,), 4, 5, (1, 2), False),
        OpaqueTier("ordered3", (1, 2, 3), 2, 3, ARITIES, True),
    ),
}
"""The op-agnostic grammars; their bounds are part of the link theorem's scope."""


def tiers_summary(mode: str) -> str:
    return "; ".join(t.text() for t in OPAQUE_TIERS[mode])


# --------------------------------------------------------------------------- the check


def check_shape(n_in: int, nodes: tuple[Node, ...]) -> tuple[bool, int, str | None]:
    """backward_dense_from(lower(g), seed) = backprop_all_ctx(g, seed) for one graph of
    opaque ops (installed by the caller) with symbolic inputs and a full symbolic seed:
    (ok, entries compared, first mismatch)."""
    from runtime.backends import from_spec, to_spec
    from runtime.engine.lower import lower
    from spec.domains import SYMBOLIC
    from spec.graph import Graph, backprop_all_ctx
    from spec.graph import Node as GNode
    from spec.tensor import TensorPack

    g = Graph(tuple(() for _ in range(n_in)), tuple(GNode(o, a, dict(at)) for o, a, at in nodes))
    xs = [Tensor((), (sympy.Symbol(f"x{i}", real=True),)) for i in range(n_in)]
    seed = TensorPack.of(
        [Tensor((), (sympy.Symbol(f"s{j}", real=True),)) for j in range(len(g.shapes))]
    )
    want = backprop_all_ctx(SYMBOLIC, g, xs, seed).tensors
    tape = lower(g, [from_spec(x, "symbolic") for x in xs], (), dtype="symbolic", kernels="ordered")
    got = tape.backward_dense_from([from_spec(t, "symbolic") for t in seed.tensors])
    if len(got) != len(want):
        return False, 0, f"{len(got)} cotangents, expected {len(want)}"
    for j, (a, b) in enumerate(zip(got, want, strict=True)):
        p, q = to_spec(a, "symbolic").data, b.data
        if p != q and not all(sympy.expand(u - v) == 0 for u, v in zip(p, q, strict=True)):
            return False, j + 1, f"cotangent %{j}: {sympy.sstr(p)} != {sympy.sstr(q)}"
    return True, len(want), None


def _work(job: tuple[int, int, tuple[Node, ...]]) -> tuple[int, tuple[bool, int, str | None]]:
    i, n_in, nodes = job
    try:
        return i, check_shape(n_in, nodes)
    except Exception as e:  # a crash on one graph fails it, with its cause
        return i, (False, 0, f"raised {type(e).__name__}: {e}")


def graph_text(n_in: int, nodes: tuple[Node, ...]) -> str:
    lines = [f"inputs: {n_in} scalars (ids 0..{n_in - 1})"]
    for k, (op, args, _) in enumerate(nodes):
        lines.append(f"%{n_in + k} = {op}[node={k}]({', '.join(f'%{a}' for a in args)})")
    return "\n".join(lines)


def sweep_opaque(mode: str, jobs: int, report: Any = None) -> dict[str, Any]:
    """Check every graph of `OPAQUE_TIERS[mode]`: counts per tier and the first failures."""
    import multiprocessing

    specs = [(t.name, n, nodes) for t in OPAQUE_TIERS[mode] for n, nodes in enumerate_shapes(t)]
    results: list[Any] = [None] * len(specs)
    work = [(i, n, nodes) for i, (_, n, nodes) in enumerate(specs)]
    with installed():
        if jobs <= 1:
            for i, job in enumerate(work):
                results[i] = _work(job)[1]
                if report is not None and (i + 1) % 1024 == 0:
                    report("opaque graphs", i + 1, len(work))
        else:
            with multiprocessing.get_context("fork").Pool(jobs) as pool:
                for k, (i, r) in enumerate(pool.imap_unordered(_work, work, chunksize=256)):
                    results[i] = r
                    if report is not None and (k + 1) % 1024 == 0:
                        report("opaque graphs", k + 1, len(work))
    failures: list[dict[str, Any]] = []
    passed = entries = 0
    for (_, n, nodes), (ok, m, msg) in zip(specs, results, strict=True):
        passed += ok
        entries += m
        if not ok and len(failures) < 5:
            failures.append({"graph": graph_text(n, nodes), "mismatch": msg})
    return {
        "graphs": len(specs),
        "passed": passed,
        "failed": len(specs) - passed,
        "entries": entries,
        "failures": failures,
        "tiers": {t.name: count_shapes(t) for t in OPAQUE_TIERS[mode]},
    }
