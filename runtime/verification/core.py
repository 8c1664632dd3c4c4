"""Shared vocabulary of the verification package: the error, the constants, exact helpers.

Invariants:
- `VerificationError` is the only error this package raises on purpose; every "not
  supported" case goes through `unavailable`, whose message starts "verification is
  unavailable for ..." and lists the supported layers.
- The constants below are part of the certificate format and are restated, independently,
  by `proofs/bounds_certificate_check.py` (which imports nothing from `runtime/`);
  `tests/test_verify.py` pins each pair equal.
- An interval `Iv` is a pair of gmpy2.mpfr (lo, hi) enclosing every value the quantity can
  take; the exact helpers (`q`, `frac`, `frac_str`) convert without rounding.
"""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction
from typing import Any

from gmpy2 import mpq

from spec.errors import TorchLeanError

__all__ = [
    "CERT_FORMAT",
    "GELU_GRID",
    "LEVEL1_EMIN",
    "LEVEL1_PRECISION",
    "PIECES",
    "SLACK",
    "Iv",
    "Relax",
    "VerificationError",
    "frac",
    "frac_str",
    "hull",
    "q",
    "sha",
    "show",
    "unavailable",
]

CERT_FORMAT = "torchlean_output_bounds_v1"
LEVEL1_PRECISION = 160
LEVEL1_EMIN = -3000
PIECES = 24  # pieces per neuron for the GELU / BatchNorm1d linear relaxation
# GELU's negative split points (dyadic, exact in every format); 0 is always a split point.
GELU_GRID = tuple(Fraction(-k, 8) for k in (48, 32, 24, 20, 16, 14, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1))
SLACK = mpq(1, 2**40)  # tanh/sigmoid intercepts are loosened by SLACK * (1 + |c|)

Iv = tuple[Any, Any]  # (lo, hi) as gmpy2.mpfr
Relax = tuple[Any, Any, Any, Any]  # (aL, cL, aU, cU) exact: aL x + cL <= y <= aU x + cU


class VerificationError(TorchLeanError):
    """Verification is unavailable for the input, or a bound could not be established."""


def unavailable(what: str) -> VerificationError:
    return VerificationError(
        f"verification is unavailable for {what} (supported: Linear, ReLU, Tanh, Sigmoid, GELU,"
        " BatchNorm1d in evaluation mode, LayerNorm, Dropout, Residual; results of Trainer.open()"
        " sessions; norm 'inf')"
    )


def show(iv: Iv) -> str:
    return f"[{float(iv[0])!r}, {float(iv[1])!r}]"


def hull(a: Iv, b: Iv) -> Iv:
    return min(a[0], b[0]), max(a[1], b[1])


def q(x: Any) -> Any:
    return mpq(x)


def frac(x: Any) -> Fraction:
    x = mpq(x)
    return Fraction(int(x.numerator), int(x.denominator))


def frac_str(x: Any) -> str:
    f = Fraction(int(mpq(x).numerator), int(mpq(x).denominator))
    return f"{f.numerator}/{f.denominator}"


def sha(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
