"""The backend registry: backends by name.

Invariants:
- `get_backend(name)`: "numpy" (or "cpu") is the NumPy backend; a name registered with
  `register_backend` (the CUDA backend registers "cupy" and "cuda" from
  `runtime.backends.cuda`, which imports CuPy only when the backend is made) calls its
  factory, which raises a clear `TorchLeanError` when the backend is not usable; any other
  name is "module" or "module:attr", an array-API namespace wrapped by `namespace_backend`.
- A plugged-in namespace is used exactly as given: never replaced by array-api-compat's
  wrapper (a namespace whose arrays are NumPy arrays stays the namespace that was named).
  It is wrapped in a `CountingNamespace`, which passes every attribute through and counts
  the calls of its functions (`calls`), so a report can say which functions were tested.
- A namespace may supply its own `ordered` primitives as module attributes
  `torchlean_ordered_fold(x)` (sum over axis 0, a left fold in index order) and
  `torchlean_ordered_matmul(a, b)` (the k-loop, no FMA); they become the backend's
  `ordered_fold` / `ordered_matmul` hooks and are then what the `ordered` properties test,
  bit for bit (returning None for a dtype falls back to the generic loops).
- This module never imports a device backend: device backends import it and register.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .base import NUMPY, Backend

__all__ = ["CountingNamespace", "get_backend", "namespace_backend", "register_backend"]

_FACTORIES: dict[str, Callable[[], Backend]] = {}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make `get_backend(name)` return `factory()` (a backend made on demand)."""
    _FACTORIES[name] = factory


def _to_host_generic(a: Any) -> Any:
    try:
        return np.from_dlpack(a)
    except (TypeError, AttributeError, RuntimeError, BufferError):
        return np.asarray(a)


class CountingNamespace:
    """A namespace as given, with a call counter per function name (`calls`)."""

    def __init__(self, xp: Any) -> None:
        self.__dict__["_xp"] = xp
        self.__dict__["calls"] = {}

    def __getattr__(self, name: str) -> Any:
        v = getattr(self._xp, name)
        if not callable(v) or isinstance(v, type):
            return v  # dtypes, constants, submodules' classes: as they are
        calls = self.calls

        def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] = calls.get(name, 0) + 1
            return v(*args, **kwargs)

        return counted

    def __repr__(self) -> str:
        return f"CountingNamespace({self._xp!r})"


def namespace_backend(name: str, xp: Any) -> Backend:
    """A backend over an array-API namespace `xp`, used as given (host device): the dtypes
    it has among float64, float32 and float16; arrays cross to NumPy by DLPack."""
    raw = xp
    xp = CountingNamespace(raw)
    probe = raw.asarray(0.0)
    dmap: dict[str, Any] = {}
    for dt in ("float64", "float32", "float16"):
        if hasattr(raw, dt):
            dmap[dt] = getattr(raw, dt)

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
        ordered_fold=getattr(raw, "torchlean_ordered_fold", None),
        ordered_matmul=getattr(raw, "torchlean_ordered_matmul", None),
        info={"namespace": getattr(raw, "__name__", repr(raw)), "counting": True},
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
