"""Rules of the Session state machine for what a caller does with results: edit them, keep
them while recording more ops, and pass Python scalars at any argument position.

Invariants:
- `edit_results` (a drawn value) and the invariant `newest_results_are_not_state` (the
  newest value, after every step): in each lane, a backward's list, its seed, a `vjp`
  entry and a value read back are edited in place (every element overwritten); then the
  same backward with an equal fresh seed returns bit for bit the list from before the
  edits, every value the machine holds reads back unchanged, and no two entries of one
  list share memory
  (TorchLean's `grad` is "the non-mutating counterpart of reading x.grad").
- `list_after_ops`: a list of the current generation, kept while more ops are recorded,
  still answers `Session.grad` and the session-free `grad` with its own entries at every
  value recorded before its backward (TorchLean's dense list is indexed by node id).
- `scalar_positions`: a binary op with a Python scalar at argument 0 or 1, first op or
  later, adds exactly one const node and no leaf to a typed graph (one rule for scalars),
  and forward mode then takes one tangent per leaf the machine created.
- Inputs made without `requires_grad` track gradients (the machine's sessions enable
  gradients): `new_input` draws "default" as a third choice and expects True for it.

`AliasRules` extends `SessionOracles` (it reads `s` and `values`) and is a base of
`SessionMachine` (it records ops through the machine's `_op`).
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from runtime.session import grad

from .model import MODE, lane_array, size_of, value_key
from .oracles import SessionOracles

__all__ = ["SCALAR_OPS", "AliasRules"]

SCALAR_OPS = ("add", "sub", "mul", "maximum")
JUNK = Fraction(-7, 2)


def _overwrite(a: Any) -> None:
    """Every element of `a` set to a value no backward of the machine's programs gives."""
    a[...] = JUNK if a.dtype == object else float(JUNK)


class AliasRules(SessionOracles):
    """See the module docstring."""

    _op: Any  # the machine's: apply an op in every lane that holds its arguments

    def _values_in(self, lane: str) -> list[tuple[Any, tuple[Any, ...]]]:
        s = self.s[lane]
        return [(v.refs[lane], value_key(s.get_value(v.refs[lane]))) for v in self.values
                if lane in v.refs]  # fmt: skip

    # ------------------------------------------------------------------ editing results
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def edit_results(self, data: Any) -> None:
        out = data.draw(st.sampled_from(self.values), label="edit_out")
        k = data.draw(st.integers(0, 2**16), label="edit_x")
        self._edit_and_recheck(out, k)

    @invariant()
    def newest_results_are_not_state(self) -> None:
        if self.values:
            self._edit_and_recheck(self.values[-1], len(self.values))

    def _edit_and_recheck(self, out: Any, k: int) -> None:
        vals = [Fraction(1 + j % 3, 2) for j in range(size_of(out.shape))]
        for lane, r in out.refs.items():
            s = self.s[lane]
            before = self._values_in(lane)
            seed = lane_array(lane, vals, out.shape)
            g = s.backward_dense_all(r, seed)
            want = [value_key(e) for e in g]
            _overwrite(seed)  # the caller's seed: not shared with the list
            assert [value_key(e) for e in g] == want, f"{lane}: the list shares the seed"
            for u, v in itertools.combinations(g, 2):
                assert not np.shares_memory(u, v), f"{lane}: two entries share memory"
            xs = [v.refs[lane] for v in self.values if lane in v.refs]
            x = xs[k % len(xs)]
            edits = [*g, s.vjp(r, lane_array(lane, vals, out.shape), x), s.get_value(x)]
            for e in edits:
                _overwrite(e)
            again = s.backward_dense_all(r, lane_array(lane, vals, out.shape))
            assert [value_key(e) for e in again] == want, f"{lane}: an edit reached the session"
            assert self._values_in(lane) == before, f"{lane}: an edit changed a value"

    # ------------------------------------------------------------------ lists after ops
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def list_after_ops(self, data: Any) -> None:
        out = data.draw(st.sampled_from(self.values), label="list_out")
        kept = {}
        for lane, r in out.refs.items():
            seed = lane_array(lane, [Fraction(1)] * size_of(out.shape), out.shape)
            kept[lane] = (self.s[lane].backward_dense_all(r, seed), list(self.values))
        n = data.draw(st.integers(1, 2), label="more_ops")
        for _ in range(n):
            self._op([self.values[-1]], lambda lane, a: self.s[lane].neg(a[0]))
        for lane, (g, earlier) in kept.items():
            s = self.s[lane]
            for v in earlier:
                xr = v.refs.get(lane)
                if xr is None:
                    continue
                assert value_key(s.grad(g, xr)) == value_key(g[xr.id]), lane
                assert value_key(grad(g, xr)) == value_key(g[xr.id]), lane

    # ------------------------------------------------------------------ scalars
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def scalar_positions(self, data: Any) -> None:
        x = data.draw(st.sampled_from(self.values), label="scalar_x")
        op = data.draw(st.sampled_from(SCALAR_OPS), label="scalar_op")
        pos = data.draw(st.sampled_from([0, 1]), label="scalar_pos")
        c = data.draw(st.sampled_from([2, Fraction(1, 2), -1]), label="scalar_c")
        leaves = {
            lane: self.s[lane].graph().graph.num_inputs
            for lane in x.refs
            if MODE[lane] == "typed_graph"
        }

        def call(lane: str, a: list[Any]) -> Any:
            args = (c, a[0]) if pos == 0 else (a[0], c)
            return getattr(self.s[lane], op)(*args)

        y = self._op([x], call, nodes=2)
        if y is None:
            return
        for lane, n in leaves.items():
            s = self.s[lane]
            assert s.graph().graph.num_inputs == n, f"{lane}: a scalar became a leaf"
            dxs = [
                lane_array(lane, [Fraction(0)] * size_of(sh), sh) for sh in s.graph().graph.inputs
            ]
            s.jvp_dense_all(y.refs[lane], dxs)
