"""Optimizers and learning-rate schedulers with a normative operation order.

Invariants:
- An optimizer object is an immutable configuration (hyperparameters as given, binary64
  floats or exact rationals): `hyper` is a read-only mapping over a private copy made at
  construction (`opt.hyper["lr"] = x` raises TypeError, `opt.hyper = ...` AttributeError),
  so `validate` cannot be bypassed by changing a rate after a session was opened (and a
  session holds its own deep copy). Its state (moments, cached powers) lives in an
  `OptState` owned by one training session, never in the optimizer or in module globals.
- `validate(dtype)` runs before any state exists: rates finite and >= 0; beta / rho / decay
  / momentum in [0, 1); eps > 0; each checked on the given value and again after rounding
  into the run's dtype (messages say "... after conversion to binary32").
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

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np

from spec.domains import FLOAT64
from spec.errors import TorchLeanError

from ..engine.context import KernelContext, fp_quiet

__all__ = [
    "SCHEDULERS",
    "SGD",
    "AdaGrad",
    "Adadelta",
    "Adam",
    "AdamW",
    "OptState",
    "Optimizer",
    "RMSProp",
    "Scheduler",
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


def check_value(who: str, name: str, v: Any, kind: str, ctx: KernelContext) -> None:
    """kind: "rate" (finite, >= 0), "unit" ([0, 1)), "pos" (finite, > 0)."""
    want = {"rate": "a finite value >= 0", "unit": "a value in [0, 1)", "pos": "a value > 0"}[kind]
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)):
        raise TorchLeanError(f"{who}: {name} must be a number, got {v!r}")

    def ok(q: Fraction | None) -> bool:
        if q is None:
            return False
        if kind == "rate":
            return q >= 0
        if kind == "unit":
            return 0 <= q < 1
        return q > 0

    q0 = Fraction(v) if not isinstance(v, float) or math.isfinite(v) else None
    if not ok(q0):
        raise TorchLeanError(f"{who}: {name} = {v!r}: expected {want}")
    r = _as_fraction(scalar(ctx, v))
    if not ok(r):
        got = np.asarray(scalar(ctx, v)).reshape(()).item()
        raise TorchLeanError(
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


class Optimizer(ABC):
    """Base class. Subclasses declare their hyperparameters (`spec`: name -> kind) and
    define `update`."""

    name: ClassVar[str] = ""
    spec: ClassVar[dict[str, str]] = {}
    slot_names: ClassVar[tuple[str, ...]] = ()
    shared_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **hyper: Any) -> None:
        self._hyper: dict[str, Any] = dict(hyper)

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
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "momentum": "unit"}

    def __init__(self, lr: float | Fraction = 0.01, momentum: float | Fraction = 0.0) -> None:
        super().__init__(lr=lr, momentum=momentum)

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
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "eps": "pos"}
    slot_names = ("sum",)

    def __init__(self, lr: float | Fraction = 0.01, eps: float | Fraction = 1e-10) -> None:
        super().__init__(lr=lr, eps=eps)

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
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "alpha": "unit", "eps": "pos"}
    slot_names = ("square_avg",)

    def __init__(
        self,
        lr: float | Fraction = 0.01,
        alpha: float | Fraction = 0.99,
        eps: float | Fraction = 1e-8,
    ) -> None:
        super().__init__(lr=lr, alpha=alpha, eps=eps)

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
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "beta1": "unit", "beta2": "unit", "eps": "pos"}
    slot_names = ("m", "v")
    shared_names = ("beta1_power", "beta2_power")

    def __init__(
        self,
        lr: float | Fraction = 0.001,
        beta1: float | Fraction = 0.9,
        beta2: float | Fraction = 0.999,
        eps: float | Fraction = 1e-8,
        **more: Any,
    ) -> None:
        super().__init__(lr=lr, beta1=beta1, beta2=beta2, eps=eps, **more)

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
    spec: ClassVar[dict[str, str]] = {**Adam.spec, "weight_decay": "rate"}

    def __init__(
        self,
        lr: float | Fraction = 0.001,
        beta1: float | Fraction = 0.9,
        beta2: float | Fraction = 0.999,
        eps: float | Fraction = 1e-8,
        weight_decay: float | Fraction = 0.01,
    ) -> None:
        super().__init__(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay)

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
    spec: ClassVar[dict[str, str]] = {"lr": "rate", "rho": "unit", "eps": "pos"}
    slot_names = ("square_avg", "acc_delta")

    def __init__(
        self,
        lr: float | Fraction = 1.0,
        rho: float | Fraction = 0.9,
        eps: float | Fraction = 1e-6,
    ) -> None:
        super().__init__(lr=lr, rho=rho, eps=eps)

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
