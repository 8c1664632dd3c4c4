"""The runtime-level operation order of the composite layers, as data, and its interpreter.

Level 2 must follow the `ordered` kernels bit for bit, and those follow the spec's
definitions: the body graphs of `gelu`, `batch_norm` and `layer_norm`
(`spec.ops.OPS[name].body`) and the scalar rule of the primitive `sigmoid`. `OP_ORDER`
restates each one as an expression tree, and the elementwise interval rules of
`intervals.py` *execute* these trees (`evaluate`), so the data is the code.

Invariants:
- A tree is a leaf or a tuple (op, arg, ...). Leaves: "x" (the input), the names of a
  layer's parameters ("weight", "bias", "mean", "var"), "eps" (the layer's epsilon), "n"
  (the normalised width), or an exact constant (Fraction or int), cast once by the runtime.
  Argument order is the spec's (it decides every rounding).
- `batch_norm` is the *evaluation-mode* layer: the spec body with its batch statistics
  replaced by the running statistics "mean" and "var"; `layer_norm`'s "eps" is the layer's
  epsilon (the spec body's LN_EPS const). `reduce_sum` is the left fold, the division by
  "n" the spec's `reduce_mean` body.
- `tests/test_verify.py` walks the spec bodies (expanding composites, dropping shape-only
  ops) and fails when a body's ops, argument pattern or constants differ from OP_ORDER.
- `evaluate` maps every node to the `Arith` operation of the same name, except
  (x * x) * x of one value, which is enclosed by `cube` (same value, tighter and free of
  the 0 * inf corner); a tree with `reduce_sum` (layer_norm) is not elementwise and is
  executed by `intervals.layernorm`, which follows it by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from spec.ops import GELU_C, GELU_K

from .arithmetic import Arith, cube
from .core import Iv

__all__ = ["OP_ORDER", "Tree", "evaluate"]

Tree = Any  # str | Fraction | int | tuple[str, Tree, ...]

_XC = ("sub", "x", ("div", ("reduce_sum", "x"), "n"))
OP_ORDER: dict[str, Tree] = {
    "sigmoid": ("div", 1, ("add", 1, ("exp", ("neg", "x")))),
    "gelu": (
        "mul",
        ("mul", Fraction(1, 2), "x"),
        (
            "add",
            1,
            (
                "tanh",
                ("mul", GELU_C, ("add", "x", ("mul", GELU_K, ("mul", ("mul", "x", "x"), "x")))),
            ),
        ),
    ),
    "batch_norm": (
        "add",
        ("mul", ("div", ("sub", "x", "mean"), ("sqrt", ("add", "var", "eps"))), "weight"),
        "bias",
    ),
    "layer_norm": (
        "add",
        (
            "mul",
            ("div", _XC, ("sqrt", ("add", ("div", ("reduce_sum", ("mul", _XC, _XC)), "n"), "eps"))),
            "weight",
        ),
        "bias",
    ),
}

_BINARY: dict[str, Callable[[Arith, Iv, Iv], Iv]] = {
    "add": Arith.add,
    "sub": Arith.sub,
    "mul": Arith.mul,
    "div": Arith.div,
}
_UNARY: dict[str, Callable[[Arith, Iv], Iv]] = {
    "neg": Arith.neg,
    "exp": Arith.exp,
    "tanh": Arith.tanh,
    "sqrt": Arith.sqrt,
}


def evaluate(A: Arith, tree: Tree, leaves: Mapping[str, Iv]) -> Iv:
    """The interval of an elementwise tree at A's level: named leaves from `leaves`,
    constants through `A.const` (rounded to nearest once at level 2, enclosed at level 1)."""
    if isinstance(tree, str):
        return leaves[tree]
    if not isinstance(tree, tuple):
        return A.const(tree)
    op, *args = tree
    if op == "mul" and args[0] == ("mul", args[1], args[1]) and isinstance(args[1], str):
        return cube(A, leaves[args[1]])
    if len(args) == 1:
        return _UNARY[op](A, evaluate(A, args[0], leaves))
    return _BINARY[op](A, evaluate(A, args[0], leaves), evaluate(A, args[1], leaves))
