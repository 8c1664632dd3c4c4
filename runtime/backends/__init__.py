"""Array backends: runtime dtypes, the `Backend` record, the NumPy backend, the registry and
the CUDA backend.

Invariants:
- `runtime.backends.base`: dtypes, `Backend`, lossless spec conversions, `NUMPY`.
- `runtime.backends.registry`: `get_backend` by name; device backends register themselves.
- `runtime.backends.cuda`: the CuPy backend, registered as "cupy" and "cuda" when this
  package is imported (CuPy itself is imported only when the backend is made).
"""

from . import cuda as cuda
from .base import (
    DTYPE_DOMAIN,
    DTYPES,
    NUMPY,
    OBJECT_DTYPES,
    Backend,
    from_spec,
    np_dtype,
    round_f64,
    to_spec,
)
from .registry import get_backend, namespace_backend, register_backend

__all__ = [
    "DTYPES",
    "DTYPE_DOMAIN",
    "NUMPY",
    "OBJECT_DTYPES",
    "Backend",
    "cuda",
    "from_spec",
    "get_backend",
    "namespace_backend",
    "np_dtype",
    "register_backend",
    "round_f64",
    "to_spec",
]
