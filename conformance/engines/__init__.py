"""Adapters that let the suite judge other autograd engines against the exact spec.

`python -m conformance --engine NAME` runs `run.run_engine` on one engine; NAME is one of
`ENGINES` (torch, torch-cuda, torch-compile, torch-compile-cuda, jax, jax-jit, tinygrad,
autograd, onnxruntime) or `module:attr` naming a
user's `Engine` subclass. The adapter classes are loaded lazily (importing this package
imports no engine): `from conformance.engines import TorchEngine` imports torch.

Invariants: see `base` (adapter shape, bit-exact conversion), `local` (per-node checks and
the three outcomes), `scale` (the error and its scale), `flush` and `ballcheck` (the two
lazily computed alternatives), `conventions` and `budgets` (data), `whole` (whole graphs and
the bound's propagation), `run` (the runner), `replay` (reproducers), `report` (JSON,
Markdown), `cli` (the `--engine` mode) and `census` (rates over many inputs).
"""

from __future__ import annotations

import importlib
from typing import Any

from .base import Engine, EngineUnavailable

__all__ = [
    "ENGINES",
    "AutogradEngine",
    "Engine",
    "EngineUnavailable",
    "JaxEngine",
    "JaxJitEngine",
    "OnnxRuntimeEngine",
    "TinygradEngine",
    "TorchCompileCudaEngine",
    "TorchCompileEngine",
    "TorchCudaEngine",
    "TorchEngine",
    "load_engine",
]

ENGINES: dict[str, str] = {
    "torch": "conformance.engines.torch_engine:TorchEngine",
    "torch-cuda": "conformance.engines.torch_engine:TorchCudaEngine",
    "torch-compile": "conformance.engines.torch_compile_engine:TorchCompileEngine",
    "torch-compile-cuda": "conformance.engines.torch_compile_engine:TorchCompileCudaEngine",
    "jax": "conformance.engines.jax_engine:JaxEngine",
    "jax-jit": "conformance.engines.jax_engine:JaxJitEngine",
    "tinygrad": "conformance.engines.tinygrad_engine:TinygradEngine",
    "autograd": "conformance.engines.autograd_engine:AutogradEngine",
    "onnxruntime": "conformance.engines.onnxruntime_engine:OnnxRuntimeEngine",
}
_CLASSES = {path.rsplit(":", 1)[1]: path for path in ENGINES.values()}


def _resolve(path: str) -> Any:
    mod, _, attr = path.partition(":")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise EngineUnavailable(f"engine {path!r}: cannot import module {mod!r} ({e})") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise EngineUnavailable(f"engine {path!r}: module {mod!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def load_engine(name: str) -> Engine:
    """An engine instance by registered name, `NAME@OPTION` (`onnxruntime@PROVIDER`: the
    execution provider by name) or `module:attr` (a class or an instance); raises
    `EngineUnavailable` (naming the package) when it cannot run here."""
    base, _, option = name.partition("@")
    if option and base in ENGINES:  # NAME@OPTION: an engine taking one option (a provider)
        cls = _resolve(ENGINES[base])
        if not getattr(cls, "option", None):
            raise EngineUnavailable(f"engine {base!r} takes no @option (got {name!r})")
        return cls(**{cls.option: option})  # type: ignore[no-any-return]
    if name in ENGINES:
        obj = _resolve(ENGINES[name])
    elif ":" in name:
        obj = _resolve(name)
    else:
        raise EngineUnavailable(
            f"unknown engine {name!r}; known engines: {', '.join(ENGINES)}, or module:attr"
        )
    if isinstance(obj, type) and issubclass(obj, Engine):
        return obj()
    if isinstance(obj, Engine):
        obj.check_available()
        return obj
    raise EngineUnavailable(f"engine {name!r}: {obj!r} is not an Engine subclass or instance")


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return _resolve(_CLASSES[name])
    raise AttributeError(f"module 'conformance.engines' has no attribute {name!r}")
