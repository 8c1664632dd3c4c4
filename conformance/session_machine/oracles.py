"""The oracles of the Session state machine: what each step is checked against.

Invariants:
- `_expect_error` accepts a call only if it raises the named error, with every needle in its
  message, and leaves the lane's session unchanged (`_snapshot`: tape values and flags,
  recorded graph, environment, parameters, RNG seed and counter, generation, owner).
- `_check_exact` compares the exact lane's values with spec `eval_graph` and its gradients
  with spec `backprop_all_ctx` (the seed at the output, zeros past it and at frozen values);
  `_check_float` compares the typed-graph float32 lane's gradients with `backprop_all_ctx`
  over binary32 whenever every tape value is finite.
- The invariants (run after every step): the newest value's gradients match spec and agree
  bit for bit between the float32 lanes; its forward-mode tangent in each typed-graph lane
  matches spec `jvp_ctx` on the recorded graph, with a tangent at every leaf (frozen or
  not); tape lengths, recorded graphs, environments,
  parameters and handles match the machine's model.

`SessionOracles` is a mixin of `SessionMachine` (it reads the machine's state: `s`, `values`,
`nats`, `params`, `foreign`, `has_ops`, `tape_len`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis.stateful import invariant

from runtime.backends import to_spec
from spec.graph import backprop_all_ctx, eval_graph, jvp_ctx
from spec.tensor import Tensor, TensorPack

from .model import B32, LANES, MODE, RAT, exact_values, lane_array, size_of, value_key

__all__ = ["SessionOracles"]


class SessionOracles:
    """The checks of `SessionMachine` (see the module docstring)."""

    s: dict[str, Any]
    values: list[Any]
    nats: list[dict[str, Any]]
    params: list[Any]
    foreign: dict[str, Any]
    has_ops: dict[str, bool]
    tape_len: dict[str, int]

    def _snapshot(self, lane: str) -> tuple[Any, ...]:
        s = self.s[lane]
        graph = None
        if s.mode == "typed_graph":
            rec = s.graph()
            graph = (rec.graph.inputs, len(rec.graph.nodes), tuple(rec.env))
        env = tuple(s.get_nat(n[lane]) for n in self.nats if lane in n)
        params = tuple(value_key(p.refs[lane].get()) for p in self.params)
        return (
            len(s.tape),
            tuple(value_key(n.value) for n in s.tape.nodes),
            tuple(n.requires_grad for n in s.tape.nodes),
            graph,
            env,
            params,
            s.rng.seed,
            s.rng.counter,
            s.generation,
            s.owner,
        )

    def _expect_error(
        self, lane: str, exc: type[Exception], call: Callable[[], Any], *needles: str
    ) -> None:
        """`call` raises `exc` whose message contains every needle; nothing changed."""
        before = self._snapshot(lane)
        try:
            call()
        except exc as e:
            msg = str(e)
            for needle in needles:
                assert needle in msg, f"{lane}: {needle!r} not in error message {msg!r}"
        else:
            raise AssertionError(f"{lane}: expected {exc.__name__}, nothing was raised")
        after = self._snapshot(lane)
        assert after == before, f"{lane}: a failed call changed the session"

    def _check_exact(self, out: int, vals: list[Fraction], grads: list[Any]) -> None:
        s = self.s["exact"]
        rec = s.graph()
        have = eval_graph(RAT, rec.graph, rec.inputs, rec.env).tensors
        assert [exact_values(n.value) for n in s.tape.nodes] == [list(t.data) for t in have]
        g = rec.graph.prefix(max(0, out - rec.graph.num_inputs + 1))
        seeds = [Tensor.zeros(RAT, sh) for sh in g.shapes]
        seeds[out] = Tensor(g.shapes[out], tuple(vals))
        want = backprop_all_ctx(RAT, g, rec.inputs, TensorPack.of(seeds), rec.env).tensors
        for i, gi in enumerate(grads):
            got = exact_values(gi)
            if i == out:
                assert got == list(vals), i
            elif i > out or not s.tape.nodes[i].requires_grad:
                assert got == [0] * len(got), (i, got)
            else:
                assert got == list(want[i].data), (i, got, want[i].data)

    def _check_float(self, out: int, vals: list[Fraction], grads: list[Any]) -> None:
        s = self.s["graph"]
        if not all(np.all(np.isfinite(n.value)) for n in s.tape.nodes):
            return  # spec propagates 0 * inf through unreached nodes; the tape skips them
        rec = s.graph()
        g = rec.graph.prefix(max(0, out - rec.graph.num_inputs + 1))
        seeds = [Tensor.zeros(B32, sh) for sh in g.shapes]
        seeds[out] = to_spec(lane_array("graph", vals, g.shapes[out]), "float32")
        want = backprop_all_ctx(B32, g, rec.inputs, TensorPack.of(seeds), rec.env).tensors
        for i in range(g.num_values):
            if i != out and not s.tape.nodes[i].requires_grad:
                continue
            got = np.asarray(grads[i], dtype=np.float64).reshape(-1)
            exp = np.array(
                [float(B32.to_rational(v)) if not B32.is_nan(v) else np.nan for v in want[i].data]
            )
            assert np.array_equal(got, exp, equal_nan=True), (i, got, exp)

    def _snapshot_foreign(self, lane: str) -> Any:
        f, _, fnat, fparam = self.foreign[lane]
        return (len(f.tape), f.get_nat(fnat), value_key(fparam.get()), f.rng.counter)

    def _check_link(self) -> None:
        for lane in ("exact", "graph"):
            rep = self.s[lane].check_link(seed=len(self.s[lane].tape))
            assert rep.ok, f"{lane}: {rep.text}"

    # ------------------------------------------------------------------ invariants
    @invariant()
    def newest_value_gradients(self) -> None:
        """Every step: the gradients from the newest value (a fixed seed) in every lane
        match spec and agree between the float32 lanes."""
        if not self.values:
            return
        out = self.values[-1]
        vals = [Fraction((i % 3) - 1, 2) or Fraction(1) for i in range(size_of(out.shape))]
        grads = {
            lane: self.s[lane].backward_dense_all(r, lane_array(lane, vals, out.shape))
            for lane, r in out.refs.items()
        }
        if "exact" in grads:
            self._check_exact(out.refs["exact"].id, vals, grads["exact"])
        if "eager" in grads and "graph" in grads:
            assert [value_key(a) for a in grads["eager"]] == [value_key(b) for b in grads["graph"]]
            self._check_float(out.refs["graph"].id, vals, grads["graph"])

    @invariant()
    def newest_value_tangents(self) -> None:
        """Every step: forward mode in each typed-graph lane (`jvp_dense_all` to the newest
        value, fixed tangents at every leaf, frozen or not) matches spec `jvp_ctx` on the
        recorded graph: exactly in the exact lane; as numbers (±0 alike: values nothing
        flows into get +0 there, spec computes their zero) in the float32 lane, whenever
        every tape value is finite."""
        if not self.values:
            return
        out = self.values[-1]
        for lane in ("exact", "graph"):
            r = out.refs.get(lane)
            if r is None:
                continue
            s = self.s[lane]
            if lane == "graph" and not all(np.all(np.isfinite(n.value)) for n in s.tape.nodes):
                continue
            rec = s.graph()
            D = RAT if lane == "exact" else B32
            qs = [
                [Fraction((i + k) % 5 - 2, 4) for k in range(size_of(sh))]
                for i, sh in enumerate(rec.graph.inputs)
            ]
            got = s.jvp_dense_all(
                r, [lane_array(lane, q, sh) for q, sh in zip(qs, rec.graph.inputs, strict=True)]
            )
            # TorchLean: "dxs[i] is the tangent for leaf i": every leaf's tangent counts,
            # frozen inputs, frozen parameters and constants alike
            dxs = [
                Tensor(sh, tuple(D.from_rational(v) for v in q))
                for q, sh in zip(qs, rec.graph.inputs, strict=True)
            ]
            want = jvp_ctx(D, rec.graph, rec.inputs, dxs, rec.env).tensors[r.id]
            self._check_tangent(lane, got, want, r.id)

    def _check_tangent(self, lane: str, got: Any, want: Tensor, rid: int) -> None:
        """A lane's tangent against spec's: exactly in the exact lane; as numbers (±0 alike,
        NaN matching NaN) in the float32 lane, whose tape values must all be finite."""
        if lane == "exact":
            assert exact_values(got) == list(want.data), (rid, got, want.data)
            return
        if not all(np.all(np.isfinite(n.value)) for n in self.s[lane].tape.nodes):
            return
        exp = np.array(
            [float(B32.to_rational(v)) if not B32.is_nan(v) else np.nan for v in want.data]
        )
        have = np.asarray(got, dtype=np.float64).reshape(-1)
        assert np.array_equal(have, exp, equal_nan=True), (rid, have, exp)

    @invariant()
    def lanes_agree(self) -> None:
        for lane in LANES:
            s = self.s[lane]
            assert len(s.tape) == self.tape_len[lane], (lane, len(s.tape), self.tape_len[lane])
            if MODE[lane] == "typed_graph":
                g = s.graph().graph
                assert g.num_values == len(s.tape)
                assert (len(g.nodes) > 0) == self.has_ops[lane], lane
                assert s.graph().env == [s.get_nat(n[lane]) for n in self.nats if lane in n]
        e, g = self.s["eager"], self.s["graph"]
        assert [(value_key(a.value), a.requires_grad) for a in e.tape.nodes] == [
            (value_key(b.value), b.requires_grad) for b in g.tape.nodes
        ]
        for p in self.params:
            assert exact_values(p.refs["exact"].get()) == p.value
            assert value_key(p.refs["eager"].get()) == value_key(p.refs["graph"].get())
        for v in self.values:
            for lane, r in v.refs.items():
                assert r.shape == v.shape and r.generation == self.s[lane].generation
