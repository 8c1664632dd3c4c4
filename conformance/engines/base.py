"""The engine adapter shape and the exact value conversions every adapter shares.

Invariants:
- An engine adapter is a subclass of `Engine` with a class attribute
  `ops: dict[str, Callable]` mapping an op name of the table (`spec.ops.OPS`) to a function
  on the engine's arrays, called as `ops[name](*arrays, **attrs)` with the op table's
  attribute names and values (rationals as `fractions.Fraction`, shapes as tuples). An op
  missing from `ops` is *not covered*; nothing here substitutes another engine's code.
- The engine's own autograd computes every VJP (`vjp`) and, where the engine has forward
  mode (`has_jvp`), every JVP (`jvp`). The adapter only moves bits in and out. A
  forward-only engine (`has_vjp = False`, e.g. ONNX Runtime) is run through `forward` and
  judged on the forward direction only; its backward is never checked, so never passed.
- Values cross the boundary bit for bit: a spec value of an IEEE domain becomes the
  engine's array element with the same bit pattern (`to_numpy`/`from_numpy` through
  unsigned-integer views), and back. No conversion rounds.
- Constructing an adapter whose package is missing raises `EngineUnavailable`, whose
  message names the package to `pip install`. An adapter that has no form of an op with
  the given attributes raises `Unsupported` (a refusal, reported as "unsupported").
- The checks hand `vjp`/`jvp` a `KeyedCall`: `OpCall` (one op of the table with its
  attributes) or a whole graph (`whole.GraphCall`). Its `key` names exactly what it
  computes: the op names, the engine's callables themselves (a subclass that replaces an
  entry gets other keys), every attribute value tagged with its type (1, 1.0, True and
  Fraction(1) differ), and the integer environment where `select` reads `env_slot`.
- `CompileCache` (used by engines that compile, e.g. `JaxJitEngine`) keys a compiled
  function by (kind, the call's `key`, the shape and dtype of every array it is given); a
  call without a key is compiled afresh. So a cached function is never reused for another
  op, attribute, shape or dtype.
- An op whose attributes give `env_slot` (`select`) is called with one more keyword,
  `env`: the tuple of ints of the non-differentiable integer environment it indexes.
- `batched` (a (C, H, W) input given a batch axis of 1 for an (N, C, H, W) function),
  `keep_mask` and `mha_body` are the adapters' shared structure (the spec's kept set;
  multi_head_attention's projections around an engine's own attention), written once over
  the engine's own calls that each adapter passes in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

import ml_dtypes
import numpy as np

from runtime.backends import DTYPE_DOMAIN
from spec.domains import IEEEDomain
from spec.errors import TorchLeanError
from spec.tensor import Tensor

__all__ = [
    "NP_DTYPE",
    "UINT_OF",
    "CompileCache",
    "Engine",
    "EngineUnavailable",
    "KeyedCall",
    "OpCall",
    "Unsupported",
    "aval",
    "batched",
    "freeze",
    "from_numpy",
    "ieee_domain",
    "keep_mask",
    "mha_body",
    "pair",
    "prelu_shape",
    "refusal",
    "select_index",
    "to_numpy",
    "uses_env",
]

NP_DTYPE: dict[str, Any] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
}
UINT_OF: dict[str, Any] = {
    "float64": np.uint64,
    "float32": np.uint32,
    "bfloat16": np.uint16,
    "float16": np.uint16,
}


class Unsupported(TorchLeanError):
    """An adapter's refusal: the engine has no form of this op with these attributes
    (e.g. tinygrad's pools have no divisor_override). The checks report it as the case's
    refusal ("unsupported: ..."), never as a pass or as the engine crashing."""


def refusal(e: Exception, width: int) -> str:
    """How a refusal is reported: "unsupported: ..." for an adapter's `Unsupported`, the
    exception's type and message otherwise (cut to `width` characters)."""
    kind = "unsupported" if isinstance(e, Unsupported) else type(e).__name__
    return f"{kind}: {str(e)[:width]}"


class EngineUnavailable(TorchLeanError):
    """An engine's package (or device) is not available here; the message says what to
    install."""


def ieee_domain(dtype: str) -> IEEEDomain:
    D = DTYPE_DOMAIN[dtype]
    if not isinstance(D, IEEEDomain):
        raise TorchLeanError(f"engines: dtype {dtype!r} is not an IEEE format")
    return D


def to_numpy(t: Tensor, dtype: str) -> np.ndarray:
    """A spec tensor of `dtype`'s domain as a NumPy array of that dtype, bit for bit."""
    D = ieee_domain(dtype)
    bits = np.array([D.to_bits(v) for v in t.data], dtype=UINT_OF[dtype])
    return bits.view(NP_DTYPE[dtype]).reshape(t.shape)


def from_numpy(a: np.ndarray, dtype: str) -> Tensor:
    """A NumPy array of `dtype` as a spec tensor, bit for bit (refuses another dtype)."""
    a = np.asarray(a)
    if a.dtype != NP_DTYPE[dtype]:
        raise TorchLeanError(f"engines: expected a {dtype} array, got {a.dtype}")
    D = ieee_domain(dtype)
    bits = np.ascontiguousarray(a).view(UINT_OF[dtype]).reshape(-1)
    return Tensor(tuple(int(s) for s in a.shape), tuple(D.from_bits(int(b)) for b in bits))


def freeze(v: Any) -> Any:
    """A hashable form of an attribute value in which equal forms mean equal values of equal
    types (containers recursively; 1, 1.0, True and Fraction(1) stay apart)."""
    if isinstance(v, Mapping):
        return ("mapping", tuple(sorted((str(k), freeze(x)) for k, x in v.items())))
    if isinstance(v, list | tuple):
        return (type(v).__name__, tuple(freeze(x) for x in v))
    return (type(v).__name__, v)


def uses_env(attrs: Mapping[str, Any]) -> bool:
    """Whether the op reads the integer environment (`select` with `env_slot`)."""
    return attrs.get("env_slot") is not None


def prelu_shape(ndim: int, n: int) -> tuple[int, ...]:
    """prelu's weight (n elements) reshaped against an input of rank `ndim`: () for one
    shared element, else (n, 1, ..., 1) along axis 1 (PyTorch's channel axis)."""
    return () if n == 1 else (n, *([1] * (ndim - 2)))


def select_index(index: int | None, env_slot: int | None, env: Sequence[int]) -> int:
    """`select`'s row: the literal `index`, or env[env_slot]."""
    if env_slot is not None:
        return int(env[env_slot])
    if index is None:
        raise TorchLeanError("select: give exactly one of index and env_slot (got neither)")
    return int(index)


def pair(v: Any, default: int) -> tuple[int, int]:
    """A pair attribute (stride, padding, dilation, ...) as two ints; (default, default)
    when absent."""
    return (default, default) if v is None else (int(v[0]), int(v[1]))


def batched(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn on (N, C, H, W); a (C, H, W) input gets (and loses) a batch axis of 1 (by
    `reshape`, which every adapter's arrays have: exact)."""

    def run(x: Any, *rest: Any, **attrs: Any) -> Any:
        if x.ndim == 3:
            y = fn(x.reshape((1, *x.shape)), *rest, **attrs)
            return y.reshape(tuple(y.shape[1:]))
        return fn(x, *rest, **attrs)

    return run


def keep_mask(lq: int, lk: int, mask: Any, causal: Any) -> np.ndarray | None:
    """The attention's kept set as an (Lq, Lk) boolean array (True = attend): `mask`
    (0/1, row-major) and, with `causal`, j <= i; None when neither is given."""
    if mask is None and not causal:
        return None
    m = np.ones((lq, lk), bool) if mask is None else np.array(list(mask), bool).reshape(lq, lk)
    if causal:
        m &= np.tril(np.ones((lq, lk), bool))
    return m


def mha_body(
    q: Any,
    k: Any,
    v: Any,
    wq: Any,
    wk: Any,
    wv: Any,
    wo: Any,
    heads: int,
    mask: Any = None,
    causal: Any = None,
    *,
    matmul: Callable[[Any, Any], Any],
    swap: Callable[[Any, int, int], Any],
    sdpa: Callable[..., Any],
) -> Any:
    """multi_head_attention as the spec writes it, on an engine's own calls: projections
    x @ w.T (no biases), heads split on the last axis, `sdpa(q, k, v, mask, causal)` per
    head, heads merged, output projection. `swap(x, a, b)` exchanges two axes."""
    e = q.shape[-1]

    def split(x: Any, w: Any) -> Any:
        y = matmul(x, swap(w, -2, -1))
        return swap(y.reshape((*y.shape[:-1], heads, e // heads)), -3, -2)

    o = swap(sdpa(split(q, wq), split(k, wk), split(v, wv), mask, causal), -3, -2)
    return matmul(o.reshape((*o.shape[:-2], e)), swap(wo, -2, -1))


class KeyedCall(ABC):
    """A function of the engine's arrays with a hashable `key` naming what it computes."""

    key: Any

    @abstractmethod
    def __call__(self, *arrays: Any) -> Any:
        """The engine's result on `arrays`."""


class OpCall(KeyedCall):
    """`fn(*arrays, **attrs)` for one op of the table (plus `env=env` when the attributes
    give `env_slot`); `key` = (op, fn, frozen attributes, env where read)."""

    def __init__(
        self, op: str, fn: Callable[..., Any], attrs: Mapping[str, Any], env: Sequence[int] = ()
    ) -> None:
        self.op, self.fn, self.attrs = op, fn, dict(attrs)
        self.env = tuple(int(i) for i in env) if uses_env(self.attrs) else ()
        self.key = ("op", op, fn, freeze(self.attrs), self.env)

    def __call__(self, *arrays: Any) -> Any:
        if uses_env(self.attrs):
            return self.fn(*arrays, **self.attrs, env=self.env)
        return self.fn(*arrays, **self.attrs)


def aval(a: Any) -> tuple[tuple[int, ...], str]:
    """An array's shape and dtype (NumPy, PyTorch, JAX and tinygrad arrays alike)."""
    return tuple(int(d) for d in a.shape), str(a.dtype)


class CompileCache:
    """Compiled functions by (kind, the call's key, every array's shape and dtype), least
    recently used dropped beyond `capacity`; `hits`, `misses` and `uncached` count the
    lookups (see the module docstring)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self.entries: OrderedDict[Any, Callable[..., Any]] = OrderedDict()
        self.hits = self.misses = self.uncached = 0

    def key(self, kind: str, fn: Callable[..., Any], arrays: Sequence[Any]) -> Any:
        """The cache key of `fn` compiled as `kind` for `arrays`, or None (no key: never
        cached)."""
        if not isinstance(fn, KeyedCall):
            return None
        k = (kind, fn.key, tuple(aval(a) for a in arrays))
        try:
            hash(k)
        except TypeError:  # an attribute value that cannot be hashed: compile afresh
            return None
        return k

    def get(
        self,
        kind: str,
        fn: Callable[..., Any],
        arrays: Sequence[Any],
        build: Callable[[], Callable[..., Any]],
    ) -> Callable[..., Any]:
        """The compiled function for (kind, fn, arrays): cached, or `build()` (cached when
        `fn` has a key)."""
        k = self.key(kind, fn, arrays)
        if k is None:
            self.uncached += 1
            return build()
        hit = self.entries.get(k)
        if hit is not None:
            self.hits += 1
            self.entries.move_to_end(k)
            return hit
        self.misses += 1
        hit = self.entries[k] = build()
        if len(self.entries) > self.capacity:
            self.entries.popitem(last=False)
        return hit

    def stats(self) -> dict[str, int]:
        return {"compiled": self.misses, "reused": self.hits, "uncached": self.uncached}


class Engine(ABC):
    """The adapter shape (see the module docstring). Subclasses set the class attributes
    and implement the four array methods; `vjp`/`jvp` call the engine's own autograd."""

    name: ClassVar[str] = "engine"
    package: ClassVar[str] = ""  # the pip name, for the "not installed" message
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32", "bfloat16", "float16")
    ops: ClassVar[dict[str, Callable[..., Any]]] = {}
    has_jvp: ClassVar[bool] = False
    has_vjp: ClassVar[bool] = True  # False: a forward-only engine (judged on the forward)
    option: ClassVar[str] = ""  # the keyword `--engine NAME@VALUE` passes to the constructor

    def __init__(self) -> None:
        self.check_available()

    # -- availability
    @classmethod
    def check_available(cls) -> None:
        """Raise `EngineUnavailable` naming the package when the engine cannot run (the
        default: always available)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Version and device, for the report."""
        return {"engine": self.name}

    # -- arrays (bit-exact)
    @abstractmethod
    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        """`a` as the engine's array of `dtype`, bit for bit."""

    @abstractmethod
    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        """The engine's array as NumPy of `dtype`, bit for bit."""

    def forward(self, fn: Callable[..., Any], arrays: Sequence[Any]) -> Any:
        """fn(*arrays): the forward of a forward-only engine (`has_vjp` False)."""
        return fn(*arrays)

    # -- the engine's own autograd
    @abstractmethod
    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        """(fn(*arrays), the engine's cotangent of every array given `cotangent`)."""

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        """(fn(*arrays), the engine's forward-mode tangent of the output)."""
        raise TorchLeanError(f"engine {self.name!r} has no forward mode (has_jvp is False)")
