"""Runtime kernels for every op of the spec op table, one module per op family.

Invariants:
- Importing this package registers every kernel: `KERNELS[name]` exists for every
  `spec.ops.OPS` entry (a test iterates the table). Primitive ops have hand-written
  kernels, registered by exactly the family module named in `Kernel.family`; the modules
  loaded are those of the families holding a primitive (`spec.ops.families_holding`), so a
  family of composites only has no module here. Every composite op runs the spec body's
  nodes through these kernels (`table.composite_kernel`, added for each composite of the
  table by `table.add_composite_kernels`), so the composition is the same sequence.
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

from spec.ops import families_holding, load_families

from .table import KERNELS, Kernel, add_composite_kernels, fold_fanin, kernel_for

# The families holding a primitive have a module of hand-written kernels (registered on
# import); every composite's kernel is derived from its spec body.
load_families(__name__, families_holding(("primitive",)))
add_composite_kernels()

__all__ = ["KERNELS", "Kernel", "fold_fanin", "kernel_for"]
