"""Laws derived from the op table for composites and math primitives without a written law.

A primitive that is one math function (`OpDef.math`, a `spec.mathfns.MathFn` record) gets
its law from the record (`math_law`): over the record's open domain, the definition is the
record's sympy spelling, so the derivative obligation compares the spec's JVP and VJP with
sympy's derivative of it.

A composite's semantics is its body graph (`spec.ops.builders.composite`), so the law it
needs follows from its table entry alone: on each sample point of its `samples=` record
(the samples whose values are all exact), its forward, JVP and VJP equal those of its
*inlined* body (`spec.inline.inline`: primitives only, each of which has its own law).

Invariants:
- `derived_law(op)` reads nothing but the op's table entry; it returns None for a
  primitive, or for a composite none of whose samples is exact (the completeness check then
  names the missing law).
- Each case sits at one sample's exact values (a `fixed` region: no ψ, so a convention
  case) with the sample's attributes; the stated convention is the inlined body's JVP and
  VJP (jvp_ctx / backprop_ctx over `SYMBOLIC` with symbolic tangents and cotangent) and the
  definition its forward (eval_graph). The adjoint obligation is checked there as for every
  op.
- `write_derived_laws()` writes the derived law of every composite that has no law in
  `LAWS` yet; a hand-written law always wins (it adds regions and hard cases). It is run
  once, by `proofs.laws`, after every family module has written its laws.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import sympy

from spec.domains import SYMBOLIC
from spec.graph import Graph, GraphBuilder, backprop_ctx, eval_graph, jvp_ctx
from spec.inline import inline
from spec.mathfns import MathFn
from spec.ops import OPS, OpDef
from spec.shape import Shape
from spec.tensor import Tensor, TensorPack

from ..decide import as_array
from .core import LAWS, UNARY_SHAPES, Arr, Case, OpLaw, arr, fixed, free, pattern, ufunc

__all__ = ["derived_law", "math_law", "write_derived_laws"]

S = SYMBOLIC


def _inlined(name: str, shapes: tuple[Shape, ...], attrs: Mapping[str, Any]) -> Graph:
    """One node of `name` on inputs of `shapes`, inlined to primitives (output last)."""
    b = GraphBuilder()
    ids = [b.input(s) for s in shapes]
    out = b.node(name, *ids, **dict(attrs))
    g, value_map = inline(b.build(output=out))
    assert value_map[-1] == len(g.shapes) - 1
    return g


def _tensors(values: list[Arr]) -> list[Tensor]:
    return [Tensor(tuple(v.shape), tuple(arr(v).reshape(-1))) for v in values]


class _Body:
    """The inlined body's forward, JVP and VJP for one composite, as `OpLaw` callables."""

    def __init__(self, name: str) -> None:
        self.name = name

    def graph(self, xs: list[Tensor], attrs: Mapping[str, Any]) -> Graph:
        return _inlined(self.name, tuple(x.shape for x in xs), attrs)

    def forward(self, values: list[Arr], attrs: Mapping[str, Any], env: tuple[int, ...]) -> Arr:
        xs = _tensors(values)
        out = eval_graph(S, self.graph(xs, attrs), xs, env, check=False).tensors[-1]
        return as_array(out)

    def jvp(
        self, values: list[Arr], tangents: list[Arr], attrs: Mapping[str, Any], env: Any
    ) -> Arr:
        xs, dxs = _tensors(values), _tensors(tangents)
        out = jvp_ctx(S, self.graph(xs, attrs), xs, dxs, env, check=False).tensors[-1]
        return as_array(out)

    def vjp(self, values: list[Arr], g: Arr, attrs: Mapping[str, Any], env: Any) -> list[Arr]:
        xs = _tensors(values)
        body = self.graph(xs, attrs)
        seed = TensorPack.zeros(S, body.shapes[:-1]).snoc(_tensors([g])[0])
        cots = backprop_ctx(S, body, xs, seed, env, check=False).tensors[: len(xs)]
        return [as_array(c) for c in cots]


def derived_law(op: OpDef) -> OpLaw | None:
    """The law of composite `op` derived from its exact samples (see the module docstring)."""
    if op.kind != "composite":
        return None
    cases = [
        Case(
            tuple(tuple(shape) for shape, _ in smp.args),
            fixed({i: values for i, (_, values) in enumerate(smp.args)}),
            dict(smp.attrs),
        )
        for smp in op.samples
        if all(not isinstance(v, float) for _, values in smp.args for v in values)
    ]
    if not cases:
        return None
    body = _Body(op.name)
    return OpLaw(
        op=op.name,
        cases=tuple(cases),
        definition_text=f"the forward of {op.name}'s body inlined to primitives",
        derivative_text=(
            f"the JVP and VJP of {op.name}'s inlined body (each primitive's own law states "
            "its derivative)"
        ),
        definition=body.forward,
        conv_jvp=body.jvp,
        conv_vjp=body.vjp,
    )


def _domain_region(lo: Fraction | None, hi: Fraction | None) -> Any:
    """The law's region over a math function's open domain (lo, hi)."""
    if lo is None and hi is None:
        return free()
    if hi is None:
        return pattern(("above", lo))
    if lo is None:
        return pattern(("below", hi))
    return pattern(("between", lo, hi))


def math_law(op: OpDef) -> OpLaw | None:
    """The law of a primitive that is one math function (`OpDef.math`), derived from its
    record: over its open domain, the forward is the record's sympy spelling and the
    derivative that of the definition (the record's `derivative`, stated in the text)."""
    fn = op.math
    if fn is None or op.kind != "primitive":
        return None
    region = _domain_region(*fn.domain)
    x = sympy.Symbol("x", real=True)
    spelled = fn.sympy
    return OpLaw(
        op=op.name,
        cases=tuple(Case((s,), region) for s in UNARY_SHAPES),
        definition_text=f"{fn.sympy(x)} elementwise (sympy), on its domain {_interval(fn)}",
        derivative_text=f"jvp = ({fn.derivative(x)})·dx",
        definition=lambda v, a, e: ufunc(spelled, 1)(v[0]),
    )


def _interval(fn: MathFn) -> str:
    lo, hi = fn.domain
    return f"({'-oo' if lo is None else lo}, {'oo' if hi is None else hi})"


def write_derived_laws() -> tuple[str, ...]:
    """Write the derived law of every composite and math primitive without a law; return
    their names."""
    written = []
    for name, op in OPS.items():
        if name in LAWS:
            continue
        derived = derived_law(op) or math_law(op)
        if derived is not None:
            LAWS[name] = derived
            written.append(name)
    return tuple(written)
