"""Graph builders of the transcendental family.

Invariants: every op takes any existing value, except `log`, whose argument is always
guarded as `clamp(v, lo, hi)` with lo > 0 (its value precondition holds for every non-NaN
value; see invariant 6 of `conformance.graphs`). `safe_log` is total and needs no guard.
"""

from __future__ import annotations

from .core import guarded_unary, register, unary

__all__: list[str] = []

register(name="exp", build=unary("exp"))
register(name="tanh", build=unary("tanh"))
register(name="sin", build=unary("sin"))
register(name="cos", build=unary("cos"))
register(name="safe_log", build=unary("safe_log"))
register(name="log", build=guarded_unary("log", always=True))
register(name="sigmoid", build=unary("sigmoid"))
register(name="softplus", build=unary("softplus"))
register(name="silu", build=unary("silu"))
register(name="gelu", build=unary("gelu"))
