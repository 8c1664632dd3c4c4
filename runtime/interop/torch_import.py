"""PyTorch import: walk a `torch.export` program and map each node with `aten.ATEN`.

Invariants:
- A node whose tensor arguments are all known at import time (integer index inputs and
  everything computed from them, constants) is evaluated by torch itself at import time
  and stays `Static`; only nodes that touch a float graph value become graph nodes.
- Parameters, buffers, lifted constants and float user inputs are the graph inputs, in
  placeholder order, named by their torch names (`conv.weight`, `x`); integer inputs and
  integer buffers are static (`Imported.int_inputs`).
- State is identified by storage, not by name: `torch.export` lists a tied tensor (one
  module reachable under several names, a tied embedding) once per name; every
  placeholder of one tensor (same storage, offset, shape, strides, dtype) is read as the
  first one, so it is one graph input whose gradient is the sum over all its uses, and
  its other names are `Imported.aliases`. User inputs are never merged: `from_torch`
  copies an example tensor that shares memory with an earlier one before exporting
  (`torch.export` would specialise the program to the aliasing).
- Before the walk the program is functionalized and decomposed by torch
  (`run_decompositions`) down to the ops the importer keeps (`aten_modes.boundary()`): in-place
  and view ops, eval-mode dropout and composite ops are torch's own rewriting. A program
  whose calls are all kept ops already is walked as it is (the decomposition would return
  it unchanged and is the costly part of a large import). When a kept op refuses a
  variant it is decomposed too and the import retried once; whatever remains unmapped is
  reported in one `UnsupportedOpsError` (every op with its count), no graph returned.
- A training-mode program (training dropout or batch norm, buffer updates) is refused
  with what makes it one, unless `eval=True`: then `aten_modes.TRAINING_AS_EVAL` reads those
  ops in eval semantics. Only user outputs are model outputs (state mutations are not).
- `.pt2` files are read by `pt2.read_pt2` (torch's `weights_only` unpickler only, unless
  `trust_pickle=True`).
torch is imported inside the functions only (`import runtime` never needs it).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .aten import ATEN, Poison
from .aten_modes import TRAINING_AS_EVAL, boundary, is_training_node
from .core import (
    Dyn,
    Emitter,
    ModelImportError,
    Static,
    Unsupported,
    UnsupportedOpsError,
    is_float,
)
from .imported import Imported
from .pt2 import read_pt2

__all__ = [
    "from_exported",
    "from_torch",
    "load_exported",
    "to_core_aten",
    "training_ops",
    "within_boundary",
]


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


def _storage_key(t: Any) -> tuple[Any, ...]:
    """What makes two placeholders one tensor: the same memory read the same way."""
    return (
        t.untyped_storage().data_ptr(),
        t.storage_offset(),
        tuple(t.shape),
        tuple(t.stride()),
        t.dtype,
    )


def tied_state(ph: Sequence[tuple[str, str, Any]], user: Sequence[str]) -> dict[str, str]:
    """fx name -> fx name of the first placeholder holding the same tensor, for every
    parameter, buffer or constant placeholder after the first of its tensor."""
    first: dict[tuple[Any, ...], str] = {}
    tied = {}
    for fx, _, t in ph:
        if fx in user or t.numel() == 0:
            continue
        key = _storage_key(t)
        if key in first:
            tied[fx] = first[key]
        else:
            first[key] = fx
    return tied


def _walk(
    ep: Any, arrays: Mapping[str, np.ndarray], eval: bool, tied: Mapping[str, str]
) -> tuple[Emitter, dict[str, Any], Any]:
    import torch.fx as fx

    rules = {**ATEN, **TRAINING_AS_EVAL} if eval else ATEN
    E = Emitter()
    env: dict[str, Any] = {}
    out: Any = ()
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            name = node.name
            if name in tied:
                env[name] = env[tied[name]]
            else:
                arr = arrays[name]
                env[name] = E.input(arr.shape) if is_float(arr) else Static(arr)
            continue
        if node.op == "output":
            out = fx.node.map_arg(node.args[0], lambda n: env[n.name])
            continue
        env[node.name] = _step(
            E, node, fx.node.map_arg((node.args, node.kwargs), lambda n: env[n.name]), rules
        )
    return E, env, out


def _step(E: Emitter, node: Any, argkw: Any, rules: Mapping[str, Any]) -> Any:
    args, kwargs = argkw
    packet, full = _key(node.target)
    if packet == "getitem":  # one item of a tuple: a Poison is reported only when used
        return args[0][args[1]]
    leaves = _flat([args, kwargs])
    poisons = [v for v in leaves if isinstance(v, Poison)]
    if poisons:
        for p in poisons:
            if p.name is not None:
                E.fail(p.name, p.why)
        if packet not in rules:
            E.fail(full)
        return _stand_in(E, node)
    if not any(isinstance(v, Dyn) for v in leaves):  # known at import time: torch computes it
        try:
            return _from_torch(node.target(*_to_torch(list(args)), **_to_torch_kw(kwargs)))
        except Exception as e:  # reported with the other unsupported ops
            E.fail(full, f"evaluation at import time failed: {type(e).__name__}: {e}")
            return _stand_in(E, node)
    rule = rules.get(packet)
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


def _boundary_table(ep: Any, extra: frozenset[str] = frozenset()) -> Any:
    """torch's default decomposition table less every op the importer maps (`boundary`),
    plus the packets in `extra` (kept ops whose rules refused a variant)."""
    import torch

    keep = boundary() - extra
    table = torch.export.default_decompositions()
    for op in list(table.keys()):
        if _key(op)[0] in keep:
            del table[op]
    return table


def to_core_aten(ep: Any, extra: frozenset[str] = frozenset()) -> Any:
    """`ep` functionalized and decomposed by torch down to the ops the importer maps
    (in-place and view ops, eval-mode dropout, composite ops: torch's own rules)."""
    try:
        return ep.run_decompositions(_boundary_table(ep, extra))
    except Exception as e:  # torch's own failure on a program it cannot decompose
        raise ModelImportError(
            f"torch could not decompose the program ({type(e).__name__}: {_first_line(e)})"
        ) from None


def within_boundary(ep: Any) -> bool:
    """Is every call in `ep` already an op the importer keeps (then torch's decomposition
    would return the same program: it is skipped, the costly part of a large import)?
    The kept packets are functional ATen ops (no in-place variants)."""
    keep = boundary() | {"getitem"}
    return all(_key(n.target)[0] in keep for n in ep.graph.nodes if n.op == "call_function")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


def _user_outputs(ep: Any) -> list[bool]:
    """Per flattened output: is it a user output (state mutations are not modelled)."""
    return [s.kind.name == "USER_OUTPUT" for s in ep.graph_signature.output_specs]


def training_ops(ep: Any) -> list[str]:
    """What makes a decomposed program a training-mode one: training-mode dropout and
    batch norm nodes, and buffer updates (running statistics)."""
    found = []
    for n in ep.graph.nodes:
        if n.op != "call_function":
            continue
        packet, full = _key(n.target)
        if packet in TRAINING_AS_EVAL and is_training_node(packet, n.args, n.kwargs):
            found.append(full)
    found += [
        f"update of buffer {s.target!r}"
        for s in ep.graph_signature.output_specs
        if s.kind.name == "BUFFER_MUTATION"
    ]
    return sorted(set(found))


def _check_training(ep: Any, eval: bool) -> None:
    found = training_ops(ep)
    if found and not eval:
        shown = ", ".join(found[:6]) + (f", ... ({len(found)} in all)" if len(found) > 6 else "")
        raise ModelImportError(
            f"the program is in training mode ({shown}); export the model after "
            "model.eval(), or pass eval=True to import it with eval semantics (dropout as "
            "identity, batch norm with its running statistics, no state updates)"
        )


def from_exported(
    ep: Any, example_args: Sequence[Any] | None = None, *, eval: bool = False
) -> Imported:
    """Import a `torch.export.ExportedProgram` (see the module docstring): decomposed to
    the ops the importer maps first; a training-mode program is refused unless `eval`."""
    if example_args is None:
        example_args = (getattr(ep, "example_inputs", None) or ((), {}))[0]
    core = ep if within_boundary(ep) else to_core_aten(ep)
    _check_training(core, eval)
    try:
        return _import(core, example_args, eval)
    except UnsupportedOpsError as first:
        retry = frozenset(_key(op)[0] for op in first.ops) & boundary()
        if not retry:
            raise
        try:  # a kept op refused a variant: let torch decompose that op and try again
            return _import(to_core_aten(ep, retry), example_args, eval)
        except ModelImportError:
            raise first from None


def _import(ep: Any, example_args: Sequence[Any], eval: bool) -> Imported:
    ph = _placeholders(ep, example_args)
    user = tuple(s.arg.name for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT")
    tied = tied_state(ph, user)
    arrays = {fx: _np(t) for fx, _, t in ph if fx not in tied}
    torch_names = {fx: tn for fx, tn, _ in ph}
    return _build(ep, arrays, torch_names, user, eval, tied)


def _build(
    ep: Any,
    arrays: dict[str, np.ndarray],
    torch_names: dict[str, str],
    user: tuple[str, ...],
    eval: bool,
    tied: Mapping[str, str],
) -> Imported:
    """The graph of `ep` over `arrays` (one per placeholder that is not `tied` to an
    earlier one)."""
    E, env, out = _walk(ep, arrays, eval, tied)
    E.raise_if_unsupported("torch.export program")
    flat = _flat(out)
    keep = _user_outputs(ep)
    keep += [True] * (len(flat) - len(keep))
    outs = E.output_ids([v for v, k in zip(flat, keep, strict=True) if k and v is not None])
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
        return _build(ep, upd, torch_names, user, eval, tied)

    return Imported(
        graph,
        names,
        values,
        outs,
        tuple(torch_names[u] for u in user),
        ints,
        "torch",
        rebuild,
        aliases={torch_names[fx]: torch_names[c] for fx, c in tied.items()},
    )


def from_torch(
    module: Any,
    example_args: Sequence[Any],
    example_kwargs: Mapping[str, Any] | None = None,
    *,
    eval: bool = False,
) -> Imported:
    """Export `module` with `torch.export.export(module, example_args)` and import it.
    A module in training mode (dropout, batch norm updating its statistics) is refused;
    with `eval=True` it is exported in eval mode (`module.eval()` for the export, its
    modes restored afterwards)."""
    try:
        import torch
    except ImportError as e:
        raise ModelImportError("from_torch needs the torch package (pip install torch)") from e
    if isinstance(module, torch.export.ExportedProgram):
        return from_exported(module, example_args, eval=eval)
    args, kwargs = _unaliased(tuple(example_args)), dict(example_kwargs or {})
    modes = [(m, m.training) for m in module.modules()] if eval else []
    try:
        if eval:
            module.eval()
        ep = torch.export.export(module, args, kwargs=kwargs)
    finally:
        for m, mode in modes:
            m.training = mode
    return from_exported(ep, (args, kwargs), eval=eval)


def _unaliased(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """`args` with every tensor that shares memory with an earlier one copied:
    `torch.export` would otherwise specialise the program to the aliasing (`f(t, t)`
    exported as `y * y`, the first input unused), and the inputs are meant to be given
    separately by name."""
    import torch

    seen: set[tuple[Any, ...]] = set()

    def one(a: Any) -> Any:
        if isinstance(a, list | tuple):
            return type(a)(one(x) for x in a)
        if not isinstance(a, torch.Tensor) or a.numel() == 0:
            return a
        key = _storage_key(a)
        if key in seen:
            return a.clone()
        seen.add(key)
        return a

    return tuple(one(a) for a in args)


def load_exported(path: str, *, trust_pickle: bool = False, eval: bool = False) -> Imported:
    """Import an exported-program file (`torch.export.save`), at its saved example inputs.
    The file is read with torch's `weights_only` unpickler only; anything needing full
    pickle (which can run code from the file) is refused unless `trust_pickle=True`
    (`runtime.interop.pt2`)."""
    ep = read_pt2(path, trust_pickle=trust_pickle)
    if getattr(ep, "example_inputs", None) is None:
        raise ModelImportError(f"{path}: the exported program has no example inputs")
    return from_exported(ep, ep.example_inputs, eval=eval)
