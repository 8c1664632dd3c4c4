"""HIPS autograd adapter: `AutogradEngine`.

Invariants: every entry of `ops` is the plain `autograd.numpy` call for that op of the
table; VJPs come from `autograd.make_vjp` over the tuple of arguments (reverse mode; HIPS
autograd's forward mode covers few primitives, so no JVP is claimed). NumPy has no
bfloat16 ufunc loops that autograd differentiates reliably, so the adapter declares
float64, float32 and float16 only. `gather` is autograd's indexing primitive along the
last axis after a +0 column is concatenated for the pad index. Ops without an entry are not
covered (autograd.numpy has no convolution, softmax or attention primitive).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import reduce
from typing import Any, ClassVar

import numpy as np

from .base import Engine, EngineUnavailable, Unsupported, prelu_shape
from .common import dotted, math_ops, namespace_ops, numpy_style_ops, operator_ops, ops_table

try:
    import autograd
    import autograd.numpy as anp
    from autograd import make_vjp
except ImportError:  # pragma: no cover - exercised where autograd is absent
    autograd = None
    anp = None
    make_vjp = None
try:  # autograd's scipy wrappers need scipy (erf, logsumexp): without it those ops are uncovered
    import autograd.scipy.special as ag_special
except ImportError:  # pragma: no cover - exercised where scipy is absent
    ag_special = None

__all__ = ["AutogradEngine"]


def _c(x: Any, v: float) -> Any:
    """The Python number v as a scalar of x's dtype (so NumPy keeps x's dtype)."""
    return np.asarray(v, dtype=np.result_type(x))


def _gather(x: Any, indices: Any, shape: Any) -> Any:
    lead = tuple(x.shape[:-1])
    xp = anp.concatenate([x, np.zeros((*lead, 1), dtype=x.dtype)], axis=-1)  # pad: +0
    return anp.reshape(xp[..., np.array(list(indices), dtype=np.intp)], (*lead, *shape))


def _where(a: Any, b: Any, mask: Any, mask_shape: Any) -> Any:
    """anp.where on operands broadcast first, as products with ones (exact; autograd's where
    does not unbroadcast its cotangents, a product does)."""
    m = np.array(list(mask), dtype=bool).reshape(tuple(mask_shape))
    out = np.broadcast_shapes(m.shape, np.shape(a), np.shape(b))
    one = np.ones(out, dtype=np.result_type(a))
    return anp.where(m, a * one, b * one)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772, 1.0507009873554805  # PyTorch's selu constants


def _ag_flip(x: Any, dims: Any) -> Any:
    return x[tuple(slice(None, None, -1) if a in dims else slice(None) for a in range(x.ndim))]


def _ag_narrow(x: Any, dim: int, start: int, length: int) -> Any:
    return x[
        tuple(slice(start, start + length) if a == dim else slice(None) for a in range(x.ndim))
    ]


def _ag_roll(x: Any, shifts: Any, dims: Any = None) -> Any:
    """One anp.roll per (shift, dim) pair (autograd's roll VJP negates a scalar shift)."""
    if not dims:
        return anp.reshape(anp.roll(anp.reshape(x, (-1,)), int(shifts[0])), x.shape)
    for k, d in zip(shifts, dims, strict=True):
        x = anp.roll(x, int(k), int(d))
    return x


def _ag_tile(x: Any, dims: Any) -> Any:
    """np.tile written as concatenated copies per axis (autograd's tile VJP divides by the
    repeat count, so a 0 repeat is the empty slice instead)."""
    reps = (1,) * (x.ndim - len(dims)) + tuple(int(k) for k in dims)
    x = anp.reshape(x, (1,) * (len(reps) - x.ndim) + tuple(x.shape))
    for a, k in enumerate(reps):
        x = _ag_narrow(x, a, 0, 0) if k == 0 else anp.concatenate([x] * k, axis=a)
    return x


def _ag_repeat_interleave(x: Any, repeats: Any, dim: Any = None) -> Any:
    if len(repeats) != 1:
        raise Unsupported("autograd's repeat VJP takes one int repeat")
    return anp.repeat(x, int(repeats[0]), axis=dim)


def _ag_cumsum(x: Any, dim: int, exclusive: Any = None, reverse: Any = None) -> Any:
    """anp.cumsum with reverse as flip-cumsum-flip and exclusive as the shifted sums."""
    y = anp.cumsum(_ag_flip(x, (dim,)) if reverse else x, axis=dim)
    n = x.shape[dim]
    if exclusive and n:
        head = np.zeros((*x.shape[:dim], 1, *x.shape[dim + 1 :]), dtype=x.dtype)
        y = anp.concatenate([head, _ag_narrow(y, dim, 0, n - 1)], axis=dim)
    return _ag_flip(y, (dim,)) if reverse else y


def _ag_bn_eval(x: Any, m: Any, v: Any, g: Any, b: Any, eps: Any = None) -> Any:
    shape = (x.shape[1], *([1] * (x.ndim - 2)))
    e = _c(x, 1e-5 if eps is None else float(eps))
    den = anp.sqrt(anp.reshape(v, shape) + e)
    return (x - anp.reshape(m, shape)) / den * anp.reshape(g, shape) + anp.reshape(b, shape)


OPS: dict[str, Callable[..., Any]] = ops_table(
    {k: v for k, v in operator_ops().items() if k not in ("scale", "mean_n")},
    namespace_ops(lambda: anp),
    numpy_style_ops(lambda: anp),
    math_ops("autograd", lambda s, x: dotted(anp, s)(x)),
    {
        "scale": lambda x, c: x * _c(x, float(c)),
        "relu": lambda x: anp.maximum(x, _c(x, 0.0)),
        "clamp": lambda x, lo, hi: anp.clip(x, _c(x, float(lo)), _c(x, float(hi))),
        "sigmoid": lambda x: _c(x, 1.0) / (_c(x, 1.0) + anp.exp(-x)),
        "softplus": lambda x: anp.logaddexp(x, _c(x, 0.0)),
        "gather": _gather,
        # NumPy formulas differentiated by autograd
        "leaky_relu": lambda x, negative_slope=0.01: anp.where(
            x > 0, x, x * _c(x, float(negative_slope))
        ),
        "hardtanh": lambda x, min_val=-1, max_val=1: anp.clip(
            x, _c(x, float(min_val)), _c(x, float(max_val))
        ),
        "relu6": lambda x: anp.clip(x, _c(x, 0.0), _c(x, 6.0)),
        "softsign": lambda x: x / (_c(x, 1.0) + anp.abs(x)),
        "mean_n": lambda *xs: reduce(lambda a, b: a + b, xs) / _c(xs[0], float(len(xs))),
        "elu": lambda x, alpha=1: anp.where(x > 0, x, _c(x, float(alpha)) * anp.expm1(x)),
        "hardsigmoid": lambda x: anp.clip(x + _c(x, 3.0), _c(x, 0.0), _c(x, 6.0)) / _c(x, 6.0),
        "hardswish": lambda x: x * anp.clip(x + _c(x, 3.0), _c(x, 0.0), _c(x, 6.0)) / _c(x, 6.0),
        "celu": lambda x, alpha=1: anp.where(
            x > 0, x, _c(x, float(alpha)) * anp.expm1(x / _c(x, float(alpha)))
        ),
        "selu": lambda x: (
            _c(x, _SELU_SCALE) * anp.where(x > 0, x, _c(x, _SELU_ALPHA) * anp.expm1(x))
        ),
        "mish": lambda x: x * anp.tanh(anp.logaddexp(x, _c(x, 0.0))),
        "prelu": lambda x, w: anp.where(x > 0, x, anp.reshape(w, prelu_shape(x.ndim, w.size)) * x),
        "where": _where,
        "pow": lambda x, exponent: anp.power(x, _c(x, float(exponent))),
        # no LRN in NumPy
        "narrow": _ag_narrow,
        "flip": _ag_flip,
        "roll": _ag_roll,
        "tile": _ag_tile,
        "repeat_interleave": _ag_repeat_interleave,
        "cumsum": _ag_cumsum,
        "batch_norm_eval": _ag_bn_eval,
    },
)
if ag_special is not None:
    OPS["erf"] = lambda x: ag_special.erf(x)
    OPS["logsumexp"] = lambda x, dim: ag_special.logsumexp(x, axis=dim)


class AutogradEngine(Engine):
    """HIPS autograd over NumPy; VJPs by `autograd.make_vjp`."""

    name: ClassVar[str] = "autograd"
    package: ClassVar[str] = "autograd"
    dtypes: ClassVar[tuple[str, ...]] = ("float64", "float32", "float16")
    ops: ClassVar[dict[str, Callable[..., Any]]] = OPS

    @classmethod
    def check_available(cls) -> None:
        if autograd is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: HIPS autograd is not installed (pip install {cls.package})"
            )

    def describe(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"engine": self.name, "autograd": version("autograd"), "numpy": np.__version__}

    def asarray(self, a: np.ndarray, dtype: str) -> Any:
        return a.copy()

    def to_numpy(self, x: Any, dtype: str) -> np.ndarray:
        return np.asarray(x)

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        vjp_fn, out = make_vjp(lambda t: fn(*t))(tuple(arrays))
        cts = vjp_fn(cotangent)
        return out, [
            np.asarray(c).astype(a.dtype, copy=False) for c, a in zip(cts, arrays, strict=True)
        ]
