"""Model files by suffix: `.onnx` (ONNX) and `.pt2` (a `torch.export.save` program).

Invariant: `load_model` returns an `Imported` at the model's own values, with `inputs`
(a mapping, or the path of an `.npz` file of named arrays) replacing values by name, or
raises `ModelImportError` naming the file and what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .core import ModelImportError
from .imported import Imported
from .onnx_import import from_onnx
from .torch_import import load_exported

__all__ = ["LOADERS", "load_model"]

LOADERS = {".onnx": "onnx", ".pt2": "torch"}


def _inputs(inputs: Mapping[str, Any] | str | None) -> dict[str, np.ndarray]:
    if inputs is None:
        return {}
    if isinstance(inputs, str):
        with np.load(inputs) as f:
            return {k: f[k] for k in f.files}
    return {k: np.asarray(v) for k, v in inputs.items()}


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
        imp = from_onnx(path, inputs=given)
        rest = {k: v for k, v in given.items() if k not in imp.input_names}
    else:
        imp = load_exported(path, trust_pickle=trust_pickle)
        rest = given
    return imp.with_inputs(rest) if rest else imp
