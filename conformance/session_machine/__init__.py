"""A Hypothesis state machine over the Session API, valid and invalid calls mixed.

The machine drives three sessions with one program (the *lanes*):

- ``exact``: typed-graph mode, exact rationals. Its gradients are compared with spec
  `backprop_all_ctx` on the recorded graph (exact equality for non-frozen values, zeros for
  frozen ones, the seed at the output) and its values with `eval_graph`.
- ``eager`` and ``graph``: float32 with the ``ordered`` kernels, eager and typed-graph mode.
  They must agree bit for bit (values, flags, gradients, parameters); the typed-graph lane's
  gradients are also compared numerically with spec `backprop_all_ctx` over binary32 when
  every value is finite. A backward without hook also runs `check_link` on both
  typed-graph lanes, and after every step the newest value's gradients are checked too.

Calls that must fail (wrong shapes, stale handles after `reset_tape`, foreign handles from a
second session, leaves after ops in typed-graph mode, `tanh` over exact rationals, bad
hooks, malformed SGD gradient lists, bad parameter values) are checked to raise the right
error and to change nothing: tape, recorded graph, environment, parameters, RNG counter.

Where a lane cannot take a step (``tanh`` in the exact lane, a leaf after ops in the
typed-graph lane) the value simply does not exist in that lane; later steps that use it skip
that lane. The eager lane skips leaves the typed-graph float32 lane refuses, so the two
float32 lanes always hold the same program.

Issue 30's promises have rules of their own (`fidelity`): forward mode at leaves that do not
require gradients (against spec `jvp_ctx`), `grad` on current and stale gradient lists, and
a trainer lane (an exact `TrainingSession` whose parameters the machine models) that goes on
training, setting its state and finishing in any order while every `Result` keeps the
state of its `finish()`.

What a caller does with results has rules too (`aliasing`): every returned array (gradient
entries, the seed, a `vjp` entry, a value) is edited in place and the session re-checked;
ops are recorded after a backward and the kept list read again; Python scalars are placed
at every argument position of binary ops (one const node, no leaf, in a typed graph); and
inputs made without `requires_grad` must track gradients.

`run_session_machine(max_examples, seed)` runs the machine and returns a report `Row`.

Layout: `model` (the lanes, value conversions, `Val`, `ParamModel`), `oracles` (the checks:
error-and-nothing-changed, spec comparisons, invariants), `fidelity` (rules for the
Session's TorchLean promises), `machine` (`SessionMachine`: state and rules), `run`
(`run_session_machine`).
"""

from __future__ import annotations

from .machine import SessionMachine
from .run import replay_session_machine, run_session_machine

__all__ = ["SessionMachine", "replay_session_machine", "run_session_machine"]
