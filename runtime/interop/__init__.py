"""Model import and export: PyTorch (`torch.export`) and ONNX graphs as spec graphs.

Public: `from_torch(module, example_args)`, `from_exported(program)`, `load_exported(path)`
(a `.pt2` file), `from_onnx(path_or_model)`, `to_onnx(graph)` (a spec graph as an ONNX
model), `load_model(path)` (by suffix), the `Imported` result, the mapping tables `ATEN` and
`ONNX_OPS`, `read_pt2` (a `.pt2` file read with torch's `weights_only` unpickler only), and
the errors `ModelImportError` / `UnsupportedOpsError` / `PickleRefused`.

Invariants: importing this package imports neither torch nor onnx (each is imported inside
the functions that need it); every import either returns an `Imported` whose graph is a
validated spec graph or raises one error, never a partial graph (docs/INTEROP.md).
"""

from __future__ import annotations

from .aten import ATEN
from .core import ModelImportError, UnsupportedOpsError, nearest_table_op
from .files import LOADERS, load_model
from .imported import Imported
from .onnx_export import EXPORT, to_onnx
from .onnx_import import ONNX_OPS, from_onnx
from .pt2 import PickleRefused, read_pt2
from .torch_import import from_exported, from_torch, load_exported

__all__ = [
    "ATEN",
    "EXPORT",
    "LOADERS",
    "ONNX_OPS",
    "Imported",
    "ModelImportError",
    "PickleRefused",
    "UnsupportedOpsError",
    "from_exported",
    "from_onnx",
    "from_torch",
    "load_exported",
    "load_model",
    "nearest_table_op",
    "read_pt2",
    "to_onnx",
]
