"""Guarded ATen rules: rules for table ops other helpers add to the op table, written
against the table's names and attributes.

Invariants: a guarded rule refuses with `Unsupported` ("needs the table op ...") while the
op table lacks the op or one of its attributes (`has_attrs`), and emits the table op when
it exists; `Poison` marks a node that could not be mapped, or an output no table op gives (it
is reported when used); nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

from spec.ops import OPS

from .core import Emitter, Unsupported

__all__ = ["Poison", "elu", "has_attrs", "leaky_relu", "needs", "table_unary"]

Rule = Callable[..., Any]


class Poison:
    """The value of a node that could not be mapped (`name` None: already reported) or
    of an output no table op gives (reported when something uses it)."""

    def __init__(self, name: str | None = None, why: str = "") -> None:
        self.name, self.why = name, why


def has_attrs(op: str, *attrs: str) -> bool:
    """Does the op table have `op` with every attribute in `attrs` (rules for ops other
    helpers add to the table are guarded by this)."""
    spec = OPS.get(op)
    return spec is not None and set(attrs) <= {a.name for a in spec.attrs}


def needs(op: str, *attrs: str) -> None:
    if not has_attrs(op, *attrs):
        what = f"table op {op!r}" + (f" with attribute(s) {', '.join(attrs)}" if attrs else "")
        raise Unsupported(f"needs the {what}, which this op table does not have")


def table_unary(op: str, **fixed: Any) -> Rule:
    """An ATen op that is one table op (guarded: refused while the table lacks it)."""

    def rule(E: Emitter, x: Any) -> Any:
        needs(op, *fixed)
        return E.node(op, x, **fixed)

    return rule


def leaky_relu(E: Emitter, x: Any, negative_slope: Any = 0.01) -> Any:
    needs("leaky_relu", "negative_slope")
    return E.node("leaky_relu", x, negative_slope=Fraction(negative_slope))


def elu(E: Emitter, x: Any, alpha: Any = 1.0, scale: Any = 1, input_scale: Any = 1) -> Any:
    if scale != 1 or input_scale != 1:
        raise Unsupported(f"scale={scale}, input_scale={input_scale} (selu-like elu)")
    needs("elu", "alpha")
    return E.node("elu", x, alpha=Fraction(alpha))
