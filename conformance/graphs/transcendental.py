"""Graph builders of the transcendental family.

Invariants: every op takes any existing value, except `log`, whose argument is always
guarded as `clamp(v, lo, hi)` with lo > 0 (its value precondition holds for every non-NaN
value; see invariant 6 of `conformance.graphs`). `safe_log` is total and needs no guard;
nor does `log1p` (x < -1 gives NaN, x = -1 gives -inf: IEEE values, no precondition).
elu draws alpha from small rationals (0 and negative included), celu from positive ones
(alpha != 0); `gelu` keeps its builder (the default tanh form), so existing seeds draw the
same graphs; its erf form is covered through `erf` and the op's samples.
"""

from __future__ import annotations

from fractions import Fraction

from hypothesis import strategies as st

from .core import POS_RAT, RAT, Builder, Ctx, guarded_unary, register, unary

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


def _alpha(op: str, alphas: st.SearchStrategy) -> Builder:
    def build(c: Ctx) -> bool:
        x = c.pick()
        if x is None or not c.room(1):
            return False
        c.add(op, x, alpha=c.draw(st.just(Fraction(1)) | alphas))
        return True

    return build


register(name="erf", build=unary("erf"))
register(name="log1p", build=unary("log1p"))
register(name="expm1", build=unary("expm1"))
register(name="elu", build=_alpha("elu", RAT))
register(name="celu", build=_alpha("celu", POS_RAT))
register(name="selu", build=unary("selu"))
register(name="mish", build=unary("mish"))
