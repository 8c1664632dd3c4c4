"""The Session state machine: its state and its rules (the steps it takes).

Invariants:
- Every rule applies one call (valid or invalid) to every lane that can take it; a call that
  must fail is checked with `_expect_error` (right error, nothing changed), a call that
  succeeds updates the machine's model (`values`, `params`, `nats`, `tape_len`, `has_ops`).
- The eager lane skips leaves the typed-graph float32 lane refuses, so the two float32 lanes
  always hold the same program; a value missing from a lane is skipped there later.
- Hypothesis orders rules by name, so rule names (and the draws inside each rule, with their
  labels) are what fixes a run; the class layout does not.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from runtime.session import Session, TensorRef
from spec import rng as srng
from spec.errors import DomainError, GraphError, HookError, ShapeError, StaleHandleError

from .aliasing import AliasRules
from .fidelity import FidelityRules
from .model import (
    BINARY,
    DTYPE,
    LANES,
    MAX_STALE,
    MODE,
    RESHAPES,
    SHAPES,
    STALE_CALLS,
    UNARY,
    VALUE,
    ParamModel,
    Val,
    bad_hook,
    broadcast_shape,
    exact_values,
    handle_call,
    lane_array,
    pattern,
    size_of,
    value_key,
)

__all__ = ["SessionMachine"]


class SessionMachine(AliasRules, FidelityRules, RuleBasedStateMachine):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.s = {
            lane: Session(mode=MODE[lane], dtype=DTYPE[lane], kernels="ordered", seed=7)
            for lane in LANES
        }
        self.values: list[Val] = []
        self.stale: list[Val] = []
        self.nats: list[dict[str, Any]] = []
        self.nat_values: list[int] = []
        self.stale_nats: list[dict[str, Any]] = []
        self.params: list[ParamModel] = []
        self.has_ops = dict.fromkeys(LANES, False)
        self.tape_len = dict.fromkeys(LANES, 0)
        self.env_read = False
        self.foreign: dict[str, tuple[Session, TensorRef, Any, Any]] = {}
        for lane in LANES:
            f = Session(mode=MODE[lane], dtype=DTYPE[lane], kernels="ordered")
            fx = f.input(lane_array(lane, [Fraction(1), Fraction(2)], (2,)), requires_grad=True)
            self.foreign[lane] = (
                f,
                fx,
                f.input_nat(0),
                f.param(lane_array(lane, [Fraction(1)], ())),
            )

    # ------------------------------------------------------------------ helpers

    def _pick(
        self, data: Any, pred: Callable[[Val], bool] = lambda v: True, label: str = "value"
    ) -> Val | None:
        cands = [v for v in self.values if pred(v)]
        if not cands:
            return None
        return data.draw(st.sampled_from(cands), label=label)

    def _draw_values(self, data: Any, shape: tuple[int, ...], label: str) -> list[Fraction]:
        n = size_of(shape)
        return data.draw(st.lists(VALUE, min_size=n, max_size=n), label=label)

    def _lanes_of(self, *vals: Val) -> list[str]:
        return [lane for lane in LANES if all(lane in v.refs for v in vals)]

    def _new_leaf(self, make: Callable[[str], Any]) -> dict[str, Any]:
        """A leaf in every lane that takes one; typed-graph lanes after ops must refuse."""
        made: dict[str, Any] = {}
        for lane in LANES:
            if lane == "eager" and self.has_ops["graph"]:
                continue  # keep the two float32 lanes on one program
            if MODE[lane] == "typed_graph" and self.has_ops[lane]:
                self._expect_error(
                    lane,
                    GraphError,
                    lambda lane=lane: make(lane),
                    "cannot add a new leaf after graph nodes have been created",
                )
                continue
            made[lane] = make(lane)
            self.tape_len[lane] += 1 if isinstance(made[lane], TensorRef) else 0
        return made

    def _op(
        self,
        vals: list[Val],
        call: Callable[[str, list[TensorRef]], TensorRef],
        nodes: int = 1,
        exact_error: type[Exception] | None = None,
    ) -> Val | None:
        """Apply an op in every lane that holds its arguments; it appends `nodes` nodes."""
        refs: dict[str, TensorRef] = {}
        shape: tuple[int, ...] | None = None
        for lane in self._lanes_of(*vals):
            args = [v.refs[lane] for v in vals]
            if lane == "exact" and exact_error is not None:
                self._expect_error(lane, exact_error, lambda a=args: call("exact", a))
                continue
            r = call(lane, args)
            assert isinstance(r, TensorRef) and r.owner == self.s[lane].owner
            assert r.generation == self.s[lane].generation
            self.tape_len[lane] += nodes
            if MODE[lane] == "typed_graph":
                self.has_ops[lane] = True
            assert shape is None or r.shape == shape
            shape = r.shape
            refs[lane] = r
        if not refs:
            return None
        assert shape is not None
        v = Val(refs, shape)
        self.values.append(v)
        return v

    # ------------------------------------------------------------------ leaves
    @initialize(data=st.data())
    def start(self, data: Any) -> None:
        """A few leaves, a used parameter and a NatRef, so that ops have operands."""
        for _ in range(data.draw(st.integers(1, 3), label="inputs")):
            self.new_input(data)
        self.new_param(data)
        self.use_param(data)
        if data.draw(st.booleans(), label="alias"):  # two snapshots of one parameter
            self.set_param(data)
            self.use_param(data)
        self.new_nat(data)

    @rule(data=st.data())
    def new_input(self, data: Any) -> None:
        shape = data.draw(st.sampled_from(SHAPES), label="shape")
        vals = self._draw_values(data, shape, "values")
        rg = data.draw(st.sampled_from([True, False, None]), label="requires_grad")
        kw = {} if rg is None else {"requires_grad": rg}  # None: the session's default
        refs = self._new_leaf(lambda lane: self.s[lane].input(lane_array(lane, vals, shape), **kw))
        for lane, r in refs.items():
            assert r.shape == shape
            # gradient-enabled sessions: an input made without requires_grad tracks them
            assert self.s[lane].tape.nodes[r.id].requires_grad is (rg is not False)
            assert value_key(self.s[lane].get_value(r)) == value_key(lane_array(lane, vals, shape))
        if refs:
            self.values.append(Val(refs, shape))

    @rule(data=st.data())
    def new_param(self, data: Any) -> None:
        shape = data.draw(st.sampled_from(SHAPES), label="shape")
        vals = self._draw_values(data, shape, "values")
        rg = data.draw(st.sampled_from([True, True, True, False]), label="requires_grad")
        # one name for every parameter: aliasing must come from storage, never from names
        refs = {
            lane: self.s[lane].param(lane_array(lane, vals, shape), name="w", requires_grad=rg)
            for lane in LANES
        }
        self.params.append(ParamModel(refs, shape, vals, rg))

    @rule(data=st.data())
    @precondition(lambda self: bool(self.params))
    def use_param(self, data: Any) -> None:
        if not self.params:
            return
        self._use(data.draw(st.sampled_from(self.params), label="param"))

    @rule(data=st.data())
    @precondition(lambda self: any(p.requires_grad for p in self.params))
    def reuse_param(self, data: Any) -> None:
        """A parameter used twice more (aliased leaves of one storage: repeated use, weight
        tying), so that sgd_step_all must sum several leaves' gradients."""
        ps = [p for p in self.params if p.requires_grad]
        if not ps:
            return
        p = data.draw(st.sampled_from(ps), label="param")
        self._use(p)
        self._use(p)
        # then a step with a distinct nonzero gradient for every node of every lane's tape
        lr = data.draw(st.sampled_from([Fraction(1, 2), Fraction(1)]), label="lr")
        pick = data.draw(st.integers(0, 2**16), label="leaf")
        for lane in LANES:
            nodes = self.s[lane].tape.nodes
            grads = [
                lane_array(lane, pattern(pick + 5 * i, size_of(n.value.shape)), n.value.shape)
                for i, n in enumerate(nodes)
            ]
            self._valid_step(lane, lr, grads)

    def _use(self, p: ParamModel) -> None:
        refs = self._new_leaf(lambda lane: self.s[lane].use(p.refs[lane]))
        for lane, r in refs.items():
            assert self.s[lane].tape.nodes[r.id].requires_grad is p.requires_grad
            assert value_key(self.s[lane].get_value(r)) == value_key(p.refs[lane].get())
            p.leaves.setdefault(lane, []).append(r.id)
        if refs:
            self.values.append(Val(refs, p.shape))

    @rule(data=st.data())
    @precondition(lambda self: bool(self.params))
    def set_param(self, data: Any) -> None:
        if not self.params:
            return
        p = data.draw(st.sampled_from(self.params), label="param")
        if data.draw(st.booleans(), label="bad"):
            bad_shape = (*p.shape, 1)
            vals = [Fraction(0)] * size_of(bad_shape)
            for lane in LANES:
                self._expect_error(
                    lane,
                    ShapeError,
                    lambda lane=lane: p.refs[lane].set(lane_array(lane, vals, bad_shape)),
                )
            self._expect_error(
                "graph",
                ShapeError,
                lambda: p.refs["graph"].set(np.zeros(p.shape, dtype=np.float64)),
                "dtype",
            )
            return
        vals = self._draw_values(data, p.shape, "values")
        for lane in LANES:
            p.refs[lane].set(lane_array(lane, vals, p.shape))
        p.value = vals

    @rule(data=st.data())
    def new_nat(self, data: Any) -> None:
        n = data.draw(st.integers(0, 1), label="n")
        refs = self._new_leaf(lambda lane: self.s[lane].input_nat(n))
        if refs:
            self.nats.append(refs)
            self.nat_values.append(n)

    @rule(data=st.data())
    @precondition(lambda self: bool(self.nats) and not self.env_read)
    def set_nat(self, data: Any) -> None:
        # A set_nat after a select read the slot would make the recorded graph disagree
        # with the tape (see the report); the machine only changes unread environments.
        if not self.nats or self.env_read:
            return
        i = data.draw(st.integers(0, len(self.nats) - 1), label="nat")
        n = data.draw(st.integers(0, 1), label="n")
        typed_locked = any(
            self.s[lane].mode == "typed_graph" and self.s[lane].graph_has_nodes
            for lane in self.nats[i]
        )
        if typed_locked:
            # Typed graphs refuse a NatRef change once nodes exist; nothing may change.
            for lane, r in self.nats[i].items():
                if self.s[lane].mode != "typed_graph":
                    continue
                old = self.s[lane].get_nat(r)
                try:
                    self.s[lane].set_nat(r, n)
                except GraphError:
                    pass
                else:
                    raise AssertionError("set_nat after graph nodes was accepted")
                assert self.s[lane].get_nat(r) == old
            return
        for lane, r in self.nats[i].items():
            self.s[lane].set_nat(r, n)
            assert self.s[lane].get_nat(r) == n
        self.nat_values[i] = n

    @rule(data=st.data())
    def new_const(self, data: Any) -> None:
        shape = data.draw(st.sampled_from(SHAPES), label="shape")
        vals = self._draw_values(data, shape, "values")
        refs = {}
        for lane in LANES:  # a const is a leaf before ops and a const node after, never refused
            r = self.s[lane].const(lane_array(lane, vals, shape))
            assert not self.s[lane].tape.nodes[r.id].requires_grad
            assert value_key(self.s[lane].get_value(r)) == value_key(lane_array(lane, vals, shape))
            self.tape_len[lane] += 1
            refs[lane] = r
        self.values.append(Val(refs, shape))

    # ------------------------------------------------------------------ ops
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def unary(self, data: Any) -> None:
        op = data.draw(st.sampled_from(UNARY), label="op")
        pred = (lambda v: size_of(v.shape) >= 1) if op == "reshape" else (lambda v: True)
        x = self._pick(data, pred)
        if x is None:
            return
        attrs: dict[str, Any] = {}
        if op == "scale":
            attrs["c"] = data.draw(
                st.sampled_from([Fraction(1, 2), Fraction(-2), Fraction(3)]), label="c"
            )
        if op == "reshape":
            targets = [s for s in RESHAPES if size_of(s) == size_of(x.shape)]
            attrs["shape"] = data.draw(st.sampled_from(targets), label="shape")
        if op == "detach":
            out = self._op([x], lambda lane, a: self.s[lane].detach(a[0]))
            assert out is not None
            for lane, r in out.refs.items():
                assert not self.s[lane].tape.nodes[r.id].requires_grad
            return
        # tanh is not exact over the rationals (tanh(0) = 0 is): DomainError, nothing changes
        inexact = (
            op == "tanh"
            and "exact" in x.refs
            and any(exact_values(self.s["exact"].get_value(x.refs["exact"])))
        )
        self._op(
            [x],
            lambda lane, a: self.s[lane].op(op, *a, **attrs),
            exact_error=DomainError if inexact else None,
        )

    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def binary(self, data: Any) -> None:
        op = data.draw(st.sampled_from(BINARY), label="op")
        a = self._pick(
            data, (lambda v: size_of(v.shape) >= 1) if op == "mse_loss" else (lambda v: True), "a"
        )
        if a is None:
            return

        def fits(v: Val) -> bool:
            if op == "mse_loss":
                return v.shape == a.shape
            return broadcast_shape(a.shape, v.shape) is not None

        bad = [v for v in self.values if not fits(v) and self._lanes_of(a, v)]
        if bad and data.draw(st.integers(0, 3), label="invalid") == 0:
            b = data.draw(st.sampled_from(bad), label="b")
            for lane in self._lanes_of(a, b):
                self._expect_error(
                    lane,
                    ShapeError,
                    lambda lane=lane: self.s[lane].op(op, a.refs[lane], b.refs[lane]),
                    op,
                )
            return
        b = self._pick(data, fits, "b")
        if b is None:
            return
        if data.draw(st.booleans(), label="swap") and op != "mse_loss":
            a, b = b, a
        out = self._op([a, b], lambda lane, r: self.s[lane].op(op, *r))
        if out is not None and op == "mse_loss":
            assert out.shape == ()

    @rule(data=st.data())
    @precondition(lambda self: any(len(v.shape) == 2 for v in self.values))
    def matmul(self, data: Any) -> None:
        a = self._pick(data, lambda v: len(v.shape) == 2, "a")
        if a is None:
            return
        bad = [
            v
            for v in self.values
            # (m, k) @ (k,) is a valid 1-D matmul: only other ranks or a k mismatch fail
            if (len(v.shape) not in (1, 2) or v.shape[0] != a.shape[1]) and self._lanes_of(a, v)
        ]
        if bad and data.draw(st.integers(0, 3), label="invalid") == 0:
            b = data.draw(st.sampled_from(bad), label="b")
            for lane in self._lanes_of(a, b):
                self._expect_error(
                    lane, ShapeError, lambda lane=lane: a.refs[lane] @ b.refs[lane], "matmul"
                )
            return
        b = self._pick(data, lambda v: len(v.shape) == 2 and v.shape[0] == a.shape[1], "b")
        if b is not None:
            out = self._op([a, b], lambda lane, r: r[0] @ r[1])
            assert out is None or out.shape == (a.shape[0], b.shape[1])

    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def scalar_op(self, data: Any) -> None:
        x = self._pick(data)
        if x is None:
            return
        c = data.draw(st.sampled_from([2, 0.5, -1, Fraction(3, 4)]), label="c")
        form = data.draw(st.sampled_from(["x*c", "c+x", "x-c", "c-x", "x@c", "x/0"]), label="form")
        if form == "x@c":  # the const is made, then matmul's shape rule fails: rolled back
            for lane in self._lanes_of(x):
                self._expect_error(lane, ShapeError, lambda r=x.refs[lane]: r @ c, "matmul")
            return
        if form == "x/0":  # exact division by zero fails in the kernel, after the const
            if "exact" in x.refs:
                self._expect_error(
                    "exact", DomainError, lambda: x.refs["exact"] / 0, "division by zero"
                )
            return
        fns: dict[str, Callable[[TensorRef], TensorRef]] = {
            "x*c": lambda r: r * c,
            "c+x": lambda r: c + r,
            "x-c": lambda r: r - c,
            "c-x": lambda r: c - r,
        }
        # the scalar becomes a frozen const (a leaf before ops, a const node after): 2 nodes
        self._op([x], lambda lane, r: fns[form](r[0]), nodes=2)

    @rule(data=st.data())
    @precondition(lambda self: bool(self.nats) and any(len(v.shape) >= 1 for v in self.values))
    def select_nat(self, data: Any) -> None:
        if not self.nats:
            return
        x = self._pick(data, lambda v: len(v.shape) >= 1)
        if x is None:
            return
        i = data.draw(st.integers(0, len(self.nats) - 1), label="nat")
        nat = self.nats[i]
        lanes = [lane for lane in self._lanes_of(x) if lane in nat]
        refs = {}
        for lane in lanes:
            r = self.s[lane].select(x.refs[lane], index=nat[lane])
            self.tape_len[lane] += 1
            if MODE[lane] == "typed_graph":
                self.has_ops[lane] = True
            got, whole = self.s[lane].get_value(r), self.s[lane].get_value(x.refs[lane])
            assert value_key(got) == value_key(whole[self.nat_values[i]])
            refs[lane] = r
        if refs:
            self.env_read = True
            self.values.append(Val(refs, x.shape[1:]))

    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def dropout(self, data: Any) -> None:
        x = self._pick(data)
        if x is None:
            return
        p = data.draw(
            st.sampled_from([Fraction(0), Fraction(1, 4), Fraction(1, 2), Fraction(1)]), label="p"
        )
        train = data.draw(st.booleans(), label="train")
        if not train or p == 0:
            for lane in self._lanes_of(x):
                n = len(self.s[lane].tape)
                assert self.s[lane].dropout(None, x.refs[lane], p, train=train) is x.refs[lane]
                assert len(self.s[lane].tape) == n
            return
        if p == 1:
            out = self._op([x], lambda lane, r: self.s[lane].dropout(None, r[0], p))
            assert out is not None
            if "exact" in out.refs:
                assert exact_values(self.s["exact"].get_value(out.refs["exact"])) == [0] * size_of(
                    x.shape
                )
            return
        counters = {lane: self.s[lane].rng.counter for lane in self._lanes_of(x)}
        # bernoulli mask (const), mul, const 1 - p, div
        out = self._op([x], lambda lane, r: self.s[lane].dropout(None, r[0], p), nodes=4)
        assert out is not None
        for lane, r in out.refs.items():
            s = self.s[lane]
            assert s.rng.counter == counters[lane] + 1
            # the mask (the first of the 4 nodes) is the spec RNG's, on every lane
            key = srng.key_of(s.rng.seed, counters[lane])
            mask = s.tape.nodes[r.id - 3].value
            assert np.shape(mask) == x.shape, (lane, np.shape(mask), x.shape)
            want = [float(srng.mask(key, i, p)) for i in range(size_of(x.shape))]
            have = [float(v) for v in np.asarray(mask).reshape(-1)]
            assert have == want, (lane, have, want)
        if "exact" in out.refs:
            s = self.s["exact"]
            for y, v in zip(
                exact_values(s.get_value(out.refs["exact"])),
                exact_values(s.get_value(x.refs["exact"])),
                strict=True,
            ):
                assert y == 0 or y == v / (1 - p)

    # ------------------------------------------------------------------ reverse mode
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def backward(self, data: Any) -> None:
        out = self._pick(data, label="out")
        if out is None:
            return
        vals = self._draw_values(data, out.shape, "seed")
        hook = data.draw(
            st.sampled_from(["none", "none", "double", "bad_shape", "bad_dtype"]), label="hook"
        )
        grads: dict[str, list[Any]] = {}
        for lane, r in out.refs.items():
            s = self.s[lane]
            seed = lane_array(lane, vals, out.shape)
            if hook in ("bad_shape", "bad_dtype"):
                bad = bad_hook(hook, r.id)
                want = (
                    ("(1,)" if out.shape == () else f"{(*out.shape, 1)}")
                    if hook == "bad_shape"
                    else ""
                )
                self._expect_error(
                    lane,
                    HookError,
                    lambda s=s, r=r, seed=seed, bad=bad: s.backward_dense_all_with_hook(
                        r, seed, bad
                    ),
                    f"node {r.id}",
                    str(out.shape),
                    want,
                )
                continue
            g = s.backward_dense_all(r, seed)
            assert len(g) == len(s.tape)
            for i, gi in enumerate(g):
                v = s.tape.nodes[i].value
                assert (np.shape(gi), np.asarray(gi).dtype) == (v.shape, v.dtype), i
            if hook == "double":
                # seed 001: the hook maps the dense array pointwise after the backward
                doubled = s.backward_dense_all_with_hook(r, seed, lambda i, gg: gg * 2)
                if lane == "exact":
                    assert [exact_values(d) for d in doubled] == [
                        [2 * q for q in exact_values(gi)] for gi in g
                    ]
                grads[lane + "_double"] = doubled
            grads[lane] = g
        if "exact" in grads:
            self._check_exact(out.refs["exact"].id, vals, grads["exact"])
        if "eager" in grads and "graph" in grads:
            assert [value_key(a) for a in grads["eager"]] == [value_key(b) for b in grads["graph"]]
            if hook == "double":
                assert [value_key(a) for a in grads["eager_double"]] == [
                    value_key(b) for b in grads["graph_double"]
                ]
            self._check_float(out.refs["graph"].id, vals, grads["graph"])
        if hook == "none":
            self._check_link()

    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def sgd_step(self, data: Any) -> None:
        """A valid or a malformed sgd_step_all, with the gradients of a backward or with
        arbitrary gradients (one per tape id: every aliased snapshot gets a nonzero one)."""
        out = self._pick(data, label="out")
        if out is None:
            return
        vals = self._draw_values(data, out.shape, "seed")
        lr = data.draw(st.sampled_from([Fraction(1, 2), Fraction(1, 4), Fraction(1)]), label="lr")
        kind = data.draw(
            st.sampled_from(["valid", "valid", "length", "shape", "dtype"]), label="kind"
        )
        arbitrary = data.draw(st.booleans(), label="arbitrary_gradients")
        shorter = data.draw(st.booleans(), label="shorter")
        pick = data.draw(st.integers(0, 2**16), label="leaf")
        for lane, r in out.refs.items():
            s = self.s[lane]
            if arbitrary:
                grads = [
                    lane_array(lane, pattern(pick + 5 * i, size_of(n.value.shape)), n.value.shape)
                    for i, n in enumerate(s.tape.nodes)
                ]
            else:
                grads = s.backward_dense_all(r, lane_array(lane, vals, out.shape))
            leaves = [i for p in self.params for i in p.leaves.get(lane, [])]
            if kind == "length" or (kind != "valid" and not leaves):
                bad = grads[:-1] if shorter else [*grads, grads[-1]]
                self._expect_error(
                    lane, ShapeError, lambda s=s, b=bad: s.sgd_step_all(lr, b), "gradients"
                )
            elif kind in ("shape", "dtype"):
                leaf = leaves[pick % len(leaves)]
                bad = list(grads)
                g = np.asarray(grads[leaf])
                bad[leaf] = (
                    np.expand_dims(g, 0)
                    if kind == "shape"
                    else g.astype(np.float64 if lane != "exact" else np.float32)
                )
                self._expect_error(
                    lane, ShapeError, lambda s=s, b=bad: s.sgd_step_all(lr, b), f"node {leaf}"
                )
            else:
                self._valid_step(lane, lr, grads)

    def _valid_step(self, lane: str, lr: Fraction, grads: Any) -> None:
        """sgd_step_all(lr, grads) in one lane, checked: unused or frozen parameters keep
        their value; the exact lane updates its model (every snapshot's gradient summed, the
        *current* value updated once); float lanes are checked by `_check_float_step`."""
        s = self.s[lane]
        before = {id(p): p.refs[lane].get() for p in self.params}
        s.sgd_step_all(lr, grads)
        for p in self.params:
            ids = p.leaves.get(lane, [])
            if not ids or not p.requires_grad:
                assert value_key(p.refs[lane].get()) == value_key(before[id(p)])
            elif lane == "exact":
                total = [sum(c) for c in zip(*(exact_values(grads[i]) for i in ids), strict=True)]
                p.value = [v - lr * t for v, t in zip(p.value, total, strict=True)]
            else:
                self._check_float_step(lane, p, ids, grads, lr, before[id(p)])

    def _check_float_step(
        self, lane: str, p: ParamModel, ids: list[int], grads: Any, lr: Fraction, before: Any
    ) -> None:
        """A float lane's update against NumPy float32: the aliased leaves' gradients summed
        in leaf order, then cur - g*lr once (bitwise, NaN matching NaN)."""
        with np.errstate(all="ignore"):
            g = np.asarray(grads[ids[0]], dtype=np.float32)
            for i in ids[1:]:
                g = (g + np.asarray(grads[i], dtype=np.float32)).astype(np.float32)
            want = (np.asarray(before, dtype=np.float32) - g * np.float32(lr)).astype(np.float32)
        got = p.refs[lane].get()
        assert value_key(got) == value_key(want), (
            f"sgd_step_all ({lane}): parameter with leaves {ids} expected "
            f"{np.asarray(want).tolist()} (gradients summed in leaf order, one update), "
            f"got {np.asarray(got).tolist()}"
        )

    # ------------------------------------------------------------------ reset and handles
    @rule()
    @precondition(lambda self: len(self.values) >= 3)
    def reset(self) -> None:
        for lane in LANES:
            s = self.s[lane]
            before = (
                s.generation,
                s.owner,
                s.rng.seed,
                s.rng.counter,
                [value_key(p.refs[lane].get()) for p in self.params],
            )
            s.reset_tape()
            # the recording goes; owner, RNG counter and parameters survive
            assert (
                s.generation - 1,
                s.owner,
                s.rng.seed,
                s.rng.counter,
                [value_key(p.refs[lane].get()) for p in self.params],
            ) == before
            assert len(s.tape) == 0
        self.stale = (self.stale + self.values)[-MAX_STALE:]
        self.stale_nats = (self.stale_nats + self.nats)[-MAX_STALE:]
        self.values, self.nats, self.nat_values = [], [], []
        self.has_ops = dict.fromkeys(LANES, False)
        self.tape_len = dict.fromkeys(LANES, 0)
        self.env_read = False
        for p in self.params:
            p.leaves = {}
        # the handles just invalidated are refused at once
        v = self.stale[-1]
        for lane, r in v.refs.items():
            self._expect_error(
                lane,
                StaleHandleError,
                lambda s=self.s[lane], r=r: s.relu(r),
                f"stale TensorRef %{r.id} from generation {r.generation}",
            )
        for lane, n in (self.stale_nats[-1] if self.stale_nats else {}).items():
            self._expect_error(
                lane,
                StaleHandleError,
                lambda s=self.s[lane], n=n: s.get_nat(n),
                f"stale NatRef slot {n.slot}",
            )

    @rule(data=st.data())
    @precondition(lambda self: bool(self.stale))
    def use_stale(self, data: Any) -> None:
        if not self.stale:
            return
        v = data.draw(st.sampled_from(self.stale), label="stale")
        call = data.draw(st.sampled_from(STALE_CALLS), label="call")
        for lane, r in v.refs.items():
            s = self.s[lane]
            if r.generation == s.generation:
                continue
            other = next((w.refs[lane] for w in self.values if lane in w.refs), None)
            needles = (
                "stale",
                f"from generation {r.generation}",
                f"current generation is {s.generation}",
                "reset_tape",
            )
            self._expect_error(lane, StaleHandleError, handle_call(s, call, r, other), *needles)
        if self.stale_nats:
            nat = data.draw(st.sampled_from(self.stale_nats), label="stale_nat")
            for lane, r in nat.items():
                s = self.s[lane]
                x = next(
                    (w.refs[lane] for w in self.values if lane in w.refs and len(w.shape) >= 1),
                    None,
                )
                self._expect_error(
                    lane, StaleHandleError, lambda s=s, r=r: s.get_nat(r), "stale NatRef"
                )
                self._expect_error(
                    lane, StaleHandleError, lambda s=s, r=r: s.set_nat(r, 0), "stale NatRef"
                )
                if x is not None:
                    self._expect_error(
                        lane, StaleHandleError, lambda s=s, r=r, x=x: s.select(x, index=r), "stale"
                    )

    @rule(data=st.data())
    def use_foreign(self, data: Any) -> None:
        call = data.draw(st.sampled_from((*STALE_CALLS, "nat", "param", "select")), label="call")
        for lane in LANES:
            s = self.s[lane]
            _, fx, fnat, fparam = self.foreign[lane]
            other = next((w.refs[lane] for w in self.values if lane in w.refs), None)
            fb = self._snapshot_foreign(lane)
            if call == "nat":
                fn: Callable[[], Any] = lambda s=s, n=fnat: s.get_nat(n)  # noqa: E731
            elif call == "param":
                fn = lambda s=s, p=fparam: s.use(p)  # noqa: E731
            elif call == "select":
                if other is None or len(s.tape.nodes[other.id].value.shape) == 0:
                    continue
                fn = lambda s=s, n=fnat, o=other: s.select(o, index=n)  # noqa: E731
            else:
                fn = handle_call(s, call, fx, other)
            self._expect_error(lane, StaleHandleError, fn, "foreign")
            assert self._snapshot_foreign(lane) == fb
