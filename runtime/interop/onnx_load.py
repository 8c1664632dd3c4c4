"""ONNX model files as untrusted data: bounded loading, confined external data, validation.

Public: `load_onnx(model, base_dir)` (a path, bytes or `ModelProto` -> a `ModelProto` whose
tensors are all in memory) and `validate(m)` (the model checked before any node is
imported; returns the statically inferred shapes of its values).

Invariants:
- A path is read by `limits.read_file` (regular files only, at most `max_file_bytes`); a
  0-byte, truncated or corrupt file raises `ModelImportError`, never a protobuf error.
- External data is resolved only against an explicit base directory: the model file's
  directory when loading by path, else the `base_dir` argument; bytes or a `ModelProto`
  with external tensors and no `base_dir` are refused. A location must be relative, stay
  inside the base directory, pass through no symbolic link and name a regular file; the
  bytes read are bounded by the file, the tensor's declared size and the caps. A given
  `ModelProto` is never mutated (external data is filled into a copy).
- `validate` refuses, with a message naming the value or node: a missing or unknown opset
  of the default domain; sequence, map, optional, sparse or string values and UNDEFINED
  element types at the model's inputs and outputs; an input without a shape or with a
  negative dimension; a name written twice; an input used before it is defined (dangling,
  or a cycle); a tensor of an unknown or UNDEFINED element type; a non-UTF-8 string
  attribute; a NaN or infinite float attribute; whatever
  the onnx checker (with full shape inference) rejects; and any value whose inferred
  static size exceeds the caps (`limits`).
- Shape inference runs on `_shape_view(m)`: the model with each float initializer of more
  than `SHAPE_VIEW_MIN` elements moved to a typed graph input (its data dropped), so a
  model of large weights is not serialized and parsed back whole (shape inference reads
  a tensor's values only for shape arguments: integer or tiny). The checker sees `m`.
"""

from __future__ import annotations

import math
import os
import stat
from collections.abc import Iterator
from pathlib import PurePosixPath, PureWindowsPath
from typing import Any

import numpy as np

from . import limits
from .core import ModelImportError

__all__ = ["NON_TENSOR", "load_onnx", "validate"]

NON_TENSOR = {
    "sequence_type": "a sequence",
    "map_type": "a map",
    "optional_type": "an optional",
    "sparse_tensor_type": "a sparse tensor",
    "opaque_type": "an opaque value",
}
"""ONNX type kinds the importer refuses at a model's inputs and outputs."""


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as e:
        raise ModelImportError("ONNX import needs the onnx package (pip install onnx)") from e
    return onnx


def _parse(data: bytes, what: str) -> Any:
    onnx = _onnx()
    if not data:
        raise ModelImportError(f"{what}: empty (0 bytes), not an ONNX model")
    try:
        m = onnx.load_from_string(data)
    except Exception as e:  # protobuf's DecodeError and friends: corrupt or truncated
        raise ModelImportError(f"{what}: not a valid ONNX model ({type(e).__name__}: {e})") from e
    if not m.HasField("graph"):
        raise ModelImportError(f"{what}: not an ONNX model (no graph)")
    return m


def load_onnx(model: Any, base_dir: str | None = None) -> Any:
    """The `ModelProto` of `model` (a path, bytes or a `ModelProto`) with every external
    tensor read from inside its base directory (see the module docstring)."""
    onnx = _onnx()
    if isinstance(model, onnx.ModelProto):
        m = onnx.ModelProto()
        m.CopyFrom(model)
        what = "ONNX model"
    elif isinstance(model, bytes | bytearray):
        m, what = _parse(bytes(model), "ONNX bytes"), "ONNX bytes"
    elif isinstance(model, str | os.PathLike):
        path = os.fspath(model)
        m, what = _parse(limits.read_file(path), path), path
        if base_dir is None:
            base_dir = os.path.dirname(os.path.abspath(path))
    else:
        raise ModelImportError(
            f"from_onnx takes a path, bytes or an onnx.ModelProto, got {type(model).__name__}"
        )
    external = [t for t in _tensors(m) if t.data_location == onnx.TensorProto.EXTERNAL]
    if external and base_dir is None:
        raise ModelImportError(
            f"{what}: {len(external)} tensor(s) use external data (e.g. {external[0].name!r}); "
            "pass base_dir= (the directory the data files live in) to allow reading them"
        )
    for t in external:
        _fill_external(t, str(base_dir), what)
    return m


def _tensors(m: Any) -> Iterator[Any]:
    """Every TensorProto of the model: initializers and tensor attributes, subgraphs too."""
    yield from _graph_tensors(m.graph)
    for f in m.functions:
        for n in f.node:
            yield from _node_tensors(n)


def _graph_tensors(g: Any) -> Iterator[Any]:
    yield from g.initializer
    for s in g.sparse_initializer:
        yield s.values
        yield s.indices
    for n in g.node:
        yield from _node_tensors(n)


def _node_tensors(n: Any) -> Iterator[Any]:
    for a in n.attribute:
        if a.HasField("t"):
            yield a.t
        yield from a.tensors
        if a.HasField("g"):
            yield from _graph_tensors(a.g)
        for g in a.graphs:
            yield from _graph_tensors(g)


def _safe_path(base: str, location: str, what: str) -> str:
    """`location` inside the real base directory, through no symbolic link, a regular
    file; else ModelImportError."""
    bad = f"{what}: external data location {location!r}"
    if not location or "\x00" in location:
        raise ModelImportError(f"{bad} is empty or malformed")
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute():
        raise ModelImportError(f"{bad} is absolute (must be relative to the base directory)")
    parts = [p for p in PurePosixPath(location.replace("\\", "/")).parts if p not in ("", ".")]
    if any(p == ".." for p in parts) or not parts:
        raise ModelImportError(f"{bad} leaves the base directory {base!r}")
    cur = os.path.realpath(base)
    for p in parts:
        cur = os.path.join(cur, p)
        try:
            st = os.lstat(cur)
        except OSError as e:
            raise ModelImportError(f"{bad} does not exist under {base!r}") from e
        if stat.S_ISLNK(st.st_mode):
            raise ModelImportError(f"{bad} passes through a symbolic link (refused)")
    if not stat.S_ISREG(st.st_mode):
        raise ModelImportError(f"{bad} is not a regular file (devices, pipes refused)")
    return cur


def _itemsize(t: Any, what: str) -> int:
    """The bytes per element of an external tensor's element type (UNDEFINED, STRING and
    unknown codes refused: their raw data has no fixed size)."""
    onnx = _onnx()
    code = t.data_type
    try:
        if code in (onnx.TensorProto.UNDEFINED, onnx.TensorProto.STRING):
            raise KeyError(code)
        return int(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(code)).itemsize)
    except (KeyError, TypeError, ValueError):
        raise ModelImportError(
            f"{what}: tensor {t.name!r}: external data of element type {code} (not a "
            "fixed-size numeric ONNX type)"
        ) from None


def _fill_external(t: Any, base: str, what: str) -> None:
    onnx = _onnx()
    info = {e.key: e.value for e in t.external_data}
    path = _safe_path(base, info.get("location", ""), what)
    try:
        offset = int(info.get("offset", 0) or 0)
        length = int(info["length"]) if info.get("length") else None
    except ValueError as e:
        raise ModelImportError(f"{what}: tensor {t.name!r}: bad external offset/length") from e
    n = limits.check_elements(list(t.dims), f"{what}: tensor {t.name!r}")
    want = n * _itemsize(t, what)
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ModelImportError(f"{what}: tensor {t.name!r}: cannot read {path!r} ({e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ModelImportError(f"{what}: tensor {t.name!r}: {path!r} is not a regular file")
        size = st.st_size
        length = want if length is None else length
        if offset < 0 or length != want or offset + length > size:
            raise ModelImportError(
                f"{what}: tensor {t.name!r}: external data (offset {offset}, length {length}) "
                f"does not fit its file ({size} bytes) or its shape ({want} bytes)"
            )
        f.seek(offset)
        t.raw_data = f.read(length)
    del t.external_data[:]
    t.data_location = onnx.TensorProto.DEFAULT


# --------------------------------------------------------------------------- validation
def validate(m: Any) -> dict[str, tuple[int, ...]]:
    """Refuse what the importer must not read (see the module docstring); the statically
    known shapes of the model's values (ONNX shape inference), by name."""
    _opsets(m)
    limits.check_nodes(len(m.graph.node), "the ONNX graph")
    _io_types(m)
    _structure(m.graph)
    _tensor_types(m)
    for n in m.graph.node:
        _node_attrs(n)
    onnx = _onnx()
    try:
        onnx.checker.check_model(_output_shapes_filled(m), full_check=False)
    except Exception as e:  # onnx.checker.ValidationError and protobuf errors
        raise ModelImportError(f"ONNX checker: {_first_line(e)}") from e
    return _inferred(m)


def _output_shapes_filled(m: Any) -> Any:
    """`m`, or a copy whose outputs declared without a shape (as `onnx.helper` allows)
    carry the inferred one: the checker requires the field, the importer does not."""
    if all(o.type.tensor_type.HasField("shape") for o in m.graph.output):
        return m
    onnx = _onnx()
    try:
        inferred = onnx.shape_inference.infer_shapes(_shape_view(m))
    except Exception:  # the checker and strict inference report the model's error
        return m
    known = {v.name: v.type for v in [*inferred.graph.value_info, *inferred.graph.output]}
    c = onnx.ModelProto()
    c.CopyFrom(m)
    for o in c.graph.output:
        if not o.type.tensor_type.HasField("shape") and o.name in known:
            o.type.CopyFrom(known[o.name])
    return c


def _first_line(e: Exception) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _opsets(m: Any) -> None:
    onnx = _onnx()
    v = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    if not v:
        raise ModelImportError("ONNX model: no opset of the default domain (opset_import)")
    top = onnx.defs.onnx_opset_version()
    if not 1 <= v[0] <= top:
        raise ModelImportError(f"ONNX model: opset {v[0]} (supported: 1..{top})")


def _io_types(m: Any) -> None:
    onnx = _onnx()
    inits = {t.name for t in m.graph.initializer}
    for kind, vis in (("input", m.graph.input), ("output", m.graph.output)):
        for vi in vis:
            which = vi.type.WhichOneof("value")
            if which != "tensor_type":
                desc = NON_TENSOR.get(str(which), "an untyped value")
                raise ModelImportError(f"ONNX model {kind} {vi.name!r} is {desc} (only tensors)")
            tt = vi.type.tensor_type
            if tt.elem_type in (onnx.TensorProto.UNDEFINED, onnx.TensorProto.STRING):
                name = onnx.TensorProto.DataType.Name(tt.elem_type)
                raise ModelImportError(f"ONNX model {kind} {vi.name!r} has element type {name}")
            if kind == "output" or vi.name in inits:
                continue
            if not tt.HasField("shape"):
                raise ModelImportError(f"ONNX model input {vi.name!r} has no shape")
            for d in tt.shape.dim:
                if d.HasField("dim_value") and d.dim_value < 0:
                    raise ModelImportError(
                        f"ONNX model input {vi.name!r}: negative dimension {d.dim_value}"
                    )


def _structure(g: Any) -> None:
    """Single assignment, and every input defined before use."""
    defined: dict[str, str] = {}
    for vi in g.input:
        defined[vi.name] = "a graph input"
    for t in g.initializer:
        if t.name in defined and defined[t.name] != "a graph input":
            raise ModelImportError(f"ONNX model: initializer {t.name!r} is defined twice")
        defined[t.name] = "an initializer"
    later = {o for n in g.node for o in n.output if o}
    for i, n in enumerate(g.node):
        for x in n.input:
            if x and x not in defined:
                why = "a cycle or unsorted nodes" if x in later else "never defined (dangling)"
                raise ModelImportError(
                    f"ONNX node {i} ({n.op_type} {n.name!r}) input {x!r} is used before it "
                    f"is defined: {why}"
                )
        for o in n.output:
            if not o:
                continue
            if o in defined:
                raise ModelImportError(
                    f"ONNX node {i} ({n.op_type} {n.name!r}) writes {o!r}, already "
                    f"{defined[o]} (each value must be written once)"
                )
            defined[o] = f"written by node {i} ({n.op_type})"
    for vi in g.output:
        if vi.name not in defined:
            raise ModelImportError(f"ONNX model output {vi.name!r} is never defined")


def _tensor_types(m: Any) -> None:
    """Every tensor of the model (initializers, attributes, subgraphs) has a known element
    type other than UNDEFINED."""
    onnx = _onnx()
    for t in _tensors(m):
        code = t.data_type
        try:
            known = code != onnx.TensorProto.UNDEFINED and bool(
                onnx.helper.tensor_dtype_to_np_dtype(code)
            )
        except (KeyError, TypeError, ValueError):
            known = False
        if not known:
            raise ModelImportError(f"ONNX tensor {t.name!r} has unknown element type {code}")


def _node_attrs(n: Any) -> None:
    onnx = _onnx()
    A = onnx.AttributeProto
    for a in n.attribute:
        where = f"ONNX node {n.op_type} {n.name!r} attribute {a.name!r}"
        strings = [a.s] if a.type == A.STRING else list(a.strings) if a.type == A.STRINGS else []
        for s in strings:
            try:
                s.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ModelImportError(f"{where} is not UTF-8 text") from e
        floats = [a.f] if a.type == A.FLOAT else list(a.floats) if a.type == A.FLOATS else []
        if n.op_type != "Constant" and any(not math.isfinite(f) for f in floats):
            raise ModelImportError(f"{where} is {floats} (NaN or infinite refused)")


SHAPE_VIEW_MIN = 64
"""Float initializers with more elements than this are typed inputs in `_shape_view`."""


def _shape_view(m: Any) -> Any:
    """`m`, or a copy whose large float initializers are graph inputs of the same type
    and shape without data (see the module docstring); `m` is never mutated."""
    onnx = _onnx()
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16}
    floats.add(onnx.TensorProto.BFLOAT16)

    def big(t: Any) -> bool:
        return t.data_type in floats and math.prod(t.dims) > SHAPE_VIEW_MIN

    if not any(big(t) for t in m.graph.initializer):
        return m
    c = onnx.ModelProto()
    c.CopyFrom(m)
    keep = [t for t in c.graph.initializer if not big(t)]
    moved = [(t.name, t.data_type, list(t.dims)) for t in c.graph.initializer if big(t)]
    del c.graph.initializer[:]
    c.graph.initializer.extend(keep)
    listed = {vi.name for vi in c.graph.input}
    for name, dt, dims in moved:
        if name not in listed:
            c.graph.input.append(onnx.helper.make_tensor_value_info(name, dt, dims))
    return c


def _inferred(m: Any) -> dict[str, tuple[int, ...]]:
    onnx = _onnx()
    try:
        inferred = onnx.shape_inference.infer_shapes(
            _shape_view(m), strict_mode=True, data_prop=True
        )
    except Exception as e:  # InferenceError: the model's types or shapes are inconsistent
        raise ModelImportError(f"ONNX shape inference: {_first_line(e)}") from e
    out: dict[str, tuple[int, ...]] = {}
    g = inferred.graph
    for vi in [*g.value_info, *g.output]:
        if vi.type.WhichOneof("value") != "tensor_type":
            continue
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            dims = tuple(int(d.dim_value) for d in tt.shape.dim)
            limits.check_elements(dims, f"ONNX value {vi.name!r}")
            out[vi.name] = dims
    return out
