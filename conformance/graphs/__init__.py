"""Hypothesis strategies for random valid typed graphs, their inputs, tangents and seeds.

Public API (reused by the conformance suite and the unit tests):

- `graphs(ops=None, *, min_inputs=1, max_inputs=3, min_nodes=1, max_nodes=6,
  domain_kind="rational")`: random valid `spec.graph.Graph`s.
- `inputs_for(graph, domain, *, specials=False)`: one tensor per input of Γ (also usable as
  input tangents).
- `seeds_for(graph, domain, *, specials=False)`: a full seed `TensorPack` over every value
  (shapes = `graph.shapes`).
- `tensors_for(shapes, domain, *, specials=False)`, `scalars(domain, *, specials=False)`:
  the element and tensor strategies behind the two above.
- `graph_cases(domain, **graph_kwargs)`: `(graph, inputs, seed)` triples.
- `ALGEBRAIC_OPS` / `is_algebraic(op)`: ops usable over exact rationals (the `algebraic`
  flag of the op table); `GRAPH_OPS`: every op the generator can build, simplest first;
  `DEFAULT_FLOAT_OPS`: `GRAPH_OPS` without `log`; `domain_kind_of(domain)`.

Invariants of `graphs`:

1. Every drawn graph is valid: it is built with `spec.graph.GraphBuilder`, which validates
   each node against the op table. Arguments are *constructed* to satisfy each op's shape
   rule (no filtering); an op that cannot be satisfied from the current values within the
   node budget is skipped and another op is drawn.
2. Nodes are appended in topological order. Shrinking goes towards fewer nodes, earlier
   operand ids, ops earlier in `GRAPH_OPS` (simple elementwise ops first), input shapes
   earlier in `INPUT_SHAPES` (scalars first) and small attribute values.
3. At most `max_nodes` nodes, helper nodes included (`const`, `reshape`, `clamp` guards);
   every value has at most `MAX_ELEMENTS` elements. Input shapes come from `INPUT_SHAPES`,
   which covers scalars, size-1 dims, broadcastable pairs, rank 3 and zero-size shapes.
4. Fan-out and fan-in occur: operands are drawn from all earlier values (the first
   candidate of a binary op's second operand is the first operand itself, e.g. mul(x, x));
   concat and mse_loss may repeat an argument too.
5. `domain_kind="rational"` only admits ops with `algebraic=True`, and every division has a
   strictly positive denominator by construction: `div`'s right operand and `inv`'s
   argument are either `clamp(v, lo, hi)` with 0 < lo <= hi or a `const` with positive
   entries; `mean`/`reduce_mean` divide by a size >= 1. Evaluating, differentiating and
   transposing such a graph over `RATIONAL` never raises `DomainError`, for any inputs.
6. `domain_kind="float"` admits every op; denominators are unrestricted (IEEE division by
   zero is defined). `log` has a value precondition (x > 0, checked when the graph is
   evaluated), so it is excluded from the default op list (`DEFAULT_FLOAT_OPS`); when it is
   requested explicitly, its argument is always guarded as `clamp(v, lo, hi)` with lo > 0,
   which satisfies the precondition for every non-NaN value. A NaN can still reach it (from
   special input values, or from overflow such as inf - inf), so callers that request `log`
   must treat a `DomainError` from evaluation as a rejected example. `safe_log` is total and
   needs no guard.
7. `select` always uses a literal `index` (never `env_slot`), so every drawn graph
   evaluates with the empty environment `env=()`.

Inputs: over `RATIONAL` elements are n/d with -8 <= n <= 8 and 1 <= d <= 4; over an IEEE
domain they are finite binary64 numbers in [-8, 8] (or such small rationals), rounded once
with `from_float`/`from_rational`. With `specials=True` IEEE elements also include NaN,
+-inf, +-0, the smallest and largest subnormals and the largest finite value (`specials` has
no effect over `RATIONAL`, which has no special values).

Hard cases (`conformance.graphs.hard`, imported by the suite, not re-exported here): pooled
values for ties and ±0, kink/boundary/transcendental-hard values, full-width rounding
values, multi-axis broadcast graphs and long reductions; separate strategies, so the ones
above keep their draws (Hypothesis itself also mixes literal constants of every loaded
local module into its draws, so adding any module can change generated cases).

Layout (one module per op family, the same names as `spec/ops/`): `core` holds the builder
context (`Ctx`), the shape helpers, the normative `SAMPLING_ORDER`, the builder table
(`BUILDERS`, filled by keyword `register(name=..., build=...)`, plus the builders derived
for composites and math primitives without one, `DERIVED_ORDER`) and `graphs()`; `values`
holds the element, tensor and case strategies; each family module registers the graph
builders of its ops. Importing this package imports the module of every family of the op
table (`spec.ops.families_holding`) and checks that exactly the ops of `SAMPLING_ORDER`
(and of `DERIVED_ORDER`) have a builder.
"""

from __future__ import annotations

from spec.ops import families_holding, load_families

from .core import (
    ALGEBRAIC_OPS,
    BUILDERS,
    DEFAULT_FLOAT_OPS,
    DERIVED_ORDER,
    GRAPH_OPS,
    INPUT_SHAPES,
    MAX_ELEMENTS,
    SAMPLING_ORDER,
    domain_kind_of,
    graphs,
    is_algebraic,
)
from .values import graph_cases, inputs_for, scalars, seeds_for, special_values, tensors_for

# Each family module registers the builders of its ops on import (every family of the table).
load_families(__name__, families_holding())

__all__ = [
    "ALGEBRAIC_OPS",
    "DEFAULT_FLOAT_OPS",
    "DERIVED_ORDER",
    "GRAPH_OPS",
    "INPUT_SHAPES",
    "MAX_ELEMENTS",
    "SAMPLING_ORDER",
    "domain_kind_of",
    "graph_cases",
    "graphs",
    "inputs_for",
    "is_algebraic",
    "scalars",
    "seeds_for",
    "special_values",
    "tensors_for",
]

# a family module forgot an op, or the order did (derived builders are DERIVED_ORDER's)
if set(BUILDERS) != set(SAMPLING_ORDER) | set(DERIVED_ORDER):
    raise ImportError(
        "conformance.graphs: builders registered for "
        f"{sorted(set(BUILDERS) ^ (set(SAMPLING_ORDER) | set(DERIVED_ORDER)))} do not match "
        "SAMPLING_ORDER"
    )
