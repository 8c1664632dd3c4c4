"""The ball of one element: every value a direct evaluation of the spec's op sequence in the
dtype can give (`conformance.bounds.balls`), with this engine's transcendental budgets.

Invariants:
- `ball_domain` builds the `BallDomain` of an engine x dtype from the engine's forward
  budgets of exp, log, tanh, sin, cos (`budgets.budget_for`, so a user's `OVERRIDES`
  count); it is kept on the engine instance (`ball_domains`, per dtype), never in module
  state.
- `BallRule` runs one output of a rule over that domain on every branch path of
  `all_branches`, lazily, at the first element that needs it; `paths()` is None when
  there are too many paths or the rule refuses. `holds(i, v)` answers (could the ball be
  computed, does it hold v — None for a wild ball, i.e. a possible overflow).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spec.errors import TorchLeanError
from spec.tensor import Tensor

from ..bounds.balls import BallDomain, all_branches, contains_any
from ..bounds.core import TRANSCENDENTAL
from .base import Engine, ieee_domain
from .budgets import budget_for

__all__ = ["BallRule", "ball_domain", "lift_ball"]


def ball_domain(engine: Engine, dtype: str) -> BallDomain:
    """The ball domain of a direct evaluation in `dtype` with this engine's transcendental
    budgets (its forward ulps of exp, log, tanh, sin, cos)."""
    cache = vars(engine).setdefault("ball_domains", {})
    hit = cache.get(dtype)
    if hit is None:
        K = {fn: budget_for(engine.name, dtype, fn, "forward").ulps for fn in TRANSCENDENTAL}
        hit = cache[dtype] = BallDomain(dtype, ieee_domain(dtype), K)
    return hit


def lift_ball(t: Tensor, exact: Callable[[Any], Any]) -> Tensor:
    """t with every element made an exact ball."""
    return Tensor(t.shape, tuple(exact(v) for v in t.data))


class BallRule:
    """Lazily, output k of `rule(BD, exact_ball)` over the engine's ball domain on every
    path of `balls.all_branches` (see the module docstring)."""

    def __init__(
        self, engine: Engine, dtype: str, rule: Callable[[BallDomain, Any], Any], k: int = 0
    ) -> None:
        self.engine, self.dtype, self.rule, self.k = engine, dtype, rule, k
        self.memo: list[list[Tensor] | None] = []

    def paths(self) -> list[Tensor] | None:
        if not self.memo:
            self.memo.append(self._compute())
        return self.memo[0]

    def _compute(self) -> list[Tensor] | None:
        BD = ball_domain(self.engine, self.dtype)
        rule = self.rule
        try:
            paths = all_branches(lambda B: rule(B, B.exact_ball), BD)
        except TorchLeanError:
            return None
        if paths is None:
            return None
        return [out[self.k] if isinstance(out, list) else out for out in paths]

    def holds(self, i: int, v: Any) -> tuple[bool, bool | None]:
        """(could the ball be computed, does it hold v — None for a wild ball) at element i."""
        paths = self.paths()
        if paths is None:
            return False, False
        BD = ball_domain(self.engine, self.dtype)
        return True, contains_any(BD, [t.data[i] for t in paths], v)[0]
