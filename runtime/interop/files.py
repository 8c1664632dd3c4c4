"""Model files by suffix: `.onnx` (ONNX) and `.pt2` (a `torch.export.save` program).

Invariant: `load_model` returns an `Imported` at the model's own values, with `inputs`
(a mapping, or the path of an `.npz` file of named arrays) replacing values by name, or
raises `ModelImportError` naming the file and what is wrong. `.npz` files are read by
`limits.load_npz` (headers checked against the size caps before any array is inflated,
no unpickling, complex arrays refused); ONNX files by `from_onnx` (bounded, external data
confined to the model's directory).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .core import ModelImportError
from .imported import Imported
from .limits import load_npz
from .onnx_import import from_onnx
from .torch_import import load_exported

__all__ = ["LOADERS", "load_model"]

LOADERS = {".onnx": "onnx", ".pt2": "torch"}


def _inputs(inputs: Mapping[str, Any] | str | None) -> dict[str, np.ndarray]:
    if inputs is None:
        return {}
    if isinstance(inputs, str):
        return load_npz(inputs)
    out = {k: np.asarray(v) for k, v in inputs.items()}
    for k, v in out.items():
        if v.dtype.kind not in "biuf":
            raise ModelImportError(f"input {k!r}: dtype {v.dtype} (expected real numbers)")
    return out


def load_model(
    path: str, inputs: Mapping[str, Any] | str | None = None, *, trust_pickle: bool = False
) -> Imported:
    """Import the model file `path` (by suffix; see `LOADERS`). `trust_pickle` lets a
    `.pt2` file be fully unpickled (runtime.interop.pt2: it can run code from the file)."""
    kind = LOADERS.get(Path(path).suffix)
    if kind is None:
        raise ModelImportError(
            f"{path}: unknown model file suffix (known: {', '.join(sorted(LOADERS))})"
        )
    given = _inputs(inputs)
    if kind == "onnx":
        return from_onnx(path, inputs=given)
    imp = load_exported(path, trust_pickle=trust_pickle)
    return imp.with_inputs(given) if given else imp
