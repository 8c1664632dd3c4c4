"""`verify.runtime_level_follows_ordered_kernels`: runtime.verification's level-2 interval
evaluation executes the ordered kernels' operation sequence.

Invariants:
- Level 2 of `runtime.verification` evaluates each supported layer (`intervals.LAYERS`:
  linear, relu, tanh, sigmoid, gelu, batch_norm, layer_norm, leaky_relu, hardtanh) with
  directed rounding in the dtype's format, following a hand-written op order. This check
  runs that very code (`intervals.ibp` on the stages of `network.stages`) with both
  rounding contexts set to round-to-nearest and every input interval degenerate, [x, x]:
  the result is then the value of verify's op sequence rounded once per operation, and it
  must equal, bit for bit, what `Result.predict` computes with the ordered kernels in that
  dtype. A changed op order on either side (a body change in spec, a kernel change, or a
  change in verify's copy) shows up as a bit difference on some point.
- Networks: per layer kind, Linear(3, 3) -> layer -> Linear(3, 2) with fixed dyadic
  weights; `POINTS_QUICK` / `POINTS_FULL` pseudo-random binary64 inputs (a fixed seed) per
  (layer, dtype), dtypes float32, float64, bfloat16, float16.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from .records import CheckContext, CheckResult, Scope, Theorem, Witness

__all__ = ["DTYPES", "LAYER_KINDS", "POINTS_FULL", "POINTS_QUICK", "theorems"]

DTYPES = ("float32", "float64", "bfloat16", "float16")
LAYER_KINDS = (
    "relu",
    "tanh",
    "sigmoid",
    "gelu",
    "batch_norm",
    "layer_norm",
    "leaky_relu",
    "hardtanh",
)
POINTS_QUICK = 10
POINTS_FULL = 60

_W1 = [[((i + 2 * j) % 5 - 2) / 4 for j in range(3)] for i in range(3)]
_W2 = [[((3 * i + j) % 7 - 3) / 8 for j in range(3)] for i in range(2)]
_B1 = [0.125, -0.25, 0.5]
_B2 = [0.0, 0.25]


def _result(kind: str, dtype: str) -> Any:
    from runtime.backends import get_backend
    from runtime.nn import (
        GELU,
        BatchNorm1d,
        Hardtanh,
        LayerNorm,
        LeakyReLU,
        Linear,
        ReLU,
        Sequential,
        Sigmoid,
        Tanh,
    )
    from runtime.trainer import Result

    mid: dict[str, Any] = {
        "relu": (ReLU(), []),
        "tanh": (Tanh(), []),
        "sigmoid": (Sigmoid(), []),
        "gelu": (GELU(), []),
        "batch_norm": (
            BatchNorm1d(3),
            [[1.5, -0.5, 1.0], [0.125, -0.25, 0.5], [0.25, 0.0, -0.5], [0.5, 2.0, 1.0], 0.1],
        ),
        "layer_norm": (LayerNorm(3), [[1.5, -0.5, 1.0], [0.125, -0.25, 0.5]]),
        "leaky_relu": (LeakyReLU(Fraction(1, 10)), []),
        "hardtanh": (Hardtanh(Fraction(-1, 3), Fraction(3, 4)), []),
    }
    layer, extra = mid[kind]
    model = Sequential(Linear(3, 3), layer, Linear(3, 2))
    np_dt = get_backend("numpy").dtype(dtype)
    state = [_W1, _B1, *extra, _W2, _B2]
    return Result(
        model, "mse", dtype, "eager", "ordered", False, [np.asarray(a, dtype=np_dt) for a in state]
    )


def _nearest(dtype: str) -> Any:
    """verify's level-2 arithmetic with both contexts rounding to nearest."""
    import gmpy2

    from runtime.backends import DTYPE_DOMAIN
    from runtime.verification.arithmetic import Arith

    A = Arith(DTYPE_DOMAIN[dtype])
    kw = {"precision": A.dn.precision, "emin": A.dn.emin, "emax": A.dn.emax, "subnormalize": True}
    A.dn = A.up = gmpy2.context(round=gmpy2.RoundToNearest, **kw)
    return A


def _case(kind: str, dtype: str, n: int) -> tuple[int, str | None]:
    """(points compared, first mismatch) for one (layer kind, dtype)."""
    import gmpy2

    from runtime.verification.intervals import ibp
    from runtime.verification.network import stages

    res = _result(kind, dtype)
    sts = stages(res)
    A = _nearest(dtype)
    rng = np.random.default_rng(sum(map(ord, kind + dtype)))
    for k in range(n):
        x = [float(v) for v in rng.normal(0.0, 1.5, 3)]
        box = [A.enclose(Fraction(v)) for v in x]
        out = ibp(A, sts, box)[-1]
        want = np.asarray(res.predict(x), dtype=np.float64).reshape(-1)
        got = [Fraction(gmpy2.mpq(lo)) for lo, _ in out]
        if any(lo != hi for lo, hi in out) or [Fraction(float(w)) for w in want] != got:
            return k + 1, (
                f"x = {x}: verify's op sequence (round to nearest) gives "
                f"{[float(g) for g in got]}, the ordered runtime {list(map(float, want))}"
            )
    return n, None


def _check(ctx: CheckContext) -> CheckResult:
    n = POINTS_QUICK if ctx.quick else POINTS_FULL
    rows: dict[str, Any] = {}
    points = failed = 0
    for kind in LAYER_KINDS:
        for dt in DTYPES:
            try:
                m, msg = _case(kind, dt, n)
            except Exception as e:  # a crash fails the row, with its cause
                m, msg = 0, f"raised {type(e).__name__}: {e}"
            points += m
            rows[f"{kind}/{dt}"] = {"points": m, "failed": msg is not None}
            if msg:
                failed += 1
                rows[f"{kind}/{dt}"]["failure"] = msg
        ctx.report(
            "verify.runtime_level_follows_ordered_kernels",
            len(rows),
            len(LAYER_KINDS) * len(DTYPES),
        )
    counts = {"cases": len(rows), "cases_passed": len(rows) - failed, "points": points}
    return CheckResult(failed == 0, counts, {"rows": rows})


def _witness() -> None:
    """verify's linear evaluation adds 1/3 to its inputs first."""
    import runtime.verification.intervals as iv

    orig = iv.LAYERS["linear"]

    def linear(A: Any, st: Any, xs: Any) -> Any:
        shifted = [A.add(x, A.const(Fraction(1, 3))) for x in xs]
        return orig(A, st, shifted)

    iv.LAYERS["linear"] = linear


def theorems() -> list[Theorem]:
    return [
        Theorem(
            name="verify.runtime_level_follows_ordered_kernels",
            statement=(
                "runtime.verification's level-2 interval evaluation of every supported layer "
                "(linear, relu, tanh, sigmoid, gelu, batch_norm, layer_norm, leaky_relu, "
                "hardtanh) follows the "
                "ordered kernels' operation sequence: run with round-to-nearest contexts on "
                "degenerate intervals [x, x], it returns, bit for bit, Result.predict with "
                "kernels='ordered' in float32, float64, bfloat16 and float16."
            ),
            formula="ibp_nearest(stages(r), [x, x]) = predict_ordered(r, x) (bitwise)",
            scope=Scope(
                ("linear", *LAYER_KINDS),
                DTYPES,
                "Linear(3, 3) -> layer -> Linear(3, 2), fixed dyadic weights",
                f"{POINTS_QUICK} quick / {POINTS_FULL} full points per (layer, dtype)",
            ),
            evidence=("random cases",),
            bounds=f"{POINTS_QUICK} quick / {POINTS_FULL} full points per (layer, dtype), "
            f"{len(LAYER_KINDS) * len(DTYPES)} rows",
            check=_check,
            sources=("spec", "runtime", "proofs"),
            isolated=True,
            time_limit=(120.0, 300.0),
            witness=Witness("verify's linear layer adds 1/3 to its inputs", _witness),
        )
    ]
