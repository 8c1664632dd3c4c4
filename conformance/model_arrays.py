"""The model mode's link property on arrays: cases drawn as NumPy arrays from one
Hypothesis-drawn integer, the spec side by the array evaluator `spec.vector`.

Invariants:
- A case is the model's own values (pack seed 0) or, for a drawn integer k, every graph
  input drawn by `draw_inputs(k)` with the pack `spec.vector.seed_arrays(g, k)`; nothing
  is drawn element by element and no spec tensor is built on graphs above
  `MODEL_SCALE` elements.
- Drawn input elements follow the suite's IEEE distribution (finite floats in [-8, 8] or
  small rationals n/d, -8 <= n <= 8, 1 <= d <= 4, rounded once into the dtype), divided by 8
  and scaled by the largest magnitude of the model's own value of that input (1 where it
  is 0), so that drawn parameters have the model's magnitudes.
- The check is bit equality (NaN matches NaN) of every value, cotangent and tangent of the
  runtime's `ordered` kernels against `spec.vector`; on graphs of at most `MODEL_SCALE`
  elements (`BOTH_MAX_ELEMENTS`) `conformance.link_property.check_link(spec="both")` also
  requires the pure-Python reference to agree. `evaluator` names which was used.
- Above `MODEL_SCALE` elements the drawn count is capped by `ELEMENT_BUDGET` (at least 1)
  unless the caller asks for an explicit count (`drawn_count`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import seed as hyp_seed
from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, round_f64
from runtime.session.link import array_link_check
from spec import vector
from spec.errors import TorchLeanError
from spec.graph import Graph, format_graph
from spec.serialize import graph_to_dict, tensor_to_dict
from spec.tensor import TensorPack

from .link_property import BOTH_MAX_ELEMENTS, check_link, elements
from .profiles import run_settings
from .reports import Row
from .runner import Outcome

__all__ = [
    "ELEMENT_BUDGET",
    "MODEL_SCALE",
    "check_array_case",
    "draw_inputs",
    "drawn_count",
    "elements",
    "evaluator",
    "input_scales",
    "is_model_scale",
    "run_array_link",
]

MODEL_SCALE = BOTH_MAX_ELEMENTS
"""Graphs above this many elements (all values together) are model-scale."""

ELEMENT_BUDGET = 100_000_000
"""Model-scale graphs get about this many elements of drawn cases per property."""

_SALT = 0x6D6F64656C  # the drawn integers' Hypothesis seed salt


def is_model_scale(g: Graph) -> bool:
    """Whether g has more than `MODEL_SCALE` elements."""
    return elements(g) > MODEL_SCALE


def evaluator(g: Graph) -> str:
    """The spec evaluator(s) the check of a case of g uses."""
    if not is_model_scale(g):
        return "spec.vector and the pure-Python reference"
    return "spec.vector"


def drawn_count(g: Graph, max_examples: int, explicit: bool) -> int:
    """Drawn cases per property: `max_examples`, capped on model-scale graphs unless
    `explicit`."""
    if explicit or not is_model_scale(g):
        return max_examples
    return max(1, min(max_examples, ELEMENT_BUDGET // elements(g)))


def input_scales(values: Sequence[np.ndarray]) -> list[float]:
    """Per input: the largest finite magnitude of the model's own value (1 where 0)."""
    out = []
    for v in values:
        a = np.abs(np.asarray(v, dtype=np.float64))
        a = a[np.isfinite(a)]
        m = float(a.max()) if a.size else 0.0
        out.append(m if m > 0 else 1.0)
    return out


def draw_inputs(g: Graph, scales: Sequence[float], dtype: str, k: int) -> list[np.ndarray]:
    """The graph inputs of drawn case k (see the module docstring), float64 arrays holding
    values of `dtype`."""
    rng = np.random.default_rng(k)
    out = []
    for shape, c in zip(g.inputs, scales, strict=True):
        n = math.prod(shape)
        floats = rng.uniform(-8.0, 8.0, n)
        rats = rng.integers(-8, 9, n) / rng.integers(1, 5, n)
        v = np.where(rng.random(n) < 0.5, floats, rats) * (c / 8.0)
        out.append(round_f64(v.reshape(shape), dtype).astype(np.float64))
    return out


def check_array_case(g: Graph, xs: Sequence[np.ndarray], dtype: str, seed: int) -> Outcome:
    """The link check of one array case (inputs `xs`, pack `seed_arrays(g, seed)`); a crash
    is a failing outcome."""
    try:
        return _check(g, xs, dtype, seed)
    except Exception as e:  # a crash is a failure of the property, reported with its case
        return Outcome(False, f"crashed: {type(e).__name__}: {e}")


def _check(g: Graph, xs: Sequence[np.ndarray], dtype: str, seed: int) -> Outcome:
    if not is_model_scale(g):
        F = vector.format_of(DTYPE_DOMAIN[dtype])
        pack = TensorPack.of([F.tensor(s) for s in vector.seed_arrays(g, F, seed)])
        r = check_link(g, [F.tensor(x) for x in xs], pack, dtype=dtype, spec="both")
        return Outcome(r.ok, r.first_mismatch)
    try:
        ok, text = array_link_check(g, xs, (), dtype, seed)
    except TorchLeanError as e:  # both sides raise alike on small graphs; here: report it
        return Outcome(False, f"{type(e).__name__}: {e}")
    return Outcome(ok, None if ok else text)


def _failure(
    g: Graph, dtype: str, k: int | None, xs: Sequence[np.ndarray], message: str | None
) -> dict[str, Any]:
    """The row's failure. Below `MODEL_SCALE` the repro is the suite's replayable one
    (graph, inputs, seed); above, it names the case (the model's own values with pack seed
    0, or drawn case k) instead of holding model-size tensors."""
    case = "the model's own values" if k is None else f"drawn case {k}"
    repro: dict[str, Any] = {
        "property": "link",
        "dtype": dtype,
        "kernels": "ordered",
        "backend": "numpy",
    }
    if is_model_scale(g):
        repro["array_case"] = {"inputs": "own" if k is None else k, "seed": k or 0}
        repro["evaluator"] = evaluator(g)
    else:
        D = DTYPE_DOMAIN[dtype]
        F = vector.format_of(D)
        seeds = vector.seed_arrays(g, F, k or 0)
        repro["graph"] = graph_to_dict(g)
        repro["inputs"] = [tensor_to_dict(D, F.tensor(x)) for x in xs]
        repro["seed"] = [tensor_to_dict(D, F.tensor(s)) for s in seeds]
        repro["env"] = []
    return {"message": f"at {case}: {message}", "graph_text": format_graph(g), "repro": repro}


def run_array_link(
    g: Graph,
    own: Sequence[np.ndarray],
    dtype: str,
    drawn: int,
    seed: int | None,
) -> Row:
    """The link row: the model's own values `own`, then `drawn` Hypothesis-drawn cases;
    stops at the first failing case (no shrinking: a case costs a full model run)."""
    row = Row("link", dtype, "ordered")
    t0 = time.perf_counter()
    xs = [round_f64(np.asarray(x, dtype=np.float64), dtype).astype(np.float64) for x in own]
    out = check_array_case(g, xs, dtype, 0)
    if not out.ok:
        row.failure = _failure(g, dtype, None, xs, out.message)
    else:
        row.passed = 1
        _drawn(g, input_scales(own), dtype, drawn, seed, row)
    row.failed = int(row.failure is not None)
    row.cases = row.passed + row.failed
    row.seconds = time.perf_counter() - t0
    return row


def _drawn(g: Graph, scales: list[float], dtype: str, n: int, seed: int | None, row: Row) -> None:
    @run_settings(n, seed, shrink=False)
    @given(st.integers(0, 2**32 - 1))
    def test(k: int) -> None:
        xs = draw_inputs(g, scales, dtype, k)
        out = check_array_case(g, xs, dtype, k)
        if not out.ok:
            row.failure = _failure(g, dtype, k, xs, out.message)
            raise AssertionError(out.message)
        row.passed += 1

    test = hyp_seed((0 if seed is None else seed) ^ _SALT)(test)
    test._hypothesis_internal_database_key = None  # type: ignore[attr-defined]
    try:
        test()
    except (AssertionError, BaseExceptionGroup):
        if row.failure is None:
            raise
