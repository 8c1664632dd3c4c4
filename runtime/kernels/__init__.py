"""Runtime kernels for every op of the spec op table, one module per op family.

Invariants:
- Importing this package registers every kernel: `KERNELS[name]` exists for every
  `spec.ops.OPS` entry (a test iterates the table), registered by exactly the family module
  named in `Kernel.family` (elementwise, transcendental, reduce, linalg, shape, index,
  softmax, loss, conv, pool, norm, attention, embed). Primitive ops have hand-written
  kernels; composite ops run the spec body's nodes through these kernels
  (`table.composite_kernel`), so the composition is the same sequence.
- The core (`table`: Kernel, KERNELS, register, fold_fanin, kernel_for, composite kernels)
  and the shared helpers (`builders`) import no family module; the family modules import
  them, never this package.
- Every kernel performs its spec rule's operation sequence (same operations, same operand
  order, same folds); the profile-dependent pieces live in `KernelContext`. Fan-in is
  folded by the caller (`fold_fanin`), never by a kernel.
- Preconditions (log's x > 0) are `check` functions run by op constructors, not inside
  composite bodies (as in spec).
"""

from __future__ import annotations

from . import (  # noqa: F401  (each family module registers its kernels on import)
    attention,
    conv,
    elementwise,
    embed,
    index,
    linalg,
    loss,
    norm,
    pool,
    reduce,
    shape,
    softmax,
    transcendental,
)
from .table import KERNELS, Kernel, fold_fanin, kernel_for

__all__ = ["KERNELS", "Kernel", "fold_fanin", "kernel_for"]
