"""The softmax family: softmax log_softmax (last axis).

Invariants:
- Both are max-shifted: m = fold maximum over the row (`builders.max_pick`), z_j = x_j − m,
  e_j = exp(z_j), s = left fold add e_j; softmax y_j = e_j / s, log_softmax
  y_j = z_j − log(s).
- VJPs and JVPs are the closed forms stated in each op's doc, with left folds in index
  order.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..shape import Shape, size
from ..tensor import Tensor, fold_add
from .builders import max_pick, second_arg, second_point, shape_error
from .table import Attrs, Env, ShapeFn, arg, register, sample

__all__ = ["FAMILY"]

FAMILY = "softmax"


# --------------------------------------------------------------------------- softmax family


def _last_axis_rule(op: str) -> ShapeFn:
    def rule(shapes: list[Shape], a: Attrs) -> Shape:
        s = shapes[0]
        if len(s) < 1 or s[-1] < 1:
            raise shape_error(op, "needs rank >= 1 and a non-empty last axis", 0, "(..., n>=1)", s)
        return s

    return rule


def _rows(t: Tensor) -> list[tuple[Any, ...]]:
    n = t.shape[-1]
    return [t.data[r * n : (r + 1) * n] for r in range(size(t.shape[:-1]))]


def _softmax_row(D: Domain, row: Sequence[Any]) -> tuple[list[Any], list[Any], Any]:
    """(z, e, s): m = fold maximum (max-shift), z_j = x_j - m, e_j = exp(z_j),
    s = fold add e_j."""
    m = row[0]
    for v in row[1:]:
        m = max_pick(D, m, v, True)
    z = [D.sub(v, m) for v in row]
    e = [D.exp(v) for v in z]
    return z, e, fold_add(D, e)


def _softmax_fwd(D: Domain, x: Tensor) -> Tensor:
    out: list[Any] = []
    for row in _rows(x):
        _, e, s = _softmax_row(D, row)
        out.extend(D.div(v, s) for v in e)
    return Tensor(x.shape, tuple(out))


def _softmax_push(D: Domain, x: Tensor, t: Tensor) -> Tensor:
    """y ⊙ (t − ⟨y, t⟩) per row, y = softmax(x): the Jacobian of softmax is symmetric, so
    the one sequence pushes a tangent (JVP) and a cotangent (VJP)."""
    y = _softmax_fwd(D, x)
    out: list[Any] = []
    for yr, tr in zip(_rows(y), _rows(t), strict=True):
        d = fold_add(D, (D.mul(p, q) for p, q in zip(yr, tr, strict=True)))
        out.extend(D.mul(p, D.sub(q, d)) for p, q in zip(yr, tr, strict=True))
    return Tensor(y.shape, tuple(out))


def _softmax_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    return _softmax_push(D, xs[0], dxs[0])


def _softmax_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    return [_softmax_push(D, xs[0], g)]


register(
    name="softmax",
    family=FAMILY,
    arity=1,
    attrs=(),
    shape=_last_axis_rule("softmax"),
    forward=lambda D, xs, a, env: _softmax_fwd(D, xs[0]),
    jvp=_softmax_jvp,
    vjp=_softmax_vjp,
    saves="y",
    doc="max-shifted softmax on the last axis: y_j = exp(x_j - m)/fold exp(x_k - m); "
    "VJP y_j*(g_j - fold_k g_k*y_k); JVP y_j*(dx_j - fold_k y_k*dx_k)",
    algebraic=False,
    tags=frozenset({"reduction"}),
    samples=(
        sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(second_arg()),
        sample(
            arg((2, 3), 1, 1, 1, 2, 2, -1),
            kind="tie",
            note="equal entries in a row (the max-shift ties)",
        ),
    ),
)


def _log_softmax_fwd(D: Domain, x: Tensor) -> Tensor:
    out: list[Any] = []
    for row in _rows(x):
        z, _, s = _softmax_row(D, row)
        ls = D.log(s)
        out.extend(D.sub(v, ls) for v in z)
    return Tensor(x.shape, tuple(out))


def _log_softmax_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    p = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for pr, dr in zip(_rows(p), _rows(dxs[0]), strict=True):
        t = fold_add(D, (D.mul(u, v) for u, v in zip(pr, dr, strict=True)))
        out.extend(D.sub(v, t) for v in dr)
    return Tensor(p.shape, tuple(out))


def _log_softmax_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    p = _softmax_fwd(D, xs[0])
    out: list[Any] = []
    for pr, gr in zip(_rows(p), _rows(g), strict=True):
        sg = fold_add(D, gr)
        out.extend(D.sub(q, D.mul(u, sg)) for u, q in zip(pr, gr, strict=True))
    return [Tensor(p.shape, tuple(out))]


register(
    name="log_softmax",
    family=FAMILY,
    arity=1,
    attrs=(),
    shape=_last_axis_rule("log_softmax"),
    forward=lambda D, xs, a, env: _log_softmax_fwd(D, xs[0]),
    jvp=_log_softmax_jvp,
    vjp=_log_softmax_vjp,
    saves="softmax p",
    doc="max-shifted log-softmax on the last axis: y_j = (x_j - m) - log(fold exp(x_k - m)); "
    "VJP g_j - p_j*fold_k g_k with p = softmax(x); JVP dx_j - fold_k p_k*dx_k",
    algebraic=False,
    tags=frozenset({"reduction"}),
    samples=(
        sample(arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1), note="generic point"),
        second_point(second_arg()),
        sample(
            arg((2, 3), 1, 1, 1, 2, 2, -1),
            kind="tie",
            note="equal entries in a row (the max-shift ties)",
        ),
    ),
)
