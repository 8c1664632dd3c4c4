"""`flush_subnormals`: the probe that shows whether an engine flushes subnormals in a
dtype, and the test whether flushing explains one element.

Invariants:
- `flush_probe` runs the engine's `mul` forward of (smallest subnormal) x 1 (DAZ gives 0)
  and (smallest normal) x 1/2 (FTZ gives 0) — both exact products subnormal — or, without
  `mul`, `add` of (smallest subnormal) + 1 and (smallest normal) - (smallest subnormal).
  The result is kept on the engine instance (`flush_probes`, per dtype; no module-level
  state); an engine with neither op, or refusing, does not flush.
- `explains` accepts an element only for an engine whose probe shows it flushing in that
  dtype: FTZ (the engine's ±0 where the exact value is below the smallest normal), or the
  exact op — or one of its conventions — on the inputs and cotangent/tangent with every
  subnormal read as a zero of its sign (DAZ; `FlushRule`, computed lazily once per
  direction), within the budget or flushed again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import gmpy2

from spec.errors import TorchLeanError
from spec.ops import get_op
from spec.tensor import Tensor

from ..bounds.core import exact_q
from .base import Engine, OpCall, from_numpy, ieee_domain, to_numpy
from .scale import elem_error, tiny

__all__ = ["FlushRule", "Flushed", "explains", "flush_probe"]


def _daz(t: Tensor, small: Fraction) -> Tensor | None:
    """t with every subnormal read as a zero of its sign; None when t has none."""

    def z(v: Any) -> Any:
        q = exact_q(v)
        return gmpy2.copy_sign(gmpy2.mpfr(0), v) if q is not None and 0 < abs(q) < small else v

    out = t.map(z)
    return None if all(a is b for a, b in zip(out.data, t.data, strict=True)) else out


@dataclass
class Flushed:
    """The op's inputs (and cotangent/tangent) with subnormals read as zeros, and the exact
    result on them (None where the spec refuses them)."""

    xs: list[Tensor]
    g: Tensor | None
    value: Tensor | None


class FlushRule:
    """Lazily, `rule(xs, extra)` with every subnormal read as a zero of its sign; `conv_g`
    (the cotangent or tangent the op's conventions read) flushed alike. `get()` is None
    when nothing is subnormal."""

    def __init__(
        self,
        dtype: str,
        rule: Callable[[list[Tensor], list[Tensor]], Tensor],
        xs: list[Tensor],
        extra: list[Tensor],
        conv_g: Tensor | None,
    ) -> None:
        self.dtype, self.rule, self.xs, self.extra, self.conv_g = dtype, rule, xs, extra, conv_g
        self.memo: list[Flushed | None] = []

    def get(self) -> Flushed | None:
        if not self.memo:
            self.memo.append(self._compute())
        return self.memo[0]

    def _compute(self) -> Flushed | None:
        small, g = tiny(self.dtype), self.conv_g
        ts = [*self.xs, *self.extra, *([g] if g is not None else [])]
        fl = [_daz(t, small) for t in ts]
        if all(f is None for f in fl):
            return None
        ft = [f if f is not None else t for f, t in zip(fl, ts, strict=True)]
        n, m = len(self.xs), len(self.extra)
        try:
            value: Tensor | None = self.rule(ft[:n], ft[n : n + m])
        except TorchLeanError:
            value = None
        return Flushed(ft[:n], ft[-1] if g is not None else None, value)


def flush_probe(engine: Engine, dtype: str) -> tuple[bool, list[float], list[float]]:
    """(does this engine flush subnormals in `dtype`, its values, the spec's) at the probe
    (see the module docstring)."""
    probes = vars(engine).setdefault("flush_probes", {})
    hit = probes.get(dtype)
    if hit is None:
        D = ieee_domain(dtype)
        sub, small = D.from_bits(1), D.from_rational(tiny(dtype))
        op = "mul" if "mul" in engine.ops else "add" if "add" in engine.ops else None
        got: list[float] = []
        want: list[float] = []
        if op is not None:
            x = Tensor((2,), (sub, small))
            y = Tensor((2,), (D.one(), D.from_float(0.5) if op == "mul" else D.neg(sub)))
            want = [float(v) for v in get_op(op).forward(D, [x, y], {}, ()).data]
            try:
                arrs = [engine.asarray(to_numpy(t, dtype), dtype) for t in (x, y)]
                call = OpCall(op, engine.ops[op], {})
                if engine.has_vjp:
                    out, _ = engine.vjp(call, arrs, arrs[0])
                else:
                    out = engine.forward(call, arrs)
                got = [float(v) for v in from_numpy(engine.to_numpy(out, dtype), dtype).data]
            except Exception:
                got = []
        hit = probes[dtype] = (any(v == 0 for v in got), got, want)
    return hit


def explains(
    engine: Engine,
    dtype: str,
    gv: Any,
    wv: Any,
    at: tuple[int, int],
    flush: FlushRule | None,
    alternatives: Sequence[Any],
    attrs: dict[str, Any],
    scale: Fraction,
    allowed: float,
) -> bool:
    """Does `flush_subnormals` explain the engine's gv (exact wv) at `at` = (result k,
    element i)? `alternatives` are the op's conventions for this direction."""
    if not flush_probe(engine, dtype)[0]:
        return False
    k, i = at
    small = tiny(dtype)
    wq = exact_q(wv)
    if gv == 0 and wq is not None and 0 < abs(wq) < small:
        return True  # FTZ: a subnormal result returned as zero
    fl = flush.get() if flush is not None else None
    if fl is None:
        return False
    cands = [fl.value.data[i]] if fl.value is not None else []
    for c in alternatives:
        alt = c.alt(fl.xs, fl.g, attrs)
        if k < len(alt) and alt[k].data[i] is not None:
            cands.append(alt[k].data[i])
    for av in cands:
        aq = exact_q(av)
        if gv == 0 and aq is not None and abs(aq) < small:
            return True  # DAZ, then FTZ of the result
        if elem_error(dtype, gv, av, scale) <= allowed:
            return True
    return False
