"""The eager op path's shortcuts in `runtime.engine.tape` and the reference each
one must equal:

- the reverse passes run `op_pairs` on a `Tape.op` node's fields (no closure per node);
  its reference is the definition: the kernel's full `vjp`, folded per distinct argument
  (`fold_fanin`), in increasing id order, for the arguments that require grad;
- `Tape.op` reads `validated`'s memo inline for an op without attributes; its reference
  is `spec.validate.check_node` (a failure is never memoised);
- the argument ids are checked in one loop; a bad one raises the same `GraphError`
  naming its input index as `Tape._check_id`, with the tape unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from runtime.engine.context import KernelContext
from runtime.engine.tape import Tape, op_pairs
from runtime.kernels import fold_fanin
from spec.errors import GraphError, ShapeError
from spec.validate import check_node

F32 = np.float32


def _reference_pairs(t: Tape, i: int, g: Any) -> list[tuple[int, bytes]]:
    """The definition of a `Tape.op` node's backward, from its kernel's full `vjp`."""
    node = t.nodes[i]
    ctx = t.ctx
    per_arg = [ctx.arr(c) for c in node.kern.vjp(ctx, node.saved, g, node.attrs, node.env)]
    folded = fold_fanin(node.parents, per_arg)
    return [
        (j, ctx.arr(c).tobytes()) for j, c in sorted(folded.items()) if t.nodes[j].requires_grad
    ]


def _got_pairs(t: Tape, i: int, g: Any) -> list[tuple[int, bytes]]:
    backward = t.nodes[i].backward
    assert backward is not None
    pairs = [(j, np.asarray(c).tobytes()) for j, c in backward(g)]
    assert pairs == [(j, np.asarray(c).tobytes()) for j, c in op_pairs(t.nodes[i], g)]
    # the sweep drops pairs into frozen arguments unread: compare the others
    return [(j, c) for j, c in pairs if t.nodes[j].requires_grad]


def _case_tape(rng: np.random.Generator) -> tuple[Tape, list[int]]:
    """Leaves x, y (require grad), w (frozen, a matrix), b (requires grad), then op nodes
    with one argument, distinct arguments, repeated arguments and frozen arguments."""
    t = Tape(KernelContext("float32"))
    x = t.leaf(rng.standard_normal((2, 3)).astype(F32))
    y = t.leaf(rng.standard_normal((2, 3)).astype(F32))
    w = t.leaf(rng.standard_normal((4, 3)).astype(F32), requires_grad=False)
    b = t.leaf(rng.standard_normal(4).astype(F32))
    ops = [
        t.op("neg", [x]),
        t.op("tanh", [y]),
        t.op("mul", [x, y]),
        t.op("mul", [x, x]),  # fan-in
        t.op("add", [y, y]),
        t.op("concat", [x, y, x]),  # fan-in, three arguments
        t.op("linear", [x, w, b]),  # a frozen weight: the kernel's `vjp_some`
        t.op("matmul", [x, t.op("transpose", [w])]),  # frozen operand
        t.op("sub", [w, w]),  # frozen node: no backward
    ]
    return t, ops


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_op_backward_equals_the_folded_kernel_vjp(seed: int) -> None:
    rng = np.random.default_rng(seed)
    t, ops = _case_tape(rng)
    for i in ops:
        node = t.nodes[i]
        if not node.requires_grad:
            assert node.backward is None and node.name == "sub"
            continue
        g = t.ctx.arr(rng.standard_normal(node.value.shape).astype(F32))
        assert _got_pairs(t, i, g) == _reference_pairs(t, i, g), node.name


def test_leaf_and_add_node_backward_is_their_rule() -> None:
    t = Tape(KernelContext("float32"))
    a = t.leaf(np.ones(2, dtype=F32))

    def rule(g: Any) -> list[tuple[int, Any]]:
        return [(a, g)]

    b = t.add_node("custom", np.ones(2, dtype=F32), True, (a,), rule)
    assert t.nodes[a].backward is None and t.nodes[b].backward is rule
    assert t.nodes[b].rule is rule and t.nodes[b].kern is None


def test_memo_read_equals_check_node_and_is_a_fresh_copy() -> None:
    t = Tape(KernelContext("float32"))
    x = t.leaf(np.ones((2, 3), dtype=F32))
    first = t.op("leaky_relu", [x])  # the default slope is filled in by normalisation
    second = t.op("leaky_relu", [x])  # read from the memo inline
    want, _ = check_node("leaky_relu", [0], {}, [(2, 3)])
    assert want  # not empty: the copy below is observable
    assert t.nodes[first].attrs == want and t.nodes[second].attrs == want
    assert t.nodes[first].attrs is not t.nodes[second].attrs
    t.nodes[second].attrs["negative_slope"] = 0  # a caller mutating a node's attributes
    assert t.nodes[t.op("leaky_relu", [x])].attrs == want  # ... does not reach the memo


def test_failed_validation_is_not_memoised() -> None:
    t = Tape(KernelContext("float32"))
    a = t.leaf(np.ones((2, 3), dtype=F32))
    b = t.leaf(np.ones(4, dtype=F32))
    for _ in range(2):  # raises every time, appends nothing
        with pytest.raises(ShapeError):
            t.op("add", [a, b])
        assert len(t) == 2


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ([0, 5], "add: input 1: invalid tape id 5"),
        ([-1, 0], "add: input 0: invalid tape id -1"),
        ([0, True], "add: input 1: invalid tape id True"),
        ([0.0, 0], "add: input 0: invalid tape id 0.0"),
        ([0, np.int64(0)], r"add: input 1: invalid tape id np.int64\(0\)"),
    ],
)
def test_bad_argument_ids_name_their_input(args: list[Any], match: str) -> None:
    t = Tape(KernelContext("float32"))
    t.leaf(np.ones(2, dtype=F32))
    with pytest.raises(GraphError, match=match):
        t.op("add", args)
    assert len(t) == 1
