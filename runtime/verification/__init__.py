"""Certified output bounds for trained results: interval bound propagation (IBP) and CROWN.

`verify(result, center, radius, ...)` (also `Result.verify`) bounds what a trained network
can output for every input of the L-infinity box `[center - radius, center + radius]`, at
two soundness levels, both returned:

- `real` (level 1): the real-valued network — exact real arithmetic on the stored
  parameters (their exact values), GELU's constants c and k and BatchNorm's eps as the exact
  rationals the spec names — for every real input in the box.
- `runtime` (level 2): the runtime's own execution in the result's dtype with the
  `ordered` kernels (what `Result.predict` computes with `kernels="ordered"`), for every
  binary64 input in the box (rounded once into the dtype, as `predict` does). For
  `dtype="exact"` the runtime is exact, so `runtime` equals `real`. Results trained with the
  `fast` kernels are evaluated by `predict` with BLAS/pairwise sums and vendor libm, which
  level 2 does not model: the statement says so, the summary says so, and
  `VerificationResult.holds` claims nothing for them (None when level 1 proves the
  property; see `runtime_covered`).

Soundness argument (the invariants every function below keeps):
- An interval is a pair of MPFR numbers (lo, hi) that encloses every value the quantity can
  take. Level 1 computes with 160-bit MPFR contexts rounding down for lower ends and up for
  upper ends (outward rounding), with the exponent range bounded to emin = LEVEL1_EMIN =
  -3000, emax = 3000 (MPFR's convention: finite magnitudes in [2^-3001, 2^3000)) so that
  every p/q in a certificate stays short. Directed rounding stays outward at both ends:
  a magnitude below the range rounds to 0 or to the least positive number, on the outer
  side; a value above it rounds up to +inf and down to the largest finite number
  (mirrored for negative values), so an overflowed bound is still an enclosure. A bound
  that is not finite at the end of a layer (or at the output) raises `VerificationError`,
  as do NaN (inf - inf, 0 * inf) and a final CROWN bound beyond the range.
- Level 2 follows the op sequence of the ordered kernels exactly (linear: a left fold over j
  of the products w[i,j]*x[j], starting from the first product, then + b[i]; sigmoid:
  1/(1+exp(-x)); gelu: the spec's composite body; BatchNorm1d eval:
  ((x - running_mean) / sqrt(running_var + eps)) * weight + bias; the last three and
  LayerNorm are the trees of `oporder.OP_ORDER`, tested against the spec bodies), with
  every operation done twice in MPFR contexts *of the target format itself* (precision,
  emin, emax of the format, subnormalize=True), once rounding down and once rounding up.
  For a monotone operation op and operands in the enclosing intervals, RN(op(a, b)) lies
  in [RD(op(lo...)), RU(op(hi...))] because RN(z) is always in [RD(z), RU(z)] and RD, RU
  are monotone; constants are rounded to nearest once, exactly as the runtime casts them.
  Overflow is covered (RU gives +inf, RD the largest finite value); a bound that is not
  finite at the end of a layer raises `VerificationError`.
- GELU is not monotone: its input interval is split at 0 and at a fixed grid of negative
  points; on each piece every intermediate of the body except the last product is monotone,
  so plain interval arithmetic per piece is sound, and the union is taken.
- CROWN (backward linear relaxation) works in exact rational arithmetic (gmpy2.mpq): the
  objective rows are pushed back through every layer exactly, so no rounding enters the
  backward pass. Relaxation slopes are chosen in binary64 (any slope is sound); intercepts
  are computed rigorously: ReLU's upper line from exact endpoint values (ReLU minus a line
  is convex, so a line at or above ReLU at both endpoints is above it on the whole
  interval); ReLU's lower line is y = x or y = 0 (intercept 0), below ReLU everywhere (a
  general lower line would also need checking at the kink x = 0, where line - ReLU, being
  concave, can peak: the checker does that), tanh's and sigmoid's from a 160-bit
  directed-rounding enclosure of min/max of f(x) - a*x over the interval, using that both
  are convex on x <= 0 and concave on x >= 0 (max/min at the endpoints on one side, a
  supporting tangent f(d) + f'(d)(x - d) with d in the piece on the other). GELU and
  BatchNorm1d use two parallel lines with the chord slope a, whose intercepts come from
  the level's own interval evaluation of f on PIECES sub-intervals (f(x) - a x >=
  lo(f([P, Q])) - max(a P, a Q) on each), or constant bounds (slope 0, the IBP interval at
  that level) when those are tighter. tanh/sigmoid intercepts are loosened by
  2^-40 * (1 + |c|), so that an independent checker's own (slightly different) enclosure
  still confirms them. Every pre-activation interval is the intersection of its IBP and
  CROWN bounds, and the final bounds are intersected with IBP's: CROWN is never wider than IBP.
- CROWN at level 2 models the runtime as the real network plus bounded per-neuron errors:
  a linear layer with n inputs adds delta_i with |delta_i| <= gamma_{n+1} * (sum_j
  |w_ij| max|x_j| + |b_i|) + n*eta*(1 + gamma_{n+1}) (u = 2^-p, gamma_k = k u / (1 - k u),
  eta = 2^(emin-1) covers underflow of a product; additions are exact in the subnormal
  range); tanh adds u*max|tanh| + eta (correctly rounded); sigmoid's three roundings add
  max(sigmoid) * ((1 + u) / ((1 - u)(1 - u - eta)) - 1) + eta + 2^(1-emax) (the last term
  covers exp overflowing, where the runtime returns 0); ReLU is exact. These are extra
  bounded inputs of the backward pass; the input box is the format-rounded box.
- alpha-CROWN (`algorithm="alpha-crown"`) runs a second CROWN chain whose backward passes
  use per-row ReLU lower slopes and tanh / sigmoid lines chosen by `alpha.optimise`
  (projected gradient in binary64, untrusted: any ReLU slope in [0, 1] is valid, and any
  tanh / sigmoid slope with the rigorously enclosed intercept min / max of f(x) - a x,
  `relaxations.smooth_line`); the bounds are recomputed exactly with them,
  the chain's intermediate intervals are intersected with CROWN's, and the final bounds
  with CROWN's and IBP's, so it is never wider than either.
- Branch and bound (`algorithm="bab"`, top_label only; `bab.search`) splits ReLU inputs
  by sign (the two children cover the parent), bounds each branch with alpha-CROWN at both
  levels, and certifies max(root margin, min over the leaves of a complete tree); a
  counterexample is an input of the box where `predict` with the ordered kernels in the
  result's dtype violates the property.
- The model hash is sha256 over the canonical JSON of the network as evaluated (layer
  kinds, sizes, eps, and every state value as its bit pattern in the dtype, or p/q for
  "exact"). `VerificationResult.certificate()` embeds that network, the box, the bounds as
  exact rationals and, for CROWN, every relaxation and pre-activation interval used, so
  `python -m proofs check-cert FILE` can re-validate it without this package.

Supported layers: Linear, ReLU, Tanh, Sigmoid, GELU, BatchNorm1d (evaluation mode), Dropout,
for (C, H, W) inputs Conv2d, AvgPool2d, MaxPool2d (max >= x_k, max <= u; exact in every
format), BatchNorm2d and Flatten
(the identity in evaluation mode), LayerNorm (interval arithmetic in its op order, with
d*d enclosed as a square; CROWN treats it as opaque: the backward pass concretises over
LayerNorm's output interval, so CROWN gains nothing across it). Anything else, results of
`open_typed` sessions and norms other than "inf" raise `VerificationError`
("verification is unavailable for ...").

Modules (each opens with its own invariants): `core` (the error, constants shared with the
certificate checker, exact helpers), `arithmetic` (outward-rounded MPFR intervals),
`network` (layer type -> stage named by its spec op; network JSON and model hash),
`oporder` (the runtime op order of sigmoid/GELU/BatchNorm/LayerNorm as data),
`intervals` (IBP, rules keyed by op), `relaxations` (linear relaxations keyed by op),
`crown` (the backward pass, steps keyed by op), `alpha` (the slope optimiser), `bab`
(branch and bound), `results` (Bounds, VerificationResult,
certificates), `api` (`verify`: parse / run each level / build the result).

Networks from files (not imported here: they rebuild a `Result`, whose module imports this
package): `vnnlib` (the VNN-COMP subset of VNN-LIB), `from_graph` (an imported ONNX spec
graph as a `Result`), `vnn` (`verify_vnnlib`, `decide`: sat / unsat / unknown) and
`python -m runtime.verification MODEL.onnx PROPERTY.vnnlib` (`__main__`).
"""

from __future__ import annotations

from .api import verify
from .core import (
    CERT_FORMAT,
    GELU_GRID,
    LEVEL1_EMIN,
    LEVEL1_PRECISION,
    PIECES,
    VerificationError,
)
from .network import model_hash, network_json
from .results import Bounds, VerificationResult

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
