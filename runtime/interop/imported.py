"""`Imported`: an imported model as a spec graph with its values, and how to run and check it.

Invariants:
- `graph` is a validated `spec.graph.Graph`; input id i is named `names[i]` (the torch
  parameter / buffer / input name, or the ONNX input / initializer name) and has the array
  `values[names[i]]` (stored in the model's own float dtype).
- Integer inputs (token ids, class ids) are not graph inputs: the op table takes indices
  as attributes, so they are baked into the graph. `int_inputs` holds their values;
  `with_inputs` (and `run(inputs=...)` with an integer name) rebuilds the graph from the
  same program with new ids, never mutating this object.
- Tied (shared) tensors are one graph input: `names` holds one name per input (the
  first of its names in the model's order) and `aliases` maps every other name of the
  same tensor to it. Gradients are reported under every name (the same array), `ids`
  answers to every name (`values` to graph input names only: `canonical(name)`), and an
  input may be replaced by any of its names
  (two names of one tensor given different values are refused).
- `run` lowers the graph with the runtime (`runtime.engine.lower`) and returns the
  outputs and, per name, the gradient of the sum of all outputs (seed 1 at every output
  value, 0 elsewhere, `backward_dense_from`). Nothing is cached between runs.
- An ONNX `Gradient` output is not a graph value: `gradients` holds (position among the
  model's outputs, id of y, id of x), and `run` / `spec_run` compute it by a reverse sweep
  of the same graph seeded with 1 at y (the cotangent of x). `outputs` are the ids of
  the other outputs; the gradients `run` returns are those of the sum of these only (a
  Gradient output's own derivative would be second order).
- `check_link` is `runtime.session.link.link_check` on this graph: runtime
  `backward_dense_from(lower(g))` with the `ordered` kernels against spec
  `backprop_all_ctx(g)`, bit for bit (exact equality for "exact"); IEEE dtypes go through
  `array_link_check` (the spec side by the array evaluator `spec.vector`, inputs as arrays).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spec.graph import Graph
from spec.tensor import Tensor, TensorPack

from ..backends.base import NUMPY, OBJECT_DTYPES, round_f64, to_spec
from ..engine.context import KernelContext
from ..engine.lower import lower
from ..session.link import LinkCheck, array_link_check, link_check, random_seed_pack
from .core import ModelImportError

__all__ = ["Imported", "as_dtype"]


def as_dtype(arr: Any, dtype: str) -> Any:
    """A float array as a runtime array of `dtype` (one rounding from its exact value;
    exact: object array of Fractions)."""
    a = np.asarray(arr)
    if dtype in OBJECT_DTYPES:
        return (
            NUMPY.asarray(a.astype(np.float64).tolist(), dtype)
            if a.ndim
            else NUMPY.asarray(float(a), dtype)
        )
    return round_f64(a.astype(np.float64), dtype)


Rebuild = Callable[[Mapping[str, np.ndarray]], "Imported"]


@dataclass
class Imported:
    """An imported model (see the module docstring). `outputs` are the graph ids of the
    model's outputs, in the model's order; `input_names` the model's runtime inputs (float
    and integer), in order; `source` "torch" or "onnx"."""

    graph: Graph
    names: dict[int, str]
    values: dict[str, np.ndarray]
    outputs: tuple[int, ...]
    input_names: tuple[str, ...]
    int_inputs: dict[str, np.ndarray] = field(default_factory=dict)
    source: str = ""
    rebuild: Rebuild | None = field(default=None, repr=False)
    gradients: tuple[tuple[int, int, int], ...] = ()
    aliases: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------ inputs
    @property
    def ids(self) -> dict[str, int]:
        """name -> graph input id (every alias of a tied tensor included)."""
        ids = {n: i for i, n in self.names.items()}
        return {**ids, **{a: ids[c] for a, c in self.aliases.items()}}

    def canonical(self, name: str) -> str:
        """The graph input name of `name` (itself unless it is an alias of a tied tensor)."""
        return self.aliases.get(name, name)

    def _named(self, per_input: Mapping[str, Any]) -> dict[str, Any]:
        """A per-graph-input mapping extended to every alias (the same object)."""
        return {**per_input, **{a: per_input[c] for a, c in self.aliases.items()}}

    @property
    def parameter_names(self) -> tuple[str, ...]:
        """The float graph inputs that are not runtime inputs (parameters, buffers,
        initializers), in graph order."""
        return tuple(n for _, n in sorted(self.names.items()) if n not in self.input_names)

    def with_inputs(self, inputs: Mapping[str, Any]) -> Imported:
        """A copy with some values replaced: float names replace graph input values (same
        shape), integer names rebuild the graph with the new ids."""
        inputs = self._resolve(inputs)
        ints = {k: np.asarray(v) for k, v in inputs.items() if k in self.int_inputs}
        unknown = [k for k in inputs if k not in self.values and k not in self.int_inputs]
        if unknown:
            raise ModelImportError(
                f"unknown input name(s) {unknown}; known: {sorted(self.values)} "
                f"and integer inputs {sorted(self.int_inputs)}"
            )
        out = self
        if ints:
            if self.rebuild is None:
                raise ModelImportError("this import cannot be rebuilt with new integer inputs")
            out = self.rebuild({**self.int_inputs, **ints})
        vals = dict(out.values)
        for k, v in inputs.items():
            if k in ints:
                continue
            a = np.asarray(v)
            if a.shape != vals[k].shape:
                raise ModelImportError(
                    f"input {k!r}: expected shape {vals[k].shape}, got {a.shape}"
                )
            if not np.issubdtype(a.dtype, np.floating):
                raise ModelImportError(f"input {k!r}: expected a float array, got {a.dtype}")
            vals[k] = a
        return Imported(
            out.graph,
            out.names,
            vals,
            out.outputs,
            out.input_names,
            out.int_inputs,
            out.source,
            out.rebuild,
            out.gradients,
            out.aliases,
        )

    def with_aliases(self, aliases: Mapping[str, str]) -> Imported:
        """A copy where each `alias` names the same graph input as its target (an ONNX
        file holds a tied tensor once: this gives it its other names in the source
        model). A target must be a graph input name or an alias; an alias must be new."""
        table = dict(self.aliases)
        for alias, target in aliases.items():
            c = table.get(target, target)
            if c not in self.values:
                raise ModelImportError(
                    f"with_aliases: {target!r} (for {alias!r}) is not a graph input name"
                )
            if alias in self.values or table.get(alias, c) != c:
                raise ModelImportError(f"with_aliases: {alias!r} already names another input")
            table[alias] = c
        return dataclasses.replace(self, aliases=table)

    def _resolve(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """`inputs` keyed by graph input names; two names of one tied tensor must agree."""
        out: dict[str, Any] = {}
        given: dict[str, str] = {}
        for k, v in inputs.items():
            c = self.canonical(k)
            if c in out and not np.array_equal(np.asarray(out[c]), np.asarray(v)):
                raise ModelImportError(
                    f"inputs {given[c]!r} and {k!r} name one tied tensor ({c!r}) "
                    "but were given different values"
                )
            out[c], given[c] = v, k
        return out

    def arrays(self, dtype: str) -> list[Any]:
        """The graph inputs in id order as runtime arrays of `dtype`."""
        return [as_dtype(self.values[self.names[i]], dtype) for i in range(self.graph.num_inputs)]

    def spec_inputs(self, dtype: str) -> list[Tensor]:
        """The graph inputs as spec tensors in the domain of `dtype` (for the spec side
        of a check, or an engine comparison)."""
        return [to_spec(a, dtype) for a in self.arrays(dtype)]

    def output_seed(self, dtype: str) -> list[Any]:
        """The full seed of `run`'s gradients: 1 at every output value, 0 elsewhere."""
        ctx = KernelContext(dtype, "ordered")
        seeds = [ctx.zeros(s) for s in self.graph.shapes]
        for o in self.outputs:
            seeds[o] = seeds[o] + as_dtype(np.ones(self.graph.shapes[o]), dtype)
        return seeds

    # ------------------------------------------------------------------ running
    def run(
        self,
        dtype: str = "float64",
        kernels: str = "fast",
        inputs: Mapping[str, Any] | None = None,
    ) -> tuple[list[Any], dict[str, Any]]:
        """(outputs, grads): the model's outputs and, per graph input name, the gradient of
        the sum of the outputs, computed by lowering the graph in `dtype` with the
        `kernels` profile. `inputs` replaces values by name (see `with_inputs`)."""
        if inputs:
            return self.with_inputs(inputs).run(dtype, kernels)
        tape = lower(self.graph, self.arrays(dtype), (), dtype=dtype, kernels=kernels)
        grads = tape.backward_dense_from(self.output_seed(dtype))
        outs = [tape.nodes[o].value for o in self.outputs]
        sweeps = {y: tape.backward_dense_from(self._y_seed(y, dtype)) for y in self._ys()}
        outs = self._merge(outs, [sweeps[y][x] for _, y, x in self.gradients])
        return outs, self._named({self.names[i]: grads[i] for i in range(self.graph.num_inputs)})

    def _ys(self) -> list[int]:
        return sorted({y for _, y, _ in self.gradients})

    def _y_seed(self, y: int, dtype: str) -> list[Any]:
        """The seed of a Gradient output's sweep: 1 at the value y (one element), 0 elsewhere."""
        ctx = KernelContext(dtype, "ordered")
        seeds = [ctx.zeros(s) for s in self.graph.shapes]
        seeds[y] = seeds[y] + as_dtype(np.ones(self.graph.shapes[y]), dtype)
        return seeds

    def _merge(self, values: list[Any], grads: list[Any]) -> list[Any]:
        """The model's outputs in its order: `values` (of `outputs`) with the Gradient
        outputs' `grads` at their positions."""
        out: list[Any] = list(values)
        for (pos, _, _), g in zip(self.gradients, grads, strict=True):
            out.insert(pos, g)
        return out

    def spec_run(self, dtype: str = "float32") -> tuple[list[Tensor], dict[str, Tensor]]:
        """The same as `run`, computed by the spec (`eval_graph`, `backprop_all_ctx`) in the
        dtype's domain: slow, exact reference semantics (small models only)."""
        from spec.graph import backprop_all_ctx, eval_graph

        from ..backends.base import DTYPE_DOMAIN

        D = DTYPE_DOMAIN[dtype]
        xs = self.spec_inputs(dtype)
        vals = eval_graph(D, self.graph, xs).tensors
        seed = TensorPack.of([to_spec(s, dtype) for s in self.output_seed(dtype)])
        cts = backprop_all_ctx(D, self.graph, xs, seed).tensors
        sweeps = {
            y: backprop_all_ctx(
                D,
                self.graph,
                xs,
                TensorPack.of([to_spec(s, dtype) for s in self._y_seed(y, dtype)]),
            ).tensors
            for y in self._ys()
        }
        outs = self._merge(
            [vals[o] for o in self.outputs], [sweeps[y][x] for _, y, x in self.gradients]
        )
        return outs, self._named({self.names[i]: cts[i] for i in range(self.graph.num_inputs)})

    # ------------------------------------------------------------------ checking
    def seed_pack(self, dtype: str, seed: int = 0) -> TensorPack:
        """A full pseudo-random seed over every value (the link check's, spec RNG)."""
        return random_seed_pack(self.graph, dtype, seed)

    def check_link(self, dtype: str = "float32", seed: int = 0) -> LinkCheck:
        """The link theorem on this graph at these values: runtime (`ordered` kernels) vs
        spec, every value and every cotangent, bit for bit (exact for "exact")."""
        if dtype in OBJECT_DTYPES:
            ok, text = link_check(self.graph, self.spec_inputs(dtype), (), dtype, seed)
        else:
            xs = [np.asarray(a, dtype=np.float64) for a in self.arrays(dtype)]
            ok, text = array_link_check(self.graph, xs, (), dtype, seed)
        return LinkCheck(ok, text, "exact" if dtype in OBJECT_DTYPES else "ordered")

    def to_onnx(self, dtype: str = "float64") -> Any:
        """This graph as an ONNX model: parameters as initializers, the float runtime inputs
        as ONNX inputs (integer ids are baked in, as in the graph)."""
        from .onnx_export import to_onnx

        if self.gradients:
            raise ModelImportError(
                "to_onnx: this model has Gradient outputs, which are not graph values "
                "(computed by a reverse sweep at run time); export is refused"
            )
        params = {n: self.values[n] for n in self.parameter_names}
        return to_onnx(
            self.graph, names=self.names, outputs=self.outputs, values=params, dtype=dtype
        )

    def summary(self) -> str:
        ops: dict[str, int] = {}
        for n in self.graph.nodes:
            ops[n.op] = ops.get(n.op, 0) + 1
        return (
            f"{self.source} model: {self.graph.num_inputs} graph inputs "
            f"({len(self.input_names)} runtime inputs, {len(self.int_inputs)} integer), "
            f"{len(self.graph.nodes)} nodes: "
            + ", ".join(f"{k} x{v}" for k, v in sorted(ops.items()))
        )
