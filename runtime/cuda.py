# INTERIM SHIM (layout merge): delete after imports are rewritten
"""Interim: runtime.cuda moved to runtime.backends.cuda."""

from .backends.cuda import (
    CUDA_DTYPES,
    FOLD_SOURCE,
    MATMUL_SOURCE,
    cupy_backend,
    kernel_source,
    tf32_enabled,
)

__all__ = [
    "CUDA_DTYPES",
    "FOLD_SOURCE",
    "MATMUL_SOURCE",
    "cupy_backend",
    "kernel_source",
    "tf32_enabled",
]
