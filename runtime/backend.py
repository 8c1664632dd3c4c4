# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.backend moved to runtime.backends.base and runtime.backends.registry."""

from .backends.base import (
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
from .backends.registry import (
    get_backend,
    namespace_backend,
    register_backend,
)

__all__ = [
    "DTYPES",
    "DTYPE_DOMAIN",
    "NUMPY",
    "OBJECT_DTYPES",
    "Backend",
    "from_spec",
    "get_backend",
    "namespace_backend",
    "np_dtype",
    "register_backend",
    "round_f64",
    "to_spec",
]
