"""The engine: the kernel context, correctly rounded math, the RNG, the tape and its
sweeps, and lowering of spec graphs.

Invariants:
- `context`: the kernel context (dtype, array namespace, the profile-dependent primitives).
- `crmath`: correctly rounded transcendentals for the `ordered` profile.
- `rng`: vectorised SplitMix64, the same bits as `spec.rng` on every backend.
- `tape`: the Wengert list and its reverse and forward sweeps.
- `lower`: a spec graph lowered to a tape (`lower`), and a reusable artifact
  (`compile_graph`, exported as `runtime.compile`).
- This package's `__init__` imports nothing: the kernel table (`runtime.kernels`) imports
  the context and the tape imports the kernel table, so importing the submodules here would
  close an import cycle through this package.
"""
