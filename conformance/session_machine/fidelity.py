"""Rules of the Session state machine for TorchLean's promises that an audit found broken:
forward mode at leaves that do not require gradients, `grad` on gradient lists (current and
stale), and a training session that goes on training after `finish()`.

Invariants:
- `jvp_non_grad_leaf`: in each typed-graph lane, `jvp_leaf(newest value, leaf, dx)` at a
  leaf that does not require gradients (an input, a frozen parameter, a constant) equals
  spec `jvp_ctx` on the recorded graph with `dx` at that leaf and zero elsewhere (TorchLean:
  "dxs[i] is the tangent for leaf i"; `requires_grad` governs reverse mode only).
- `grad_lists`: `grad(grads, x)` and the session-free `grad` return `grads[x.id]` for a
  current list; a list kept from before a `reset_tape` is refused (`StaleHandleError`,
  nothing changed) by both, also at a handle whose id it covers.
- The trainer lane: one `TrainingSession` ("exact", Linear(2, 1), SGD with lr 1/8) whose
  parameters the machine models exactly. `train_step` checks the loss and the update;
  `train_finish` keeps the `Result` with the state it must hold; `train_set_state` replaces
  the parameters. `trainer_results_kept` (after every step): the session holds the model's
  parameters and every Result still holds the state of its `finish()`, however much the
  session trained afterwards.

`FidelityRules` extends `SessionOracles` (whose checks it uses: `_expect_error`,
`_check_tangent`) and is a base of `SessionMachine` (it reads `s` and `values`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule

from runtime.nn import Linear, Sequential
from runtime.optim import SGD
from runtime.session import GradientList, grad
from runtime.trainer import Trainer
from spec.errors import StaleHandleError
from spec.graph import jvp_ctx
from spec.tensor import Tensor

from .model import B32, LANES, MODE, RAT, VALUE, exact_values, lane_array, size_of, value_key
from .oracles import SessionOracles

__all__ = ["FidelityRules"]

LR = Fraction(1, 8)
MAX_RESULTS = 4


def _exact(vals: list[Fraction], shape: tuple[int, ...]) -> np.ndarray:
    return lane_array("exact", vals, shape)


class FidelityRules(SessionOracles):
    """See the module docstring."""

    def __init__(self) -> None:
        super().__init__()
        self.grad_lists: dict[str, list[GradientList]] = {lane: [] for lane in LANES}
        self.w = [Fraction(1), Fraction(-1)]
        self.b = Fraction(0)
        trainer = Trainer(Sequential(Linear(2, 1)), optimizer=SGD(LR))
        self.run = trainer.open_typed("exact", initial_state=[_exact(self.w, (1, 2)), [0]])
        self.results: list[tuple[Any, list[Fraction], Fraction]] = []
        self.train_steps = 0

    # ------------------------------------------------------------------ forward mode
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def jvp_non_grad_leaf(self, data: Any) -> None:
        out = self.values[-1]
        k = data.draw(st.integers(0, 2**16), label="leaf")
        for lane in LANES:
            r = out.refs.get(lane)
            if r is None or MODE[lane] != "typed_graph":
                continue
            s = self.s[lane]
            rec = s.graph()
            frozen = {
                v.refs[lane].id: v.refs[lane]
                for v in self.values
                if lane in v.refs
                and v.refs[lane].id < rec.graph.num_inputs
                and not s.tape.nodes[v.refs[lane].id].requires_grad
            }
            if not frozen:
                continue
            i = sorted(frozen)[k % len(frozen)]
            sh = rec.graph.inputs[i]
            q = [Fraction((k + j) % 7 - 3, 4) for j in range(size_of(sh))]
            got = s.jvp_leaf(r, frozen[i], lane_array(lane, q, sh))
            D = RAT if lane == "exact" else B32
            dxs = [
                Tensor(shp, tuple(D.from_rational(v) for v in q))
                if j == i
                else Tensor.zeros(D, shp)
                for j, shp in enumerate(rec.graph.inputs)
            ]
            want = jvp_ctx(D, rec.graph, rec.inputs, dxs, rec.env).tensors[r.id]
            self._check_tangent(lane, got, want, r.id)

    # ------------------------------------------------------------------ grad
    @rule(data=st.data())
    @precondition(lambda self: bool(self.values))
    def grad_lists(self, data: Any) -> None:
        """`grad` on a current list returns its entry; a list from an earlier generation
        (kept across `reset_tape`) is refused by `Session.grad` and the session-free
        `grad`, with nothing changed."""
        out = self.values[-1]
        x = data.draw(st.sampled_from(self.values), label="x")
        seed = [Fraction(1)] * size_of(out.shape)
        for lane, r in out.refs.items():
            s = self.s[lane]
            g = s.backward_dense_all(r, lane_array(lane, seed, out.shape))
            xr = x.refs.get(lane)
            if xr is not None:
                assert value_key(s.grad(g, xr)) == value_key(g[xr.id])
                assert value_key(grad(g, xr)) == value_key(g[xr.id])
            for old in self.grad_lists[lane]:
                if old.generation == s.generation:
                    continue
                needle = f"stale gradient list from generation {old.generation}"
                self._expect_error(
                    lane, StaleHandleError, lambda s=s, o=old, r=r: s.grad(o, r), needle
                )
                self._expect_error(lane, StaleHandleError, lambda o=old, r=r: grad(o, r), needle)
            kept = [h for h in self.grad_lists[lane] if h.generation != s.generation]
            self.grad_lists[lane] = [*kept[-2:], g]

    # ------------------------------------------------------------------ trainer lane
    @rule(data=st.data())
    def train_step(self, data: Any) -> None:
        x = data.draw(st.lists(VALUE, min_size=2, max_size=2), label="train_x")
        t = data.draw(VALUE, label="train_t")
        e = self.w[0] * x[0] + self.w[1] * x[1] + self.b - t
        loss = self.run.step((_exact(x, (2,)), _exact([t], (1,))), loss=True)
        assert loss == e * e, (loss, e * e)
        # d(e^2)/dw_j = 2 e x_j, d(e^2)/db = 2 e; SGD: p - lr g
        self.w = [w - LR * 2 * e * xj for w, xj in zip(self.w, x, strict=True)]
        self.b = self.b - LR * 2 * e
        self.train_steps += 1

    @rule()
    def train_finish(self) -> None:
        res = self.run.finish()
        assert res.report["updates"] == self.train_steps
        assert res.eval([]) == 0  # TorchLean: "or zero when empty"
        self.results = [*self.results[-(MAX_RESULTS - 1) :], (res, self.w, self.b)]

    @rule(data=st.data())
    def train_set_state(self, data: Any) -> None:
        w = data.draw(st.lists(VALUE, min_size=2, max_size=2), label="set_w")
        b = data.draw(VALUE, label="set_b")
        self.run.set_state([_exact(w, (1, 2)), _exact([b], (1,))])
        self.w, self.b = w, b

    @invariant()
    def trainer_results_kept(self) -> None:
        st_ = self.run.state()
        assert (exact_values(st_[0]), exact_values(st_[1])) == (self.w, [self.b])
        assert self.run.steps() == self.train_steps
        for res, w, b in self.results:
            kept = res.state()
            assert (exact_values(kept[0]), exact_values(kept[1])) == (w, [b])
