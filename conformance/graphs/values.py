"""Strategies for the values fed to drawn graphs: elements, tensors, inputs, seeds, and
`graph_cases` (graph, inputs, seed).

Invariants: over `RATIONAL` elements are n/d with -8 <= n <= 8 and 1 <= d <= 4; over an IEEE
domain they are finite binary64 numbers in [-8, 8] (or such small rationals), rounded once
with `from_float`/`from_rational`. With `specials=True` IEEE elements also include NaN,
+-inf, +-0, the smallest and largest subnormals and the largest finite value (`specials` has
no effect over `RATIONAL`). Draw order (graph, then inputs, then seed) is normative.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import strategies as st

from spec.domains import Domain, IEEEDomain
from spec.graph import Graph
from spec.shape import Shape, size
from spec.tensor import Tensor, TensorPack

from .core import RAT, domain_kind_of, graphs

__all__ = [
    "graph_cases",
    "inputs_for",
    "scalars",
    "seeds_for",
    "special_values",
    "tensors_for",
]


def special_values(domain: IEEEDomain) -> list[Any]:
    """NaN, +-inf, +-0, the smallest and largest subnormals (both signs) and the largest
    finite value (both signs) of an IEEE domain."""
    sign = 1 << (domain.width - 1)
    mant = (1 << domain.mbits) - 1
    max_finite = ((2**domain.ebits - 2) << domain.mbits) | mant
    bits = [1, mant, max_finite, sign | 1, sign | mant, sign | max_finite]
    return [
        domain.from_float(float("nan")),
        domain.from_float(float("inf")),
        domain.from_float(float("-inf")),
        domain.from_float(0.0),
        domain.from_float(-0.0),
        *(domain.from_bits(b) for b in bits),
    ]


_SCALARS: dict[Any, st.SearchStrategy[Any]] = {}


def scalars(domain: Domain, *, specials: bool = False) -> st.SearchStrategy[Any]:
    """Elements of a domain (see the module docstring). Memoised per (domain, specials):
    the same strategy object each time, so Hypothesis validates its tree once instead of
    once per drawn case (performance only: a strategy's draws do not depend on which
    equal object is drawn from)."""
    try:
        hit = _SCALARS.get((domain, specials))
    except TypeError:  # an unhashable domain: build it every time
        return _scalars(domain, specials)
    if hit is None:
        hit = _SCALARS[(domain, specials)] = _scalars(domain, specials)
    return hit


def _scalars(domain: Domain, specials: bool) -> st.SearchStrategy[Any]:
    kind = domain_kind_of(domain)
    if kind == "rational":
        return RAT.map(domain.from_rational)
    assert isinstance(domain, IEEEDomain)
    finite = RAT.map(domain.from_rational) | st.floats(
        -8.0, 8.0, allow_nan=False, allow_infinity=False
    ).map(domain.from_float)
    if specials:
        return finite | st.sampled_from(special_values(domain))
    return finite


_TENSORS: dict[Any, tuple[st.SearchStrategy[Any], st.SearchStrategy[Tensor]]] = {}


def _tensor(shape: Shape, elems: st.SearchStrategy[Any]) -> st.SearchStrategy[Tensor]:
    # memoised per (shape, element strategy object), like `scalars`: performance only
    key = (type(shape), tuple(shape), id(elems))
    hit = _TENSORS.get(key)
    if hit is None or hit[0] is not elems:
        n = size(shape)
        strat = st.lists(elems, min_size=n, max_size=n).map(lambda v: Tensor(shape, tuple(v)))
        hit = _TENSORS[key] = (elems, strat)
    return hit[1]


def tensors_for(
    shapes: Sequence[Shape], domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    """One tensor per shape, elements drawn by `scalars`."""
    elems = scalars(domain, specials=specials)
    key = (tuple(map(tuple, shapes)), id(elems))
    hit = _TENSOR_LISTS.get(key)
    if hit is None or hit[0] is not elems:  # memoised like `_tensor`: performance only
        if len(_TENSOR_LISTS) > 20_000:
            _TENSOR_LISTS.clear()
        strat = st.tuples(*(_tensor(tuple(s), elems) for s in shapes)).map(list)
        hit = _TENSOR_LISTS[key] = (elems, strat)
    return hit[1]


_TENSOR_LISTS: dict[Any, tuple[st.SearchStrategy[Any], st.SearchStrategy[list[Tensor]]]] = {}
_SEEDS: dict[Any, st.SearchStrategy[TensorPack]] = {}


def inputs_for(
    graph: Graph, domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[list[Tensor]]:
    """Input tensors for the graph's Γ (equally usable as input tangents)."""
    return tensors_for(graph.inputs, domain, specials=specials)


def seeds_for(
    graph: Graph, domain: Domain, *, specials: bool = False
) -> st.SearchStrategy[TensorPack]:
    """A full seed over every value of the graph (shapes = graph.shapes)."""
    shapes = graph.shapes
    tensors = tensors_for(shapes, domain, specials=specials)
    key = (shapes, id(tensors))
    hit = _SEEDS.get(key)
    if hit is None:  # memoised per tensor strategy object (kept alive by _TENSOR_LISTS)
        if len(_SEEDS) > 20_000:
            _SEEDS.clear()
        hit = _SEEDS[key] = tensors.map(lambda ts: TensorPack(shapes, tuple(ts)))
    return hit


@st.composite
def graph_cases(
    draw: st.DrawFn, domain: Domain, /, *, specials: bool = False, **graph_kwargs: Any
) -> tuple[Graph, list[Tensor], TensorPack]:
    """(graph, inputs, seed) with the graph drawn for the domain's kind."""
    graph_kwargs.setdefault("domain_kind", domain_kind_of(domain))
    g = draw(graphs(**graph_kwargs))
    xs = draw(inputs_for(g, domain, specials=specials))
    seed = draw(seeds_for(g, domain, specials=specials))
    return g, xs, seed
