"""Per-node error bounds for the `fast` kernel profile.

Each primitive op states a bound on |ŷ − y| for one output element, where ŷ is the
runtime's result and y the exact result *on the runtime's own inputs to that node*
(composites are inlined into primitives first, since that is how the runtime runs them).
y is computed by the spec forward in a 256-bit MPFR domain (`HP`); a slack of 2**-200·M
absorbs its own rounding. With u = 2**-p the unit roundoff, η the smallest subnormal and
γ_n = n·u/(1 − n·u):

| op | bound |
|---|---|
| structural ops, neg, abs, relu, maximum, minimum, detach, select, gather ... | 0 (exact) |
| reduce_max, mask_neg_inf, where (a selected input element or −∞) | 0 (exact) |
| add, sub, mul, div, sqrt, clamp, const, prelu | u·|y| + η/2 (correctly rounded) |
| scale | 2.01·u·|y| + (|x| + 1)·η (the constant c is rounded first) |
| an op with a math record (exp log tanh sin cos erf log1p expm1 ...) | K·ulp(y) (derived) |
| pow_tensor | K·ulp(y), K the budget of pow |
| pow(x, p), p̂ = p rounded | 4K·ulp(y) + 2|δ|·|y| + K·η, |δ| <= |p − p̂|·(|e| + 2)·ln 2 |
| leaky_relu | 2.01·u·|y| + (|x| + 1)·η (as scale); sign: 0 |
| elu = α̂·expm1(x) for x <= 0 | (2K + 2.01)·u·|y| + (K·|α| + 1)·η; 0 for x > 0 |
| celu = α̂·expm1(x/α̂) for x <= 0 | (2K + 4.01)·u·|y| + (K·|α| + 3)·η; 0 for x > 0 |
| sigmoid = 1/(1 + exp(−x)) | (2K + 2.01)·u·|y| + η |
| sum, reduce_sum (n terms) | γ_n·Σ|x_i| |
| matmul (k terms), linear (k terms + bias) | γ_{k+1}·(Σ|a_p·b_p| + |bias|) + (k+1)·η |
| softmax (n per row) | 1.01·(2·max|z| + 4K + n + 2)·u·y_j + η, z = x − max |
| log_softmax | 1.01·u·(|z_j| + |y_j| + 2K·|log s| + max|z| + 2K + n) + η |

An op with a math-function record (`spec.mathfns`) has no entry of its own: its bound is
`core.math_bound` with K its record's ULP budget for the dtype (`core.ulp_budget`).

A result may be ±inf where the bound's magnitude reaches the overflow threshold, and must
be NaN exactly where y is NaN.

Layout (one module per op family, the same names as `spec/ops/`): `core` holds the table
(`BOUNDS`, filled by keyword `register(name=..., bound=...)`), the bound function type and
the γ/ulp arithmetic; `check` holds `check_bounds`; the module of each family holding a
primitive registers its primitives' bounds. Composite ops (inv, mean, softplus, conv2d,
layer_norm, ...) have no bound of their own: they are inlined and their primitives
checked, so a family of composites only (conv, pool, norm, loss, embed today) has no
module here. Importing this
package imports the modules of the families the op table says hold a primitive
(`spec.ops.families_holding`); a missing one raises `ImportError`.

The backward side (VJP contributions, JVP tangents, accumulated cotangents) has no per-op
table: `balls` models the fast runtime per primitive as a scalar domain of (center,
radius) pairs and `derivatives.check_derivative_bounds` runs each node's spec VJP and JVP
rule over it, so every bound is derived from the rule's own operation sequence.
"""

from __future__ import annotations

from spec.ops import families_holding, load_families

from .check import BoundReport, check_bounds
from .core import (
    BOUNDS,
    HP,
    TRANSCENDENTAL,
    ULP_BUDGET,
    BoundFn,
    derive_math_bounds,
    node_bound,
    register,
    ulp_budget,
)
from .derivatives import check_derivative_bounds

# The families holding a primitive have a module of bounds (registered on import); a family
# of composites only has none (its ops are inlined and their primitives checked).
load_families(__name__, families_holding(("primitive",)))
derive_math_bounds()

__all__ = [
    "BOUNDS",
    "HP",
    "TRANSCENDENTAL",
    "ULP_BUDGET",
    "BoundFn",
    "BoundReport",
    "check_bounds",
    "check_derivative_bounds",
    "node_bound",
    "register",
    "ulp_budget",
]
