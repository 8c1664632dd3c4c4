"""A census of one op's forward on many random inputs: what fraction of elements an engine
gets beyond its budget (`python -m conformance.engines.census`).

Invariants:
- Inputs are `n` values drawn uniformly from [lo, hi) by NumPy's `default_rng(seed)` in
  binary64 and rounded once to the dtype (every argument of the op alike); the engine runs
  the op once on the whole tensor, by the same call a node check makes (`vjp`, whose
  forward value is measured — a compiling engine's compiled program; `forward` for a
  forward-only engine).
- Each element is measured exactly as the node check measures the forward
  (`scale.elem_error` against the spec's forward in 256-bit MPFR, scale S = 0, i.e. ulps of
  the exact value) and counted beyond budget when its error exceeds the op's forward
  budget (`budgets.budget_for`; 0.5 ulp for IEEE's correctly rounded ops). Only
  elementwise ops without attributes are accepted.
- The result names every count and the first few offending inputs with both values
  (bit patterns), so any line of it can be replayed by hand.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np

from spec.errors import TorchLeanError
from spec.ops import get_op

from ..bounds.core import HP
from . import load_engine
from .base import NP_DTYPE, UINT_OF, Engine, EngineUnavailable, OpCall, from_numpy, ieee_domain
from .budgets import budget_for
from .scale import elem_error, lift

__all__ = ["Census", "census", "main"]


@dataclass
class Census:
    engine: str
    op: str
    dtype: str
    n: int
    lo: float
    hi: float
    seed: int
    budget_ulp: float
    beyond: int = 0
    max_ulp: float = 0.0
    examples: list[dict[str, str]] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.beyond / self.n if self.n else 0.0


def census(
    engine: Engine, op: str, dtype: str, n: int, lo: float, hi: float, seed: int = 0
) -> Census:
    """Count the elements of `op`'s forward beyond budget on n uniform inputs (module
    docstring)."""
    d = get_op(op)
    if d.family not in ("elementwise", "transcendental") or d.attrs or d.arity not in (1, 2):
        raise TorchLeanError(f"census: {op!r} is not an elementwise op without attributes")
    if op not in engine.ops:
        raise EngineUnavailable(f"census: engine {engine.name!r} does not cover {op!r}")
    np_dt = NP_DTYPE[dtype]
    rng = np.random.default_rng(seed)
    xs = [rng.uniform(lo, hi, n).astype(np_dt) for _ in range(d.arity or 1)]
    arrs = [engine.asarray(x, dtype) for x in xs]
    call = OpCall(op, engine.ops[op], {})
    if engine.has_vjp:  # the forward value a node check sees (a compiled engine's program)
        ones = engine.asarray(np.ones(n, np_dt), dtype)
        y = engine.vjp(call, arrs, ones)[0]
    else:
        y = engine.forward(call, arrs)
    got = engine.to_numpy(y, dtype).reshape(-1)
    want = d.forward(HP, [lift(from_numpy(x, dtype)) for x in xs], {}, ())
    allowed = budget_for(engine.name, dtype, op, "forward").allowed(n)
    out = Census(engine.name, op, dtype, n, lo, hi, seed, allowed)
    gt = from_numpy(np.ascontiguousarray(got), dtype)
    D = ieee_domain(dtype)
    width = D.width // 4
    for i, (gv, wv) in enumerate(zip(lift(gt).data, want.data, strict=True)):
        e = elem_error(dtype, gv, wv, Fraction(0))
        out.max_ulp = max(out.max_ulp, e)
        if e > allowed:
            out.beyond += 1
            if len(out.examples) < 5:
                bits = [int(x.reshape(-1).view(UINT_OF[dtype])[i]) for x in xs]
                out.examples.append(
                    {
                        "inputs": " ".join(f"0x{b:0{width}x}" for b in bits),
                        "engine": f"0x{D.to_bits(gt.data[i]):0{width}x}",
                        "exact": repr(float(wv)),
                        "ulp": f"{e:.4g}",
                    }
                )
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m conformance.engines.census", description=__doc__)
    p.add_argument("--engine", required=True)
    p.add_argument("--op", required=True)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--lo", type=float, default=0.0)
    p.add_argument("--hi", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    try:
        if not 0 < a.n <= 10**7:
            raise TorchLeanError(f"--n: expected 1..10000000, got {a.n}")
        c = census(load_engine(a.engine), a.op, a.dtype, a.n, a.lo, a.hi, a.seed)
    except (TorchLeanError, KeyError) as e:
        print(f"python -m conformance.engines.census: {e}", file=sys.stderr)
        return 2
    print(json.dumps({**asdict(c), "rate": c.rate}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
