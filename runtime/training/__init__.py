"""Training: layers and losses (`layers`, `model_layers`), optimizers and schedulers
(`optim`), the trainer (`trainer`, with `evaluation`: results, evaluation and the replayed
loss graph) and checkpoint files (`checkpoint`).

Invariants:
- Everything here is built on the public `runtime.session` API and the engine's kernel
  context; nothing in `spec` depends on it.
- The public import paths are `runtime.nn`, `runtime.optim`, `runtime.trainer` and
  `runtime.checkpoint` (re-exports of these modules); this package's `__init__` imports
  nothing, so importing one part does not load the others.
"""
