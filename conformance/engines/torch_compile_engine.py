"""Compiled PyTorch: `TorchCompileEngine` (`torch.compile`, inductor on the CPU) and
`TorchCompileCudaEngine` (the same on CUDA, where a CUDA device and Triton are present).

Invariants:
- The ops are `TorchEngine.ops` unchanged (the same PyTorch calls); what differs is that
  they run inside `torch.compile` programs (`fullgraph=True`: a graph break is an error,
  reported as the engine's refusal, never a silent fall back to eager; `dynamic=False`:
  one program per shape).
- `programs="joint"` (the default): one compiled program per signature computes the
  forward, the VJP (`torch.func.vjp`) and the JVP (`torch.func.jvp`) of the op together,
  so each signature costs one Dynamo trace and one inductor compile. `vjp` runs it with
  zero tangents, `jvp` with a zero cotangent; in a dataflow graph neither output depends
  on the other direction's seed, so both are what the program computes for that
  direction. Where the joint program fails (an op without forward-mode AD, say), the
  signature falls back to the split programs for good.
- `programs="split"` (`--engine torch-compile@split`): the forward is one compiled
  program whose backward AOTAutograd compiles when `torch.autograd.grad` runs it (the
  path of `loss.backward()` on a compiled model), and the JVP is one compiled program of
  `torch.func.jvp`: three inductor graphs per signature.
- Programs are cached as `jax-jit`'s are (`base.CompileCache`): by kind, the call's key
  (op, the engine's callable, attributes with their types, the integer environment where
  read) and the shape and dtype of every array; a program is never reused for another
  op, attribute, shape or dtype. Dynamo's own recompile limits are raised for each call
  (so it never falls back to eager after many programs) and hitting one fails the call
  instead (`fail_on_recompile_limit_hit`).
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


def _compile_joint(fn: Callable[..., Any], n: int, backend: str) -> Callable[..., Any]:
    """program(*xs, cotangent, *tangents) = (fn(*xs), its VJP of every x, its JVP)."""

    def program(*xgt: Any) -> Any:
        xs, g, ts = xgt[:n], xgt[n], xgt[n + 1 :]
        y, pull = torch.func.vjp(fn, *xs)
        _, ty = torch.func.jvp(fn, tuple(xs), tuple(ts))
        return y, list(pull(g)), ty

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

    option: ClassVar[str] = "programs"  # --engine torch-compile@split
    modes: ClassVar[tuple[str, ...]] = ("joint", "split")

    def __init__(self, programs: str = "joint") -> None:
        super().__init__()
        if programs not in self.modes:
            raise EngineUnavailable(
                f"engine {self.name!r}: programs must be one of {', '.join(self.modes)} "
                f"(got {programs!r})"
            )
        self.programs = programs
        self.cache = CompileCache()
        self.split: set[Any] = set()  # joint-program keys that failed: split programs
        self.out_aval: dict[Any, tuple[tuple[int, ...], Any]] = {}

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
            "programs": self.programs,
            "compile_cache": {**self.cache.stats(), "split_fallbacks": len(self.split)},
        }

    def _joint(
        self, fn: Callable[..., Any], arrays: Sequence[Any], g: Any, ts: Sequence[Any]
    ) -> tuple[Any, list[Any], Any] | None:
        """The joint program's (y, cotangents, tangent), or None where this signature
        uses the split programs (the joint one failed once, or `programs="split"`)."""
        args = [*arrays, g, *ts]
        key = self.cache.key("joint", fn, args)
        if self.programs == "split" or (key is not None and key in self.split):
            return None
        program = self.cache.get(
            "joint", fn, args, lambda: _compile_joint(fn, len(arrays), self.backend)
        )
        try:
            with torch._dynamo.config.patch(**_LIMITS):
                y, cts, ty = program(*arrays, g, *ts)
        except Exception:  # e.g. no forward-mode AD for the op: split programs from now on
            if key is None:
                return None
            self.split.add(key)
            return None
        return y, cts, ty

    def vjp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], cotangent: Any
    ) -> tuple[Any, list[Any]]:
        res = self._joint(fn, arrays, cotangent, [torch.zeros_like(a) for a in arrays])
        if res is not None:
            return res[0], res[1]
        program = self.cache.get("vjp", fn, arrays, lambda: _compile(fn, self.backend))
        with torch._dynamo.config.patch(**_LIMITS):
            return super().vjp(program, arrays, cotangent)

    def jvp(
        self, fn: Callable[..., Any], arrays: Sequence[Any], tangents: Sequence[Any]
    ) -> tuple[Any, Any]:
        sig = self.cache.key("out", fn, arrays)
        shape, dt = self.out_aval.get(sig) or _out_aval(fn, arrays)
        if sig is not None:
            self.out_aval[sig] = (shape, dt)
        g = torch.zeros(shape, dtype=dt, device=arrays[0].device)
        res = self._joint(fn, arrays, g, tangents)
        if res is not None:
            return res[0], res[2]
        n = len(arrays)
        program = self.cache.get(
            "jvp", fn, [*arrays, *tangents], lambda: _compile_jvp(fn, n, self.backend)
        )
        with torch._dynamo.config.patch(**_LIMITS):
            out, tan = program(*arrays, *tangents)
        return out, tan


def _out_aval(fn: Callable[..., Any], arrays: Sequence[Any]) -> tuple[tuple[int, ...], Any]:
    """The shape and dtype of fn's output (one eager call, only for the zero cotangent)."""
    with torch.no_grad():
        y = fn(*arrays)
    return tuple(y.shape), y.dtype


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
