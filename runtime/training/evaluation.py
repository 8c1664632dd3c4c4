"""Evaluation and the pieces a training session is made of: boundary conversions, the
pairwise mean, `Result` (a snapshot), `Evaluator` (evaluation-mode forwards on a private
inference Session) and `LossGraph` (a recorded loss graph replayed on new values).

Invariants:
- Boundary values are rounded once into the run's dtype (`to_run`, `from_f64`); `to_f64`
  converts back (exact for every IEEE dtype).
- `pairwise_mean` combines per-sample means pairwise in index order (see
  `runtime.training.trainer` for the merge rule); it is zero when empty (TorchLean:
  "returns its ordered mean, or zero when empty").
- A `Result` holds copies: nothing done to the session afterwards changes it.
- `Evaluator` mutates nothing outside its own inference Session.
- `LossGraph.run` replays the recorded tape on new leaf values (`Tape.replay`) and takes the
  backward `Session.backward_scalar_dense_all` takes: bit for bit a fresh recording's
  gradients and loss.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from spec.errors import ShapeError, TorchLeanError
from spec.tensor import Tensor

from ..backends.base import DTYPE_DOMAIN, from_spec, round_f64
from ..backends.registry import get_backend
from ..engine.context import KernelContext, fp_quiet
from ..session import Param, Session, TensorRef
from . import checkpoint as ckpt
from .layers import LOSSES, Forward, Sequential

__all__ = [
    "Evaluator",
    "LossGraph",
    "Result",
    "from_f64",
    "pairwise_mean",
    "split_sample",
    "to_f64",
    "to_run",
]


def from_f64(v: Any, dtype: str) -> np.ndarray:
    """Values rounded once into `dtype` (exactly converted for "exact"): binary64 numbers
    from their binary64 value, Fractions (object arrays) from their exact value."""
    obj = np.asarray(v)
    if obj.dtype == object and dtype != "exact":
        D = DTYPE_DOMAIN[dtype]
        t = Tensor(tuple(obj.shape), tuple(D.from_rational(Fraction(x)) for x in obj.reshape(-1)))
        return np.asarray(from_spec(t, dtype))
    a = np.asarray(v, dtype=np.float64)
    if dtype == "exact":
        out = np.empty(a.shape, dtype=object)
        for idx, x in np.ndenumerate(a):
            if not math.isfinite(x):
                raise TorchLeanError(f"exact dtype cannot hold {x!r}")
            out[idx] = Fraction(float(x))
        return out
    return np.asarray(round_f64(a, dtype))


def to_run(x: Any, dtype: str) -> np.ndarray:
    """Boundary values into the run's dtype: an array of that dtype as is; "exact": every
    number exactly (Fraction(v)); IEEE: one rounding (see `from_f64`)."""
    if isinstance(x, np.ndarray) and x.dtype == get_backend("numpy").dtype(dtype):
        return x
    if dtype == "exact":
        return np.asarray(get_backend("numpy").asarray(x, "exact"))
    return from_f64(x, dtype)


def to_f64(a: Any) -> np.ndarray:
    """Run-dtype values as binary64 (exact for every IEEE dtype; rounded for Fractions)."""
    arr = np.asarray(a)
    if arr.dtype == object:
        return np.array([float(v) for v in arr.reshape(-1)], dtype=np.float64).reshape(arr.shape)
    return arr.astype(np.float64)


def pairwise_mean(ctx: KernelContext, items: Iterable[Any]) -> Any:
    """The mean of 0-d values (in ctx's dtype), combined pairwise in index order; zero when
    empty. See the module docstring for the merge rule and its range guarantee."""
    stack: list[tuple[Any, int]] = []

    def merge(a: Any, na: int, b: Any, nb: int) -> tuple[Any, int]:
        n = na + nb
        wl, wr = ctx.const(Fraction(na, n)), ctx.const(Fraction(nb, n))
        with fp_quiet():
            r = ctx.arr(ctx.arr(a * wl) + ctx.arr(b * wr))
            if not ctx.exact:
                fa, fb = float(a), float(b)
                if math.isfinite(fa) and math.isfinite(fb) and not math.isnan(float(r)):
                    lo, hi = (a, b) if fa <= fb else (b, a)
                    if float(r) < float(lo):
                        r = lo
                    elif float(r) > float(hi):
                        r = hi
        return ctx.arr(r), n

    for v in items:
        stack.append((ctx.arr(v), 1))
        while len(stack) >= 2 and stack[-1][1] == stack[-2][1]:
            b, nb = stack.pop()
            a, na = stack.pop()
            stack.append(merge(a, na, b, nb))
    if not stack:
        return ctx.zeros(())
    while len(stack) >= 2:
        b, nb = stack.pop()
        a, na = stack.pop()
        stack.append(merge(a, na, b, nb))
    return stack[0][0]


# --------------------------------------------------------------------------- result


@dataclass
class Result:
    """A snapshot of a training session: state copies, the report, and evaluation."""

    model: Sequential
    objective: str
    dtype: str
    mode: str
    kernels: str
    typed: bool
    _state: list[np.ndarray]
    report: dict[str, Any] = field(default_factory=dict)

    def state(self) -> list[np.ndarray]:
        return [np.array(a, copy=True) for a in self._state]

    def _eval(self) -> Evaluator:
        return Evaluator(self.model, self.objective, self.dtype, self.mode, self.kernels)

    def predict(self, x: Any, batch: bool = False) -> Any:
        ev = self._eval()
        return ev.predict(self._state, x, batch, self.typed)

    def loss(self, sample: Any, batch: bool = False) -> Any:
        return self._eval().loss(self._state, sample, batch, self.typed)

    def eval(self, data: Iterable[Any]) -> Any:
        """The pairwise mean loss over `data` at the snapshot's state (zero when empty)."""
        return self.loss(data, batch=True)

    def save(self, path: str | os.PathLike[str]) -> None:
        ckpt.save_state(path, self._state, self.dtype, self.model.tying())

    def verify(
        self,
        center: Any,
        radius: Any,
        norm: str = "inf",
        property: Any = "bounds",
        algorithm: str = "ibp",
    ) -> Any:
        """Certified output bounds on the box center +- radius: `runtime.verification.verify`."""
        from ..verification import verify

        return verify(self, center, radius, norm, property, algorithm)

    def summary(self) -> str:
        r = self.report
        parts = [f"{r['updates']} updates", f"dtype {r['dtype']} ({r['scalar']})"]
        for k in ("before", "after"):
            if r["losses"].get(k) is not None:
                parts.append(f"loss {k} {r['losses'][k]}")
        return "; ".join(parts)


# --------------------------------------------------------------------------- evaluation


class Evaluator:
    """Evaluation-mode forwards on a private inference Session (mutates nothing else)."""

    def __init__(self, model: Sequential, objective: str, dtype: str, mode: str, kernels: str):
        self.model, self.objective, self.dtype = model, objective, dtype
        self.s = Session(mode, "cpu", dtype, kernels, grad_enabled=False)
        self.ctx = self.s.ctx

    def convert(self, x: Any, typed: bool) -> Any:
        return to_run(x, self.dtype)

    def out(self, v: Any, typed: bool) -> Any:
        if typed:
            a = np.asarray(v)
            # a 0-d result is a scalar of the dtype: np.float32 / np.float64 / ..., and
            # for "exact" its Fraction (`a[()]` is the element itself for object arrays)
            return a[()] if a.shape == () else a
        a = to_f64(v)
        return float(a) if a.shape == () else a

    def forward(
        self, state: list[Any], x: Any, t: Any | None
    ) -> tuple[TensorRef, TensorRef | None]:
        s = self.s
        s.reset_tape()
        refs = [[s.input(state[k]) for k in occ] for occ in self.model.occurrences()]
        xr = s.input(x)
        tr = s.input(t) if t is not None else None
        y = self.model.run(Forward(s, False), refs, xr)
        if tr is None:
            return y, None
        return y, LOSSES[self.objective](s, y, tr)

    def sample_loss(self, state: list[Any], sample: Any, typed: bool) -> Any:
        x, t = split_sample(sample)
        _, loss = self.forward(state, self.convert(x, typed), self.convert(t, typed))
        assert loss is not None
        return self.s.get_value(loss)

    def loss(self, state: list[Any], samples: Any, batch: bool, typed: bool) -> Any:
        if not batch:
            return self.out(self.sample_loss(state, samples, typed), typed)
        return self.out(
            pairwise_mean(self.ctx, (self.sample_loss(state, sm, typed) for sm in samples)), typed
        )

    def predict(self, state: list[Any], x: Any, batch: bool, typed: bool) -> Any:
        if not batch:
            y, _ = self.forward(state, self.convert(x, typed), None)
            return self.out(self.s.get_value(y), typed)
        xs = self.convert(x, typed)
        if xs.ndim == 0:
            raise ShapeError("predict(batch=True): input 0: expected a leading batch axis, got ()")
        outs = []
        for i in range(xs.shape[0]):
            y, _ = self.forward(state, xs[i], None)
            outs.append(self.s.get_value(y))
        if not outs:
            shape = (0, *self.model.out_shape(tuple(xs.shape[1:])))
            return self.out(self.ctx.zeros(shape), typed)
        return self.out(np.stack(outs), typed)


def split_sample(sample: Any) -> tuple[Any, Any]:
    if not isinstance(sample, (tuple, list)) or len(sample) != 2:
        raise TorchLeanError(
            f"sample: expected a pair (input, target), got {type(sample).__name__}"
            + (f" of length {len(sample)}" if isinstance(sample, (tuple, list)) else "")
        )
    return sample[0], sample[1]


@dataclass
class LossGraph:
    """A recorded loss graph: its tape, the leaf ids of each state slot, of the input and
    of the target, and the loss id. `run` replays it on new values (`Tape.replay`) and
    takes the same backward as `Session.backward_scalar_dense_all`."""

    tape: Any
    leaves: dict[int, list[int]]
    x: int
    t: int
    loss: int

    def run(
        self, s: Session, params: list[Param], xv: Any, tv: Any
    ) -> tuple[list[Any], dict[int, list[int]], Any]:
        values = {self.x: xv, self.t: tv}
        for k, ids in self.leaves.items():
            for i in ids:
                values[i] = s.store.leaf_value(params[k])
        tape = self.tape.replay(values)
        grads = tape.backward_dense_all(self.loss, tape.ctx.const(1))
        return grads, self.leaves, tape.nodes[self.loss].value
