"""The embed family: embedding one_hot (composites).

Invariants:
- Token and class ids are attributes, never tensor arguments; embedding is index_select
  (+ reshape), whose VJP scatter-adds in order of occurrence; one_hot is a const and not
  differentiable.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ..shape import size
from .builders import composite, second_point, shape_error
from .table import Attrs, AttrSpec, arg, sample

__all__ = ["FAMILY"]

FAMILY = "embed"


# --------------------------------------------------------------------------- embeddings


def _embedding_body(b: Any, args: list[int], a: Attrs) -> int:
    s = b.shape_of(args[0])
    if len(s) != 2:
        raise shape_error("embedding", "table must be (V, D)", 0, "rank 2", s)
    idx = a["indices"]
    shape = a.get("shape")
    shape = (len(idx),) if shape is None else shape
    if size(shape) != len(idx):
        raise shape_error(
            "embedding", "index count does not fill `shape`", None, size(shape), len(idx)
        )
    rows = b.node("index_select", args[0], indices=idx)
    if shape == (len(idx),):
        return rows
    return b.node("reshape", rows, shape=(*shape, s[1]))


composite(
    name="embedding",
    family=FAMILY,
    arity=1,
    body=_embedding_body,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("shape", "shape", False)),
    doc="table (V, D) rows at token ids `indices` (row-major over `shape`, default "
    "(len(indices),)), output shape + (D,): index_select then reshape; the VJP "
    "scatter-adds into the table (left fold in order of occurrence)",
    tags=frozenset({"structural", "index", "model"}),
    samples=(
        sample(
            arg((3, 2), 1, -2, 3, Fraction(1, 2), 4, -1),
            attrs={"indices": (2, 0, 2)},
            note="generic point",
        ),
        second_point(
            arg((3, 2), 1, 2, Fraction(1, 2), -1, 2, 0),
            attrs={"indices": (2, 0, 2)},
        ),
    ),
)


def _one_hot_body(b: Any, args: list[int], a: Attrs) -> int:
    n = a["num_classes"]
    for i in a["indices"]:
        if not 0 <= i < n:
            raise shape_error("one_hot", "class id out of range", None, f"0 <= id < {n}", i)
    vals = [Fraction(int(i == j)) for i in a["indices"] for j in range(n)]
    return b.node("const", shape=(len(a["indices"]), n), values=vals)


composite(
    name="one_hot",
    family=FAMILY,
    arity=0,
    body=_one_hot_body,
    attrs=(AttrSpec("indices", "ints"), AttrSpec("num_classes", "nat")),
    doc="const (len(indices), num_classes) with 1 at [k, indices[k]] and 0 elsewhere "
    "(non-differentiable)",
    tags=frozenset({"index", "model"}),
    differentiable=False,
    samples=(
        sample(attrs={"indices": (2, 0), "num_classes": 3}, note="generic point"),
        second_point(attrs={"indices": (1, 0), "num_classes": 3}),
    ),
)
