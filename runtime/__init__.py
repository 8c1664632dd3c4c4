"""torchlean's runtime: the spec's semantics executed fast on NumPy.

Public: backends and dtypes, the kernel context and kernel table, the tape, `lower` /
`compile`, the `Session`, and the trainer (`Trainer`, `TrainingSession`, `Result`; layers in
`runtime.nn`, optimizers and schedulers in `runtime.optim`, files in `runtime.checkpoint`).
Layout: `runtime.backends` (dtypes, backends, registry, CUDA), `runtime.engine` (kernel
context, crmath, RNG, tape, lowering), `runtime.kernels` (the kernel table),
`runtime.session` (the Session and its parts), `runtime.training` (layers, optimizers,
trainer, checkpoints).
`runtime` imports `spec` (shapes, op table, domains, RNG) and never `proofs` or
`conformance`.
"""

from .backends.base import DTYPES, NUMPY, Backend, from_spec, to_spec
from .backends.registry import get_backend
from .engine.context import PROFILES, KernelContext
from .engine.lower import Compiled, lower
from .engine.lower import compile_graph as compile
from .engine.tape import Tape, TapeNode
from .kernels import KERNELS, Kernel
from .session import NatRef, Param, Rng, Session, TensorRef, canonical_indices, group_leaves
from .training.trainer import Result, Trainer, TrainingSession

__all__ = [
    "DTYPES",
    "KERNELS",
    "NUMPY",
    "PROFILES",
    "Backend",
    "Compiled",
    "Kernel",
    "KernelContext",
    "NatRef",
    "Param",
    "Result",
    "Rng",
    "Session",
    "Tape",
    "TapeNode",
    "TensorRef",
    "Trainer",
    "TrainingSession",
    "canonical_indices",
    "compile",
    "from_spec",
    "get_backend",
    "group_leaves",
    "lower",
    "to_spec",
]
