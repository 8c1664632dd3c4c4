"""Accuracy budgets: the ULP error each engine may show per op x direction x dtype.

Invariants:
- A budget is data: `Budget(ulps, per_term, scale)`; the allowed error of one element is
  `ulps + per_term * n` units in the last place of the engine's dtype, where n is the
  number of elements of the op's largest input (the terms a reduction may sum).
- `scale` says *which* ulp: "rel" — ulp(|exact_i|) (IEEE's correctly rounded ops);
  "cotangent" — ulp(max(|exact_i|, max|g|)) for derivatives whose formula cancels (e.g.
  tanh' = 1 - y*y), g the cotangent (tangent for JVPs); "abs" — ulp(max(|exact_i|, M)) with
  M the largest magnitude of the same op evaluated exactly on |inputs| (and |g|), the
  scale of the standard summation bound (sum |x_i|, |A| |B|).
- The numbers follow the engines' documented accuracy where there is one: IEEE 754 requires
  + - * / sqrt correctly rounded (0.5 ulp); PyTorch's CPU transcendentals are SLEEF's
  1.0-ulp (u10) kernels and glibc libm (<= 4 ulp is the bound stated for glibc's float
  functions); bfloat16/float16 transcendentals are evaluated in float32 and rounded once
  (<= 1 ulp). Composite functions (sigmoid, softplus, gelu, silu) get the sum of their
  parts' budgets. Reductions get the recursive-summation bound gamma_n ~ n units of
  `abs` scale; "norm" (layer_norm, batch_norm) is "abs" widened by max|g| * G * max|x|, G
  the largest |.|-propagated gain of the op (up to 1/sqrt(eps) where a variance vanishes):
  the forward error of x - mean, amplified by that gain. multi_head_attention is three such
  stages in sequence (input projection, attention, output projection): the sum of three
  `_SUMS` budgets, as composites get the sum of their parts.
- `ball` (scaled_dot_product_attention, multi_head_attention): the `abs` budget, and also
  every value a direct evaluation of the spec's op sequence in the dtype can give: the
  element's ball (`conformance.bounds.balls`, the same rounding model as the fast
  profile's derivative bounds, with this engine's transcendental budgets). Attention's
  error depends on the inputs' conditioning (the softmax amplifies the scores' rounding
  errors by exp), which no fixed number of ulps states; an element outside both is wrong
  (a wild ball, or one that cannot be computed, leaves the element unconstrained).
  `OVERRIDES[engine]` replaces
  entries for one engine (none is needed by the measured engines; it is the place for a
  user's documented kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BUDGETS", "OVERRIDES", "Budget", "budget_for"]


@dataclass(frozen=True)
class Budget:
    ulps: float
    per_term: float = 0.0
    scale: str = "rel"

    def allowed(self, n: int) -> float:
        return self.ulps + self.per_term * n


_EXACT_OPS = ("neg", "relu", "abs", "clamp", "maximum", "minimum", "detach")
_SHAPE_OPS = (
    "reshape",
    "swap_adjacent",
    "transpose",
    "broadcast_to",
    "concat",
    "slice",
    "select",
    "index_select",
    "scatter_add",
    "gather",
    "embedding",
    "mask_neg_inf",
)
_ROUNDED = ("add", "sub", "mul", "div", "sqrt", "scale", "inv")
_TRANSCENDENTAL = ("exp", "log", "tanh", "sin", "cos")
_COMPOSITE = ("sigmoid", "softplus", "gelu", "silu", "safe_log")
_SUMS = (
    "sum",
    "reduce_sum",
    "mean",
    "reduce_mean",
    "reduce_max",
    "matmul",
    "linear",
    "mse_loss",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "conv2d",
    "conv_transpose2d",
    "avg_pool2d",
    "max_pool2d",
)
_CHAINS = {"scaled_dot_product_attention": 1, "multi_head_attention": 3}  # `_SUMS` stages
_NORMS = ("layer_norm", "batch_norm")

_LOW = ("bfloat16", "float16")  # evaluated in float32 by the engines and rounded once


def _table(dtype: str) -> dict[tuple[str, str], Budget]:
    low = dtype in _LOW
    tr = 1.0 if low else 4.0
    t: dict[tuple[str, str], Budget] = {}
    for op in _EXACT_OPS + _SHAPE_OPS:
        t[op, "forward"] = Budget(0.5)
        t[op, "backward"] = Budget(0.5, 1.0, "abs")  # exact, but broadcasting sums
    for op in _ROUNDED:
        t[op, "forward"] = Budget(0.5)
        t[op, "backward"] = Budget(2.0, 1.0, "abs")  # e.g. div: g*a/b^2, three roundings
    for op in _TRANSCENDENTAL:
        t[op, "forward"] = Budget(tr)
        t[op, "backward"] = Budget(tr + 2.0, 0.0, "cotangent")
    for op in _COMPOSITE:
        t[op, "forward"] = Budget(2 * tr + 2.0, 0.0, "abs")
        t[op, "backward"] = Budget(2 * tr + 4.0, 0.0, "cotangent")
    for op in _SUMS:
        t[op, "forward"] = Budget(tr + 2.0, 1.0, "abs")
        t[op, "backward"] = Budget(tr + 2.0, 2.0, "abs")
    for op, k in _CHAINS.items():  # attention: conditioning-dependent, see `ball`
        t[op, "forward"] = Budget(k * (tr + 2.0), k * 1.0, "ball")
        t[op, "backward"] = Budget(k * (tr + 2.0), k * 2.0, "ball")
    for op in _NORMS:
        t[op, "forward"] = Budget(tr + 4.0, 2.0, "abs")
        t[op, "backward"] = Budget(tr + 8.0, 4.0, "norm")
    return t


BUDGETS: dict[str, dict[tuple[str, str], Budget]] = {
    dt: _table(dt) for dt in ("float64", "float32", "bfloat16", "float16")
}
OVERRIDES: dict[str, dict[tuple[str, str, str], Budget]] = {}


def budget_for(engine: str, dtype: str, op: str, direction: str) -> Budget:
    """The budget of one engine x dtype x op x direction ("forward", "backward"; JVPs use
    the backward budget)."""
    d = "forward" if direction == "forward" else "backward"
    o = OVERRIDES.get(engine, {}).get((dtype, op, d))
    if o is not None:
        return o
    return BUDGETS[dtype].get((op, d), Budget(8.0, 2.0, "abs"))
