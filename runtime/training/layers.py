"""Layers, losses and initialisers built out of Session ops (the model-scale layers, conv,
pooling, embedding and attention, are in `runtime.training.model_layers`).

Invariants:
- A layer is an immutable description (sizes, attributes, initialisers); it holds no
  values. Its state is a list of `StateSpec` (name, shape, trainable) in a fixed order, and
  `init_state(seeds)` returns the initial values as binary64 NumPy arrays. The trainer
  rounds them once into the run's dtype (or converts them exactly for `exact`).
- Seeds: a model built with seed `s` draws its initialiser seeds from `SeedStream(s)`
  (the j-th seed is `spec.rng.key_of(s, j)`), layer by layer in first-occurrence order. A
  layer draws seeds only for stochastic initialisers (`Linear`: one for the weight; the
  bias is zero by default and draws nothing). An initialiser with seed `z` uses
  `u_i = spec.rng.sample_unit(key_of(z, 0), i)` for the element of row-major index `i`.
- Initialisers compute in binary64, one rounding per Python float operation, in the order
  written in each docstring (e.g. xavier_uniform: L = sqrt(6 / (fan_in + fan_out)),
  value = (-L) + u * (2 * L)); the run's dtype rounds the binary64 value once.
- Forwards use Session ops only (`linear`, `relu`, `gelu`, `tanh`, `sigmoid`,
  `reduce_mean`, `mse_loss`, `cross_entropy`, ...), so every layer runs in both Session
  modes and every dtype the ops support (in `exact`, ops without exact results, e.g.
  `sqrt` of a non-square or `tanh`, raise `DomainError`).
- A `Sequential` is flat (nested ones are spliced in). The same layer object appearing
  twice is *tied*: it owns one set of state slots, used by every occurrence, so the
  gradients of the occurrences are summed and the state is updated once.
- Tying is refused (`TorchLeanError` at `Sequential` construction) for a layer with
  non-trainable state (a `StateSpec` with trainable=False: BatchNorm1d / BatchNorm2d
  running statistics): each occurrence would compute its buffer update from the value read
  before the forward and the last report would overwrite the others, so all but one update
  would be lost. Use two separate layer objects instead.
- Input errors name the layer and "input 0": layers whose op takes weights too (Conv2d,
  MultiHeadAttention) check the input against their own sizes first, so a wrong input is
  never reported as a wrong weight; the op's shape rule then checks the rest.
- Stateful layers (`BatchNorm1d`) never mutate anything themselves: in training mode their
  forward reports new buffer values through `Forward.set_buffer`; the caller decides to
  apply them. Evaluation mode reads the running statistics and reports nothing.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from types import MappingProxyType
from typing import Any

import numpy as np

from spec import rng as srng
from spec.domains import FLOAT64
from spec.errors import ShapeError, TorchLeanError

from ..session import Session, TensorRef

__all__ = [
    "GELU",
    "INITIALISERS",
    "LOSSES",
    "BatchNorm1d",
    "Dropout",
    "Forward",
    "Hardtanh",
    "Layer",
    "LayerNorm",
    "LeakyReLU",
    "Linear",
    "ReLU",
    "Residual",
    "SeedStream",
    "Sequential",
    "Sigmoid",
    "StateSpec",
    "Tanh",
    "cross_entropy",
    "init_values",
    "kaiming_uniform",
    "mse",
    "normal",
    "uniform",
    "xavier_uniform",
]


# --------------------------------------------------------------------------- seeds


class SeedStream:
    """The model's seed stream: the j-th draw is `spec.rng.key_of(seed, j)`."""

    def __init__(self, seed: int) -> None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise TorchLeanError(f"SeedStream: seed must be an int, got {seed!r}")
        self.seed = seed
        self.counter = 0

    def next(self) -> int:
        z = srng.key_of(self.seed, self.counter)
        self.counter += 1
        return z


# --------------------------------------------------------------------------- initialisers


def _units(seed: int, n: int) -> list[float]:
    """u_i = sample_unit(key_of(seed, 0), i) as binary64 (exact: k / 2**32)."""
    key = srng.key_of(seed, 0)
    return [float(srng.sample_unit(key, i)) for i in range(n)]


def _size(shape: Sequence[int]) -> int:
    return int(math.prod(shape))


def xavier_uniform(shape: Sequence[int], seed: int, fan_in: int, fan_out: int) -> np.ndarray:
    """L = sqrt(6 / (fan_in + fan_out)); value_i = (-L) + u_i * (2 * L), in binary64."""
    if fan_in + fan_out <= 0:
        raise ShapeError(f"xavier_uniform: fan_in + fan_out must be > 0, got {fan_in + fan_out}")
    L = math.sqrt(6.0 / float(fan_in + fan_out))
    two_l = 2.0 * L
    vals = [(-L) + u * two_l for u in _units(seed, _size(shape))]
    return np.array(vals, dtype=np.float64).reshape(tuple(shape))


def kaiming_uniform(shape: Sequence[int], seed: int, fan_in: int, fan_out: int = 0) -> np.ndarray:
    """He (ReLU gain): B = sqrt(6 / fan_in); value_i = (-B) + u_i * (2 * B), in binary64."""
    if fan_in <= 0:
        raise ShapeError(f"kaiming_uniform: fan_in must be > 0, got {fan_in}")
    B = math.sqrt(6.0 / float(fan_in))
    two_b = 2.0 * B
    vals = [(-B) + u * two_b for u in _units(seed, _size(shape))]
    return np.array(vals, dtype=np.float64).reshape(tuple(shape))


def uniform(
    shape: Sequence[int], seed: int, lo: float = -0.1, hi: float = 0.1, **_: Any
) -> np.ndarray:
    """value_i = lo + u_i * (hi - lo), in binary64."""
    if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
        raise TorchLeanError(f"uniform: need finite lo <= hi, got lo={lo!r}, hi={hi!r}")
    w = hi - lo
    vals = [lo + u * w for u in _units(seed, _size(shape))]
    return np.array(vals, dtype=np.float64).reshape(tuple(shape))


def normal(
    shape: Sequence[int], seed: int, mean: float = 0.0, std: float = 0.01, **_: Any
) -> np.ndarray:
    """value_i = mean + std * z_i, z_i = spec.rng.normal(binary64, key_of(seed, 0), i)."""
    if not (math.isfinite(mean) and math.isfinite(std) and std >= 0):
        raise TorchLeanError(f"normal: need finite mean and std >= 0, got {mean!r}, {std!r}")
    key = srng.key_of(seed, 0)
    vals = [mean + std * float(srng.normal(FLOAT64, key, i)) for i in range(_size(shape))]
    return np.array(vals, dtype=np.float64).reshape(tuple(shape))


INITIALISERS: Mapping[str, Callable[..., np.ndarray]] = MappingProxyType(
    {
        "xavier_uniform": xavier_uniform,
        "kaiming_uniform": kaiming_uniform,
        "uniform": uniform,
        "normal": normal,
    }
)


def init_values(
    name: str, shape: Sequence[int], seeds: SeedStream, fan_in: int, fan_out: int
) -> np.ndarray:
    """Initial binary64 values: "zeros" and "ones" draw no seed; stochastic ones draw one."""
    if name == "zeros":
        return np.zeros(tuple(shape), dtype=np.float64)
    if name == "ones":
        return np.ones(tuple(shape), dtype=np.float64)
    if name not in INITIALISERS:
        raise TorchLeanError(
            f"unknown initialiser {name!r}; choose zeros, ones or one of {sorted(INITIALISERS)}"
        )
    return INITIALISERS[name](shape, seeds.next(), fan_in=fan_in, fan_out=fan_out)


# --------------------------------------------------------------------------- forward context


@dataclass
class Forward:
    """What a layer's forward needs: the session, the mode, and where buffer updates go."""

    s: Session
    train: bool
    updates: list[tuple[int, Any]] = field(default_factory=list)

    def set_buffer(self, slot: int, value: Any) -> None:
        """Report a new value for state slot `slot` (applied by the caller, in order)."""
        self.updates.append((slot, value))


@dataclass(frozen=True)
class StateSpec:
    name: str
    shape: tuple[int, ...]
    trainable: bool


class Layer(ABC):
    """Base class: stateless by default; a layer must define `forward`."""

    def state_specs(self) -> list[StateSpec]:
        return []

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        return []

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        return in_shape

    @abstractmethod
    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        """y from x and the layer's state leaves (buffer updates reported to `f`)."""

    def __repr__(self) -> str:
        return type(self).__name__ + "()"


class Linear(Layer):
    """y = linear(x, W, b): x (in,) or (batch, in), W (out, in), b (out,).

    State order: weight, bias. Weight initialiser draws one seed (default xavier_uniform,
    fan_in = in, fan_out = out); the bias is zeros by default (no seed)."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        init: str = "xavier_uniform",
        bias_init: str = "zeros",
    ) -> None:
        for n, v in (("in_features", in_features), ("out_features", out_features)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ShapeError(f"Linear: {n} must be a positive int, got {v!r}")
        self.in_features, self.out_features = in_features, out_features
        self.init, self.bias_init = init, bias_init

    def __repr__(self) -> str:
        return f"Linear({self.in_features}, {self.out_features})"

    def state_specs(self) -> list[StateSpec]:
        return [
            StateSpec("weight", (self.out_features, self.in_features), True),
            StateSpec("bias", (self.out_features,), True),
        ]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        i, o = self.in_features, self.out_features
        w = init_values(self.init, (o, i), seeds, i, o)
        b = init_values(self.bias_init, (o,), seeds, i, o)
        return [w, b]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if not in_shape or in_shape[-1] != self.in_features or len(in_shape) > 2:
            raise ShapeError(
                f"Linear({self.in_features}, {self.out_features}): input 0: expected shape "
                f"({self.in_features},) or (batch, {self.in_features}), got {in_shape}"
            )
        return (*in_shape[:-1], self.out_features)

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        return f.s.linear(x, state[0], state[1])


class _Elementwise(Layer):
    op = ""

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        return f.s.op(self.op, x)


class ReLU(_Elementwise):
    op = "relu"


def _finite_rational(what: str, v: Any) -> Fraction:
    """An attribute as an exact Fraction (int, float or Fraction; finite, not bool)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, Fraction)):
        raise TorchLeanError(f"{what}: expected a number, got {v!r}")
    if isinstance(v, float) and not math.isfinite(v):
        raise TorchLeanError(f"{what}: expected a finite number, got {v!r}")
    return Fraction(v)


class LeakyReLU(Layer):
    """The table's leaky_relu: x if x > 0 else negative_slope * x (the slope rounded once
    into the run's dtype, one rounded product), default slope 1/100 (PyTorch's 0.01 is
    taken as the exact binary64 value given)."""

    def __init__(self, negative_slope: int | float | Fraction = Fraction(1, 100)) -> None:
        self.negative_slope = _finite_rational("LeakyReLU negative_slope", negative_slope)

    def __repr__(self) -> str:
        return f"LeakyReLU({self.negative_slope})"

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        return f.s.op("leaky_relu", x, negative_slope=self.negative_slope)


class Hardtanh(Layer):
    """The table's hardtanh: clamp(x, min_val, max_val) (defaults -1, 1; each bound rounded
    once into the run's dtype); min_val < max_val is required (as PyTorch's)."""

    def __init__(
        self, min_val: int | float | Fraction = -1, max_val: int | float | Fraction = 1
    ) -> None:
        lo = _finite_rational("Hardtanh min_val", min_val)
        hi = _finite_rational("Hardtanh max_val", max_val)
        if not lo < hi:
            raise TorchLeanError(f"Hardtanh: min_val {lo} must be below max_val {hi}")
        self.min_val, self.max_val = lo, hi

    def __repr__(self) -> str:
        return f"Hardtanh({self.min_val}, {self.max_val})"

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        return f.s.op("hardtanh", x, min_val=self.min_val, max_val=self.max_val)


class GELU(_Elementwise):
    """gelu's tanh form (`approximate="tanh"`, named in the call): the verifier's GELU
    relaxations (`runtime.verification`) are for this form. PyTorch's `nn.GELU()` default
    is the erf form: a deliberate difference (docs/ARCHITECTURE.md)."""

    op = "gelu"

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        return f.s.op("gelu", x, approximate="tanh")


class Tanh(_Elementwise):
    op = "tanh"


class Sigmoid(_Elementwise):
    op = "sigmoid"


class Dropout(Layer):
    """Training mode: `Session.dropout` with the session RNG (one advance per call when
    0 < p < 1); evaluation mode: the identity."""

    def __init__(self, p: float = 0.5) -> None:
        if not (isinstance(p, (int, float, Fraction)) and 0 <= p <= 1):
            raise TorchLeanError(f"Dropout: p must be in [0, 1], got {p!r}")
        self.p = p

    def __repr__(self) -> str:
        return f"Dropout({self.p})"

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        if not f.train:
            return x
        return f.s.dropout(None, x, self.p)


def _keepdims(s: Session, m: TensorRef, x_shape: tuple[int, ...]) -> TensorRef:
    """A per-row statistic of a (B, n) input reshaped to (B, 1) so it broadcasts."""
    if len(x_shape) == 2:
        return s.reshape(m, shape=(x_shape[0], 1))
    return m


class LayerNorm(Layer):
    """Over the last axis of a (n,) or (B, n) input:
    mu = reduce_mean(x); d = x - mu; var = reduce_mean(d * d); y = (d / sqrt(var + eps)) * w + b.
    State order: weight (ones), bias (zeros); both trainable; no seeds."""

    def __init__(self, n: int, eps: float = 1e-5) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise ShapeError(f"LayerNorm: n must be a positive int, got {n!r}")
        if not (math.isfinite(eps) and eps > 0):
            raise TorchLeanError(f"LayerNorm: eps must be finite and > 0, got {eps!r}")
        self.n, self.eps = n, eps

    def __repr__(self) -> str:
        return f"LayerNorm({self.n})"

    def state_specs(self) -> list[StateSpec]:
        return [StateSpec("weight", (self.n,), True), StateSpec("bias", (self.n,), True)]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        return [np.ones((self.n,)), np.zeros((self.n,))]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (1, 2) or in_shape[-1] != self.n:
            raise ShapeError(
                f"LayerNorm({self.n}): input 0: expected shape ({self.n},) or (batch, {self.n}),"
                f" got {in_shape}"
            )
        return in_shape

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        s = f.s
        self.out_shape(x.shape)
        ax = len(x.shape) - 1
        mu = _keepdims(s, s.reduce_mean(x, axis=ax), x.shape)
        d = s.sub(x, mu)
        var = _keepdims(s, s.reduce_mean(s.mul(d, d), axis=ax), x.shape)
        den = s.sqrt(s.add(var, self.eps))
        return s.add(s.mul(s.div(d, den), state[0]), state[1])


class BatchNorm1d(Layer):
    """Batch normalisation over the leading (batch) axis of a (B, C) input; a (C,) input is
    a batch of one.

    State order: weight (ones), bias (zeros), running_mean (zeros), running_var (ones),
    momentum (a scalar, default 0.1); trainable [T, T, F, F, F].

    Training: mean = reduce_mean(x, 0); d = x - mean; ss = reduce_sum(d * d, 0);
    var = ss / B; y = (d / sqrt(var + eps)) * w + b. Running statistics (reported, applied
    by the caller), in the run's dtype with one rounding per operation:
    r <- ((1 - m) * r) + (m * batch), with batch = mean for running_mean and, for
    running_var, ss / (B - 1) (unbiased) when B > 1, else var.
    Evaluation: y = ((x - running_mean) / sqrt(running_var + eps)) * w + b."""

    def __init__(self, c: int, eps: float = 1e-5, momentum: float = 0.1) -> None:
        if isinstance(c, bool) or not isinstance(c, int) or c <= 0:
            raise ShapeError(f"BatchNorm1d: c must be a positive int, got {c!r}")
        if not (math.isfinite(eps) and eps > 0):
            raise TorchLeanError(f"BatchNorm1d: eps must be finite and > 0, got {eps!r}")
        if not (math.isfinite(momentum) and 0 <= momentum <= 1):
            raise TorchLeanError(f"BatchNorm1d: momentum must be in [0, 1], got {momentum!r}")
        self.c, self.eps, self.momentum = c, eps, momentum

    def __repr__(self) -> str:
        return f"BatchNorm1d({self.c})"

    def state_specs(self) -> list[StateSpec]:
        c = (self.c,)
        return [
            StateSpec("weight", c, True),
            StateSpec("bias", c, True),
            StateSpec("running_mean", c, False),
            StateSpec("running_var", c, False),
            StateSpec("momentum", (), False),
        ]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        c = (self.c,)
        return [
            np.ones(c),
            np.zeros(c),
            np.zeros(c),
            np.ones(c),
            np.array(self.momentum, dtype=np.float64),
        ]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        if len(in_shape) not in (1, 2) or in_shape[-1] != self.c:
            raise ShapeError(
                f"BatchNorm1d({self.c}): input 0: expected shape ({self.c},) or "
                f"(batch, {self.c}), got {in_shape}"
            )
        return in_shape

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        s = f.s
        x2 = x if len(x.shape) == 2 else s.reshape(x, shape=(1, self.c))
        y = self._rows(f, state, slots, x2)
        return y if len(x.shape) == 2 else s.reshape(y, shape=(self.c,))

    def _rows(
        self, f: Forward, state: list[TensorRef], slots: list[int], x2: TensorRef
    ) -> TensorRef:
        """The (B, C) computation (training or evaluation), buffers reported to `f`."""
        s = f.s
        w, b, rm, rv, mom = state
        if not f.train:
            den = s.sqrt(s.add(rv, self.eps))
            return s.add(s.mul(s.div(s.sub(x2, rm), den), w), b)
        n = x2.shape[0]
        mean = s.reduce_mean(x2, axis=0)
        d = s.sub(x2, mean)
        ss = s.reduce_sum(s.mul(d, d), axis=0)
        var = s.div(ss, n)
        y = s.add(s.mul(s.div(d, s.sqrt(s.add(var, self.eps))), w), b)
        ctx = s.host_ctx  # the buffers are host values (get_value), also on CUDA
        m = s.get_value(mom)
        one_m = ctx.arr(ctx.const(1) - m)
        batch_var = ctx.div(s.get_value(ss), ctx.const(n - 1)) if n > 1 else s.get_value(var)
        for slot, ref, batch in ((slots[2], rm, s.get_value(mean)), (slots[3], rv, batch_var)):
            r = s.get_value(ref)
            with np.errstate(all="ignore"):
                f.set_buffer(slot, ctx.arr(ctx.arr(one_m * r) + ctx.arr(m * batch)))
        return y


# --------------------------------------------------------------------------- the model


class Sequential(Layer):
    """Layers applied in order. Flat: nested Sequentials are spliced in. A layer object
    that appears more than once is tied (one set of state slots); tying a layer with
    non-trainable state (running statistics) is refused (see the module docstring)."""

    def __init__(self, *layers: Layer) -> None:
        flat: list[Layer] = []
        for k, layer in enumerate(layers):
            if isinstance(layer, Sequential):
                flat.extend(layer.layers)
            elif isinstance(layer, Layer):
                flat.append(layer)
            else:
                raise TorchLeanError(
                    f"Sequential: layer {k}: expected a Layer, got {type(layer).__name__}"
                )
        self.layers: tuple[Layer, ...] = tuple(flat)
        unique: list[Layer] = []
        for k, layer in enumerate(flat):
            first = next((j for j, u in enumerate(flat[:k]) if u is layer), None)
            if first is None:
                unique.append(layer)
            elif any(not sp.trainable for sp in layer.state_specs()):
                raise TorchLeanError(
                    f"Sequential: layer {k}: {layer!r} appears twice (first as layer {first}); "
                    "tying a layer with running statistics is not supported (its buffer "
                    "updates would be lost)"
                )
        self._unique = tuple(unique)
        slots: list[list[int]] = []
        n = 0
        for u in unique:
            k = len(u.state_specs())
            slots.append(list(range(n, n + k)))
            n += k
        self._unique_slots = slots

    def __repr__(self) -> str:
        return "Sequential(" + ", ".join(repr(x) for x in self.layers) + ")"

    def state_specs(self) -> list[StateSpec]:
        """One entry per state slot (tied layers contribute once), first-occurrence order."""
        return [sp for u in self._unique for sp in u.state_specs()]

    def state_shapes(self) -> list[tuple[int, ...]]:
        return [sp.shape for sp in self.state_specs()]

    def occurrences(self) -> list[list[int]]:
        """For each layer occurrence in forward order, the state slots it uses."""
        out = []
        for layer in self.layers:
            k = next(i for i, u in enumerate(self._unique) if u is layer)
            out.append(list(self._unique_slots[k]))
        return out

    def tying(self) -> list[int]:
        """For each occurrence-slot (occurrences in order, their slots in order), the state
        slot it reads; a slot listed twice is tied."""
        return [k for occ in self.occurrences() for k in occ]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        for u in self._unique:
            vals = u.init_state(seeds)
            specs = u.state_specs()
            for v, sp in zip(vals, specs, strict=True):
                if tuple(v.shape) != sp.shape:  # pragma: no cover - a layer bug
                    raise ShapeError(f"{u!r}: init of {sp.name} has shape {v.shape}")
            out.extend(vals)
        return out

    def init(self, seed: int) -> list[np.ndarray]:
        """Initial binary64 state from the seed stream of `seed`."""
        return self.init_state(SeedStream(seed))

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        for layer in self.layers:
            in_shape = layer.out_shape(in_shape)
        return in_shape

    def run(self, f: Forward, refs: list[list[TensorRef]], x: TensorRef) -> TensorRef:
        """Apply every occurrence, with `refs[k]` the state refs of occurrence k."""
        for layer, occ, r in zip(self.layers, self.occurrences(), refs, strict=True):
            x = layer.forward(f, r, occ, x)
        return x

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:  # pragma: no cover - Sequentials are flattened, never nested
        raise TorchLeanError("Sequential: call run(); nested Sequentials are spliced in")


class Residual(Layer):
    """y = add(body(x), shortcut(x)): the layers of `body` applied in order to x, and those
    of `shortcut` (none: the identity, y = body(x) + x), then one elementwise `add` op.

    Both branches must produce the same shape (`ShapeError` naming the Residual otherwise).
    A branch is flat (a nested Sequential is spliced in; a nested Residual is one layer of
    it); a layer object may appear only once in a Residual (no tying inside it). State
    order: the body's layers' state, then the shortcut's, each in layer order."""

    def __init__(self, body: Sequence[Layer] | Layer, shortcut: Sequence[Layer] = ()) -> None:
        def flat(v: Any, what: str) -> tuple[Layer, ...]:
            items = [v] if isinstance(v, Layer) else list(v)
            if any(not isinstance(x, Layer) for x in items):
                raise TorchLeanError(f"Residual: {what}: expected Layers, got {items!r}")
            return Sequential(*items).layers if items else ()

        self.body, self.shortcut = flat(body, "body"), flat(shortcut, "shortcut")
        seen = [*self.body, *self.shortcut]
        for k, layer in enumerate(seen):
            if any(u is layer for u in seen[:k]):
                raise TorchLeanError(f"Residual: {layer!r} appears twice (no tying inside it)")

    def __repr__(self) -> str:
        sc = ", [" + ", ".join(map(repr, self.shortcut)) + "]" if self.shortcut else ""
        return "Residual([" + ", ".join(map(repr, self.body)) + "]" + sc + ")"

    def branches(self) -> tuple[tuple[Layer, ...], tuple[Layer, ...]]:
        return self.body, self.shortcut

    def state_specs(self) -> list[StateSpec]:
        return [sp for u in (*self.body, *self.shortcut) for sp in u.state_specs()]

    def init_state(self, seeds: SeedStream) -> list[np.ndarray]:
        return [v for u in (*self.body, *self.shortcut) for v in u.init_state(seeds)]

    def out_shape(self, in_shape: tuple[int, ...]) -> tuple[int, ...]:
        a, b = in_shape, in_shape
        for u in self.body:
            a = u.out_shape(a)
        for u in self.shortcut:
            b = u.out_shape(b)
        if a != b:
            raise ShapeError(f"{self!r}: the body gives shape {a}, the shortcut {b}")
        return a

    def forward(
        self, f: Forward, state: list[TensorRef], slots: list[int], x: TensorRef
    ) -> TensorRef:
        self.out_shape(x.shape)
        k, outs = 0, []
        for branch in (self.body, self.shortcut):
            y = x
            for u in branch:
                n = len(u.state_specs())
                y = u.forward(f, state[k : k + n], slots[k : k + n], y)
                k += n
            outs.append(y)
        return f.s.op("add", outs[0], outs[1])


# --------------------------------------------------------------------------- losses


def mse(s: Session, y: TensorRef, t: TensorRef) -> TensorRef:
    """mse_loss(y, t) = (1/N) * sum((y - t)^2), the table's composite."""
    return s.mse_loss(y, t)


def cross_entropy(s: Session, y: TensorRef, t: TensorRef) -> TensorRef:
    """cross_entropy(logits, one-hot t), the table's composite (mean over a batch axis)."""
    return s.cross_entropy(y, t)


LOSSES: Mapping[str, Callable[[Session, TensorRef, TensorRef], TensorRef]] = MappingProxyType(
    {"mse": mse, "cross_entropy": cross_entropy}
)
