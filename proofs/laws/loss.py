"""Per-op laws of the loss family: mse_loss, cross_entropy.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- mse_loss is checked on free symbols; cross_entropy on row orders of the logits, with
  ties compared with the derivative of the independent definition.
"""

from __future__ import annotations

from typing import Any

import sympy

from .core import Arr, Case, arr, free, law, log_softmax_row, rows, rowwise

__all__: list[str] = []

law(
    op="mse_loss",
    cases=[Case((s, s), free()) for s in ((), (3,), (2, 2))],
    definition_text="Σ (y - t)² / size(y)",
    derivative_text="jvp = (2/N)·Σ (y - t)(dy - dt)",
    definition=lambda v, a, e: arr(sympy.Add(*arr((v[0] - v[1]) ** 2).reshape(-1)) / v[0].size),
)


def _ce_def(v: list[Arr], a: Any, e: Any) -> Arr:
    x, t = v
    ls = rowwise(x, log_softmax_row)
    total = -sympy.Add(*(t * ls).reshape(-1))
    return arr(total / x.shape[0] if x.ndim == 2 else total)


law(
    op="cross_entropy",
    cases=[Case(((3,), (3,)), rows(o)) for o in ("inc", "dec", "mid", "tie")]
    + [Case(((2, 3), (2, 3)), rows("inc", "mid")), Case(((1, 2), (1, 2)), rows("tie"))],
    definition_text="-Σ_j t_j·(x_j - log Σ_k exp x_k), divided by B for (B, C) logits",
    derivative_text=(
        "jvp = -Σ (dt·log_softmax(x) + t·(dx - Σ p·dx)) (/B); at ties of the row maximum compared "
        "with the derivative of the independent definition"
    ),
    definition=_ce_def,
    conv_jvp="definition",
)
