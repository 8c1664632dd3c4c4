"""Fast-profile bounds of the transcendental family.

Invariants:
- exp, log, tanh, sin, cos, erf, log1p, expm1 have math-function records: their bound,
  K·ulp(y) (K the record's budget for the dtype; 0.5 under the ordered kernels; 0 where y
  is ±inf or NaN), is `core.math_bound`, registered by `core.derive_math_bounds`.
- sigmoid = 1/(1 + exp(−x)): (2K + 2.01)·u·|y| + η, K the budget of exp.
- elu = α̂·expm1(x) for x <= 0 (α̂ = α rounded, then the product rounded):
  (2K + 2.01)·u·|y| + (K·|α| + 1)·η, K the budget of expm1; exact (0) for x > 0.
- celu = α̂·expm1(x/α̂): the quotient's rounding and α̂'s each move expm1's value by at most
  u relative (z·e^z/(1 − e^z) <= 1 for z <= 0), so (2K + 4.01)·u·|y| + (K·|α| + 3)·η.
- pow_tensor: K·ulp(y), K the budget of pow. pow(x, p): the kernel raises x to p̂, p
  rounded into the dtype, while the bound's exact result uses p: x**p̂ = y·e^δ with
  |δ| <= |p − p̂|·|log x| <= |p − p̂|·(|e| + 2)·ln 2 for x = m·2**e, and |e^δ − 1| <= 2|δ|
  for |δ| <= 1 (larger δ: no finite bound), so 4K·ulp(y) + 2|δ|·|y| + K·η (2K·ulp(y) +
  K·η when δ = 0: ulp(y·e^δ) <= 4·ulp(y)); δ = 0 for every exponent the dtype holds
  exactly (the integers the graphs draw).
- safe_log, softplus, gelu, silu, selu, mish are composites: no bound of their own; their
  primitives are checked after inlining.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import gmpy2

from spec.tensor import Tensor

from .core import Fmt, exact_q, magnitude, math_bound, register, ulp

__all__: list[str] = []


def _sigmoid(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    # 1/(1 + e), e = exp(-x) with K ulp (<= 2K·u relative); e/(1+e) <= 1 damps it; the add and
    # the division round once each.
    a = (2 * Fraction(K) + Fraction(201, 100)) * f.u
    return [(a * magnitude(v) + f.eta, magnitude(v)) for v in y.data]


def _alpha_expm1(extra: int) -> Any:
    def fn(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
        a = (2 * Fraction(K) + extra + Fraction(1, 100)) * f.u
        al = abs(Fraction(attrs["alpha"]))
        out = []
        for v, x in zip(y.data, xs[0].data, strict=True):
            q = exact_q(x)
            if q is not None and q > 0:
                out.append((Fraction(0), magnitude(v)))
            else:
                out.append(
                    (a * magnitude(v) + (Fraction(K) * al + extra - 1) * f.eta, magnitude(v))
                )
        return out

    return fn


register(name="elu", bound=_alpha_expm1(2))
register(name="celu", bound=_alpha_expm1(4))
register(name="sigmoid", bound=_sigmoid)


_LN2_UP = Fraction(7, 10)  # > ln 2


def _pow(f: Fmt, xs: list[Tensor], y: Tensor, attrs: dict[str, Any], K: float):
    p = Fraction(attrs["exponent"])
    p_hat = f.D.from_rational(p)
    dp = abs(p - f.D.to_rational(p_hat)) if gmpy2.is_finite(p_hat) else None
    out = []
    for v, x in zip(y.data, xs[0].data, strict=True):
        q, qx = exact_q(v), exact_q(x)
        if q is None:
            out.append((Fraction(0), magnitude(v)))
            continue
        delta: Fraction | None = Fraction(0)
        if dp is None:
            delta = None
        elif dp and qx is not None and qx != 0:
            e = abs(qx).numerator.bit_length() - abs(qx).denominator.bit_length()
            delta = dp * (abs(e) + 2) * _LN2_UP
        if delta is None or delta > 1:
            out.append((Fraction(10) ** 400, magnitude(v)))
            continue
        # the kernel's K ulp are of x**p̂ = y·e^δ, within 4·ulp(y) per ulp for |δ| <= 1
        k_ulps = (4 if delta else 2) * Fraction(K)
        err = k_ulps * ulp(f, q) + 2 * delta * abs(q) + Fraction(K) * f.eta
        out.append((err, magnitude(v)))
    return out


register(name="pow", bound=_pow)
register(name="pow_tensor", bound=math_bound)
