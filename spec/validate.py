"""The IR validator: checks one node, or a whole graph, against the op table.

Invariants: a node is valid when its op exists, its arity matches, every argument id refers
to an earlier value (inputs 0..|Γ|-1, then nodes in creation order), its attributes match
the op's schema (required present, none unknown, each of the right kind), and the op's
shape rule accepts the argument shapes. Validation returns normalised attributes and the
output shape; it never evaluates values. Runs after every capture or lowering.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

from .errors import GraphError, ShapeError, op_error
from .ops import AttrSpec, get_op
from .shape import Shape, as_shape

__all__ = ["check_node", "normalize_attrs", "validate_graph"]


def _rational(op: str, name: str, v: Any) -> Fraction:
    if isinstance(v, bool):
        raise op_error(
            GraphError,
            op,
            f"attribute {name!r} must be a rational",
            expected="int, Fraction, 'p/q' or finite float",
            got=v,
        )
    if isinstance(v, float) and not math.isfinite(v):
        raise op_error(
            GraphError,
            op,
            f"attribute {name!r} must be finite",
            expected="a finite rational",
            got=v,
        )
    try:
        return Fraction(v)
    except (TypeError, ValueError):
        raise op_error(
            GraphError,
            op,
            f"attribute {name!r} must be a rational",
            expected="int, Fraction, 'p/q' or finite float",
            got=repr(v),
        ) from None


def _int(op: str, name: str, v: Any, nat: bool) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or (nat and v < 0):
        raise op_error(
            GraphError,
            op,
            f"attribute {name!r} must be a {'non-negative ' if nat else ''}int",
            expected="a non-negative int" if nat else "an int",
            got=repr(v),
        )
    return int(v)


def _normalize(op: str, spec: AttrSpec, v: Any) -> Any:
    if spec.kind == "int":
        return _int(op, spec.name, v, False)
    if spec.kind == "nat":
        return _int(op, spec.name, v, True)
    if spec.kind == "ints":
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise op_error(
                GraphError,
                op,
                f"attribute {spec.name!r} must be a list of ints",
                expected="a list of non-negative ints",
                got=repr(v),
            )
        return tuple(_int(op, spec.name, x, True) for x in v)
    if spec.kind == "shape":
        try:
            return as_shape(v, f"{op}: attribute {spec.name!r}")
        except (TypeError, ShapeError) as e:
            raise op_error(
                GraphError,
                op,
                f"attribute {spec.name!r} must be a shape",
                expected="a list of non-negative ints",
                got=repr(v),
            ) from e
    if spec.kind == "rational":
        return _rational(op, spec.name, v)
    if spec.kind == "rationals":
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
            raise op_error(
                GraphError,
                op,
                f"attribute {spec.name!r} must be a list",
                expected="a list of rationals",
                got=repr(v),
            )
        return tuple(_rational(op, spec.name, x) for x in v)
    if spec.kind == "str":
        if not isinstance(v, str):
            raise op_error(
                GraphError, op, f"attribute {spec.name!r} must be a str", expected="a str", got=v
            )
        return v
    raise GraphError(f"{op}: attribute {spec.name!r} has unknown kind {spec.kind!r}")


def normalize_attrs(op: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Check attributes against the op's schema; return them normalised."""
    d = get_op(op)
    known = {s.name: s for s in d.attrs}
    unknown = sorted(set(attrs) - set(known))
    if unknown:
        raise op_error(GraphError, op, "unknown attributes", expected=sorted(known), got=unknown)
    out: dict[str, Any] = {}
    for s in d.attrs:
        if s.name not in attrs or attrs[s.name] is None:
            if s.required:
                raise op_error(GraphError, op, f"missing attribute {s.name!r}")
            out[s.name] = s.default
        else:
            out[s.name] = _normalize(op, s, attrs[s.name])
    return out


def check_node(
    op: str, args: Sequence[int], attrs: Mapping[str, Any], shapes: Sequence[Shape]
) -> tuple[dict[str, Any], Shape]:
    """Validate one node against the shapes of the values before it."""
    d = get_op(op)
    n = len(shapes)
    if d.arity is None:
        if len(args) < 1:
            raise op_error(GraphError, op, "needs at least one argument", expected=">= 1", got=0)
    elif len(args) != d.arity:
        raise op_error(GraphError, op, "wrong number of arguments", expected=d.arity, got=len(args))
    for i, a in enumerate(args):
        if isinstance(a, bool) or not isinstance(a, int) or not 0 <= a < n:
            raise op_error(
                GraphError,
                op,
                "argument id does not name an earlier value",
                index=i,
                expected=f"an id in 0..{n - 1}",
                got=a,
            )
    norm = normalize_attrs(op, attrs)
    out = d.shape([shapes[a] for a in args], norm)
    return norm, out


def _identical(a: Any, b: Any) -> bool:
    """Equal and of the same types throughout (Fraction(3, 2) == 1.5, but 1.5 is not a
    normalised rational attribute)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_identical(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_identical(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def validate_graph(inputs: Sequence[Shape], nodes: Sequence[Any]) -> list[Shape]:
    """Validate every node in order; return the shapes of all values (Γ then nodes).
    Nodes must already carry normalised attributes (as `Graph` stores them)."""
    shapes = [as_shape(s, f"graph input {i}") for i, s in enumerate(inputs)]
    for k, node in enumerate(nodes):
        try:
            norm, out = check_node(node.op, node.args, node.attrs, shapes)
        except (GraphError, ShapeError) as e:
            raise type(e)(f"node %{len(inputs) + k}: {e}") from None
        if not _identical(norm, dict(node.attrs)):
            raise GraphError(f"node %{len(inputs) + k}: {node.op}: attributes not normalised")
        shapes.append(out)
    return shapes
