"""Compiled PyTorch: `TorchCompileEngine` (`torch.compile`, inductor on the CPU) and
`TorchCompileCudaEngine` (the same on CUDA, where a CUDA device and Triton are present).

Invariants:
- The ops are `TorchEngine.ops` unchanged (the same PyTorch calls); what differs is that
  each op's forward is one `torch.compile` program (`fullgraph=True`: a graph break is an
  error, reported as the engine's refusal, never a silent fall back to eager;
  `dynamic=False`: one program per shape), whose backward AOTAutograd compiles with the
  same backend when `torch.autograd.grad` runs it, and each JVP is one compiled program of
  `torch.func.jvp` of the op.
- Programs are cached as `jax-jit`'s are (`base.CompileCache`): by kind ("vjp", "jvp"),
  the call's key (op, the engine's callable, attributes with their types, the integer
  environment where read) and the shape and dtype of every array; a program is never
  reused for another op, attribute, shape or dtype. Dynamo's own recompile limits are
  raised for each call (so it never falls back to eager after many programs) and hitting
  one fails the call instead (`fail_on_recompile_limit_hit`).
- Inductor on the CPU needs a C++ compiler (`$CXX`, else `g++`, `c++` or `clang++` on
  PATH): without one the engine is unavailable, with a message saying so.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .base import CompileCache, EngineUnavailable
from .torch_engine import TorchEngine, torch

__all__ = ["TorchCompileCudaEngine", "TorchCompileEngine"]

_LIMITS = {
    "recompile_limit": 1 << 20,
    "accumulated_recompile_limit": 1 << 20,
    "fail_on_recompile_limit_hit": True,
}


def _compile(fn: Callable[..., Any], backend: str) -> Callable[..., Any]:
    def program(*xs: Any) -> Any:
        return fn(*xs)

    return torch.compile(program, backend=backend, fullgraph=True, dynamic=False)


def _compile_jvp(fn: Callable[..., Any], n: int, backend: str) -> Callable[..., Any]:
    def program(*xt: Any) -> Any:
        return torch.func.jvp(fn, tuple(xt[:n]), tuple(xt[n:]))

    return torch.compile(program, backend=backend, fullgraph=True, dynamic=False)


def _cxx() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


class TorchCompileEngine(TorchEngine):
    """`torch.compile` (inductor) of every op's forward, its VJP and its JVP, on the CPU."""

    name: ClassVar[str] = "torch-compile"
    backend: ClassVar[str] = "inductor"

    def __init__(self) -> None:
        super().__init__()
        self.cache = CompileCache()

    @classmethod
    def check_available(cls) -> None:
        super().check_available()
        if cls.device == "cpu" and cls.backend == "inductor" and _cxx() is None:
            raise EngineUnavailable(
                f"engine {cls.name!r}: inductor on the CPU needs a C++ compiler (g++, c++ or "
                "clang++ on PATH, or $CXX); none found (apt-get install g++)"
            )

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "backend": self.backend,
            "compile_cache": self.cache.stats(),
        }

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        program = self.cache.get("vjp", fn, arrays, lambda: _compile(fn, self.backend))
        with torch._dynamo.config.patch(**_LIMITS):
            return super().vjp(program, arrays, cotangent)

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        n = len(arrays)
        program = self.cache.get(
            "jvp", fn, [*arrays, *tangents], lambda: _compile_jvp(fn, n, self.backend)
        )
        with torch._dynamo.config.patch(**_LIMITS):
            out, tan = program(*arrays, *tangents)
        return out, tan


class TorchCompileCudaEngine(TorchCompileEngine):
    """`torch.compile` (inductor, Triton kernels) on CUDA; unavailable without a CUDA
    device or Triton."""

    name: ClassVar[str] = "torch-compile-cuda"
    device: ClassVar[str] = "cuda"

    @classmethod
    def check_available(cls) -> None:
        super().check_available()
        if not torch.cuda.is_available():
            raise EngineUnavailable(
                "engine 'torch-compile-cuda': no CUDA device visible to PyTorch (install a "
                "CUDA build: pip install torch==2.13.0 --index-url "
                "https://download.pytorch.org/whl/cu128)"
            )
        try:
            import triton  # noqa: F401
        except ImportError as e:
            raise EngineUnavailable(
                "engine 'torch-compile-cuda': inductor on CUDA needs Triton (pip install triton)"
            ) from e
