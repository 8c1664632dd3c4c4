"""The index family: select index_select scatter_add gather.

Invariants:
- Indices are attributes (non-differentiable data), never tensor arguments; select's index
  may come from the non-differentiable integer environment (env_slot).
- Scatter-adds are left folds in increasing source position per target (index_select's
  and gather's VJPs, scatter_add's forward); gather's index M = x.shape[-1] is the zero
  padding (reads +0, gets no cotangent).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from ..domains import Domain
from ..errors import GraphError, op_error
from ..shape import Shape, size
from ..tensor import Tensor, fold_add
from .builders import second_arg, second_point, shape_error
from .table import Attrs, AttrSpec, Env, arg, register, sample

__all__ = ["FAMILY"]

FAMILY = "index"


def _select_index(op: str, a: Attrs, env: Env, dim: int) -> int:
    if a.get("env_slot") is not None:
        slot = a["env_slot"]
        if not 0 <= slot < len(env):
            raise op_error(
                GraphError, op, "env slot out of range", expected=f"< {len(env)}", got=slot
            )
        i = env[slot]
    else:
        i = a["index"]
    if not 0 <= i < dim:
        raise shape_error(op, "index out of range", 0, f"0 <= index < {dim}", i)
    return i


def _select_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise shape_error("select", "input must have rank >= 1", 0, "rank >= 1", s)
    if (a.get("index") is None) == (a.get("env_slot") is None):
        raise op_error(GraphError, "select", "give exactly one of index and env_slot")
    if a.get("index") is not None:
        _select_index("select", a, (), s[0])
    return s[1:]


def _select_fwd(t: Tensor, a: Attrs, env: Env) -> Tensor:
    i = _select_index("select", a, env, t.shape[0])
    inner = size(t.shape[1:])
    return Tensor(t.shape[1:], t.data[i * inner : (i + 1) * inner])


def _select_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    i = _select_index("select", a, env, x.shape[0])
    inner = size(x.shape[1:])
    z = D.zero()
    return [Tensor(x.shape, (z,) * (i * inner) + g.data + (z,) * ((x.shape[0] - i - 1) * inner))]


register(
    name="select",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("index", "nat", False), AttrSpec("env_slot", "nat", False)),
    shape=_select_shape,
    forward=lambda D, xs, a, env: _select_fwd(xs[0], a, env),
    jvp=lambda D, xs, dxs, a, env: _select_fwd(dxs[0], a, env),
    vjp=_select_vjp,
    saves="input shape",
    doc="x[i] on the leading axis (axis removed); i a literal `index` or "
    "env[env_slot] from the non-differentiable integer environment",
    tags=frozenset({"structural", "index"}),
    samples=(
        sample(
            arg((3, 2), 1, -2, 3, Fraction(1, 2), 4, -1), attrs={"index": 2}, note="generic point"
        ),
        second_point(
            second_arg(),
            attrs={"index": 1},
        ),
    ),
)


def _gather(t: Tensor, indices: Sequence[int]) -> Tensor:
    inner = size(t.shape[1:])
    data: list[Any] = []
    for i in indices:
        data.extend(t.data[i * inner : (i + 1) * inner])
    return Tensor((len(indices), *t.shape[1:]), tuple(data))


def _scatter(D: Domain, t: Tensor, indices: Sequence[int], n: int) -> Tensor:
    """out[j] = fold over k with indices[k] == j (in order of k) of t[k]; zero if none."""
    inner = size(t.shape[1:])
    buckets: list[list[int]] = [[] for _ in range(n)]
    for k, j in enumerate(indices):
        buckets[j].append(k)
    data: list[Any] = []
    for j in range(n):
        for e in range(inner):
            data.append(fold_add(D, (t.data[k * inner + e] for k in buckets[j])))
    return Tensor((n, *t.shape[1:]), tuple(data))


def _index_select_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise shape_error("index_select", "input must have rank >= 1", 0, "rank >= 1", s)
    for i in a["indices"]:
        if not 0 <= i < s[0]:
            raise shape_error("index_select", "index out of range", 0, f"0 <= index < {s[0]}", i)
    return (len(a["indices"]), *s[1:])


register(
    name="index_select",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("indices", "ints"),),
    shape=_index_select_shape,
    forward=lambda D, xs, a, env: _gather(xs[0], a["indices"]),
    jvp=lambda D, xs, dxs, a, env: _gather(dxs[0], a["indices"]),
    vjp=lambda D, xs, g, a, env: [_scatter(D, g, a["indices"], xs[0].shape[0])],
    saves="input shape",
    doc="rows x[indices[k]]; VJP scatter-adds in order of k",
    tags=frozenset({"structural", "index"}),
    samples=(
        sample(
            arg((3, 2), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"indices": (2, 0, 2)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            attrs={"indices": (1, 0, 1)},
        ),
    ),
)


def _scatter_add_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise shape_error("scatter_add", "input must have rank >= 1", 0, "rank >= 1", s)
    if len(a["indices"]) != s[0]:
        raise shape_error("scatter_add", "one index per input row", 0, s[0], len(a["indices"]))
    for i in a["indices"]:
        if not 0 <= i < a["size"]:
            raise shape_error(
                "scatter_add", "index out of range", 0, f"0 <= index < {a['size']}", i
            )
    return (a["size"], *s[1:])


register(
    name="scatter_add",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("size", "nat")),
    shape=_scatter_add_shape,
    forward=lambda D, xs, a, env: _scatter(D, xs[0], a["indices"], a["size"]),
    jvp=lambda D, xs, dxs, a, env: _scatter(D, dxs[0], a["indices"], a["size"]),
    vjp=lambda D, xs, g, a, env: [_gather(g, a["indices"])],
    saves="nothing",
    doc="out[j] = fold over k with indices[k]==j of x[k]; VJP gathers",
    tags=frozenset({"structural", "index"}),
    samples=(
        sample(
            arg((3, 2), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"indices": (1, 1, 0), "size": 3},
            note="generic point",
        ),
        second_point(
            second_arg(),
            attrs={"indices": (2, 0), "size": 3},
        ),
    ),
)


# --------------------------------------------------------------------------- gather


def _gather_shape(shapes: list[Shape], a: Attrs) -> Shape:
    s = shapes[0]
    if len(s) < 1:
        raise shape_error("gather", "input must have rank >= 1", 0, "rank >= 1", s)
    if len(a["indices"]) != size(a["shape"]):
        raise shape_error(
            "gather", "index count does not fill `shape`", None, size(a["shape"]), len(a["indices"])
        )
    m = s[-1]
    for i in a["indices"]:
        if not 0 <= i <= m:
            raise shape_error(
                "gather", "index out of range", 0, f"0 <= index <= {m} ({m} = pad)", i
            )
    return (*s[:-1], *a["shape"])


def _gather_fwd(D: Domain, x: Tensor, a: Attrs) -> Tensor:
    m = x.shape[-1]
    z = D.zero()
    data: list[Any] = []
    for b in range(size(x.shape[:-1])):
        row = x.data[b * m : (b + 1) * m]
        data.extend(row[i] if i < m else z for i in a["indices"])
    return Tensor((*x.shape[:-1], *a["shape"]), tuple(data))


def _gather_vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Attrs, env: Env) -> list[Tensor]:
    x = xs[0]
    m, idx = x.shape[-1], a["indices"]
    p = len(idx)
    buckets: list[list[int]] = [[] for _ in range(m)]
    for k, i in enumerate(idx):
        if i < m:
            buckets[i].append(k)
    data: list[Any] = []
    for b in range(size(x.shape[:-1])):
        row = g.data[b * p : (b + 1) * p]
        data.extend(fold_add(D, (row[k] for k in bucket)) for bucket in buckets)
    return [Tensor(x.shape, tuple(data))]


register(
    name="gather",
    family=FAMILY,
    arity=1,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("shape", "shape")),
    shape=_gather_shape,
    forward=lambda D, xs, a, env: _gather_fwd(D, xs[0], a),
    jvp=lambda D, xs, dxs, a, env: _gather_fwd(D, dxs[0], a),
    vjp=_gather_vjp,
    saves="input shape",
    doc="last-axis gather: out[..., p] = x[..., indices[p]] with output shape "
    "x.shape[:-1] + shape; index M = x.shape[-1] is the zero padding (reads +0, gets no "
    "cotangent); VJP scatter-adds: gx[..., m] = left fold over p ascending with "
    "indices[p] == m of g[..., p] (0 if none)",
    tags=frozenset({"structural", "index"}),
    samples=(
        sample(
            arg((2, 3), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"indices": (2, 0, 3, 2), "shape": (2, 2)},
            note="generic point",
        ),
        second_point(
            second_arg(),
            attrs={"indices": (2, 3, 0), "shape": (3,)},
        ),
    ),
)
