"""The tape (a Wengert list) and its reverse passes, with TorchLean's accumulation rules.

Invariants:
- A node's id is its index; `add_node` returns the old length. Op constructors validate
  before appending, so a failed op leaves the tape unchanged.
- A node's requires_grad is the OR of its parents' (leaves choose); a node without it is
  *frozen*: reverse passes skip it and drop contributions into it.
- A node's backward maps its output cotangent to `(id, grad)` pairs; the passes fold them
  into a dense list in emission order: the first contribution into an empty slot is stored
  as is, later ones as `existing + new`.
- Gradients are returned, never stored on nodes. A gradient hook has one semantics
  (TorchLean's `backwardDenseAllWithHook`): `apply_hook`, pointwise over the finished dense
  list, never inside the sweep.
- Forward mode (`forward_tangents`) takes a tangent for any leaf, frozen or not (see there).
- `replay` runs the recorded program (every `Tape.op` node keeps its op, normalised
  attributes and environment) again on new leaf values: the same values as a new
  recording, without recording it again.
- A backward may end its pairs with `(ZERO_REST, None)`: "a zero for every earlier id I did
  not name" (what `lower` emits: TorchLean's compile_aux_data gives every earlier id a
  dense zero). The sweep applies those zeros lazily, bit for bit as the dense pairs would:
  `v + 0` is `v` except that it turns −0 into +0 (and an empty slot into zeros), and
  `(v + 0) + 0 == v + 0`, so each slot gets one `+ zeros` wherever one or more pending
  zeros precede its next real contribution, or its own node's turn. A node's pass is then
  O(its arguments), not O(its id): a lowered tape's reverse pass is linear, not quadratic.
  `lower(..., emission="dense")` is the reference that the lazy path must equal
  (tests/test_lower.py).

Speed (the eager Session runs every op through `Tape.op`): the validation of an identical
(op, input shapes, attributes) is memoised (`validated`; `Tape.op` reads the memo inline for
an op without attributes, and anything not found goes through `validated`), the forward
runs under one `fp_quiet()` (the kernels do not set the floating-point state again), a
`Tape.op` node keeps its kernel's fields instead of a backward closure (the sweep runs
`op_pairs` on them, the reference being the kernel's full `vjp` folded per argument:
tests/test_tape_fastpath.py; the node is built by storing its fields, the reference being
the `TapeNode` constructor: tests/test_session_fastpath_kernels.py), and the reverse
sweep checks each contribution with a cheap shape/dtype test, falling back to the full
check (and its error message) only when that test fails. None of this changes a value or
skips a check.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Any

import numpy as np

from spec.errors import GraphError, HookError, ShapeError
from spec.validate import check_node

from ..kernels import KERNELS, fold_fanin, kernel_for
from .context import KernelContext, fp_enter, fp_exit, fp_quiet

__all__ = ["ZERO_REST", "Backward", "Tape", "TapeNode", "apply_hook", "op_pairs", "validated"]

ZERO_REST = -1
"""The id of a backward's last pair `(ZERO_REST, None)`: a zero for every earlier id the
backward did not name (see the module docstring)."""


def _first(pair: tuple[int, Any]) -> int:
    return pair[0]


Backward = Callable[[Any], Sequence[tuple[int, Any]]]
Hook = Callable[[int, Any], Any]


_ATOMS = (int, bool, str, Fraction, type(None))
_VALIDATED: dict[Any, tuple[dict[str, Any], tuple[int, ...]]] = {}
_VALIDATED_MAX = 4096


def _freeze(v: Any) -> Any:
    """A hashable key that is equal only for attribute values that normalise alike: the
    exact type goes into the key (1, 1.0, True and Fraction(1) stay apart; floats by their
    hex form, so -0.0 and NaN are keys too). Anything else raises TypeError: not cached."""
    t = type(v)
    if t in _ATOMS:
        return (t, v)
    if t is float:
        return (t, v.hex())
    if t is tuple or t is list:
        return (t, tuple(_freeze(x) for x in v))
    raise TypeError(t)


def validated(name: str, attrs: dict[str, Any], shapes: tuple[tuple[int, ...], ...]) -> Any:
    """`check_node(name, 0..n-1, attrs, shapes)`, memoised on (op, shapes, attributes): the
    result depends on nothing else. Failures are not cached (they raise every time). Returns
    (a fresh copy of the normalised attributes, the output shape)."""
    try:
        # no attribute (most calls): a 2-tuple key, which no 3-tuple key below can equal
        key: Any = (
            (name, shapes, tuple([(k, _freeze(v)) for k, v in attrs.items()]))
            if attrs
            else (name, shapes)
        )
        hit = _VALIDATED.get(key)
    except TypeError:
        key, hit = None, None
    if hit is None:
        norm, out = check_node(name, list(range(len(shapes))), attrs, shapes)
        if key is not None:
            if len(_VALIDATED) >= _VALIDATED_MAX:
                _VALIDATED.clear()
            _VALIDATED[key] = (dict(norm), tuple(out))
        return norm, out
    return dict(hit[0]), hit[1]


def _describe(h: Any) -> str:
    shape = getattr(h, "shape", None)
    dtype = getattr(h, "dtype", None)
    if shape is None or dtype is None:
        return f"a {type(h).__name__}"
    return f"shape {tuple(shape)} dtype {dtype}"


def apply_hook(
    hook: Callable[[int, Any], Any],
    grads: Sequence[Any],
    names: Sequence[str],
    exact: bool,
    as_array: Callable[[Any], Any],
) -> list[Any]:
    """`[hook(i, g) for i, g in enumerate(grads)]`, each result checked against its
    gradient's shape and dtype (`HookError`). Exact dtype: a bare Fraction returned for a
    0-d gradient is given back its 0-d array form (`as_array`: NumPy turns arithmetic on a
    0-d object array into a Fraction), and every element must be an exact rational."""
    if not callable(hook):
        raise HookError(f"gradient hook must be callable, got {type(hook).__name__}")
    out = []
    for i, g in enumerate(grads):
        h = hook(i, g)
        if isinstance(h, np.generic) or (
            exact and isinstance(h, (Fraction, int)) and tuple(g.shape) == ()
        ):
            h = as_array(h)  # NumPy arithmetic on a 0-d array gives a scalar
        if tuple(getattr(h, "shape", ("?",))) != tuple(g.shape) or (
            getattr(h, "dtype", None) != g.dtype
        ):
            raise HookError(
                f"gradient hook changed the gradient of node {i} ({names[i]}): expected "
                f"shape {tuple(g.shape)} dtype {g.dtype}, got {_describe(h)}"
            )
        if exact:
            for v in np.asarray(h).reshape(-1):
                if not isinstance(v, (Fraction, int)) or isinstance(v, bool):
                    raise HookError(
                        f"gradient hook returned a non-exact value for node {i} "
                        f"({names[i]}): the exact dtype holds exact rationals only, got "
                        f"{type(v).__name__} {v!r}"
                    )
        out.append(h)
    return out


@dataclass(slots=True)
class TapeNode:
    """One tape value. An op node made by `Tape.op` also keeps its normalised attributes,
    the environment it ran with, its kernel, the kernel's saved values, which arguments
    require grad and the kernel context (`attrs`, `env`, `kern`, `saved`, `needs`, `ctx`):
    `Tape.replay` runs it again from them, the reverse passes run its `kern.vjp`
    (`op_pairs`) and `forward_tangents` its `kern.jvp`; its `rule` and `jvp` are None.
    Leaves and nodes made by `add_node` have `attrs` None and carry their own `rule` (the
    backward) and `jvp`."""

    name: str
    value: Any
    requires_grad: bool
    parents: tuple[int, ...]
    rule: Backward | None
    jvp: Callable[[list[Any]], Any] | None = None
    attrs: dict[str, Any] | None = None
    env: Sequence[int] = ()
    kern: Any = None
    saved: Any = None
    needs: tuple[bool, ...] = ()
    ctx: Any = None

    @property
    def backward(self) -> Backward | None:
        """The node's backward (cotangent -> `(id, grad)` pairs); None for a leaf or a
        frozen node. `rule`, or for a `Tape.op` node that requires grad, `op_pairs` on it
        (built on demand: recording an op allocates no closure)."""
        if self.kern is None or not self.requires_grad:
            return self.rule
        return partial(op_pairs, self)


_new_node = TapeNode.__new__


def op_pairs(node: TapeNode, g: Any) -> list[tuple[int, Any]]:
    """The backward of a differentiable `Tape.op` node: its kernel's cotangents for `g` as
    `(id, grad)` pairs, one per distinct argument in increasing id order (repeated
    arguments folded by `fold_fanin`)."""
    ctx = node.ctx
    kern = node.kern
    arg_ids = node.parents
    arr = ctx.arr
    if len(arg_ids) == 1:  # the common case first: no fan-in, no `vjp_some`
        per_arg = kern.vjp(ctx, node.saved, g, node.attrs, node.env)
        if len(per_arg) == 1:
            c = per_arg[0]
            return [(arg_ids[0], c if type(c) is ctx.atype else arr(c))]
    else:
        needs = node.needs
        if kern.vjp_some is not None and not all(needs):
            # Only the cotangents of arguments that require grad: the sweep drops the
            # others unread, so skipping them changes no value.
            per = kern.vjp_some(ctx, node.saved, g, node.attrs, node.env, needs)
            folded = fold_fanin(
                [j for j, nd in zip(arg_ids, needs, strict=True) if nd],
                [arr(c) for c, nd in zip(per, needs, strict=True) if nd],
            )
            return [(j, arr(c)) for j, c in sorted(folded.items())]
        per_arg = kern.vjp(ctx, node.saved, g, node.attrs, node.env)
        if len(set(arg_ids)) == len(arg_ids) and len(per_arg) == len(arg_ids):
            # no fan-in: one cotangent per distinct id, emitted in increasing id order
            atype = ctx.atype
            pairs = [
                (j, c if type(c) is atype else arr(c))
                for j, c in zip(arg_ids, per_arg, strict=True)
            ]
            pairs.sort(key=_first)
            return pairs
    folded = fold_fanin(arg_ids, [arr(c) for c in per_arg])
    return [(j, arr(c)) for j, c in sorted(folded.items())]


class Tape:
    """A list of nodes plus the kernel context they were computed in."""

    def __init__(self, ctx: KernelContext | None = None) -> None:
        self.ctx = ctx or KernelContext()
        self.nodes: list[TapeNode] = []

    def __len__(self) -> int:
        return len(self.nodes)

    def value(self, i: int) -> Any:
        return self.nodes[self._check_id(i, "value")].value

    def add_node(
        self,
        name: str,
        value: Any,
        requires_grad: bool,
        parents: Sequence[int],
        backward: Backward | None,
        jvp: Callable[[list[Any]], Any] | None = None,
    ) -> int:
        """Append a node; `jvp(tangents of the parents)` is its forward-mode rule (a
        differentiable node without one is refused by `forward_tangents`)."""
        for p in parents:
            self._check_id(p, f"add_node({name!r}) parent")
        self.nodes.append(TapeNode(name, value, requires_grad, tuple(parents), backward, jvp))
        return len(self.nodes) - 1

    def leaf(self, value: Any, requires_grad: bool = True, name: str = "leaf") -> int:
        return self.add_node(name, self.ctx.arr(value), requires_grad, (), None)

    def op(self, name: str, args: Sequence[int], env: Sequence[int] = (), **attrs: Any) -> int:
        """Append one op node: validate, compute, then append (nothing on failure)."""
        nodes = self.nodes
        n = len(nodes)
        for a in args:
            if type(a) is not int or not 0 <= a < n:
                self._check_args(name, args)
        ctx = self.ctx
        if len(args) == 1:  # no comprehension (a function frame each in Python 3.11)
            x = nodes[args[0]].value
            xs = [x]
            shapes: tuple[tuple[int, ...], ...] = (tuple(x.shape),)
        else:
            xs = [nodes[a].value for a in args]
            shapes = tuple([tuple(x.shape) for x in xs])
        hit = None if attrs else _VALIDATED.get((name, shapes))  # `validated`'s own memo
        norm = dict(hit[0]) if hit is not None else validated(name, attrs, shapes)[0]
        kern = KERNELS.get(name) or kernel_for(name)
        tok = fp_enter()  # `with fp_quiet()`, without the manager object
        try:
            if kern.check is not None:
                kern.check(ctx, xs, norm)
            y, saved = kern.forward(ctx, xs, norm, env)
        finally:
            fp_exit(tok)
        if type(y) is not ctx.atype:
            y = ctx.arr(y)
        arg_ids = tuple(args)
        if len(arg_ids) == 1:
            rg = bool(nodes[arg_ids[0]].requires_grad)
            needs: tuple[bool, ...] = (True,) if rg else (False,)  # constants: no tuple built
        else:
            needs = tuple([bool(nodes[a].requires_grad) for a in arg_ids])
            rg = any(needs)
        # no closures: the reverse passes run `op_pairs` and `forward_tangents` runs
        # `kern.jvp` from the node's fields. The node is `TapeNode(name, y, rg, arg_ids,
        # None, None, norm, env, kern, saved, needs, ctx)` (its reference), built by storing
        # every field: the twelve-argument constructor call costs more than the stores.
        node = _new_node(TapeNode)
        node.name = name
        node.value = y
        node.requires_grad = rg
        node.parents = arg_ids
        node.rule = None
        node.jvp = None
        node.attrs = norm
        node.env = env
        node.kern = kern
        node.saved = saved
        node.needs = needs
        node.ctx = ctx
        nodes.append(node)
        return n

    def detach(self, a: int) -> int:
        """A frozen node holding the value of `a`, with no contributions and a zero tangent
        (the spec `detach` op's VJP and JVP)."""
        v = self.nodes[self._check_id(a, "detach")].value
        zeros = self.ctx.zeros

        def jvp(tangents: list[Any]) -> Any:
            return zeros(tuple(v.shape))

        return self.add_node("detach", v, False, (a,), None, jvp)

    def replay(self, leaves: dict[int, Any]) -> Tape:
        """A new tape with this tape's program run again: leaf `i` holds `leaves[i]` (same
        shape and dtype, else `ShapeError`) or, when not given, its old value (constants);
        every op node runs again with its recorded op, attributes and environment, in id
        order, in this tape's kernel context. The values are those a fresh recording of the
        same program would compute, bit for bit (the same kernels on the same arguments). A
        node made by `add_node` other than `detach` cannot be replayed (`GraphError`)."""
        new = Tape(self.ctx)
        for i, node in enumerate(self.nodes):
            if node.attrs is not None:
                new.op(node.name, node.parents, node.env, **node.attrs)
            elif not node.parents:
                v = node.value
                if i in leaves:
                    v = self.ctx.arr(leaves[i])
                    if tuple(v.shape) != tuple(node.value.shape) or v.dtype != node.value.dtype:
                        raise ShapeError(
                            f"replay: leaf {i} ({node.name}) has shape {tuple(node.value.shape)}"
                            f" dtype {node.value.dtype}; got shape {tuple(v.shape)} dtype "
                            f"{v.dtype}"
                        )
                new.add_node(node.name, v, node.requires_grad, (), None)
            elif node.name == "detach" and len(node.parents) == 1:
                new.detach(node.parents[0])
            else:
                raise GraphError(
                    f"replay: node {i} ({node.name}) was not made by Tape.op; it has no "
                    "recorded op to run again"
                )
        return new

    def _check_args(self, name: str, args: Sequence[int]) -> None:
        for k, a in enumerate(args):
            self._check_id(a, f"{name}: input {k}")

    # ------------------------------------------------------------------ reverse passes
    def _check_id(self, i: Any, what: str) -> int:
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(self.nodes):
            raise GraphError(f"{what}: invalid tape id {i!r} (tape has {len(self.nodes)} nodes)")
        return i

    def check_grad(self, i: int, g: Any, what: str) -> None:
        v = self.nodes[i].value
        if tuple(getattr(g, "shape", ())) != tuple(v.shape) or getattr(g, "dtype", None) != v.dtype:
            raise ShapeError(
                f"{what}: gradient for node {i} ({self.nodes[i].name}) has shape "
                f"{tuple(getattr(g, 'shape', ()))} dtype {getattr(g, 'dtype', type(g).__name__)}"
                f"; expected shape {tuple(v.shape)} dtype {v.dtype}"
            )

    def _sweep(self, grads: list[Any], start: int, run_all: bool) -> list[Any]:
        with fp_quiet():  # IEEE overflow/invalid are values here, not errors
            return self._sweep_inner(grads, start, run_all)

    def _sweep_inner(self, grads: list[Any], start: int, run_all: bool) -> list[Any]:
        nodes = self.nodes
        arr = self.ctx.arr
        ndarray = self.ctx.atype
        zeros = self.ctx.zeros
        # Lazy ZERO_REST: `epoch` counts the steps that emitted it; `seen[j]` is the count
        # after the step of j's last real contribution (which excluded j). Slot j has pending
        # zeros iff epoch > seen.get(j, 0); they are applied once (see the docstring).
        epoch = 0
        seen: dict[int, int] = {}

        def flush(j: int) -> None:
            if epoch > seen.get(j, 0):
                old = grads[j]
                z = zeros(tuple(nodes[j].value.shape))
                grads[j] = z if old is None else arr(old + z)
            seen[j] = epoch

        for i in range(start, -1, -1):
            node = nodes[i]
            if epoch and node.requires_grad:
                flush(i)
            if not node.requires_grad:
                continue
            rule = node.rule
            if rule is None and node.kern is None:
                continue  # a leaf (or an `add_node` node without a backward)
            g = grads[i]
            if g is None:
                if not run_all:
                    continue
                g = self.ctx.zeros(tuple(node.value.shape))
            elif type(g) is not ndarray:
                g = arr(g)
            pairs: Sequence[tuple[int, Any]]
            if rule is None:
                pairs = op_pairs(node, g)
                rest = False  # only an `add_node` backward emits ZERO_REST
            else:
                pairs = rule(g)
                rest = bool(pairs) and pairs[-1][0] == ZERO_REST
                if rest:
                    pairs = pairs[:-1]
            for pid, contrib in pairs:
                if pid >= i or pid < 0:
                    raise GraphError(f"node {i} ({node.name}) emitted a gradient for id {pid}")
                target = nodes[pid]
                if not target.requires_grad:
                    continue
                v = target.value
                if (
                    type(contrib) is not ndarray
                    or contrib.shape != v.shape
                    or contrib.dtype != v.dtype
                ):
                    self.check_grad(pid, contrib, f"node {i} ({node.name}) backward")
                if epoch:
                    flush(pid)
                old = grads[pid]
                if old is None:
                    grads[pid] = contrib
                else:
                    new = old + contrib
                    grads[pid] = new if type(new) is ndarray else arr(new)
                if rest:
                    seen[pid] = epoch + 1
            if rest:
                epoch += 1
        return grads

    def backward_dense(self, out: int, seed: Any) -> list[Any | None]:
        """Reverse pass from `out`: one entry per id, None where nothing arrived."""
        self._check_id(out, "backward_dense output")
        self.check_grad(out, seed, "backward_dense seed")
        grads: list[Any] = [None] * len(self.nodes)
        grads[out] = seed
        return self._sweep(grads, out, run_all=False)

    def backward_dense_all(self, out: int, seed: Any, hook: Hook | None = None) -> list[Any]:
        """`backward_dense`, then unreached slots become zeros: one gradient per id. With
        `hook`: TorchLean's `backwardDenseAllWithHook` ("apply a gradient hook pointwise to
        the dense gradient array"), `apply_hook` over the finished dense list, never inside
        the sweep (a doubling hook doubles each gradient once)."""
        grads = self.backward_dense(out, seed)
        zeros = self.ctx.zeros
        dense = [
            zeros(tuple(n.value.shape)) if g is None else g
            for g, n in zip(grads, self.nodes, strict=True)
        ]
        if hook is None:
            return dense
        names = [n.name for n in self.nodes]
        return apply_hook(hook, dense, names, self.ctx.exact, self.ctx.arr)

    def backward_dense_from(self, grads0: Sequence[Any]) -> list[Any]:
        """Run every non-frozen node in reverse id order from a full list of cotangents."""
        if len(grads0) != len(self.nodes):
            raise ShapeError(
                f"backward_dense_from: {len(grads0)} cotangents for a tape of "
                f"{len(self.nodes)} nodes"
            )
        for i, g in enumerate(grads0):
            self.check_grad(i, g, "backward_dense_from seed")
        return self._sweep(list(grads0), len(self.nodes) - 1, run_all=True)

    def forward_tangents(self, leaf_tangents: dict[int, Any]) -> list[Any]:
        """Forward mode over the recorded nodes: the tangent of every id given tangents of
        leaves. TorchLean: "dxs[i] is the tangent for leaf i" -- a given tangent counts
        whether or not the leaf requires gradients (`requires_grad` governs reverse mode
        only); a leaf given none has a zero tangent. A node runs its forward-mode rule when
        it requires gradients or when a parent's tangent is not such a zero; otherwise its
        tangent is zero (nothing flows into it). `detach` has a zero rule. A node without a
        rule that something flows into raises `GraphError` (never a silent zero tangent)."""
        for i in leaf_tangents:
            self._check_id(i, "forward tangent")
        tans: list[Any] = []
        live: list[bool] = []  # whether tans[i] may be nonzero (not a structural zero)
        with fp_quiet():
            for i, node in enumerate(self.nodes):
                if not node.parents:
                    t = leaf_tangents.get(i)
                    if t is not None:
                        self.check_grad(i, t, "forward tangent")
                    lv = t is not None
                else:
                    t = None
                    lv = node.requires_grad or any(live[p] for p in node.parents)
                if t is None and lv:
                    ts = [tans[p] for p in node.parents]
                    if node.jvp is not None:
                        t = node.jvp(ts)
                    elif node.kern is not None:
                        k = node.kern
                        t = self.ctx.arr(k.jvp(self.ctx, node.saved, ts, node.attrs, node.env))
                    else:
                        raise GraphError(
                            f"forward tangent: node {i} ({node.name}) has no forward-mode rule"
                        )
                tans.append(self.ctx.zeros(tuple(node.value.shape)) if t is None else t)
                live.append(lv)
        return tans
