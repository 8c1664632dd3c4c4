"""The trainer and its session: open, step, loss, predict, save/load, finish.

Invariants:
- A `Trainer` is an immutable configuration (model, objective, optimizer, dtype, mode,
  device, kernels, seed). `open()` / `open_typed()` return a `TrainingSession` that owns
  all mutable state explicitly: parameters and buffers (Session `Param` cells), optimizer
  state, the completed-step count, the scheduler and the dropout RNG counter. Nothing is
  shared between sessions. The session holds a deep copy of the optimizer (whose `hyper`
  is read-only anyway) and the scheduler (a frozen dataclass), so nothing done to the
  objects passed to the Trainer after `open()` changes a running session.
- Validation before instantiation: objective, optimizer and scheduler settings are checked
  (on the given values and after conversion to the run's dtype) before the model's
  initial state is computed or any session exists.
- Seeds: the model's initial values come from the seed stream of `key_of(seed, 0)`;
  dropout draws from a Session RNG seeded with `key_of(seed, 1)`.
- Boundary: `open()` takes Python floats (binary64) and returns Python floats / float64
  arrays (exact conversions for every IEEE dtype); `open_typed(dtype)` keeps the scalar
  (arrays of the dtype, Fractions for "exact") in inputs, state, predictions, losses,
  reports and checkpoints; a scalar result (`loss`, `eval`, `step(loss=True)`) is a scalar
  of the dtype (`np.float32`, `np.float64`, ..., a `Fraction` for "exact"), never a 0-d
  array, as the session's `jvp_scalar_leaf` returns.
- `step` is one update: per-sample gradients at the same parameter point, summed left to
  right, multiplied by fl(1/n) (not for n = 1); tied parameters get the sum (leaf order) of
  their occurrences' gradients and one update. Stateful layers run in training mode and
  their buffers are updated after each forward, in sample order. A step that raises
  leaves the session unchanged (parameters, buffers, optimizer state, counters, RNG).
- Scheduled rates are checked at every step, before anything runs or changes: lr(t) in
  binary64 and its value rounded into the run's dtype must be finite and >= 0, else
  `TorchLeanError` naming the step, the scheduler, the value and the dtype (e.g.
  exponential(1.0, 2.0) in float16 reaches 65536 at step 16, "... is inf after conversion
  to binary16"); the session stays as it was.
- `loss`, `eval`, `predict` are evaluation mode on a separate inference Session: they
  mutate nothing (no parameter, buffer, RNG or counter changes).
- Batch means combine per-sample means pairwise (a binary-counter merge in index order):
  mean(L, R) = mean_L * fl(n_L / n) + mean_R * fl(n_R / n), the weights cast once from
  exact ratios; for IEEE scalars a result with finite children is clamped into the
  children's range (so every finite partial mean lies between its children and a large
  finite sum never overflows). This bounds each merge, it is not an accuracy guarantee
  under cancellation.
- Training data is checked before a step runs: every input and target value, after
  conversion to the run's dtype, must be finite, else `DataError` naming the sample, the
  input or target and the element (a NaN label or an infinite input would turn every
  parameter NaN); the step is refused and nothing changes. `eval`/`loss(batch=True)` of
  an empty stream is zero in the run's dtype (TorchLean: "returns its ordered mean, or
  zero when empty").
- `finish()` returns a `Result` holding copies (TorchLean: "Keep a model snapshot with the
  losses measured for it. The session can continue training without changing this
  result."): the session stays open, and later steps, loads or `set_state` calls do not
  change the Result.
- `state()` / `set_state(values)` read or replace every state slot (TorchLean's
  `setStateImpl`: "read or replace the parameters"), validated before anything changes;
  optimizer history and the step count are kept.
- The loss graph is recorded once per shape signature (input and target shape and dtype)
  and reused: later samples of that signature run the recorded tape again on their values
  (`Tape.replay`) and take its `backward_dense_all`, the same kernels on the same
  arguments as a fresh recording, so bit for bit the same gradients and losses. A forward
  that draws random numbers (dropout), reports buffer updates (batch norm) or reads a value
  back into Python (embedding ids) depends on more than the shapes: it is recorded for
  every sample. `loss_graphs_recorded()` counts the recordings.
- Full checkpoints are validated before anything changes (see `checkpoint` for the file
  checks): the digest, keys, dtype, tying, optimizer and scheduler configuration, the step
  count and RNG counter (ints >= 0), every tensor's shape and the optimizer state's domain
  (`Optimizer.check_state`: moments finite, second moments >= 0, beta powers 1 before the
  first step and in [0, 1) after).
- Devices: `Trainer(device="cuda")` (eager, float64/float32/float16; bfloat16 is refused
  by `open()`, CuPy has no bfloat16 dtype) runs every training forward and backward on
  the CUDA backend; the gradients come back to the host, where the optimizer update, the
  optimizer state, buffer updates and the parameters' authoritative copies live (NumPy,
  same dtype and kernel profile), so an `ordered` CUDA run is bit-identical to the CPU run.
  `loss`/`eval`/`predict` evaluate on the host.
"""

from __future__ import annotations

import copy
import json
import os
import sys
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from spec import rng as srng
from spec.errors import CheckpointError, ShapeError, TorchLeanError

from ..backends.base import DTYPES
from ..backends.registry import get_backend
from ..engine.context import KernelContext, fp_quiet
from ..session import Param, Session, TensorRef
from . import checkpoint as ckpt
from .evaluation import (
    Evaluator,
    LossGraph,
    Result,
    from_f64,
    pairwise_mean,
    split_sample,
    to_run,
)
from .guards import DataError, check_finite
from .layers import LOSSES, Forward, Sequential
from .optim import SGD, Optimizer, OptState, Scheduler, check_value, format_name, scalar

__all__ = [
    "DataError",
    "Result",
    "Trainer",
    "TrainingSession",
    "pairwise_mean",
    "save_loss_curve",
]


_NATIVE_FLOATS = ("float64", "float32", "bfloat16", "float16")
# the CUDA backend (CuPy) has no bfloat16 dtype, so a CUDA run cannot hold bfloat16 arrays
_CUDA_FLOATS = ("float64", "float32", "float16")


# --------------------------------------------------------------------------- the trainer


class Trainer:
    """Configuration of a training run; `open()` starts a session, `train()` runs one."""

    def __init__(
        self,
        model: Sequential,
        objective: str = "mse",
        optimizer: Optimizer | None = None,
        dtype: str = "float32",
        mode: str = "eager",
        device: str = "cpu",
        kernels: str = "fast",
        seed: int = 0,
    ) -> None:
        if not isinstance(model, Sequential):
            raise TorchLeanError(f"Trainer: model must be a Sequential, got {type(model).__name__}")
        self.model = model
        self.objective = objective
        self.optimizer = optimizer if optimizer is not None else SGD(0.01)
        self.dtype = dtype
        self.mode = mode
        self.device = device
        self.kernels = kernels
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TorchLeanError(f"Trainer: seed must be an int, got {seed!r}")
        self.seed = seed

    def open(self, scheduler: Scheduler | None = None) -> TrainingSession:
        """A session in the trainer's dtype with binary64 Python floats at the boundary."""
        if self.device != "cpu":
            cuda = self.device == "cuda"
            native = _CUDA_FLOATS if cuda else _NATIVE_FLOATS
            if self.dtype not in native:
                why = " (not bfloat16: CuPy has no bfloat16 dtype)" if cuda else ""
                raise TorchLeanError(
                    f"Trainer.open: device {self.device!r} needs a native float dtype "
                    f"{list(native)}{why}, got {self.dtype!r}"
                )
            if self.mode != "eager":
                raise TorchLeanError(
                    f"Trainer.open: device {self.device!r} runs eager sessions only "
                    f"(typed_graph is CPU-only), got mode {self.mode!r}"
                )
            get_backend("cupy" if self.device == "cuda" else self.device)  # raises if absent
        return TrainingSession(self, self.dtype, False, scheduler, None)

    def open_typed(
        self,
        dtype: str,
        initial_state: Sequence[Any] | None = None,
        scheduler: Scheduler | None = None,
    ) -> TrainingSession:
        """A CPU session whose boundary keeps the scalar of `dtype` (Fractions for exact)."""
        if self.device != "cpu":
            raise TorchLeanError(
                f"Trainer.open_typed: CPU only, this trainer's device is {self.device!r}"
            )
        return TrainingSession(self, dtype, True, scheduler, initial_state)

    def train(
        self,
        data: Iterable[Any],
        steps: int,
        samples_per_step: int = 1,
        scheduler: Scheduler | None = None,
        log_every: int = 0,
        report_loss: bool = True,
        plot: str | os.PathLike[str] | None = None,
    ) -> Result:
        """open, `steps` calls of step (samples taken cyclically), finish. Progress output
        goes to stderr only and only when stderr is a terminal: the tqdm bar and, with
        `log_every > 0`, a loss line every `log_every` steps. `plot` writes a loss-curve PNG
        (needs matplotlib)."""
        from tqdm import tqdm

        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise TorchLeanError(f"train: steps must be an int >= 0, got {steps!r}")
        if samples_per_step < 1:
            raise TorchLeanError(f"train: samples_per_step must be >= 1, got {samples_per_step}")
        data = list(data)
        if steps > 0 and not data:
            raise TorchLeanError(f"train: the dataset is empty but steps = {steps} > 0")
        if plot is not None:
            _require_matplotlib()
        run = self.open(scheduler)
        before = run.eval(data) if report_loss and data else None
        curve: list[float] = []
        interactive = sys.stderr.isatty()
        bar = tqdm(total=steps, file=sys.stderr, disable=not interactive, desc="train")
        log = interactive and log_every > 0
        pos = 0
        try:
            for i in range(steps):
                batch = [data[(pos + j) % len(data)] for j in range(samples_per_step)]
                pos = (pos + samples_per_step) % len(data)
                due = log and (i + 1) % log_every == 0
                want = plot is not None or due
                lv = run.step(batch, batch=True, loss=want)
                if lv is not None:
                    curve.append(float(lv))
                if due:
                    tqdm.write(f"step {i + 1}/{steps}: loss {float(lv):.6g}", file=sys.stderr)
                bar.update(1)
        finally:
            bar.close()
        after = run.eval(data) if report_loss and data else None
        res = run.finish(before=before, after=after)
        if plot is not None:
            save_loss_curve(plot, curve)
        return res


def _require_matplotlib() -> Any:
    """matplotlib's `Figure` class (no pyplot, so no global backend state is touched)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise TorchLeanError(
            "loss-curve plot: matplotlib is not installed (pip install matplotlib, or "
            "pip install -e '.[bench]')"
        ) from None
    return Figure


def save_loss_curve(path: str | os.PathLike[str], losses: Sequence[float]) -> None:
    """A PNG of the per-step training loss."""
    fig = _require_matplotlib()(figsize=(5, 3))
    ax = fig.add_subplot()
    ax.plot(range(1, len(losses) + 1), losses)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    fig.tight_layout()
    fig.savefig(path, format="png")


# --------------------------------------------------------------------------- the session


class TrainingSession:
    """One training run. See the module docstring for its invariants."""

    def __init__(
        self,
        trainer: Trainer,
        dtype: str,
        typed: bool,
        scheduler: Scheduler | None,
        initial_state: Sequence[Any] | None,
    ) -> None:
        t = trainer
        if dtype not in DTYPES or dtype == "symbolic":
            raise TorchLeanError(f"Trainer: unknown dtype {dtype!r}")
        if t.mode not in ("eager", "typed_graph"):
            raise TorchLeanError(f"Trainer: mode must be 'eager' or 'typed_graph', got {t.mode!r}")
        if t.objective not in LOSSES:
            raise TorchLeanError(
                f"Trainer: unknown objective {t.objective!r}; choose one of {sorted(LOSSES)}"
            )
        if not isinstance(t.optimizer, Optimizer):
            raise TorchLeanError(
                f"Trainer: optimizer must be an Optimizer, got {type(t.optimizer).__name__}"
            )
        if scheduler is not None and not isinstance(scheduler, Scheduler):
            raise TorchLeanError(
                f"Trainer: scheduler must be a Scheduler, got {type(scheduler).__name__}"
            )
        # the configuration is copied: changing the Trainer, its optimizer or the scheduler
        # later does not reach a session (the copies are the ones validated)
        optimizer, scheduler = copy.deepcopy(t.optimizer), copy.deepcopy(scheduler)
        ctx = KernelContext(dtype, t.kernels)
        optimizer.validate(ctx)  # before anything is instantiated
        if scheduler is not None:
            scheduler.validate(ctx)
        self.model, self.dtype, self.typed = t.model, dtype, typed
        self.objective, self.mode, self.kernels, self.seed = t.objective, t.mode, t.kernels, t.seed
        self.optimizer, self.scheduler = optimizer, scheduler
        self._specs = self.model.state_specs()
        self._shapes = [sp.shape for sp in self._specs]
        self._tying = self.model.tying()
        if initial_state is None:
            init = [from_f64(v, dtype) for v in self.model.init(srng.key_of(t.seed, 0))]
        else:
            init = self._check_state(list(initial_state), "open_typed: initial_state")
        self.device = "cpu" if typed else t.device
        self._s = Session(t.mode, self.device, dtype, t.kernels, seed=srng.key_of(t.seed, 1))
        # optimizer state, updates and the parameters' authoritative copies are host arrays
        # (on CUDA the forwards and backwards run on the device; see the module docstring)
        self.ctx = self._s.host_ctx
        self._params: list[Param] = [
            self._s.param(v, name=f"state{i}.{sp.name}", requires_grad=sp.trainable)
            for i, (v, sp) in enumerate(zip(init, self._specs, strict=True))
        ]
        self._trainable = [i for i, sp in enumerate(self._specs) if sp.trainable]
        self._opt = self.optimizer.init(self.ctx, [self._shapes[i] for i in self._trainable])
        self._steps = 0
        self._graphs: dict[Any, LossGraph | None] = {}
        self._recorded = 0
        self._eval = Evaluator(self.model, t.objective, dtype, t.mode, t.kernels)

    def __repr__(self) -> str:
        return (
            f"TrainingSession({self.model!r}, dtype={self.dtype!r}, "
            f"optimizer={self.optimizer!r}, steps={self._steps})"
        )

    # ------------------------------------------------------------------ helpers
    def _check_state(self, values: list[Any], what: str) -> list[Any]:
        if len(values) != len(self._shapes):
            raise ShapeError(f"{what}: expected {len(self._shapes)} tensors, got {len(values)}")
        out = []
        for i, (v, sh) in enumerate(zip(values, self._shapes, strict=True)):
            try:
                a = to_run(v, self.dtype)
            except (TypeError, ValueError, ArithmeticError) as e:
                raise TorchLeanError(
                    f"{what}: tensor {i}: not numbers of {self.dtype} ({e})"
                ) from e
            if tuple(a.shape) != sh:
                raise ShapeError(f"{what}: tensor {i}: shape {tuple(a.shape)} is not {sh}")
            out.append(a)
        return out

    def _current(self) -> list[Any]:
        return [p.get() for p in self._params]

    def _sample_grads(self, sample: Any, want_loss: bool) -> tuple[list[Any], Any]:
        """One training-mode forward and backward at the current point; applies the
        forward's buffer updates; returns (gradient per trainable slot, loss or None). The
        loss graph of the sample's shape signature is reused when one was recorded (see
        the module docstring)."""
        x, t = split_sample(sample)
        xv, tv = self._eval.convert(x, self.typed), self._eval.convert(t, self.typed)
        key = (tuple(xv.shape), str(xv.dtype), tuple(tv.shape), str(tv.dtype))
        plan = self._graphs.get(key)
        if plan is None:
            grads, leaves, loss, plan = self._record(xv, tv)
            if key not in self._graphs:
                self._graphs[key] = plan  # None: this forward is recorded every time
        else:
            grads, leaves, loss = plan.run(self._s, self._params, xv, tv)
        out = []
        host = self._s.to_host
        with fp_quiet():
            for k in self._trainable:
                ids = leaves[k]
                g = self.ctx.arr(host(grads[ids[0]]))
                for i in ids[1:]:
                    g = self.ctx.arr(g + host(grads[i]))
                out.append(g)
        return out, (host(loss) if want_loss else None)

    def _record(self, xv: Any, tv: Any) -> tuple[list[Any], dict[int, list[int]], Any, Any]:
        """Record the loss graph on a fresh tape and run its backward: (gradients, leaf ids
        per state slot, loss value, the reusable `LossGraph` or None)."""
        s = self._s
        s.reset_tape()
        self._recorded += 1
        counter, reads = s.rng.counter, s.values_read
        leaves: dict[int, list[int]] = {}
        refs: list[list[TensorRef]] = []
        for occ in self.model.occurrences():
            r = []
            for k in occ:
                ref = s.use(self._params[k])
                leaves.setdefault(k, []).append(ref.id)
                r.append(ref)
            refs.append(r)
        # data leaves: no gradient is wanted for them (the step reads the parameters' only)
        xr = s.input(xv, requires_grad=False)
        tr = s.input(tv, requires_grad=False)
        f = Forward(s, True)
        y = self.model.run(f, refs, xr)
        loss = LOSSES[self.objective](s, y, tr)
        grads = s.backward_scalar_dense_all(loss)
        for slot, v in f.updates:
            self._params[slot].set(v)
        value = s.tape.nodes[loss.id].value
        reusable = not f.updates and s.rng.counter == counter and s.values_read == reads
        plan = LossGraph(s.tape, leaves, xr.id, tr.id, loss.id) if reusable else None
        return grads, leaves, value, plan

    # ------------------------------------------------------------------ training
    def _lr(self) -> Any:
        """This step's learning rate in the run's dtype. A scheduled rate is checked (in
        binary64 and after rounding into the dtype: finite, >= 0); the optimizer's own rate
        was validated at open and cannot change."""
        if self.scheduler is None:
            return scalar(self.ctx, self.optimizer.hyper["lr"])
        t = self._steps
        v = self.scheduler(t)
        check_value(
            f"step {t}: scheduler {self.scheduler.config()}", f"lr({t})", v, "rate", self.ctx
        )
        return scalar(self.ctx, v)

    def step(self, sample: Any, batch: bool = False, loss: bool = False) -> Any:
        """One update from one sample, or (batch=True) from a non-empty list of samples
        whose gradients are averaged. `loss=True` returns the mean loss of the forwards."""
        samples = list(sample) if batch else [sample]
        if not samples:
            raise TorchLeanError("step(batch=True): the batch is empty")
        for i, sm in enumerate(samples):
            x, t = split_sample(sm)
            check_finite(self._eval.convert(x, self.typed), f"step: sample {i}: input")
            check_finite(self._eval.convert(t, self.typed), f"step: sample {i}: target")
        lr = self._lr()  # raises before anything runs or changes
        snap = self._current()
        rng_counter = self._s.rng.counter
        try:
            total: list[Any] | None = None
            losses = []
            for sm in samples:
                g, lv = self._sample_grads(sm, loss)
                losses.append(lv)
                if total is None:
                    total = g
                else:
                    with fp_quiet():
                        total = [self.ctx.arr(a + b) for a, b in zip(total, g, strict=True)]
            assert total is not None
            n = len(samples)
            if n > 1:
                inv = self.ctx.const(Fraction(1, n))
                with fp_quiet():
                    total = [self.ctx.arr(g * inv) for g in total]
            st = self._opt.copy()
            cur = [self._params[k].get() for k in self._trainable]
            new = self.optimizer.apply(self.ctx, st, cur, total, lr)
        except BaseException:
            for p, v in zip(self._params, snap, strict=True):
                p.set(v)
            self._s.rng.counter = rng_counter
            raise
        for k, v in zip(self._trainable, new, strict=True):
            self._params[k].set(v)
        self._opt = st
        self._steps += 1
        if not loss:
            return None
        return self._eval.out(pairwise_mean(self.ctx, losses), self.typed)

    def steps(self) -> int:
        """The number of completed updates."""
        return self._steps

    # ------------------------------------------------------------------ evaluation
    def loss(self, sample: Any, batch: bool = False) -> Any:
        """Evaluation-mode loss of a sample, or (batch=True) the pairwise mean over an
        iterable: TorchLean's "returns its ordered mean, or zero when empty"."""
        return self._eval.loss(self._current(), sample, batch, self.typed)

    def eval(self, data: Iterable[Any]) -> Any:
        """TorchLean's batched evaluation: "returns its ordered mean, or zero when empty"
        (the pairwise mean loss over `data`, in evaluation mode)."""
        return self.loss(data, batch=True)

    def predict(self, x: Any, batch: bool = False) -> Any:
        return self._eval.predict(self._current(), x, batch, self.typed)

    def state(self) -> list[np.ndarray]:
        """Copies of every state slot (model.state_specs() order), in the run's dtype."""
        return [np.array(a, copy=True) for a in self._current()]

    def set_state(self, values: Sequence[Any]) -> None:
        """TorchLean's `setStateImpl` ("read or replace the parameters"): replace every
        state slot (model.state_specs() order: parameters and buffers) with `values`,
        converted into the run's dtype like `open_typed`'s initial state. The count and
        every shape are checked before anything changes (`ShapeError`); optimizer history
        and the step count are kept, as `load` of a state file keeps them."""
        if not isinstance(values, (list, tuple)):
            raise TorchLeanError(
                f"set_state: expected a list of {len(self._shapes)} tensors, got "
                f"{type(values).__name__}"
            )
        new = self._check_state(list(values), "set_state")
        for p, v in zip(self._params, new, strict=True):
            p.set(v)

    def loss_graphs_recorded(self) -> int:
        """How many times a training step recorded its loss graph (once per shape
        signature, or once per sample for forwards that cannot be reused)."""
        return self._recorded

    # ------------------------------------------------------------------ checkpoints
    def save(self, path: str | os.PathLike[str], full: bool = False) -> None:
        """A state file (JSON or .safetensors); `full=True`: a JSON training checkpoint
        with optimizer state, step count, scheduler position and RNG counter."""
        if full and str(path).endswith(".safetensors"):
            raise CheckpointError(
                f"{path}: a full training checkpoint is a JSON file (not .safetensors)"
            )
        if not full:
            ckpt.save_state(path, self._current(), self.dtype, self._tying)
            return
        enc = ckpt.encode_array
        obj = {
            "format": ckpt.TRAINING_TAG,
            "dtype": self.dtype,
            "tying": self._tying,
            "state": [enc(a, self.dtype) for a in self._current()],
            "optimizer": self.optimizer.config(),
            "opt_slots": [
                [enc(d[n], self.dtype) for n in self.optimizer.slot_names] for d in self._opt.slots
            ],
            "opt_shared": {n: enc(v, self.dtype) for n, v in self._opt.shared.items()},
            "steps": self._steps,
            "scheduler": None if self.scheduler is None else self.scheduler.config(),
            "rng": {"seed": self._s.rng.seed, "counter": self._s.rng.counter},
        }
        ckpt.write_bytes_atomic(path, ckpt.json_bytes_with_digest(obj))

    def load(self, path: str | os.PathLike[str]) -> None:
        """Replace parameters and buffers from a state file (optimizer history and the step
        count are kept), or restore everything from a full training checkpoint. Everything
        is validated before anything changes (see the module docstring)."""
        ckpt.check_path(path)
        if str(path).endswith(".safetensors"):
            values = ckpt.load_state(path, self._shapes, self.dtype, self._tying)
        else:
            obj = ckpt.read_json(path)  # read once: validated and decoded from this text
            if isinstance(obj, dict) and obj.get("format") == ckpt.TRAINING_TAG:
                self._load_full(path, obj)
                return
            values = ckpt.state_from_json(path, obj, self._shapes, self.dtype)
        for p, v in zip(self._params, values, strict=True):
            p.set(v)

    def _load_full(self, path: str | os.PathLike[str], obj: dict[str, Any]) -> None:
        def bad(msg: str) -> CheckpointError:
            return CheckpointError(f"{path}: {msg}")

        obj, checked = ckpt.checked_json(path, obj)

        want_keys = {
            "format", "dtype", "tying", "state", "optimizer", "opt_slots", "opt_shared",
            "steps", "scheduler", "rng",
        }  # fmt: skip
        if set(obj) != want_keys:
            raise bad(f"keys {sorted(obj)} are not {sorted(want_keys)}")
        if obj["dtype"] != self.dtype:
            raise bad(f"dtype {obj['dtype']!r} is not this session's {self.dtype!r}")
        if obj["tying"] != self._tying:
            raise bad(f"tying {obj['tying']!r} is not the model's {self._tying!r}")
        if obj["optimizer"] != json.loads(json.dumps(self.optimizer.config())):
            raise bad(f"optimizer {obj['optimizer']!r} is not {self.optimizer.config()!r}")
        sch = None if self.scheduler is None else self.scheduler.config()
        if obj["scheduler"] != (None if sch is None else json.loads(json.dumps(sch))):
            raise bad(f"scheduler {obj['scheduler']!r} is not {sch!r}")
        steps, rng = obj["steps"], obj["rng"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise bad(f"steps must be an int >= 0, got {steps!r}")
        if (
            not isinstance(rng, dict)
            or set(rng) != {"seed", "counter"}
            or rng["seed"] != self._s.rng.seed
            or isinstance(rng["counter"], bool)
            or not isinstance(rng["counter"], int)
            or rng["counter"] < 0
        ):
            raise bad(f"rng {rng!r}: expected seed {self._s.rng.seed} and a counter >= 0")
        state = ckpt.decode_list(obj["state"], self.dtype, self._shapes, f"{path}: state")
        names = self.optimizer.slot_names
        slots_in = obj["opt_slots"]
        tshapes = [self._shapes[i] for i in self._trainable]
        if not isinstance(slots_in, list) or len(slots_in) != len(tshapes):
            raise bad(f"opt_slots: expected {len(tshapes)} entries")
        slots = []
        for i, (e, sh) in enumerate(zip(slots_in, tshapes, strict=True)):
            vals = ckpt.decode_list(e, self.dtype, [sh] * len(names), f"{path}: opt_slots[{i}]")
            slots.append(dict(zip(names, vals, strict=True)))
        shared_in = obj["opt_shared"]
        if not isinstance(shared_in, dict) or set(shared_in) != set(self.optimizer.shared_names):
            raise bad(f"opt_shared: expected keys {list(self.optimizer.shared_names)}")
        shared = {
            n: ckpt.decode_array(shared_in[n], self.dtype, (), f"{path}: opt_shared.{n}")
            for n in self.optimizer.shared_names
        }
        self.optimizer.check_state(OptState(slots, shared), steps, f"{path}: optimizer state")
        # validated: commit
        for p, v in zip(self._params, state, strict=True):
            p.set(v)
        self._opt = OptState(slots, shared)
        self._steps = steps
        self._s.rng.counter = rng["counter"]
        if not checked:
            ckpt.note_unchecked(path)

    # ------------------------------------------------------------------ finish
    def finish(self, before: Any = None, after: Any = None) -> Result:
        """TorchLean: "Keep a model snapshot with the losses measured for it. The session can
        continue training without changing this result." A `Result` with state copies and a
        report (updates, dtype/scalar, supplied losses); the session stays open."""
        report = {
            "updates": self._steps,
            "dtype": self.dtype,
            "scalar": format_name(self.dtype),
            "losses": {"before": before, "after": after},
            "optimizer": repr(self.optimizer),
            "mode": self.mode,
            "kernels": self.kernels,
        }
        return Result(
            self.model,
            self.objective,
            self.dtype,
            self.mode,
            self.kernels,
            self.typed,
            self.state(),
            report,
        )
