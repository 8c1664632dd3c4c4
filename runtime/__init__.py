"""torchlean's runtime: the spec's semantics executed fast on NumPy.

Public: backends and dtypes, the kernel context and kernel table, the tape, `lower` /
`compile`, the `Session`, and the trainer (`Trainer`, `TrainingSession`, `Result`; layers in
`runtime.nn`, optimizers and schedulers in `runtime.optim`, files in `runtime.checkpoint`).
`runtime` imports `spec` (shapes, op table, domains, RNG) and never `proofs` or
`conformance`.
"""

from .backend import DTYPES, NUMPY, Backend, from_spec, get_backend, to_spec
from .context import PROFILES, KernelContext
from .kernels import KERNELS, Kernel
from .lower import Compiled, compile, lower
from .session import NatRef, Param, Rng, Session, TensorRef, canonical_indices, group_leaves
from .tape import Tape, TapeNode
from .trainer import Result, Trainer, TrainingSession

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
