"""ONNX's own backend test data as checks of the importer.

Public: `DATA` (the data directory inside the installed onnx wheel), `SUITES` (the suites
walked by the project's test), `cases(suite)` (the case directories), `run_case(dir)`
(one case imported, run and compared: `("pass", "")`, `("refused", reason)` or
`("wrong", detail)`), `dummy_inputs(model)` (the ONNX test runner's rule for the `light`
models, which ship no inputs) and `light_models()`.

Invariants:
- A case passes when every output has the stored shape and agrees with the stored values
  at ONNX's tolerances (rtol 1e-3, atol 1e-7, NaN equal to NaN), computed in float64 with
  the `fast` kernels. A `TorchLeanError` during import or run is a refusal (its first
  line is the reason); any other exception propagates (a crash is a bug).
- onnx is imported inside the functions only.
"""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .onnx_import import from_onnx

__all__ = [
    "ATOL",
    "RTOL",
    "SUITES",
    "cases",
    "compare",
    "data_dir",
    "dummy_inputs",
    "light_models",
    "run_case",
]

RTOL, ATOL = 1e-3, 1e-7
SUITES = ("pytorch-converted", "pytorch-operator", "simple")


def data_dir() -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def cases(suite: str) -> list[str]:
    root = os.path.join(data_dir(), suite)
    return sorted(os.path.join(root, c) for c in os.listdir(root))


def _tensors(pattern: str) -> list[np.ndarray]:
    import onnx
    from onnx import numpy_helper

    return [numpy_helper.to_array(onnx.load_tensor(f)) for f in sorted(glob.glob(pattern))]


def compare(got: list[Any], want: list[np.ndarray]) -> str:
    """ "" when `got` matches `want` at ONNX's tolerances, else what differs."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        g = np.asarray(g, dtype=np.float64)
        if g.shape != w.shape:
            return f"output {i}: shape {g.shape}, expected {w.shape}"
        if not np.allclose(g, w.astype(np.float64), rtol=RTOL, atol=ATOL, equal_nan=True):
            return f"output {i}: max |diff| {np.nanmax(np.abs(g - w)):.3g}"
    return ""


def run_case(case: str) -> tuple[str, str]:
    """One backend case (a directory with model.onnx and test_data_set_0)."""
    import onnx

    model = os.path.join(case, "model.onnx")
    ds = os.path.join(case, "test_data_set_0")
    ins, want = _tensors(ds + "/input_*.pb"), _tensors(ds + "/output_*.pb")
    try:
        m = onnx.load(model)
        names = [i.name for i in m.graph.input][: len(ins)]  # the runner's order
        imp = from_onnx(model, inputs=dict(zip(names, ins, strict=True)))
        got, _ = imp.run("float64")
    except TorchLeanError as e:
        return "refused", str(e).strip().splitlines()[-1].strip()
    diff = compare(got, want)
    return ("wrong", diff) if diff else ("pass", "")


def light_models() -> list[str]:
    return sorted(glob.glob(os.path.join(data_dir(), "light", "*.onnx")))


def dummy_inputs(model: Any) -> dict[str, np.ndarray]:
    """The ONNX test runner's dummy data for a model without stored inputs (its
    `generate_dummy_data(random=False)`): each non-initializer input of n elements is
    arange(n) / n in float32, symbolic dimensions taken as 1."""
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
        n = int(np.prod(shape))
        out[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return out
