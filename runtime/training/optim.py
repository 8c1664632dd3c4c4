"""Optimizers and learning-rate schedulers with a normative operation order.

Invariants:
- An optimizer object is an immutable configuration (hyperparameters as given, binary64
  floats or exact rationals): `hyper` is a read-only mapping over a private copy made at
  construction (`opt.hyper["lr"] = x` raises TypeError, `opt.hyper = ...` AttributeError),
  so `validate` cannot be bypassed by changing a rate after a session was opened (and a
  session holds its own deep copy). Its state (moments, cached powers) lives in an
  `OptState` owned by one training session, never in the optimizer or in module globals.
- Construction: positional arguments in the documented order, then torchlean keywords;
  a keyword that is neither torchlean's nor an accepted PyTorch spelling is an
  `OptionError` (a `TypeError`) naming it, listing the accepted ones and suggesting the
  nearest. PyTorch spellings are accepted only where they mean exactly the same thing in
  this optimizer: `betas=(b1, b2)` is `beta1=b1, beta2=b2` (Adam, AdamW); PyTorch options
  that torchlean does not implement are accepted only at the value that turns them off
  (`weight_decay=0` for SGD/Adam/AdaGrad/RMSProp/Adadelta, `nesterov=False`,
  `dampening=0`, `amsgrad=False`, `centered=False`, `momentum=0` for RMSProp,
  `lr_decay=0`, `initial_accumulator_value=0`, `maximize=False`) and are not stored;
  any other value, and PyTorch's implementation switches (`foreach`, `fused`,
  `capturable`, `differentiable`), are `OptionError`s saying what torchlean has instead
  (e.g. Adam's `weight_decay` is L2 added to the gradient in PyTorch; torchlean's
  decoupled decay is `AdamW(weight_decay=...)`). The update formulas (and so the bits)
  are torchlean's, written below, not PyTorch's.
- Hyperparameters are checked at construction (a number, not a bool; rates finite and
  >= 0; beta / rho / decay / momentum in [0, 1); eps > 0: `HyperparameterError`) and
  again by `validate(dtype)` before any state exists, after rounding into the run's dtype
  (messages say "... after conversion to binary32").
- `check_state(state, steps, where)` is the domain of an optimizer state read from a file:
  every moment finite, second moments (sums and averages of squares) >= 0, beta powers
  exactly 1 before the first step and in [0, 1) after; else `CheckpointError`.
- Arithmetic is in the run's dtype: NumPy arrays of that dtype, one rounding per scalar
  operation (NumPy's + - * / sqrt are correctly rounded), or object arrays of Fractions for
  "exact" (sqrt of a non-square raises `DomainError`). Hyperparameters are rounded once
  into the dtype; `1 - beta` is computed in the dtype from the rounded beta. The operation
  order of each update is written in its docstring (parenthesised as evaluated) and is
  normative for bit-exactness.
- Schedulers compute in binary64 (Python floats, one rounding per operation; cos is the
  correctly rounded binary64 cosine of `spec.domains.FLOAT64`), from the 0-based count of
  completed steps; the value is rounded once into the run's dtype and applied to every
  parameter.
"""

from __future__ import annotations

import difflib
import inspect
import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from spec.domains import FLOAT64
from spec.errors import CheckpointError, TorchLeanError

from ..engine.context import KernelContext, fp_quiet

__all__ = [
    "SCHEDULERS",
    "SGD",
    "AdaGrad",
    "Adadelta",
    "Adam",
    "AdamW",
    "HyperparameterError",
    "OptState",
    "Optimizer",
    "OptionError",
    "RMSProp",
    "Scheduler",
    "check_raw",
    "check_value",
    "constant",
    "exponential",
    "format_name",
    "scalar",
    "step",
    "warmup_cosine",
]

_FORMAT = {
    "float64": "binary64",
    "float32": "binary32",
    "bfloat16": "bfloat16",
    "float16": "binary16",
    "exact": "exact rationals",
}


class OptionError(TorchLeanError, TypeError):
    """An optimizer keyword that is not accepted (unknown, given twice, or a PyTorch option
    at a value torchlean does not implement)."""


class HyperparameterError(TorchLeanError, ValueError):
    """A hyperparameter outside its domain (or not a number)."""


def format_name(dtype: str) -> str:
    """The IEEE name of a runtime dtype (binary64, binary32, ...)."""
    return _FORMAT.get(dtype, dtype)


def scalar(ctx: KernelContext, v: float | Fraction | int) -> Any:
    """The value `v` rounded once into the context's dtype, as a 0-d array. A float is
    its exact binary64 value; Fractions and ints are exact."""
    if isinstance(v, float):
        if ctx.exact:
            if not math.isfinite(v):
                raise TorchLeanError(f"exact dtype cannot hold {v!r}")
            return ctx.arr(Fraction(v))
        return ctx.backend.asarray(np.float64(v), ctx.dtype).reshape(())
    return ctx.const(Fraction(v))


def _as_fraction(x: Any) -> Fraction | None:
    """The exact value of a 0-d array, None when not finite."""
    v = np.asarray(x).reshape(()).item()
    if isinstance(v, Fraction):
        return v
    f = float(v)
    return Fraction(f) if math.isfinite(f) else None


_WANT = {"rate": "a finite value >= 0", "unit": "a value in [0, 1)", "pos": "a value > 0"}
_IN = {
    "rate": lambda q: q >= 0,
    "unit": lambda q: 0 <= q < 1,
    "pos": lambda q: q > 0,
}


def check_raw(who: str, name: str, v: Any, kind: str) -> None:
    """The given value of a hyperparameter: a number (not a bool) in its domain;
    kind: "rate" (finite, >= 0), "unit" ([0, 1)), "pos" (finite, > 0)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)):
        raise HyperparameterError(f"{who}: {name} must be a number, got {v!r}")
    q0 = Fraction(v) if not isinstance(v, float) or math.isfinite(v) else None
    if q0 is None or not _IN[kind](q0):
        raise HyperparameterError(f"{who}: {name} = {v!r}: expected {_WANT[kind]}")


def check_value(who: str, name: str, v: Any, kind: str, ctx: KernelContext) -> None:
    """`check_raw`, and the value after rounding into the context's dtype in the domain."""
    check_raw(who, name, v, kind)
    want = _WANT[kind]
    r = _as_fraction(scalar(ctx, v))
    if r is None or not _IN[kind](r):
        got = np.asarray(scalar(ctx, v)).reshape(()).item()
        raise HyperparameterError(
            f"{who}: {name} = {v!r} is {got!r} after conversion to {format_name(ctx.dtype)}, "
            f"expected {want}"
        )


@dataclass
class OptState:
    """An optimizer's state: per trainable parameter a dict of moment arrays (names in
    `Optimizer.slot_names` order) and shared scalars (`Optimizer.shared_names`)."""

    slots: list[dict[str, Any]] = field(default_factory=list)
    shared: dict[str, Any] = field(default_factory=dict)

    def copy(self) -> OptState:
        return OptState(
            [{k: np.array(v, copy=True) for k, v in d.items()} for d in self.slots],
            {k: np.array(v, copy=True) for k, v in self.shared.items()},
        )


_IMPL_SWITCHES = ("foreach", "fused", "capturable", "differentiable")
_OFF = {"maximize": False}  # PyTorch options every optimizer accepts when off
_OFF_WHY = {
    "maximize": "torchlean optimizers minimise; negate the loss to maximise",
    "weight_decay": "PyTorch adds weight_decay * p to the gradient (L2); torchlean has no L2 "
    "term here: add it to the loss, or use AdamW(weight_decay=...) for decoupled decay",
    "nesterov": "torchlean's SGD has heavy-ball momentum only",
    "dampening": "torchlean's SGD momentum is b <- (b * momentum) + g (no dampening)",
    "amsgrad": "torchlean's Adam has no AMSGrad variant",
    "centered": "torchlean's RMSProp is not centred",
    "momentum": "torchlean's RMSProp has no momentum",
    "lr_decay": "use a scheduler (runtime.optim.exponential, step, ...) for a decaying rate",
    "initial_accumulator_value": "torchlean's AdaGrad sum starts at 0",
}


def _is_off(v: Any, off: Any) -> bool:
    if isinstance(off, bool):
        return v is off
    return not isinstance(v, bool) and isinstance(v, (int, float, Fraction)) and v == off


class Optimizer(ABC):
    """Base class. Subclasses declare their hyperparameters in positional order with their
    defaults (`params`), their domains (`spec`: name -> kind), the PyTorch options they
    accept only when off (`torch_off`: name -> the value that changes nothing), the domain
    of each state slot (`slot_domains`: "finite" or "nonneg") and define `update`."""

    name: ClassVar[str] = ""
    params: ClassVar[tuple[tuple[str, Any], ...]] = ()
    spec: ClassVar[dict[str, str]] = {}
    torch_off: ClassVar[dict[str, Any]] = {}
    slot_names: ClassVar[tuple[str, ...]] = ()
    shared_names: ClassVar[tuple[str, ...]] = ()
    slot_domains: ClassVar[dict[str, str]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        ps = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=d)
               for n, d in cls.params]  # fmt: skip
        cls.__signature__ = inspect.Signature(ps)  # type: ignore[attr-defined]

    def __init__(self, *args: Any, **kw: Any) -> None:
        names = [n for n, _ in self.params]
        if len(args) > len(names):
            raise OptionError(
                f"{self.name}: takes at most {len(names)} positional arguments "
                f"({', '.join(names)}), got {len(args)}"
            )
        given = dict(zip(names, args, strict=False))
        for k, v in kw.items():
            self._keyword(given, k, v)
        hyper = {n: given.get(n, d) for n, d in self.params}
        for k, kind in self.spec.items():
            check_raw(self.name, k, hyper[k], kind)
        self._hyper: dict[str, Any] = hyper

    def _keyword(self, given: dict[str, Any], k: str, v: Any) -> None:
        """Take keyword `k` into `given` (torchlean names) or raise `OptionError`."""
        names = [n for n, _ in self.params]
        if k in names:
            if k in given:
                raise OptionError(f"{self.name}: {k} given twice (positionally and by keyword)")
            given[k] = v
            return
        off = {**_OFF, **self.torch_off}
        if k == "betas" and "beta1" in names:
            if not isinstance(v, (tuple, list)) or len(v) != 2:
                raise OptionError(f"{self.name}: betas must be a pair (beta1, beta2), got {v!r}")
            if "beta1" in given or "beta2" in given:
                raise OptionError(f"{self.name}: betas given together with beta1/beta2")
            given["beta1"], given["beta2"] = v
            return
        if k in off:
            if not _is_off(v, off[k]):
                raise OptionError(
                    f"{self.name}: PyTorch's {k}={v!r} is not implemented (only {k}={off[k]!r}, "
                    f"which changes nothing, is accepted): {_OFF_WHY.get(k, '')}"
                )
            return
        if k in _IMPL_SWITCHES:
            raise OptionError(
                f"{self.name}: {k} is a PyTorch implementation switch; torchlean has one "
                "implementation with a normative operation order (drop the keyword)"
            )
        accepted = names + (["betas"] if "beta1" in names else []) + sorted(off)
        near = difflib.get_close_matches(k, accepted, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise OptionError(
            f"{self.name}: unknown keyword {k!r}; accepted: {', '.join(accepted)}{hint}"
        )

    @property
    def hyper(self) -> Mapping[str, Any]:
        """The hyperparameters, read-only (see the module docstring)."""
        return MappingProxyType(self._hyper)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hyper.items())
        return f"{self.name}({args})"

    def config(self) -> dict[str, Any]:
        """JSON-able configuration (floats as floats, Fractions as 'p/q' strings, also for
        integral Fractions: "3/1")."""

        def enc(v: Any) -> Any:
            return f"{v.numerator}/{v.denominator}" if isinstance(v, Fraction) else v

        return {"name": self.name, **{k: enc(v) for k, v in self.hyper.items()}}

    def validate(self, ctx: KernelContext) -> None:
        for k, kind in self.spec.items():
            check_value(self.name, k, self.hyper[k], kind, ctx)

    def check_state(self, st: OptState, steps: int, where: str) -> None:
        """The domain of a state read from a file (module docstring); `CheckpointError`."""
        for i, slots in enumerate(st.slots):
            for n, a in slots.items():
                kind = self.slot_domains.get(n, "finite")
                bad = _outside(a, kind)
                if bad is not None:
                    want = "finite" if kind == "finite" else "finite and >= 0"
                    raise CheckpointError(
                        f"{where}: parameter {i}: {n}: element {bad[0]} is {bad[1]!r}, "
                        f"expected {want}"
                    )
        for n, a in st.shared.items():
            q = _as_fraction(a)
            ok = q == 1 if steps == 0 else q is not None and 0 <= q < 1
            if not ok:
                want = "exactly 1 (no step yet)" if steps == 0 else f"in [0, 1) after {steps} steps"
                got = np.asarray(a).reshape(()).item()
                raise CheckpointError(f"{where}: {n} is {got!r}, expected {want}")

    def consts(self, ctx: KernelContext) -> dict[str, Any]:
        return {k: scalar(ctx, v) for k, v in self.hyper.items()}

    def init(self, ctx: KernelContext, shapes: list[tuple[int, ...]]) -> OptState:
        st = OptState([{n: ctx.zeros(sh) for n in self.slot_names} for sh in shapes], {})
        for n in self.shared_names:
            st.shared[n] = np.array(ctx.const(1), copy=True)
        return st

    def begin_step(self, ctx: KernelContext, c: dict[str, Any], st: OptState) -> None:
        """Update shared scalars once per step (before any parameter); none by default."""
        return None

    @abstractmethod
    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        """The new value of parameter k (its slots in `st` updated in place)."""

    def apply(
        self, ctx: KernelContext, st: OptState, params: list[Any], grads: list[Any], lr: Any
    ) -> list[Any]:
        """New parameter values (state updated in place in `st`)."""
        c = self.consts(ctx)
        a = ctx.arr
        with fp_quiet():
            self.begin_step(ctx, c, st)
            return [
                a(self.update(ctx, c, st, k, a(p), a(g), lr))
                for k, (p, g) in enumerate(zip(params, grads, strict=True))
            ]


def _outside(a: Any, kind: str) -> tuple[int, Any] | None:
    """(index, value) of the first element of `a` outside `kind` ("finite", "nonneg")."""
    flat = np.asarray(a).reshape(-1)
    if flat.dtype == object:  # exact rationals are finite
        bad = [i for i, v in enumerate(flat) if kind == "nonneg" and v < 0]
        return (bad[0], flat[bad[0]]) if bad else None
    out = ~np.isfinite(flat)
    if kind == "nonneg":
        out |= flat < 0
    idx = np.flatnonzero(out)
    return (int(idx[0]), float(flat[idx[0]])) if idx.size else None


def _a(ctx: KernelContext, x: Any) -> Any:
    return ctx.arr(x)


def _ema(ctx: KernelContext, avg: Any, x: Any, decay: Any) -> Any:
    """(avg * decay) + (x * (1 - decay)), one rounding per operation: the moving average of
    every optimizer here (IEEE products commute, so x * w and w * x are the same bits)."""
    a = ctx.arr
    return a(a(avg * decay) + a(x * a(ctx.const(1) - decay)))


class SGD(Optimizer):
    """momentum == 0 (exactly): p <- p - (g * lr).
    Otherwise, b starting at zeros: b <- (b * mu) + g; p <- p - (b * lr)."""

    name = "SGD"
    params = (("lr", 0.01), ("momentum", 0.0))
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "momentum": "unit"}
    torch_off: ClassVar[dict[str, Any]] = {"weight_decay": 0, "nesterov": False, "dampening": 0}

    @property
    def slot_names(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("momentum_buffer",) if self.hyper["momentum"] != 0 else ()

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        if not self.slot_names:
            return p - _a(ctx, g * lr)
        s = st.slots[k]
        b = _a(ctx, _a(ctx, s["momentum_buffer"] * c["momentum"]) + g)
        s["momentum_buffer"] = b
        return p - _a(ctx, b * lr)


class AdaGrad(Optimizer):
    """s <- s + (g * g); p <- p - ((g * lr) / (sqrt(s) + eps)). eps = 1e-10."""

    name = "AdaGrad"
    params = (("lr", 0.01), ("eps", 1e-10))
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "eps": "pos"}
    torch_off: ClassVar[dict[str, Any]] = {
        "weight_decay": 0, "lr_decay": 0, "initial_accumulator_value": 0,
    }  # fmt: skip
    slot_names = ("sum",)
    slot_domains: ClassVar[dict[str, str]] = {"sum": "nonneg"}

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        s = st.slots[k]
        acc = _a(ctx, s["sum"] + _a(ctx, g * g))
        s["sum"] = acc
        den = _a(ctx, ctx.sqrt(acc) + c["eps"])
        return p - ctx.div(_a(ctx, g * lr), den)


class RMSProp(Optimizer):
    """v <- (v * alpha) + ((g * g) * (1 - alpha)); p <- p - ((g * lr) / (sqrt(v) + eps)).
    alpha (decay) = 0.99, eps = 1e-8."""

    name = "RMSProp"
    params = (("lr", 0.01), ("alpha", 0.99), ("eps", 1e-8))
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "alpha": "unit", "eps": "pos"}
    torch_off: ClassVar[dict[str, Any]] = {"weight_decay": 0, "momentum": 0, "centered": False}
    slot_names = ("square_avg",)
    slot_domains: ClassVar[dict[str, str]] = {"square_avg": "nonneg"}

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        s = st.slots[k]
        v = _ema(ctx, s["square_avg"], _a(ctx, g * g), c["alpha"])
        s["square_avg"] = v
        den = _a(ctx, ctx.sqrt(v) + c["eps"])
        return p - ctx.div(_a(ctx, g * lr), den)


class Adam(Optimizer):
    """Shared, once per step (starting at 1): b1p <- b1p * beta1; b2p <- b2p * beta2;
    c1 <- 1 / (1 - b1p); c2 <- 1 / (1 - b2p).
    Per parameter: m <- (m * beta1) + (g * (1 - beta1));
    v <- (v * beta2) + ((g * g) * (1 - beta2)); mh = m * c1; vh = v * c2;
    eta = lr / (sqrt(max(vh, 0)) + eps); p <- p - (eta * mh).
    beta1 = 0.9, beta2 = 0.999, eps = 1e-8."""

    name = "Adam"
    params: ClassVar[tuple[tuple[str, Any], ...]] = (
        ("lr", 0.001), ("beta1", 0.9), ("beta2", 0.999), ("eps", 1e-8),
    )  # fmt: skip
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "beta1": "unit", "beta2": "unit", "eps": "pos"}
    torch_off: ClassVar[dict[str, Any]] = {"weight_decay": 0, "amsgrad": False}
    slot_names = ("m", "v")
    shared_names = ("beta1_power", "beta2_power")
    slot_domains: ClassVar[dict[str, str]] = {"m": "finite", "v": "nonneg"}

    def begin_step(self, ctx: KernelContext, c: dict[str, Any], st: OptState) -> None:
        one = ctx.const(1)
        st.shared["beta1_power"] = _a(ctx, st.shared["beta1_power"] * c["beta1"])
        st.shared["beta2_power"] = _a(ctx, st.shared["beta2_power"] * c["beta2"])
        c["c1"] = ctx.div(one, _a(ctx, one - st.shared["beta1_power"]))
        c["c2"] = ctx.div(one, _a(ctx, one - st.shared["beta2_power"]))

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        a = ctx.arr
        s = st.slots[k]
        m = _ema(ctx, s["m"], g, c["beta1"])
        v = _ema(ctx, s["v"], a(g * g), c["beta2"])
        s["m"], s["v"] = m, v
        mh = a(m * c["c1"])
        vh = a(v * c["c2"])
        eta = ctx.div(lr, a(ctx.sqrt(a(np.maximum(vh, ctx.const(0)))) + c["eps"]))
        return p - a(eta * mh)


class AdamW(Adam):
    """Decoupled decay first: p <- p - (p * (lr * weight_decay)); then the Adam update of
    that p. weight_decay = 0.01."""

    name = "AdamW"
    params = (*Adam.params, ("weight_decay", 0.01))
    spec: ClassVar[dict[str, str]] = {**Adam.spec, "weight_decay": "rate"}
    torch_off: ClassVar[dict[str, Any]] = {"amsgrad": False}

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        a = ctx.arr
        p = a(p - a(p * a(lr * c["weight_decay"])))
        return super().update(ctx, c, st, k, p, g, lr)


class Adadelta(Optimizer):
    """v <- (v * rho) + ((g * g) * (1 - rho)); d = (sqrt(u + eps) / sqrt(v + eps)) * g;
    u <- (u * rho) + ((d * d) * (1 - rho)); p <- p - (d * lr).
    lr = 1.0, rho = 0.9, eps = 1e-6."""

    name = "Adadelta"
    params = (("lr", 1.0), ("rho", 0.9), ("eps", 1e-6))
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "rho": "unit", "eps": "pos"}
    torch_off: ClassVar[dict[str, Any]] = {"weight_decay": 0}
    slot_names = ("square_avg", "acc_delta")
    slot_domains: ClassVar[dict[str, str]] = {"square_avg": "nonneg", "acc_delta": "nonneg"}

    def update(
        self, ctx: KernelContext, c: dict[str, Any], st: OptState, k: int, p: Any, g: Any, lr: Any
    ) -> Any:
        a = ctx.arr
        s = st.slots[k]
        v = _ema(ctx, s["square_avg"], a(g * g), c["rho"])
        d = a(ctx.div(ctx.sqrt(a(s["acc_delta"] + c["eps"])), ctx.sqrt(a(v + c["eps"]))) * g)
        u = _ema(ctx, s["acc_delta"], a(d * d), c["rho"])
        s["square_avg"], s["acc_delta"] = v, u
        return p - a(d * lr)


# --------------------------------------------------------------------------- schedulers


@dataclass(frozen=True)
class Scheduler:
    """lr(t) in binary64 for the 0-based count t of completed steps. `kind` is one of
    constant, step, exponential, warmup_cosine; see the module functions for formulas."""

    kind: str
    lr: float
    step_size: int = 1
    gamma: float = 1.0
    warmup_steps: int = 0
    total_steps: int = 1
    min_lr: float = 0.0

    def config(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "lr": self.lr,
            "step_size": self.step_size,
            "gamma": self.gamma,
            "warmup_steps": self.warmup_steps,
            "total_steps": self.total_steps,
            "min_lr": self.min_lr,
        }

    def validate(self, ctx: KernelContext) -> None:
        who = f"scheduler {self.kind}"
        if self.kind not in SCHEDULERS:
            raise TorchLeanError(f"unknown scheduler {self.kind!r}; choose one of {SCHEDULERS}")
        check_value(who, "lr", self.lr, "rate", ctx)
        check_value(who, "min_lr", self.min_lr, "rate", ctx)
        check_value(who, "gamma", self.gamma, "rate", ctx)
        for n, v, lo in (
            ("step_size", self.step_size, 1),
            ("warmup_steps", self.warmup_steps, 0),
            ("total_steps", self.total_steps, 1),
        ):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise TorchLeanError(f"{who}: {n} must be an int >= {lo}, got {v!r}")
        if self.kind == "warmup_cosine":
            if self.total_steps < self.warmup_steps:
                raise TorchLeanError(
                    f"{who}: total_steps {self.total_steps} < warmup_steps {self.warmup_steps}"
                )
            if self.min_lr > self.lr:
                raise TorchLeanError(f"{who}: min_lr {self.min_lr!r} > lr {self.lr!r}")

    def __call__(self, t: int) -> float:
        if self.kind == "constant":
            return float(self.lr)
        if self.kind in ("step", "exponential"):
            k = t // self.step_size if self.kind == "step" else t
            pw = 1.0
            for _ in range(k):  # gamma**k by repeated multiplication (binary64)
                pw = pw * self.gamma
            return self.lr * pw
        # warmup_cosine
        if t < self.warmup_steps:
            return self.lr * ((t + 1) / self.warmup_steps)
        prog = min(1.0, (t - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps))
        c = float(FLOAT64.cos(FLOAT64.from_float(math.pi * prog)))
        return self.min_lr + ((self.lr - self.min_lr) * (0.5 * (1.0 + c)))


def constant(lr: float) -> Scheduler:
    """lr(t) = lr."""
    return Scheduler("constant", float(lr))


def step(lr: float, step_size: int, gamma: float = 0.1) -> Scheduler:
    """lr(t) = lr * gamma^(t // step_size), the power by repeated multiplication."""
    return Scheduler("step", float(lr), step_size=step_size, gamma=float(gamma))


def exponential(lr: float, gamma: float) -> Scheduler:
    """lr(t) = lr * gamma^t, the power by repeated multiplication."""
    return Scheduler("exponential", float(lr), gamma=float(gamma))


def warmup_cosine(lr: float, warmup_steps: int, total_steps: int, min_lr: float = 0.0) -> Scheduler:
    """t < warmup: lr * ((t + 1) / warmup); else with
    q = min(1, (t - warmup) / max(1, total - warmup)):
    min_lr + ((lr - min_lr) * (0.5 * (1 + cos(pi * q)))), cos correctly rounded."""
    return Scheduler(
        "warmup_cosine",
        float(lr),
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        min_lr=float(min_lr),
    )


SCHEDULERS = ("constant", "step", "exponential", "warmup_cosine")
