"""The backend registry: backends by name.

Invariants:
- `get_backend(name)`: "numpy" (or "cpu") is the NumPy backend; a name registered with
  `register_backend` (the CUDA backend registers "cupy" and "cuda" from
  `runtime.backends.cuda`, which imports CuPy only when the backend is made) calls its
  factory, which raises a clear `TorchLeanError` when the backend is not usable; any other
  name is "module" or "module:attr", an array-API namespace wrapped by `namespace_backend`.
- This module never imports a device backend: device backends import it and register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import array_api_compat
import numpy as np

from spec.errors import TorchLeanError

from .base import NUMPY, Backend

__all__ = ["get_backend", "namespace_backend", "register_backend"]

_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make `get_backend(name)` return `factory()` (a backend made on demand)."""
    _FACTORIES[name] = factory


def _to_host_generic(a: Any) -> Any:
    try:
        return np.from_dlpack(a)
    except (TypeError, AttributeError, RuntimeError, BufferError):
        return np.asarray(a)


def namespace_backend(name: str, xp: Any) -> Backend:
    """A backend over an array-API namespace `xp` (host device): the dtypes it has among
    float64, float32 and float16; arrays cross to NumPy by DLPack."""
    xp = array_api_compat.array_namespace(xp.asarray(0.0)) if hasattr(xp, "asarray") else xp
    probe = xp.asarray(0.0)
    dmap: dict[str, Any] = {}
    for dt in ("float64", "float32", "float16"):
        if hasattr(xp, dt):
            dmap[dt] = getattr(xp, dt)

    def from_host(a: Any) -> Any:
        dt = dmap.get(str(a.dtype)) if a.dtype.kind == "f" else None
        return xp.asarray(a, dtype=dt, copy=True)  # never a view of the host buffer

    return Backend(
        name=name,
        xp=xp,
        device="cpu",
        dtypes=tuple(dmap),
        array_type=type(probe),
        dtype_map=dmap,
        to_host_fn=_to_host_generic,
        from_host_fn=from_host,
    )


def get_backend(name: str = "numpy") -> Backend:
    """ "numpy" (or "cpu"); "cupy" (or "cuda"): the CUDA backend, which raises a clear
    error without a usable GPU; "module" or "module:attr": an array-API namespace."""
    if name in ("numpy", "cpu"):
        return NUMPY
    factory = _FACTORIES.get(name)
    if factory is not None:
        return factory()
    import importlib

    modname, _, attr = name.partition(":")
    try:
        mod: Any = importlib.import_module(modname)
    except ImportError as e:
        raise TorchLeanError(
            f"backend {name!r} is not available: cannot import {modname!r} ({e}); "
            "built-in backends are 'numpy' and 'cupy'"
        ) from None
    if attr:
        try:
            for part in attr.split("."):
                mod = getattr(mod, part)
        except AttributeError:
            raise TorchLeanError(f"backend {name!r}: {modname!r} has no {attr!r}") from None
    if not hasattr(mod, "asarray"):
        raise TorchLeanError(f"backend {name!r} is not an array namespace (no asarray)")
    return namespace_backend(name, mod)
