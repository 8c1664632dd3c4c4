"""PyTorch import: walk a `torch.export` program and map each node with `aten.ATEN`.

Invariants:
- A node whose tensor arguments are all known at import time (integer index inputs and
  everything computed from them, constants) is evaluated by torch itself at import time
  and stays `Static`; only nodes that touch a float graph value become graph nodes.
- Parameters, buffers, lifted constants and float user inputs are the graph inputs, in
  placeholder order, named by their torch names (`conv.weight`, `x`); integer inputs and
  integer buffers are static (`Imported.int_inputs`).
- Ops the table lacks are first decomposed by torch (`run_decompositions` restricted to
  exactly those ops); whatever remains unmapped is reported in one `UnsupportedOpsError`
  (every op with its count), and no graph is returned.
torch is imported inside the functions only (`import runtime` never needs it).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .aten import ATEN, Poison
from .core import Dyn, Emitter, ModelImportError, Static, Unsupported, is_float
from .imported import Imported

__all__ = ["from_exported", "from_torch", "load_exported"]


def _key(target: Any) -> tuple[str, str]:
    """(packet key of ATEN, full overload name for messages)."""
    if target is operator.getitem:
        return "getitem", "getitem"
    name = target.name() if hasattr(target, "name") else str(target)
    full = name.replace("::", ".")
    packet = ".".join(full.split(".")[:2])
    return packet, full


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().numpy().copy()


def _to_torch(v: Any) -> Any:
    import torch

    if isinstance(v, Static):
        return torch.from_numpy(np.ascontiguousarray(v.value))
    if isinstance(v, list | tuple):
        return type(v)(_to_torch(x) for x in v)
    return v


def _from_torch(v: Any) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        return Static(_np(v))
    if isinstance(v, list | tuple):
        return tuple(_from_torch(x) for x in v)
    return v


def _flat(v: Any) -> list[Any]:
    if isinstance(v, list | tuple):
        return [y for x in v for y in _flat(x)]
    if isinstance(v, dict):
        return [y for x in v.values() for y in _flat(x)]
    return [v]


def _placeholders(ep: Any, args: Sequence[Any]) -> list[tuple[str, str, Any]]:
    """(fx name, torch name, tensor) for every placeholder, in graph order."""
    import torch

    user = iter(a for a in _flat(list(args)) if isinstance(a, torch.Tensor))
    out = []
    for spec in ep.graph_signature.input_specs:
        fx = spec.arg.name
        kind = spec.kind.name
        if kind == "USER_INPUT":
            try:
                out.append((fx, fx, next(user)))
            except StopIteration:
                raise ModelImportError(f"example_args: no tensor for input {fx!r}") from None
        elif kind in ("PARAMETER", "BUFFER"):
            t = ep.state_dict.get(spec.target)
            out.append((fx, spec.target, t if t is not None else ep.constants[spec.target]))
        elif kind == "CONSTANT_TENSOR":
            out.append((fx, spec.target, ep.constants[spec.target]))
        else:
            raise ModelImportError(f"placeholder {fx!r} of kind {kind} is not supported")
    return out


def _walk(ep: Any, arrays: Mapping[str, np.ndarray]) -> tuple[Emitter, dict[str, Any], Any]:
    import torch.fx as fx

    E = Emitter()
    env: dict[str, Any] = {}
    for name, arr in arrays.items():
        env[name] = E.input(arr.shape) if is_float(arr) else Static(arr)
    out: Any = ()
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "output":
            out = fx.node.map_arg(node.args[0], lambda n: env[n.name])
            continue
        env[node.name] = _step(
            E, node, fx.node.map_arg((node.args, node.kwargs), lambda n: env[n.name])
        )
    return E, env, out


def _step(E: Emitter, node: Any, argkw: Any) -> Any:
    args, kwargs = argkw
    packet, full = _key(node.target)
    leaves = _flat([args, kwargs])
    poisons = [v for v in leaves if isinstance(v, Poison)]
    if poisons:
        for p in poisons:
            if p.name is not None:
                E.fail(p.name, p.why)
        if packet not in ATEN:
            E.fail(full)
        return _stand_in(E, node)
    if not any(isinstance(v, Dyn) for v in leaves):  # known at import time: torch computes it
        try:
            return _from_torch(node.target(*_to_torch(list(args)), **_to_torch_kw(kwargs)))
        except Exception as e:  # reported with the other unsupported ops
            E.fail(full, f"evaluation at import time failed: {type(e).__name__}: {e}")
            return _stand_in(E, node)
    rule = ATEN.get(packet)
    if rule is None:
        E.fail(full)
        return _stand_in(E, node)
    try:
        return rule(E, *args, **kwargs)
    except (Unsupported, TypeError, KeyError, TorchLeanError) as e:
        E.fail(full, str(e))
        return _stand_in(E, node)


def _stand_in(E: Emitter, node: Any) -> Any:
    """A value of the right shape for a node that could not be mapped, so the nodes after
    it are still checked (their variants reported too); the graph is never returned."""
    import torch

    def one(v: Any) -> Any:
        if isinstance(v, torch.Tensor) and v.is_floating_point():
            return E.stand_in(tuple(v.shape))
        return Poison()

    val = node.meta.get("val")
    return tuple(one(v) for v in val) if isinstance(val, list | tuple) else one(val)


def _to_torch_kw(kw: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _to_torch(v) for k, v in kw.items()}


def _unsupported_targets(ep: Any) -> set[Any]:
    return {
        n.target
        for n in ep.graph.nodes
        if n.op == "call_function" and _key(n.target)[0] not in ATEN
    }


def from_exported(ep: Any, example_args: Sequence[Any] | None = None) -> Imported:
    """Import a `torch.export.ExportedProgram` (see the module docstring)."""
    if example_args is None:
        example_args = (getattr(ep, "example_inputs", None) or ((), {}))[0]
    missing = _unsupported_targets(ep)
    if missing:
        import torch

        table = torch.export.default_decompositions()
        wanted = {op: table[op] for op in list(table.keys()) if op in missing}
        if wanted:
            ep = ep.run_decompositions(wanted)
    ph = _placeholders(ep, example_args)
    arrays = {fx: _np(t) for fx, _, t in ph}
    torch_names = {fx: tn for fx, tn, _ in ph}
    user = tuple(s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT")
    return _build(ep, arrays, torch_names, user)


def _build(
    ep: Any, arrays: dict[str, np.ndarray], torch_names: dict[str, str], user: tuple[str, ...]
) -> Imported:
    E, env, out = _walk(ep, arrays)
    E.raise_if_unsupported("torch.export program")
    outs = E.output_ids([v for v in _flat(out) if v is not None])
    graph = E.build()
    names = {env[fx].id: torch_names[fx] for fx, a in arrays.items() if is_float(a)}
    values = {torch_names[fx]: a for fx, a in arrays.items() if is_float(a)}
    ints = {torch_names[fx]: a for fx, a in arrays.items() if not is_float(a) and fx in user}

    def rebuild(new: Mapping[str, np.ndarray]) -> Imported:
        by_fx = {fx: torch_names[fx] for fx in arrays}
        upd = {
            fx: (np.asarray(new[tn]) if tn in new else a)
            for fx, a in arrays.items()
            for tn in [by_fx[fx]]
        }
        return _build(ep, upd, torch_names, user)

    return Imported(
        graph,
        names,
        values,
        outs,
        tuple(torch_names[u] for u in user),
        ints,
        "torch",
        rebuild,
    )


def from_torch(
    module: Any, example_args: Sequence[Any], example_kwargs: Mapping[str, Any] | None = None
) -> Imported:
    """Export `module` with `torch.export.export(module, example_args)` and import it.
    Put the module in eval mode first (batch norm with running statistics, no dropout)."""
    try:
        import torch
    except ImportError as e:
        raise ModelImportError("from_torch needs the torch package (pip install torch)") from e
    if isinstance(module, torch.export.ExportedProgram):
        return from_exported(module, example_args)
    ep = torch.export.export(module, tuple(example_args), kwargs=dict(example_kwargs or {}))
    return from_exported(ep, (tuple(example_args), dict(example_kwargs or {})))


def load_exported(path: str) -> Imported:
    """Import an exported-program file (`torch.export.save`), at its saved example inputs."""
    try:
        import torch
    except ImportError as e:
        raise ModelImportError("loading a .pt2 file needs the torch package") from e
    ep = torch.export.load(path)
    if getattr(ep, "example_inputs", None) is None:
        raise ModelImportError(f"{path}: the exported program has no example inputs")
    return from_exported(ep, ep.example_inputs)
