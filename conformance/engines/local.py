"""The per-node check: one op of the table, run by the engine (forward, the engine's VJP,
and its JVP where it has forward mode), against the exact spec on the same inputs.

Invariants:
- Inputs are the engine's own float values (bit for bit); the exact value is the spec's
  forward / VJP / JVP of that op evaluated in `HP` (256-bit MPFR, every rounding far below
  the dtype's) on those inputs lifted exactly.
- Error of one element, in ulps of the engine's dtype: |got - exact| / ulp(max(|exact|, S))
  with S from the op's `Budget.scale` (see `budgets`). Ops with the `ball` scale also accept
  an element inside its ball: what a direct evaluation of the spec's op sequence in the
  dtype can give (`conformance.bounds.balls`, with the engine's transcendental budgets; a
  wild ball — a possible overflow — accepts anything, and so does a ball that cannot be
  computed, more branch paths than `all_branches` follows: such elements are counted
  `unconstrained`, not judged). NaN vs NaN and equal infinities are 0; a finite/NaN or
  finite/inf disagreement is infinite, except that an engine's ±inf is correct where the
  exact value rounds to that infinity.
- Three outcomes per element: within budget (accuracy, counted in the max ulp); beyond
  budget but explained by a named convention whose condition the inputs hit (reported with
  spec and engine values side by side, excluded from the max ulp; `flush_subnormals`, for
  every op, is tried last, and only for an engine whose `flush_probe` shows it flushing in
  that dtype: see `conventions`); otherwise *wrong* — unless a direct evaluation of the
  spec's own rule in the dtype may overflow at that element (its ball is wild, e.g. div's
  denominator cotangent -(g*((a/b)/b)) at a subnormal b): then the element is counted
  `unconstrained`, as for the `ball` ops, not judged. (A ball that cannot be computed leaves
  such an element wrong.)
- An op missing from `engine.ops` is not covered; an engine raising on a valid input is
  a `refused` result (reported with the message, never a pass).
- The engine gets the op as a `base.OpCall` (its key names op, callable, attributes and
  the integer environment `env`, which the spec's reference reads too: `select` with
  `env_slot`).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import gmpy2

from spec.errors import TorchLeanError
from spec.graph import Graph, Node
from spec.inline import inline
from spec.ops import get_op
from spec.tensor import Tensor, TensorPack

from ..bounds.balls import BallDomain, all_branches, contains_any
from ..bounds.core import HP, TRANSCENDENTAL, exact_q, fmt, ulp
from .base import Engine, OpCall, from_numpy, ieee_domain, to_numpy, uses_env
from .budgets import budget_for
from .conventions import SIGNED_ZERO, SUBNORMAL_FLUSH, conventions_for
from .propagate import abs_backprop

__all__ = [
    "NodeResult",
    "check_node",
    "elem_error",
    "flush_probe",
    "lift",
    "literal_attrs",
    "safe_float",
]


def lift(t: Tensor) -> Tensor:
    """A tensor of an IEEE domain lifted exactly into HP (keeps -0, inf, NaN)."""
    return t.map(lambda v: gmpy2.mpfr(v, HP.precision))


@dataclass
class NodeResult:
    op: str
    covered: bool = True
    refused: str | None = None
    max_ulp: dict[str, float] = field(default_factory=dict)  # direction -> max ulp
    conventions: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> example
    wrong: str | None = None
    jvp_refused: str | None = None
    output: Tensor | None = None  # the engine's forward value (dtype domain)
    unconstrained: int = 0  # `ball` elements where a direct evaluation may overflow


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


def abs_scale(op: str, xs: list[Tensor], g: Tensor, attrs: dict[str, Any]) -> list[Tensor]:
    """Per argument, |g| propagated back through the op's inlined primitive body with every
    node's contributions made absolute before they are summed (the magnitude of the terms
    the engine's backward sums; see `whole`)."""
    one = Graph([x.shape for x in xs], [Node(op, tuple(range(len(xs))), attrs)])
    gi, vmap = inline(one)
    seed = [Tensor.zeros(HP, s) for s in gi.shapes]
    seed[vmap[-1]] = g.map(abs)
    return abs_backprop(gi, xs, TensorPack(gi.shapes, tuple(seed)))


def _mag(t: Tensor) -> Fraction:
    m = Fraction(0)
    for v in t.data:
        q = exact_q(v)
        if q is not None:
            m = max(m, abs(q))
    return m


def elem_error(dtype: str, got: Any, want: Any, scale: Fraction) -> float:
    """The error of one element in ulps of `dtype` (see the module docstring)."""
    f = fmt(ieee_domain(dtype))
    if gmpy2.is_nan(got) or gmpy2.is_nan(want):
        return 0.0 if gmpy2.is_nan(got) and gmpy2.is_nan(want) else float("inf")
    gq, wq = exact_q(got), exact_q(want)
    if wq is None:
        return 0.0 if got == want else float("inf")
    if gq is None:
        return 0.0 if abs(wq) >= f.threshold and (wq > 0) == (got > 0) else float("inf")
    err = abs(gq - wq)
    if err == 0:
        return 0.0
    return safe_float(err / ulp(f, max(abs(wq), scale)))


def safe_float(q: Fraction) -> float:
    """A rational as a float, +inf when it is beyond binary64's range."""
    try:
        return float(q)
    except OverflowError:
        return float("inf")


def _scale(
    op: str,
    mode: str,
    direction: str,
    xs: list[Tensor],
    g: Tensor | None,
    attrs: dict[str, Any],
    k: int,
) -> Fraction:
    if mode == "rel":
        return Fraction(0)
    if mode == "ball":  # the abs scale; the ball is checked beside it (`_compare`)
        mode = "abs"
    gm = _mag(g) if g is not None else Fraction(0)
    if mode == "cotangent":
        return gm if direction != "forward" else Fraction(0)
    d = get_op(op)
    if mode == "norm" and direction == "vjp":
        assert g is not None
        # the gain of the normalised value x_hat = (x - mean)/sqrt(var + eps): the op's
        # |.|-propagated gain with gamma = 1 (x_hat's error reaches gamma's cotangent too)
        unit = [xs[0], *(Tensor(x.shape, (gmpy2.mpfr(1),) * len(x.data)) for x in xs[1:])]
        y = d.forward(HP, unit, attrs, ())
        ones = Tensor(y.shape, (gmpy2.mpfr(1),) * len(y.data))
        gain = max(_mag(t) for t in abs_scale(op, unit, ones, attrs))
        extra = gm * gain * max([_mag(x) for x in xs] + [Fraction(1)])
        return max(extra, _scale(op, "abs", direction, xs, g, attrs, k))
    axs = [x.map(abs) for x in xs]
    try:
        if direction == "forward":
            return _mag(d.forward(HP, axs, attrs, ()))
        if direction == "vjp":
            assert g is not None
            return max(
                gm,
                _mag(d.vjp(HP, axs, g.map(abs), attrs, ())[k]),
                _mag(abs_scale(op, xs, g, attrs)[k]),
            )
        y = d.forward(HP, xs, attrs, ())
        m = abs_scale(op, xs, Tensor(y.shape, (gmpy2.mpfr(1),) * len(y.data)), attrs)
        return max(gm, gm * max([_mag(t) for t in m] + [Fraction(0)]))
    except TorchLeanError:
        return gm


def _tiny(dtype: str) -> Fraction:
    """The dtype's smallest normal magnitude, 2**(1 - bias)."""
    return Fraction(2) ** (1 - ieee_domain(dtype).bias)


def _daz(t: Tensor, tiny: Fraction) -> Tensor | None:
    """t with every subnormal read as a zero of its sign; None when t has none."""

    def z(v: Any) -> Any:
        q = exact_q(v)
        return gmpy2.copy_sign(gmpy2.mpfr(0), v) if q is not None and 0 < abs(q) < tiny else v

    out = t.map(z)
    return None if all(a is b for a, b in zip(out.data, t.data, strict=True)) else out


@dataclass
class _Flushed:
    """The op's inputs (and cotangent/tangent) with subnormals read as zeros, and the exact
    result on them (None where the spec refuses them)."""

    xs: list[Tensor]
    g: Tensor | None
    value: Tensor | None


def _flush_rule(
    dtype: str,
    rule: Callable[[list[Tensor], list[Tensor]], Tensor],
    xs: list[Tensor],
    extra: list[Tensor],
    conv_g: Tensor | None,
) -> Callable[[], _Flushed | None]:
    """Lazily, `rule(xs, extra)` with every subnormal read as a zero of its sign; `conv_g`
    (the cotangent or tangent the op's conventions read) flushed alike. None when nothing
    is subnormal."""
    memo: list[_Flushed | None] = []

    def run() -> _Flushed | None:
        if not memo:
            tiny = _tiny(dtype)
            ts = [*xs, *extra, *([conv_g] if conv_g is not None else [])]
            fl = [_daz(t, tiny) for t in ts]
            out = None
            if any(f is not None for f in fl):
                ft = [f if f is not None else t for f, t in zip(fl, ts, strict=True)]
                fx, fe = ft[: len(xs)], ft[len(xs) : len(xs) + len(extra)]
                try:
                    value: Tensor | None = rule(fx, fe)
                except TorchLeanError:
                    value = None
                out = _Flushed(fx, ft[-1] if conv_g is not None else None, value)
            memo.append(out)
        return memo[0]

    return run


def flush_probe(engine: Engine, dtype: str) -> tuple[bool, list[float], list[float]]:
    """(does this engine flush subnormals in `dtype`, its values, the spec's) at the probe:
    the engine's `mul` forward of (smallest subnormal) x 1 (DAZ gives 0) and (smallest
    normal) x 1/2 (FTZ gives 0) — both exact products subnormal — or, without `mul`, `add`
    of (smallest subnormal) + 1 and (smallest normal) - (smallest subnormal) (FTZ gives 0).
    Kept on the engine instance (`flush_probes`, per dtype); an engine with neither op, or
    refusing, does not flush (empty values)."""
    probes = vars(engine).setdefault("flush_probes", {})
    hit = probes.get(dtype)
    if hit is None:
        D = ieee_domain(dtype)
        sub, tiny = D.from_bits(1), D.from_rational(_tiny(dtype))
        op = "mul" if "mul" in engine.ops else "add" if "add" in engine.ops else None
        got: list[float] = []
        want: list[float] = []
        if op is not None:
            x = Tensor((2,), (sub, tiny))
            y = Tensor((2,), (D.one(), D.from_float(0.5) if op == "mul" else D.neg(sub)))
            want = [float(v) for v in get_op(op).forward(D, [x, y], {}, ()).data]
            try:
                arrs = [engine.asarray(to_numpy(t, dtype), dtype) for t in (x, y)]
                out, _ = engine.vjp(OpCall(op, engine.ops[op], {}), arrs, arrs[0])
                got = [float(v) for v in from_numpy(engine.to_numpy(out, dtype), dtype).data]
            except Exception:
                got = []
        hit = probes[dtype] = (any(v == 0 for v in got), got, want)
    return hit


def _flushed(
    engine: Engine,
    dtype: str,
    gv: Any,
    wv: Any,
    i: int,
    k: int,
    flush: Callable[[], _Flushed | None] | None,
    convs: Sequence[Any],
    attrs: dict[str, Any],
    S: Fraction,
    allowed: float,
) -> bool:
    """Does `flush_subnormals` explain the engine's gv (exact wv) at element i of result k:
    only for an engine the probe shows flushing in this dtype (`flush_probe`), FTZ of the
    result, or the exact op — or one of its conventions — on the inputs with their
    subnormals read as zeros (DAZ, which can make the op singular: 0/0, 1/sqrt(0))?"""
    if not flush_probe(engine, dtype)[0]:
        return False
    tiny = _tiny(dtype)
    wq = exact_q(wv)
    if gv == 0 and wq is not None and 0 < abs(wq) < tiny:
        return True  # FTZ: a subnormal result returned as zero
    fl = flush() if flush is not None else None
    if fl is None:
        return False
    cands = [fl.value.data[i]] if fl.value is not None else []
    for c in convs:
        alt = c.alt(fl.xs, fl.g, attrs)
        if k < len(alt) and alt[k].data[i] is not None:
            cands.append(alt[k].data[i])
    for av in cands:
        aq = exact_q(av)
        if gv == 0 and aq is not None and abs(aq) < tiny:
            return True  # DAZ, then FTZ of the result
        if elem_error(dtype, gv, av, S) <= allowed:
            return True
    return False


def _compare(
    engine: Engine,
    dtype: str,
    op: str,
    direction: str,
    k: int,
    got: Tensor,
    want: Tensor,
    xs: list[Tensor],
    g: Tensor | None,
    attrs: dict[str, Any],
    res: NodeResult,
    balls: Callable[[], list[Tensor] | None] | None = None,
    flush: Callable[[], _Flushed | None] | None = None,
) -> None:
    if got.shape != want.shape:
        res.wrong = f"{op} {direction}: shape {got.shape}, spec {want.shape}"
        return
    b = budget_for(engine.name, dtype, op, direction)
    n = max((len(x.data) for x in xs), default=1)
    allowed = b.allowed(n)
    S = _scale(op, b.scale, direction, xs, g, attrs, k)
    convs = conventions_for(op, direction)
    alts = [(c, c.alt(xs, g, attrs)) for c in convs]
    worst = res.max_ulp.get(direction, 0.0)
    memo: list[list[Tensor] | None] = []

    def ball_hit(i: int, gv: Any) -> tuple[bool, bool | None]:
        """(could the ball be computed, does it hold gv — None for a wild ball) at element
        i; the ball (every branch path) is computed once, at the first element needing it."""
        assert balls is not None
        if not memo:
            memo.append(balls())
        if memo[0] is None:
            return False, False
        BD = ball_domain_for(engine.name, dtype)
        return True, contains_any(BD, [t.data[i] for t in memo[0]], gv)[0]

    def overflows(ok: bool | None, e: float) -> bool:
        # a possible (wild) or certain (holds the engine's infinite error) overflow of a
        # direct evaluation in the dtype: the engine's value is no accuracy figure
        return ok is None or (ok and e == float("inf"))

    def overflows_here(i: int, gv: Any, e: float) -> bool:
        computed, ok = ball_hit(i, gv)
        return computed and overflows(ok, e)

    for i, (gv, wv) in enumerate(zip(got.data, want.data, strict=True)):
        e = elem_error(dtype, gv, wv, S)
        inside = e <= allowed
        if not inside and balls is not None and b.scale == "ball":
            computed, ok = ball_hit(i, gv)
            if not computed or overflows(ok, e):
                # not judged: no ball (more paths than `all_branches` follows), or overflow
                res.unconstrained += 1
                continue
            inside = bool(ok)
        if inside:
            if gv == 0 and wv == 0 and gmpy2.is_signed(gv) != gmpy2.is_signed(wv):
                res.conventions.setdefault(
                    SIGNED_ZERO.name, _example(op, direction, k, i, wv, gv, xs, attrs)
                )
            worst = max(worst, e)
            continue
        for c, alt in alts:
            av = alt[k].data[i] if k < len(alt) else None
            if av is not None and elem_error(dtype, gv, av, S) <= allowed:
                res.conventions.setdefault(c.name, _example(op, direction, k, i, wv, gv, xs, attrs))
                break
        else:
            if _flushed(engine, dtype, gv, wv, i, k, flush, convs, attrs, S, allowed):
                res.conventions.setdefault(
                    SUBNORMAL_FLUSH.name, _example(op, direction, k, i, wv, gv, xs, attrs)
                )
            elif balls is not None and b.scale != "ball" and overflows_here(i, gv, e):
                res.unconstrained += 1  # the spec's own formula may overflow here too
            elif res.wrong is None:
                res.wrong = (
                    f"{op} {direction}"
                    + (f" (argument {k})" if direction == "vjp" else "")
                    + f" element {i}: engine {float(gv)!r}, exact {float(wv)!r}, error "
                    f"{e:.4g} ulp > budget {allowed:.4g} ulp"
                )
    res.max_ulp[direction] = worst


def _example(
    op: str,
    direction: str,
    k: int,
    i: int,
    spec_v: Any,
    eng_v: Any,
    xs: list[Tensor],
    attrs: dict[str, Any],
) -> dict[str, Any]:
    return {
        "op": op,
        "direction": direction,
        "argument": k,
        "element": i,
        "inputs": [[float(v) for v in x.data] for x in xs],
        "spec": float(spec_v),
        "engine": float(eng_v),
    }


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


_BALLS: dict[tuple[str, str], BallDomain] = {}


def ball_domain_for(engine: str, dtype: str) -> BallDomain:
    """The ball domain of a direct evaluation in `dtype` with this engine's transcendental
    budgets (its forward ulps of exp, log, tanh, sin, cos)."""
    hit = _BALLS.get((engine, dtype))
    if hit is None:
        K = {fn: budget_for(engine, dtype, fn, "forward").ulps for fn in TRANSCENDENTAL}
        hit = _BALLS[engine, dtype] = BallDomain(dtype, ieee_domain(dtype), K)
    return hit


def _ball_rule(
    engine: Engine, dtype: str, rule: Callable[[BallDomain, Any], Any], k: int = 0
) -> Callable[[], list[Tensor] | None]:
    """Lazily, output k of `rule(BD, exact_ball)` over the engine's ball domain on every
    path of `balls.all_branches` (None when there are too many, or the rule refuses)."""

    def run() -> list[Tensor] | None:
        BD = ball_domain_for(engine.name, dtype)
        try:
            paths = all_branches(lambda B: rule(B, B.exact_ball), BD)
        except TorchLeanError:
            return None
        if paths is None:
            return None
        return [out[k] if isinstance(out, list) else out for out in paths]

    return run


def _lift_ball(t: Tensor, exact: Callable[[Any], Any]) -> Tensor:
    return Tensor(t.shape, tuple(exact(v) for v in t.data))


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
    D = ieee_domain(dtype)
    hx = [lift(x) for x in xs]
    attrs = dtype_attrs(D, op, attrs)
    fn = OpCall(op, fn0, attrs, env)  # the engine gets the attributes the dtype holds
    try:
        want_y = d.forward(HP, hx, attrs, env)
        want_ct = d.vjp(HP, hx, lift(g), attrs, env)
    except TorchLeanError:
        res.covered = False  # outside the spec's domain (e.g. log of a non-positive)
        return res
    lit = literal_attrs(attrs, env)  # the same op without the environment, for the scales
    try:
        arrs = [engine.asarray(to_numpy(x, dtype), dtype) for x in xs]
        out, cts = engine.vjp(fn, arrs, engine.asarray(to_numpy(g, dtype), dtype))
        got_y = from_numpy(engine.to_numpy(out, dtype), dtype)
        got_ct = [from_numpy(engine.to_numpy(c, dtype), dtype) for c in cts]
    except Exception as e:  # the engine's refusal, reported with its message
        res.refused = f"{type(e).__name__}: {str(e)[:200]}"
        return res
    res.output = got_y
    hg = lift(g)

    def bx(exact: Any) -> list[Tensor]:
        return [_lift_ball(x, exact) for x in hx]

    fwd = _ball_rule(engine, dtype, lambda BD, ex: d.forward(BD, bx(ex), attrs, env))
    ffl = _flush_rule(dtype, lambda fx, _: d.forward(HP, fx, attrs, env), hx, [], None)
    _compare(engine, dtype, op, "forward", 0, lift(got_y), want_y, hx, None, lit, res, fwd, ffl)
    for k, (gc, wc) in enumerate(zip(got_ct, want_ct, strict=True)):
        bwd = _ball_rule(
            engine, dtype, lambda BD, ex: d.vjp(BD, bx(ex), _lift_ball(hg, ex), attrs, env), k
        )
        bfl = _flush_rule(
            dtype, lambda fx, fg, k=k: d.vjp(HP, fx, fg[0], attrs, env)[k], hx, [hg], hg
        )
        _compare(engine, dtype, op, "vjp", k, lift(gc), wc, hx, hg, lit, res, bwd, bfl)
    if engine.has_jvp and ts is not None:
        try:
            want_t = d.jvp(HP, hx, [lift(t) for t in ts], attrs, env)
            tarrs = [engine.asarray(to_numpy(t, dtype), dtype) for t in ts]
            _, tout = engine.jvp(fn, arrs, tarrs)
            got_t = from_numpy(engine.to_numpy(tout, dtype), dtype)
        except Exception as e:
            res.jvp_refused = f"{type(e).__name__}: {str(e)[:120]}"
        else:
            # the tangent for the conventions' rules (unary ops) and the scale (its magnitude)
            ht = (
                lift(ts[0])
                if len(ts) == 1
                else lift(
                    Tensor.of((sum(len(t.data) for t in ts),), [v for t in ts for v in t.data])
                )
            )
            tan = _ball_rule(
                engine,
                dtype,
                lambda BD, ex: d.jvp(BD, bx(ex), [_lift_ball(lift(t), ex) for t in ts], attrs, env),
            )
            lts = [lift(t) for t in ts]
            tfl = _flush_rule(dtype, lambda fx, ft: d.jvp(HP, fx, ft, attrs, env), hx, lts, ht)
            _compare(engine, dtype, op, "jvp", 0, lift(got_t), want_t, hx, ht, lit, res, tan, tfl)
    return res
