# INTERIM SHIM (layout merge): delete after imports are rewritten
"""The old path of `runtime.verification` (certified output bounds): re-exports its names."""

from runtime.verification import (
    CERT_FORMAT,
    GELU_GRID,
    LEVEL1_EMIN,
    LEVEL1_PRECISION,
    PIECES,
    Bounds,
    VerificationError,
    VerificationResult,
    model_hash,
    network_json,
    verify,
)

__all__ = [
    "CERT_FORMAT",
    "GELU_GRID",
    "LEVEL1_EMIN",
    "LEVEL1_PRECISION",
    "PIECES",
    "Bounds",
    "VerificationError",
    "VerificationResult",
    "model_hash",
    "network_json",
    "verify",
]
