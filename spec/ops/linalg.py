"""The linalg family: matmul linear.

Invariants:
- matmul: (..., m, k) @ (..., k, n) with broadcast batch prefixes; each entry is a left
  fold over the contraction index of mul(a[i,p], b[p,j]). Cotangents g@bᵀ (fold over j)
  and aᵀ@g (fold over i), reduced over broadcast batch axes by `unbroadcast`.
- linear: y[r,i] = fold_j mul(w[i,j], x[r,j]), then add(., b[i]).
- `matmul_operands` expands both operands to the output's batch prefix (the bounds of the
  fast profile use it too).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..shape import Shape, broadcast_shapes, ravel_index, size, unravel_index
from ..tensor import Tensor, fold_add
from .builders import rank_at_least, second_arg, second_point, shape_error
from .table import Attrs, Env, arg, expand, register, sample, unbroadcast

__all__ = ["FAMILY", "matmul_operands"]

FAMILY = "linalg"


# --------------------------------------------------------------------------- matmul, linear


def _matmul_shape(shapes: list[Shape], a: Attrs) -> Shape:
    rank_at_least("matmul", shapes, 0, 2)
    rank_at_least("matmul", shapes, 1, 2)
    A, B = shapes
    if A[-1] != B[-2]:
        raise shape_error(
            "matmul", "contraction dims differ", 1, f"leading matrix dim {A[-1]}", B[-2]
        )
    batch = broadcast_shapes(A[:-2], B[:-2])
    if batch is None:
        raise shape_error(
            "matmul",
            "batch prefixes do not broadcast",
            1,
            f"a prefix broadcastable with {A[:-2]}",
            B[:-2],
        )
    return (*batch, A[-2], B[-1])


def _mm(D: Domain, A: Tensor, B: Tensor, ta: bool, tb: bool) -> Tensor:
    """Batched product of op(A) @ op(B) over equal batch prefixes; op transposes when set.
    Each entry is a left fold over the contraction index of products taken as
    mul(op(A)[i,p], op(B)[p,j])."""
    batch = A.shape[:-2]
    m = A.shape[-1] if ta else A.shape[-2]
    k = A.shape[-2] if ta else A.shape[-1]
    n = B.shape[-2] if tb else B.shape[-1]
    out_shape = (*batch, m, n)
    data = []
    for flat in range(size(out_shape)):
        idx = unravel_index(flat, out_shape)
        b, i, j = idx[:-2], idx[-2], idx[-1]

        def av(i: int, p: int, b: Shape = b) -> Any:
            return A.data[ravel_index((*b, p, i) if ta else (*b, i, p), A.shape)]

        def bv(p: int, j: int, b: Shape = b) -> Any:
            return B.data[ravel_index((*b, j, p) if tb else (*b, p, j), B.shape)]

        data.append(fold_add(D, (D.mul(av(i, p), bv(p, j)) for p in range(k))))
    return Tensor(out_shape, tuple(data))


def matmul_operands(xs: list[Tensor], out: Shape) -> tuple[Tensor, Tensor]:
    batch = out[:-2]
    A = expand(xs[0], (*batch, *xs[0].shape[-2:]))
    B = expand(xs[1], (*batch, *xs[1].shape[-2:]))
    return A, B


def _matmul_forward(D: Domain, xs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    A, B = matmul_operands(xs, _matmul_shape([xs[0].shape, xs[1].shape], a))
    return _mm(D, A, B, False, False)


def _matmul_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    out = _matmul_shape([xs[0].shape, xs[1].shape], a)
    A, B = matmul_operands(xs, out)
    dA, dB = matmul_operands(dxs, out)
    left, right = _mm(D, dA, B, False, False), _mm(D, A, dB, False, False)
    return Tensor(out, tuple(D.add(p, q) for p, q in zip(left.data, right.data, strict=True)))


def _matmul_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    A, B = matmul_operands(xs, g.shape)
    gA = _mm(D, g, B, False, True)  # gA[i,p] = fold_j g[i,j]*B[p,j]
    gB = _mm(D, A, g, True, False)  # gB[p,j] = fold_i A[i,p]*g[i,j]
    return [unbroadcast(D, gA, xs[0].shape), unbroadcast(D, gB, xs[1].shape)]


register(
    name="matmul",
    family=FAMILY,
    arity=2,
    attrs=(),
    shape=_matmul_shape,
    forward=_matmul_forward,
    jvp=_matmul_jvp,
    vjp=_matmul_vjp,
    saves="a, b",
    doc="(..., m, k) @ (..., k, n), batch prefixes broadcast; C[i,j] = fold_p a[i,p]*b[p,j]; "
    "cotangents g@b^T (fold over j), a^T@g (fold over i), reduced over broadcast batch axes",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 2, 3), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12),
            arg((3, 2), 1, -1, 2, Fraction(1, 2), 0, 3),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg((3, 2), 1, 2, Fraction(1, 2), -1, 2, 0),
        ),
    ),
)


def _linear_shape(shapes: list[Shape], a: Attrs) -> Shape:
    x, w, b = shapes
    if len(w) != 2:
        raise shape_error("linear", "weight must be a matrix", 1, "rank 2", w)
    if len(x) not in (1, 2):
        raise shape_error("linear", "input must be (in,) or (batch, in)", 0, "rank 1 or 2", x)
    if x[-1] != w[1]:
        raise shape_error("linear", "input features differ from weight columns", 0, w[1], x[-1])
    if b != (w[0],):
        raise shape_error("linear", "bias must be (out,)", 2, (w[0],), b)
    return (*x[:-1], w[0])


def _linear_core(D: Domain, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
    """y[r,i] = fold_j mul(w[i,j], x[r,j]), then add(., b[i]) when b is given."""
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    data = []
    for r in range(rows):
        for i in range(out_dim):
            acc = fold_add(D, (D.mul(w.data[i * n + j], x.data[r * n + j]) for j in range(n)))
            data.append(D.add(acc, b.data[i]) if b is not None else acc)
    return Tensor((*x.shape[:-1], out_dim), tuple(data))


def _linear_jvp(D: Domain, xs: list[Tensor], dxs: list[Tensor], a: Attrs, env: Env) -> Tensor:
    x, w, _ = xs
    dx, dw, db = dxs
    p, q = _linear_core(D, dx, w, None), _linear_core(D, x, dw, None)
    out_dim = w.shape[0]
    return Tensor(
        p.shape,
        tuple(
            D.add(D.add(u, v), db.data[k % out_dim])
            for k, (u, v) in enumerate(zip(p.data, q.data, strict=True))
        ),
    )


def _linear_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x, w, b = xs
    out_dim, n = w.shape
    rows = 1 if len(x.shape) == 1 else x.shape[0]
    gv = lambda r, i: g.data[r * out_dim + i]  # noqa: E731
    gx = tuple(
        fold_add(D, (D.mul(gv(r, i), w.data[i * n + j]) for i in range(out_dim)))
        for r in range(rows)
        for j in range(n)
    )
    gw = tuple(
        fold_add(D, (D.mul(gv(r, i), x.data[r * n + j]) for r in range(rows)))
        for i in range(out_dim)
        for j in range(n)
    )
    gb = tuple(fold_add(D, (gv(r, i) for r in range(rows))) for i in range(out_dim))
    return [Tensor(x.shape, gx), Tensor(w.shape, gw), Tensor(b.shape, gb)]


register(
    name="linear",
    family=FAMILY,
    arity=3,
    attrs=(),
    shape=_linear_shape,
    forward=lambda D, xs, a, env: _linear_core(D, *xs),
    jvp=_linear_jvp,
    vjp=_linear_vjp,
    saves="x, w",
    doc="linear(x, w, b) = W x + b for x (in,) or (batch, in), w (out, in), b (out,): "
    "y[r,i] = fold_j w[i,j]*x[r,j] + b[i]; gx = fold_i g*w, gw = fold_r g*x, gb = fold_r g",
    tags=frozenset({"reduction"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            arg((2, 3), 1, 0, -1, 2, 1, Fraction(1, 2)),
            arg((2,), Fraction(1, 4), -3),
            note="generic point",
        ),
        second_point(
            second_arg(),
            arg(
                (4, 3),
                1,
                Fraction(1, 2),
                -1,
                2,
                0,
                1,
                Fraction(-1, 2),
                Fraction(3, 2),
                Fraction(1, 4),
                1,
                1,
                1,
            ),
            arg((4,), Fraction(1, 2), -1, 0, 2),
        ),
    ),
)
