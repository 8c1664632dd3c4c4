"""Fast-profile bounds of the softmax family (per row of the last axis, n entries).

Invariants:
- softmax: 1.01·(2·max|z| + 4K + n + 2)·u·y_j + η, z = x − max, K the budget of exp.
- log_softmax: 1.01·u·(|z_j| + |y_j| + 2K·|log s| + max|z| + 2K + n) + η; a row holding
  ±inf or NaN gets bound 0 (its result must then match exactly, NaN where y is NaN).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from spec.tensor import Tensor

from .core import Fmt, exact_q, magnitude, register

__all__: list[str] = []


def _rows(t: Tensor) -> list[tuple[Any, ...]]:
    n = t.shape[-1]
    return [t.data[r * n : (r + 1) * n] for r in range(len(t.data) // n)]


def _softmax(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for row, yr in zip(_rows(xs[0]), _rows(y), strict=True):
        qs = [exact_q(v) for v in row]
        finite = [q for q in qs if q is not None]
        zmax = (max(finite) - min(finite)) if finite else Fraction(0)
        a = Fraction(101, 100) * (2 * zmax + 4 * Fraction(K) + len(row) + 2)
        out.extend((a * f.u * magnitude(v) + f.eta, magnitude(v)) for v in yr)
    return out


def _log_softmax(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    out = []
    for row, yr in zip(_rows(xs[0]), _rows(y), strict=True):
        qs = [exact_q(v) for v in row]
        if any(q is None for q in qs):
            out.extend((Fraction(0), magnitude(v)) for v in yr)
            continue
        m = max(qs)  # type: ignore[type-var]
        zs = [q - m for q in qs]  # type: ignore[operator]
        zmax = max(abs(z) for z in zs)
        for z, v in zip(zs, yr, strict=True):
            ls = abs(exact_q(v) - z) if exact_q(v) is not None else Fraction(0)  # |log s| = |z - y|
            c = abs(z) + magnitude(v) + 2 * Fraction(K) * ls + zmax + 2 * Fraction(K) + len(row)
            out.append((Fraction(101, 100) * f.u * c + f.eta, magnitude(v)))
    return out


register(name="softmax", bound=_softmax)
register(name="log_softmax", bound=_log_softmax)
