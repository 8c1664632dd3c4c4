"""Per-op laws of the softmax family: softmax, log_softmax.

Invariants (those of `proofs.laws.core`):
- This module holds exactly the laws of its family's ops, each written once with
  `law(op=..., ...)` when the module is imported; it exports no names (`__all__` is
  empty) and is imported only by `proofs.laws`.
- Every definition here is independent of `spec`: NumPy object arrays and sympy, built
  from the shared helpers of `proofs.laws.core`.
- Checked row by row on the row orders of `proofs.laws.core.rows` against the
  definitions without the max-shift; at ties of the row maximum the JVP is compared with
  the derivative of the independent definition (softmax is smooth).
"""

from __future__ import annotations

from .core import Case, law, log_softmax_row, rows, rowwise, softmax_row

__all__: list[str] = []

_ROW_CASES = (
    ((3,), ("inc",)),
    ((3,), ("dec",)),
    ((3,), ("mid",)),
    ((3,), ("tie",)),
    ((1,), ("inc",)),
    ((2, 3), ("inc", "mid")),
    ((2, 1, 2), ("dec", "tie")),
)

law(
    op="softmax",
    cases=[Case((s,), rows(*o)) for s, o in _ROW_CASES],
    definition_text="exp(x_j)/Σ_k exp(x_k) along the last axis (no max-shift)",
    derivative_text=(
        "jvp_j = y_j·(dx_j - Σ_k y_k·dx_k); at ties of the row maximum (where the max-shift's "
        "argmax is not locally constant) the JVP is compared with the derivative of the "
        "independent definition, softmax being smooth"
    ),
    definition=lambda v, a, e: rowwise(v[0], softmax_row),
    conv_jvp="definition",
)

law(
    op="log_softmax",
    cases=[Case((s,), rows(*o)) for s, o in _ROW_CASES],
    definition_text="x_j - log Σ_k exp(x_k) along the last axis (no max-shift)",
    derivative_text=(
        "jvp_j = dx_j - Σ_k p_k·dx_k with p = softmax(x); at ties compared with the derivative of "
        "the independent definition"
    ),
    definition=lambda v, a, e: rowwise(v[0], log_softmax_row),
    conv_jvp="definition",
)
