"""JAX adapters: `JaxEngine` (eager) and `JaxJitEngine` (every function under `jax.jit`).

Invariants: every entry of `ops` is the plain `jax.numpy` / `jax.nn` call for that op of the
table; VJPs come from `jax.vjp`, JVPs from `jax.jvp` (JAX's forward mode). `JaxJitEngine`
compiles, per call, one program for the output and the VJP (`jax.jit` of `jax.vjp`) and
one for `jax.jvp`, kept in a `base.CompileCache`: a program is reused only for the same
op, attributes (with their types), integer environment and shapes and dtypes of every
array. float64 needs `jax_enable_x64`, which constructing an adapter switches on
(process-wide, as JAX requires). Ops without an entry are not covered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from .base import CompileCache, Engine, EngineUnavailable, select_index

try:
    import jax
    import jax.numpy as jnp
except ImportError:  # pragma: no cover - exercised where jax is absent
    jax = None
    jnp = None

__all__ = ["JaxEngine", "JaxJitEngine"]


def _mask_neg_inf(x: Any, mask: Any, mask_shape: Any) -> Any:
    keep = np.array(list(mask), dtype=bool).reshape(tuple(mask_shape))
    return jnp.where(keep, x, jnp.array(-jnp.inf, dtype=x.dtype))


def _scatter_add(x: Any, indices: Any, size: int) -> Any:
    out = jnp.zeros((size, *x.shape[1:]), dtype=x.dtype)
    return out.at[np.array(list(indices), dtype=np.int64)].add(x)


OPS: dict[str, Callable[..., Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "maximum": lambda a, b: jnp.maximum(a, b),
    "minimum": lambda a, b: jnp.minimum(a, b),
    "neg": lambda x: -x,
    "scale": lambda x, c: x * float(c),
    "relu": lambda x: jax.nn.relu(x),
    "abs": lambda x: jnp.abs(x),
    "clamp": lambda x, lo, hi: jnp.clip(x, float(lo), float(hi)),
    "sqrt": lambda x: jnp.sqrt(x),
    "detach": lambda x: jax.lax.stop_gradient(x),
    "inv": lambda x: jnp.reciprocal(x),
    "exp": lambda x: jnp.exp(x),
    "log": lambda x: jnp.log(x),
    "tanh": lambda x: jnp.tanh(x),
    "sin": lambda x: jnp.sin(x),
    "cos": lambda x: jnp.cos(x),
    "sigmoid": lambda x: jax.nn.sigmoid(x),
    "softplus": lambda x: jax.nn.softplus(x),
    "gelu": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": lambda x: jax.nn.silu(x),
    "safe_log": lambda x: jnp.log(jnp.maximum(x, 2.0**-24)),
    "sum": lambda x: jnp.sum(x),
    "reduce_sum": lambda x, axis: jnp.sum(x, axis=axis),
    "mean": lambda x: jnp.mean(x),
    "reduce_mean": lambda x, axis: jnp.mean(x, axis=axis),
    "reduce_max": lambda x, axis: jnp.max(x, axis=axis),
    "matmul": lambda a, b: jnp.matmul(a, b),
    "linear": lambda x, w, b: x @ w.T + b,
    "reshape": lambda x, shape: jnp.reshape(x, shape),
    "swap_adjacent": lambda x, axis: jnp.swapaxes(x, axis, axis + 1),
    "transpose": lambda x: jnp.swapaxes(x, -2, -1),
    "broadcast_to": lambda x, shape: jnp.broadcast_to(x, shape),
    "concat": lambda *xs: jnp.concatenate(xs, 0),
    "slice": lambda x, start, stop: x[start:stop],
    "select": lambda x, index=None, env_slot=None, env=(): x[select_index(index, env_slot, env)],
    "index_select": lambda x, indices: x[np.array(list(indices), dtype=np.int64)],
    "scatter_add": _scatter_add,
    "softmax": lambda x: jax.nn.softmax(x, axis=-1),
    "log_softmax": lambda x: jax.nn.log_softmax(x, axis=-1),
    "mse_loss": lambda y, t: jnp.mean((y - t) ** 2),
    "mask_neg_inf": _mask_neg_inf,
    "embedding": lambda table, indices, shape=None: table[
        np.array(list(indices), dtype=np.int64).reshape(
            shape if shape is not None else (len(indices),)
        )
    ],
}


class JaxEngine(Engine):
    """JAX eager (op by op dispatch); VJPs by `jax.vjp`, JVPs by `jax.jvp`."""

    name: ClassVar[str] = "jax"
    package: ClassVar[str] = "jax"
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS
    has_jvp: ClassVar[bool] = True
    jit: ClassVar[bool] = False

    @classmethod
    def check_available(cls) -> None:
        if jax is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: JAX is not installed (pip install {cls.package})"
            )
        jax.config.update("jax_enable_x64", True)

    def describe(self) -> dict[str, Any]:
        return {
            "engine": self.name,
            "jax": jax.__version__,
            "jit": self.jit,
            "device": str(jax.devices()[0]),
        }

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return jnp.asarray(a.copy())

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        out, pull = jax.vjp(fn, *arrays)
        return out, list(pull(cotangent))

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        return jax.jvp(fn, tuple(arrays), tuple(tangents))


def _vjp_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    def program(xs: tuple[Any, ...], g: Any) -> tuple[Any, Any]:
        out, pull = jax.vjp(fn, *xs)
        return out, pull(g)

    return jax.jit(program)


def _jvp_program(fn: Callable[..., Any]) -> Callable[..., Any]:
    return jax.jit(lambda xs, ts: jax.jvp(fn, xs, ts))


class JaxJitEngine(JaxEngine):
    """JAX with every VJP and JVP one `jax.jit` program (XLA-compiled, fusion allowed),
    compiled once per op, attributes, shapes and dtypes (`cache`)."""

    name: ClassVar[str] = "jax-jit"
    jit: ClassVar[bool] = True

    def __init__(self) -> None:
        super().__init__()
        self.cache = CompileCache()

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "compile_cache": self.cache.stats()}

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        program = self.cache.get("vjp", fn, [*arrays, cotangent], lambda: _vjp_program(fn))
        out, cts = program(tuple(arrays), cotangent)
        return out, list(cts)

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        program = self.cache.get("jvp", fn, [*arrays, *tangents], lambda: _jvp_program(fn))
        return program(tuple(arrays), tuple(tangents))
