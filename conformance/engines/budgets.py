"""Accuracy budgets: the ULP error each engine may show per op x direction x dtype.

Invariants:
- Which budget an op gets is its class (`budget_class`), derived from the op table's
  family, kind and tags; only what the table does not say (whether an elementwise op
  rounds, sigmoid evaluated as a composite, attention's stage count) is keyed by name.
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

from spec.ops import OPS

__all__ = ["BUDGETS", "OVERRIDES", "Budget", "budget_class", "budget_for"]


@dataclass(frozen=True)
class Budget:
    ulps: float
    per_term: float = 0.0
    scale: str = "rel"

    def allowed(self, n: int) -> float:
        return self.ulps + self.per_term * n


# The op table does not say which elementwise ops round (maximum does not, add does), nor
# that engines evaluate the primitive sigmoid as a composite: those stay keyed by name.
# sign, hardtanh, relu6 (clamps) and the variadic maximum_n / minimum_n select or negate an
# input: exact. leaky_relu is one product (slope·x): rounded once.
_EXACT_OPS = ("neg", "relu", "abs", "clamp", "maximum", "minimum", "detach", "sign")
_EXACT_OPS += ("hardtanh", "relu6", "maximum_n", "minimum_n")
_ROUNDED = ("add", "sub", "mul", "div", "sqrt", "scale", "inv", "leaky_relu")
_EXACT_OPS += ("where",)  # picks an element of a or b
_ROUNDED += ("prelu",)  # x, or one product w·x
_COMPOSITE_PRIMITIVES = ("sigmoid",)
# Elementwise composites of several roundings (x + 3, ·x, /6; 1 + |x|, /): the sum of their
# parts' budgets, as a transcendental composite's.
_COMPOSITE_ROUNDED = ("hardsigmoid", "hardswish", "softsign")
# Variadic folds of additions (ONNX Sum, Mean): the recursive-summation bound of a sum.
_FOLDS = ("add_n", "mean_n")
_CHAIN_STAGES = {"multi_head_attention": 3}  # `_SUMS`-like stages in sequence (default 1)


def budget_class(op: str) -> str | None:
    """The budget class of `op`, derived from the op table where it has the information
    (family, kind, tags): "norm" (family norm), "chain" (attention family, reduction tag),
    "sums" (reduction or loss tag), "shape" (structural or index tag), "transcendental"
    (an op with a math-function record, or a transcendental-family primitive) /
    "composite" (transcendental family: composite); "exact", "rounded", the
    rounded elementwise composites and the additive folds by name (above); None for an op
    without arguments or class (the default budget)."""
    d = OPS.get(op)
    if d is None or d.arity == 0:
        return None
    if op in _EXACT_OPS:
        return "exact"
    if op in _ROUNDED:
        return "rounded"
    if op in _COMPOSITE_ROUNDED:
        return "composite"
    if op in _FOLDS:
        return "sums"
    if d.family == "norm":
        return "norm"
    if d.family == "attention" and "reduction" in d.tags:
        return "chain"
    if d.tags & {"reduction", "loss"}:
        return "sums"
    if d.tags & {"structural", "index"}:
        return "shape"
    if d.math is not None:  # one math function elementwise (`spec.mathfns` record)
        return "transcendental"
    if d.family == "transcendental":
        composite = d.kind == "composite" or op in _COMPOSITE_PRIMITIVES
        return "composite" if composite else "transcendental"
    return None


_LOW = ("bfloat16", "float16")  # evaluated in float32 by the engines and rounded once


def _table(dtype: str) -> dict[tuple[str, str], Budget]:
    low = dtype in _LOW
    tr = 1.0 if low else 4.0
    t: dict[tuple[str, str], Budget] = {}
    for op in OPS:
        cls = budget_class(op)
        if cls in ("exact", "shape"):
            t[op, "forward"] = Budget(0.5)
            t[op, "backward"] = Budget(0.5, 1.0, "abs")  # exact, but broadcasting sums
        elif cls == "rounded":
            t[op, "forward"] = Budget(0.5)
            t[op, "backward"] = Budget(2.0, 1.0, "abs")  # e.g. div: g*a/b^2, three roundings
        elif cls == "transcendental":
            t[op, "forward"] = Budget(tr)
            t[op, "backward"] = Budget(tr + 2.0, 0.0, "cotangent")
        elif cls == "composite":
            t[op, "forward"] = Budget(2 * tr + 2.0, 0.0, "abs")
            t[op, "backward"] = Budget(2 * tr + 4.0, 0.0, "cotangent")
        elif cls == "sums":
            t[op, "forward"] = Budget(tr + 2.0, 1.0, "abs")
            t[op, "backward"] = Budget(tr + 2.0, 2.0, "abs")
        elif cls == "chain":  # attention: conditioning-dependent, see `ball`
            k = _CHAIN_STAGES.get(op, 1)
            t[op, "forward"] = Budget(k * (tr + 2.0), k * 1.0, "ball")
            t[op, "backward"] = Budget(k * (tr + 2.0), k * 2.0, "ball")
        elif cls == "norm":
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


# pow_tensor's derivatives add two transcendental terms (b·a**(b − 1)·da + a**b·log(a)·db)
# that may cancel, at any sign of log a: the `ball` scale of the spec's sequence (with the
# transcendental budget twice, for pow and log), as attention's conditioning-dependent error.
for _dt, _t in BUDGETS.items():
    _tr = 1.0 if _dt in _LOW else 4.0
    _t["pow_tensor", "backward"] = Budget(2 * _tr + 2.0, 0.0, "ball")
