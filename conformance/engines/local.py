"""The per-node check: one op of the table, run by the engine (forward, the engine's VJP,
and its JVP where it has forward mode), against the exact spec on the same inputs.

Invariants:
- One check is one record, `NodeCheck` (engine, dtype, op, the attributes the dtype holds,
  the integer environment, the inputs, cotangent and tangents lifted exactly into `HP`);
  each compared result is one `Judge` (the check, direction, result index, the budget,
  its scale S, the conventions that apply, the lazy ball and flush rules). A check flows
  down: `check_node` -> `NodeCheck.run` -> `Judge.compare` -> `Judge.verdict` per element,
  reading `scale` (arithmetic), `conventions` and `budgets` (data), `ballcheck` and
  `flush` (the two lazily computed alternatives); none of those calls back here.
- Inputs are the engine's own float values (bit for bit); the exact value is the spec's
  forward / VJP / JVP of that op evaluated in `HP` (256-bit MPFR, every rounding far below
  the dtype's) on those inputs lifted exactly.
- Error of one element, in ulps of the engine's dtype: `scale.elem_error` with S from the
  op's `Budget.scale`. Ops with the `ball` scale also accept an element inside its ball
  (`ballcheck`; a wild ball — a possible overflow — or one that cannot be computed leaves
  the element `unconstrained`, not judged).
- Verdict of one element beyond budget, in this order: a named convention of the op whose
  condition the inputs hit and whose alternative value the engine matches;
  `nan_propagation` (spec and engine differ only in being NaN, with a NaN or ±inf among the
  element's inputs: `conventions.NONFINITE`); `flush_subnormals` (only for an engine whose
  `flush.flush_probe` shows it flushing in that dtype); `unconstrained` where a direct
  evaluation of the spec's own rule in the dtype may overflow at that element (its ball is
  wild, e.g. div's denominator cotangent -(g*((a/b)/b)) at a subnormal b); otherwise
  *wrong*. Exact zeros of different sign within budget are `signed_zero`.
- An op missing from `engine.ops` is not covered; an engine raising on a valid input is
  a `refused` result (reported with the message, never a pass).
- The engine gets the op as a `base.OpCall` (its key names op, callable, attributes and
  the integer environment `env`, which the spec's reference reads too: `select` with
  `env_slot`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2

from spec.errors import TorchLeanError
from spec.ops import get_op
from spec.tensor import Tensor

from ..bounds.core import HP
from .ballcheck import BallRule, lift_ball
from .base import Engine, OpCall, from_numpy, ieee_domain, refusal, to_numpy, uses_env
from .budgets import Budget, budget_for
from .conventions import (
    DTYPE_KEY,
    NAN_PROPAGATION,
    SIGNED_ZERO,
    SUBNORMAL_FLUSH,
    conventions_for,
)
from .flush import FlushRule, explains, flush_probe
from .scale import elem_error, lift, safe_float, scale_for

__all__ = [
    "Judge",
    "NodeCheck",
    "NodeResult",
    "check_node",
    "elem_error",
    "flush_probe",
    "lift",
    "literal_attrs",
    "safe_float",
]

_LANE_FAMILIES = ("elementwise", "transcendental")


@dataclass
class NodeResult:
    op: str
    covered: bool = True
    refused: str | None = None
    max_ulp: dict[str, float] = field(default_factory=dict)  # direction -> max ulp
    max_ratio: dict[str, float] = field(default_factory=dict)  # direction -> error / budget
    conventions: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> example
    wrong: str | None = None
    jvp_refused: str | None = None
    output: Tensor | None = None  # the engine's forward value (dtype domain)
    unconstrained: int = 0  # elements where a direct evaluation may overflow


def _budget_ratio(e: float, allowed: float) -> float:
    """An element's error over its budget (0 for no error, +inf for an error where the
    budget is 0)."""
    if e == 0:
        return 0.0
    return e / allowed if allowed > 0 else float("inf")


def dtype_attrs(D: Any, op: str, attrs: dict[str, Any]) -> dict[str, Any]:
    """The attributes with every rational attribute (scale's c, clamp's bounds) rounded once
    into the dtype, as the spec casts them: the exact reference is the op on the values the
    dtype's program holds."""
    out = dict(attrs)
    for a in get_op(op).attrs:
        v = out.get(a.name)
        if v is None:
            continue
        if a.kind == "rational":
            out[a.name] = Fraction(D.to_rational(D.from_rational(Fraction(v))))
        elif a.kind == "rationals":
            out[a.name] = tuple(Fraction(D.to_rational(D.from_rational(Fraction(q)))) for q in v)
    return out


def literal_attrs(attrs: dict[str, Any], env: Sequence[int]) -> dict[str, Any]:
    """`select`'s attributes with env[env_slot] as its literal `index` (the same op on the
    empty environment); other attributes unchanged."""
    if not uses_env(attrs):
        return attrs
    return {**attrs, "index": int(env[attrs["env_slot"]]), "env_slot": None}


def _nonfinite(v: Any) -> bool:
    return not gmpy2.is_finite(v)


@dataclass
class NodeCheck:
    """One node check (see the module docstring): everything the comparisons read."""

    engine: Engine
    dtype: str
    op: str
    attrs: dict[str, Any]  # as the dtype holds them (`dtype_attrs`)
    env: tuple[int, ...]
    xs: list[Tensor]  # HP
    g: Tensor  # HP
    ts: list[Tensor] | None  # HP, None without forward mode
    res: NodeResult

    @property
    def lit(self) -> dict[str, Any]:
        """The attributes without the environment, for the scales and conventions."""
        return literal_attrs(self.attrs, self.env)

    def judge(
        self,
        direction: str,
        k: int,
        g: Tensor | None,
        ball: BallRule | None,
        flush: FlushRule | None,
    ) -> Judge:
        budget = budget_for(self.engine.name, self.dtype, self.op, direction)
        lit = self.lit
        return Judge(
            self,
            direction,
            k,
            g,
            budget,
            scale_for(self.op, budget.scale, direction, self.xs, g, lit, k),
            ball,
            flush,
        )

    def lanes(self, n: int) -> bool:
        """Do the op's arguments and result of n elements share one lane per element?"""
        d = get_op(self.op)
        lane_op = d.family in _LANE_FAMILIES or "elementwise" in d.tags
        return lane_op and all(len(x.data) == n for x in self.xs)


@dataclass
class Judge:
    """The comparison of one result (direction, argument k) of a `NodeCheck`."""

    check: NodeCheck
    direction: str
    k: int
    g: Tensor | None  # the cotangent (tangent for "jvp") the conventions and scale read
    budget: Budget
    S: Fraction
    ball: BallRule | None
    flush: FlushRule | None

    def __post_init__(self) -> None:
        c = self.check
        self.allowed = self.budget.allowed(max((len(x.data) for x in c.xs), default=1))
        self.convs = conventions_for(c.op, self.direction)
        lit = {**c.lit, DTYPE_KEY: c.dtype}  # alt rules that round as the engine does
        self.alts = [(cv, cv.alt(c.xs, self.g, lit)) for cv in self.convs]

    def compare(self, got: Tensor, want: Tensor) -> None:
        res = self.check.res
        if got.shape != want.shape:
            res.wrong = f"{self.check.op} {self.direction}: shape {got.shape}, spec {want.shape}"
            return
        worst = res.max_ulp.get(self.direction, 0.0)
        ratio = res.max_ratio.get(self.direction, 0.0)
        lanes = self.check.lanes(len(want.data)) and (
            self.g is None or len(self.g.data) == len(want.data)
        )
        for i, (gv, wv) in enumerate(zip(got.data, want.data, strict=True)):
            e = elem_error(self.check.dtype, gv, wv, self.S)
            kind = self.verdict(i, gv, wv, e, lanes)
            if kind in ("accuracy", "wrong"):
                ratio = max(ratio, _budget_ratio(e, self.allowed))
            if kind == "accuracy":
                worst = max(worst, e)
            elif kind == "unconstrained":
                res.unconstrained += 1
            elif kind == "wrong":
                if res.wrong is None:
                    res.wrong = self.message(i, gv, wv, e)
            else:
                res.conventions.setdefault(kind, self.example(i, wv, gv))
        res.max_ulp[self.direction] = worst
        res.max_ratio[self.direction] = ratio

    def verdict(self, i: int, gv: Any, wv: Any, e: float, lanes: bool) -> str:
        """'accuracy', 'unconstrained', 'wrong', or the name of the convention (see the
        module docstring); signed zeros within budget are recorded here."""
        inside = e <= self.allowed
        if not inside and self.ball is not None and self.budget.scale == "ball":
            computed, ok = self.ball.holds(i, gv)
            if not computed or _overflows(ok, e):
                return "unconstrained"  # no ball (too many paths), or a possible overflow
            inside = bool(ok)
        if inside:
            if gv == 0 and wv == 0 and gmpy2.is_signed(gv) != gmpy2.is_signed(wv):
                self.check.res.conventions.setdefault(SIGNED_ZERO.name, self.example(i, wv, gv))
            return "accuracy"
        return self.beyond(i, gv, wv, e, lanes)

    def beyond(self, i: int, gv: Any, wv: Any, e: float, lanes: bool) -> str:
        c, k = self.check, self.k
        for cv, alt in self.alts:
            av = alt[k].data[i] if k < len(alt) else None
            if av is not None and elem_error(c.dtype, gv, av, self.S) <= self.allowed:
                return cv.name
        if gmpy2.is_nan(gv) != gmpy2.is_nan(wv) and self.nonfinite_input(i, lanes):
            return NAN_PROPAGATION.name
        at = (k, i)
        lit = c.lit
        if explains(
            c.engine, c.dtype, gv, wv, at, self.flush, self.convs, lit, self.S, self.allowed
        ):
            return SUBNORMAL_FLUSH.name
        if self.ball is not None and self.budget.scale != "ball":
            computed, ok = self.ball.holds(i, gv)
            if computed and _overflows(ok, e):
                return "unconstrained"  # the spec's own formula may overflow here too
        return "wrong"

    def nonfinite_input(self, i: int, lanes: bool) -> bool:
        """A NaN or ±inf among element i's inputs and cotangent/tangent (its lane where the
        op has lanes, any element otherwise)."""
        srcs = [*self.check.xs, *([self.g] if self.g is not None else [])]
        if lanes:
            return any(_nonfinite(t.data[i]) for t in srcs)
        return any(_nonfinite(v) for t in srcs for v in t.data)

    def message(self, i: int, gv: Any, wv: Any, e: float) -> str:
        return (
            f"{self.check.op} {self.direction}"
            + (f" (argument {self.k})" if self.direction == "vjp" else "")
            + f" element {i}: engine {float(gv)!r}, exact {float(wv)!r}, error "
            f"{e:.4g} ulp > budget {self.allowed:.4g} ulp"
        )

    def example(self, i: int, spec_v: Any, eng_v: Any) -> dict[str, Any]:
        return {
            "op": self.check.op,
            "direction": self.direction,
            "argument": self.k,
            "element": i,
            "inputs": [[float(v) for v in x.data] for x in self.check.xs],
            "spec": float(spec_v),
            "engine": float(eng_v),
        }


def _overflows(ok: bool | None, e: float) -> bool:
    # a possible (wild) or certain (holds the engine's infinite error) overflow of a
    # direct evaluation in the dtype: the engine's value is no accuracy figure
    return ok is None or (ok and e == float("inf"))


def check_node(
    engine: Engine,
    dtype: str,
    op: str,
    attrs: dict[str, Any],
    xs: Sequence[Tensor],
    g: Tensor,
    ts: Sequence[Tensor] | None = None,
    env: Sequence[int] = (),
) -> NodeResult:
    """Check one op on the engine's inputs `xs` (dtype domain), cotangent `g`, integer
    environment `env` and, for an engine with forward mode, tangents `ts` (engines'
    floating-point warnings silenced: the check reports what they warn about)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _check_node(engine, dtype, op, attrs, xs, g, ts, tuple(env))


def _check_node(
    engine: Engine,
    dtype: str,
    op: str,
    attrs: dict[str, Any],
    xs: Sequence[Tensor],
    g: Tensor,
    ts: Sequence[Tensor] | None,
    env: tuple[int, ...],
) -> NodeResult:
    res = NodeResult(op)
    fn0 = engine.ops.get(op)
    if fn0 is None:
        res.covered = False
        return res
    d = get_op(op)
    hts = [lift(t) for t in ts] if engine.has_jvp and ts is not None else None
    c = NodeCheck(
        engine, dtype, op, dtype_attrs(ieee_domain(dtype), op, attrs), env,
        [lift(x) for x in xs], lift(g), hts, res,
    )  # fmt: skip
    try:
        want_y = d.forward(HP, c.xs, c.attrs, env)
        want_ct = d.vjp(HP, c.xs, c.g, c.attrs, env)
    except TorchLeanError:
        res.covered = False  # outside the spec's domain (e.g. log of a non-positive)
        return res
    fn = OpCall(op, fn0, c.attrs, env)  # the engine gets the attributes the dtype holds
    try:
        arrs = [engine.asarray(to_numpy(x, dtype), dtype) for x in xs]
        if engine.has_vjp:
            out, cts = engine.vjp(fn, arrs, engine.asarray(to_numpy(g, dtype), dtype))
        else:  # forward only: no cotangent is asked for, none is judged
            out, cts = engine.forward(fn, arrs), []
            want_ct = []
        got_y = from_numpy(engine.to_numpy(out, dtype), dtype)
        got_ct = [from_numpy(engine.to_numpy(ct, dtype), dtype) for ct in cts]
    except Exception as e:  # the engine's refusal, reported with its message
        res.refused = refusal(e, 200)
        return res
    res.output = got_y
    _forward_and_vjp(c, got_y, want_y, got_ct, want_ct)
    if c.ts is not None and ts is not None:
        _jvp(c, fn, arrs, ts)
    return res


def _forward_and_vjp(
    c: NodeCheck, got_y: Tensor, want_y: Tensor, got_ct: list[Tensor], want_ct: list[Tensor]
) -> None:
    d, a, env, dtype = get_op(c.op), c.attrs, c.env, c.dtype

    def bx(exact: Any) -> list[Tensor]:
        return [lift_ball(x, exact) for x in c.xs]

    fwd = BallRule(c.engine, dtype, lambda BD, ex: d.forward(BD, bx(ex), a, env))
    ffl = FlushRule(dtype, lambda fx, _: d.forward(HP, fx, a, env), c.xs, [], None)
    c.judge("forward", 0, None, fwd, ffl).compare(lift(got_y), want_y)
    for k, (gc, wc) in enumerate(zip(got_ct, want_ct, strict=True)):
        bwd = BallRule(
            c.engine, dtype, lambda BD, ex: d.vjp(BD, bx(ex), lift_ball(c.g, ex), a, env), k
        )
        bfl = FlushRule(
            dtype, lambda fx, fg, k=k: d.vjp(HP, fx, fg[0], a, env)[k], c.xs, [c.g], c.g
        )
        c.judge("vjp", k, c.g, bwd, bfl).compare(lift(gc), wc)


def _jvp(c: NodeCheck, fn: OpCall, arrs: list[Any], ts: Sequence[Tensor]) -> None:
    assert c.ts is not None
    d, a, env, dtype, engine = get_op(c.op), c.attrs, c.env, c.dtype, c.engine
    try:
        want_t = d.jvp(HP, c.xs, c.ts, a, env)
        tarrs = [engine.asarray(to_numpy(t, dtype), dtype) for t in ts]
        _, tout = engine.jvp(fn, arrs, tarrs)
        got_t = from_numpy(engine.to_numpy(tout, dtype), dtype)
    except Exception as e:
        c.res.jvp_refused = refusal(e, 120)
        return
    # the tangent for the conventions' rules (unary ops) and the scale (its magnitude)
    ht = (
        c.ts[0]
        if len(c.ts) == 1
        else Tensor.of((sum(len(t.data) for t in c.ts),), [v for t in c.ts for v in t.data])
    )
    tan = BallRule(
        engine,
        dtype,
        lambda BD, ex: d.jvp(
            BD, [lift_ball(x, ex) for x in c.xs], [lift_ball(t, ex) for t in c.ts or ()], a, env
        ),
    )
    tfl = FlushRule(dtype, lambda fx, ft: d.jvp(HP, fx, ft, a, env), c.xs, c.ts, ht)
    c.judge("jvp", 0, ht, tan, tfl).compare(lift(got_t), want_t)
