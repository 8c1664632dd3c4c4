"""`python -m conformance MODEL`: the suite's properties on an imported model's graph.

Invariants:
- The model (`.onnx`, or a `.pt2` exported program) is imported with
  `runtime.interop.load_model`; `--inputs FILE.npz` replaces values by name (runtime
  inputs, integer ids, parameters).
- Each property runs first on the model's own values (its parameters and the given or
  default inputs) and then on `--max-examples` Hypothesis-drawn inputs and seeds for the
  same graph; both count in the property's row. The properties are the suite's: `link`
  (ordered kernels, bit equality with the spec; exact equality for "exact"),
  `node_bounds` and `derivative_bounds` (fast kernels: per-node error bounds of values, and
  of VJPs, JVPs and accumulated cotangents) and `dense_all_vs_from` (exact).
- For the IEEE dtypes the `link` property runs on arrays (`conformance.model_arrays`):
  cases are NumPy arrays drawn from one Hypothesis integer each, the spec side is
  `spec.vector` (with the pure-Python reference as well on graphs of at most
  `model_arrays.MODEL_SCALE` elements); the evaluator used is printed on stderr. On model-scale
  graphs (above `model_arrays.MODEL_SCALE` elements) the drawn count is capped by
  `model_arrays.ELEMENT_BUDGET` unless `--max-examples` is given, and the default
  `--dtype all` / `--kernels all` leave out the properties that evaluate element by element
  in pure Python (exact link and dense_all_vs_from, node_bounds, derivative_bounds), with a
  stderr line naming them; asking for them by `--dtype` / `--kernels` runs them.
- The report is the suite's (`cli.report`): the same table, files and exit codes. Every
  failure of the given file or flags (an unwritable `--report`, a file that cannot be
  imported, a `.pt2` needing full pickle without `--trust-pickle`, a graph with no outputs
  or no nodes) is one `python -m conformance: <message>` line on stderr and exit 2,
  checked before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from hypothesis import strategies as st

from runtime.backends import DTYPE_DOMAIN, NUMPY
from runtime.interop import Imported, load_model
from spec.errors import TorchLeanError
from spec.graph import format_graph
from spec.serialize import graph_to_dict, tensor_to_dict

from . import model_arrays
from .bounds import check_bounds, check_derivative_bounds
from .graphs import inputs_for, seeds_for
from .link_property import check_dense_all_vs_from, check_link
from .model_arrays import drawn_count, elements, evaluator, is_model_scale, run_array_link
from .suite import IEEE_DTYPES, Case, Outcome, Property, Row, run_property

__all__ = ["model_properties", "run_model", "run_model_file"]


def _cases(imp: Imported, dtype: str) -> Callable[[Sequence[str] | None], st.SearchStrategy[Case]]:
    D = DTYPE_DOMAIN[dtype]
    g = imp.graph

    def strategy(focus: Sequence[str] | None) -> st.SearchStrategy[Case]:
        return st.tuples(inputs_for(g, D), seeds_for(g, D)).map(
            lambda xs_seed: Case(g, tuple(xs_seed[0]), xs_seed[1])
        )

    return strategy


def _link(dtype: str) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_link(c.graph, c.inputs, c.seed, c.env, dtype=dtype, kernels="ordered")
        return Outcome(r.ok, r.first_mismatch)

    return check


def _bounds(dtype: str) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_bounds(c.graph, c.inputs, c.env, dtype=dtype, kernels="fast")
        return Outcome(r.ok, r.first_violation, r.max_ulp, r.worst_ratio)

    return check


def _derivatives(dtype: str) -> Callable[[Case], Outcome]:
    def check(c: Case) -> Outcome:
        r = check_derivative_bounds(c.graph, c.inputs, c.seed, c.env, dtype=dtype)
        return Outcome(r.ok, r.first_violation, r.max_ulp, r.worst_ratio)

    return check


def _dense_all(c: Case) -> Outcome:
    r = check_dense_all_vs_from(c.graph, c.inputs, c.seed.tensors[-1], c.env, dtype="exact")
    return Outcome(r.ok, r.first_mismatch)


def model_properties(
    imp: Imported, dtypes: Sequence[str], kernels: Sequence[str]
) -> list[Property]:
    """The suite's properties over this model's graph, with cases drawn for its shapes."""
    ops = tuple(sorted({n.op for n in imp.graph.nodes}))
    props = []
    for dt in dtypes:
        if dt == "exact":
            props.append(Property("link", dt, "exact", _cases(imp, dt), _link(dt), "exact", ops))
            props.append(
                Property("dense_all_vs_from", dt, "exact", _cases(imp, dt), _dense_all, "", ops)
            )
            continue
        if "ordered" in kernels:
            props.append(Property("link", dt, "ordered", _cases(imp, dt), _link(dt), "bits", ops))
        if "fast" in kernels:
            props.append(
                Property("node_bounds", dt, "fast", _cases(imp, dt), _bounds(dt), "bounds", ops)
            )
            props.append(
                Property(
                    "derivative_bounds", dt, "fast", _cases(imp, dt), _derivatives(dt), "", ops
                )
            )
    return props


def _own_case(imp: Imported, dtype: str) -> Case:
    return Case(imp.graph, tuple(imp.spec_inputs(dtype)), imp.seed_pack(dtype, 0))


def _failure(case: Case, prop: Property, out: Outcome) -> dict[str, Any]:
    D = DTYPE_DOMAIN[prop.dtype]
    return {
        "message": f"at the model's own values: {out.message}",
        "graph_text": format_graph(case.graph),
        "repro": {
            "property": prop.name,
            "dtype": prop.dtype,
            "kernels": prop.kernels,
            "backend": "numpy",
            "graph": graph_to_dict(case.graph),
            "inputs": [tensor_to_dict(D, x) for x in case.inputs],
            "seed": [tensor_to_dict(D, t) for t in case.seed.tensors],
            "env": [],
        },
    }


def run_model(
    imp: Imported,
    props: Sequence[Property],
    max_examples: int,
    seed: int | None,
    explicit_examples: bool = True,
) -> list[Row]:
    """One row per property: the model's own values first, then the drawn cases (the IEEE
    link on arrays; `explicit_examples` False lets `drawn_count` cap them)."""
    rows = []
    for prop in props:
        if prop.name == "link" and prop.dtype in IEEE_DTYPES:
            rows.append(_array_link(imp, prop.dtype, max_examples, seed, explicit_examples))
            continue
        try:
            own = _own_case(imp, prop.dtype)
            out = prop.check(own)
        except TorchLeanError as e:  # e.g. the exact dtype and an op without exact results
            out, own = Outcome(False, f"{type(e).__name__}: {e}"), None
        if not out.ok:
            row = Row(prop.name, prop.dtype, prop.kernels, cases=1, failed=1)
            row.failure = (
                _failure(own, prop, out)
                if own is not None
                else {"message": out.message, "graph_text": format_graph(imp.graph), "repro": {}}
            )
            rows.append(row)
            continue
        row = run_property(prop, max_examples, seed)
        row.passed, row.cases = row.passed + 1, row.cases + 1
        row.max_ulp = max(row.max_ulp, out.max_ulp)
        row.worst_bound_ratio = max(row.worst_bound_ratio, out.worst_ratio)
        rows.append(row)
    return rows


def _array_link(
    imp: Imported, dtype: str, max_examples: int, seed: int | None, explicit: bool
) -> Row:
    """The IEEE link row on array cases; its evaluator and case count on stderr."""
    n = drawn_count(imp.graph, max_examples, explicit)
    values = [imp.values[imp.names[i]] for i in range(imp.graph.num_inputs)]
    print(f"link/{dtype}: {n} drawn case(s), {evaluator(imp.graph)}", file=sys.stderr)
    return run_array_link(imp.graph, values, dtype, n, seed)


def _dtypes(a: argparse.Namespace, imp: Imported) -> list[str]:
    if a.dtype != "all":
        return a.dtype.split(",")
    exact_ok = _all_algebraic(imp) and not is_model_scale(imp.graph)
    return (["exact"] if exact_ok else []) + list(IEEE_DTYPES[:2])


def _all_algebraic(imp: Imported) -> bool:
    """Whether every op of the graph is algebraic (the exact dtype can check it)."""
    return all(n.op in _ALGEBRAIC for n in imp.graph.nodes)


def _kernels(a: argparse.Namespace, imp: Imported) -> list[str]:
    if a.kernels != "all":
        return [a.kernels]
    return ["ordered"] if is_model_scale(imp.graph) else ["fast", "ordered"]


def _left_out(a: argparse.Namespace, imp: Imported) -> str | None:
    """The stderr line naming what the defaults leave out on a model-scale graph."""
    if not is_model_scale(imp.graph):
        return None
    gone = []
    if a.dtype == "all" and _all_algebraic(imp):
        gone.append("exact link and dense_all_vs_from (--dtype exact)")
    if a.kernels == "all":
        gone.append("node_bounds and derivative_bounds (--kernels fast)")
    if not gone:
        return None
    return (
        f"model-scale graph ({elements(imp.graph)} elements > {model_arrays.MODEL_SCALE}): "
        f"the defaults leave out the element-by-element pure-Python properties {'; '.join(gone)}"
    )


def _algebraic() -> frozenset[str]:
    from spec.ops import OPS

    return frozenset(name for name, op in OPS.items() if op.algebraic)


_ALGEBRAIC = _algebraic()


def run_model_file(a: argparse.Namespace) -> int:
    """Import `a.model` (with `a.inputs`; `a.trust_pickle` for a `.pt2` needing full
    pickle), run the properties, report; 2 with one stderr line if `--scheduler` is given
    (this mode uses no cluster), the report cannot be written, the model cannot be
    imported, or its graph has nothing to check."""
    from .cli import check_report_path, report

    try:
        if getattr(a, "scheduler", None) is not None:
            raise TorchLeanError(
                f"--scheduler {a.scheduler!r}: the model mode runs in this process and uses "
                "no cluster; drop --scheduler"
            )
        check_report_path(a.report)
        imp = _load(a)
    except TorchLeanError as e:
        print(f"python -m conformance: {_one_line(str(e))}", file=sys.stderr)
        return 2
    print(imp.summary(), file=sys.stderr)
    note = _left_out(a, imp)
    if note:
        print(note, file=sys.stderr)
    props = model_properties(imp, _dtypes(a, imp), _kernels(a, imp))
    rows = run_model(imp, props, a.max_examples, a.seed, a.explicit_examples)
    a.per_op = 0
    return report(a, NUMPY, rows)


def _load(a: argparse.Namespace) -> Imported:
    """The imported model; `TorchLeanError` for any failure of the file (a reader's own
    exception included: the file is what is wrong) or a graph with nothing to check."""
    try:
        imp = load_model(a.model, inputs=a.inputs, trust_pickle=getattr(a, "trust_pickle", False))
    except TorchLeanError:
        raise
    except Exception as e:  # OSError, a reader's DecodeError, ...: one line, never a traceback
        raise TorchLeanError(f"{a.model}: cannot import ({type(e).__name__}: {e})") from None
    if not imp.outputs or not imp.graph.nodes:
        raise TorchLeanError(
            f"{a.model}: the model has {len(imp.outputs)} output(s) and "
            f"{len(imp.graph.nodes)} node(s): nothing to check"
        )
    return imp


def _one_line(text: str) -> str:
    """A multi-line message (UnsupportedOpsError's list) joined on one line."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())
