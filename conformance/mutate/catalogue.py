"""The mutation catalogue: realistic single-point bugs in `runtime/` and `spec.vector`, as data.

Invariants:
- Each `Mutant` names one file, one exact source snippet that occurs exactly once in that
  file, and its replacement; applying it changes nothing else. `tests/test_mutate.py`
  checks that every snippet is found exactly once in the current tree.
- Ids are unique and stable (the published score in docs/MUTATION.md refers to them); a
  mutant whose snippet no longer exists is reported "not applicable" (an error), never a
  pass.
- `bug_class` names the class of bug the mutant is an instance of; the suite's generators
  and properties aim at the classes, not at these instances.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CATALOGUE", "Mutant", "by_id"]


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    snippet: str
    replacement: str
    description: str
    bug_class: str
    suite: tuple[str, ...] = ()  # flags of the suite run that covers the file (default: none)


_EW = "runtime/kernels/elementwise.py"
_TR = "runtime/kernels/transcendental.py"
_CTX = "runtime/engine/context.py"
_TAPE = "runtime/engine/tape.py"
_TABLE = "runtime/kernels/table.py"

CATALOGUE: tuple[Mutant, ...] = (
    # ---------------------------------------------------------------- VJP rules: signed zero
    Mutant(
        "div_vjp_plus_zero",
        _EW,
        "return c.div(g, b), -(g * q)",
        "return c.div(g, b), c.const(0) - (g * q)",
        "div's denominator cotangent as 0 - (g*q) instead of -(g*q) (+0 where spec has -0)",
        "signed zero in a VJP",
    ),
    Mutant(
        "sub_vjp_neg",
        _EW,
        "vjp_s=lambda c, a, b, g: (g, c.const(0) - g),",
        "vjp_s=lambda c, a, b, g: (g, -g),",
        "sub's second cotangent as -g instead of 0 - g (-0 where spec has +0)",
        "signed zero in a VJP",
    ),
    Mutant(
        "cos_vjp_plus_zero",
        _TR,
        'push=lambda c, x, y, t, a: -(t * c.unary("sin", x)),',
        'push=lambda c, x, y, t, a: c.const(0) - t * c.unary("sin", x),',
        "cos' cotangent as 0 - t*sin(x) instead of -(t*sin(x))",
        "signed zero in a VJP",
    ),
    # ---------------------------------------------------------------- VJP rules: ties / kinks
    Mutant(
        "maximum_tie_full",
        _EW,
        "ga = xp.where(a_wins, g, xp.where(b_wins, z, xp.where(tie, h, z)))",
        "ga = xp.where(a_wins, g, xp.where(b_wins, z, xp.where(tie, g, z)))",
        "maximum/minimum give the whole cotangent (not half) to the first operand on a tie",
        "tie rule",
    ),
    Mutant(
        "minimum_tie_second",
        "runtime/kernels/builders.py",
        "take_b = (a < b) if larger else (b < a)",
        "take_b = (a < b) if larger else (b <= a)",
        "minimum returns the second operand on a tie (differs for +0 vs -0)",
        "tie rule",
    ),
    Mutant(
        "reduce_max_last_tie",
        "runtime/kernels/reduce.py",
        "take = ~ctx.isnan(m) & (ctx.isnan(v) | (m < v))",
        "take = ~ctx.isnan(m) & (ctx.isnan(v) | (m <= v))",
        "reduce_max (and max_pool2d) routes the cotangent to the last maximal element",
        "tie rule",
    ),
    Mutant(
        "relu_grad_at_zero",
        _EW,
        "return where(c, c.const(0) < x, t, x.shape)",
        "return where(c, c.const(0) <= x, t, x.shape)",
        "relu' taken as 1 at x = 0",
        "kink at a boundary",
    ),
    Mutant(
        "abs_grad_at_zero",
        _EW,
        "return c.xp.where(zero < x, t, where(c, x < zero, -t, x.shape))",
        "return c.xp.where(zero <= x, t, where(c, x < zero, -t, x.shape))",
        "abs' taken as 1 at x = 0",
        "kink at a boundary",
    ),
    Mutant(
        "clamp_grad_at_bounds",
        _EW,
        '(c.const(a["lo"]) < x) & (x < c.const(a["hi"]))',
        '(c.const(a["lo"]) <= x) & (x <= c.const(a["hi"]))',
        "clamp passes the cotangent at its bounds",
        "kink at a boundary",
    ),
    Mutant(
        "sqrt_grad_at_zero",
        _EW,
        "pos = c.const(0) < x",
        "pos = c.const(0) <= x",
        "sqrt' computed as t/(2*sqrt(x)) at x = 0 (inf) instead of 0",
        "kink at a boundary",
    ),
    # ---------------------------------------------------------------- VJP rules: rounding order
    Mutant(
        "tanh_vjp_factored",
        _TR,
        "push=lambda c, x, y, t, a: t * (c.const(1) - y * y),",
        "push=lambda c, x, y, t, a: (t * (c.const(1) - y)) * (c.const(1) + y),",
        "tanh' as t*(1-y)*(1+y): algebraically equal, rounds differently",
        "operation order in a VJP",
    ),
    Mutant(
        "sigmoid_vjp_reassoc",
        _TR,
        "push=lambda c, x, y, t, a: t * (y * (c.const(1) - y)),",
        "push=lambda c, x, y, t, a: (t * y) * (c.const(1) - y),",
        "sigmoid' as (t*y)*(1-y) instead of t*(y*(1-y))",
        "operation order in a VJP",
    ),
    Mutant(
        "softmax_vjp_distributed",
        "runtime/kernels/softmax.py",
        "vjp=lambda c, y, g, a, e: [y * (g - _lastsum(c, g * y))],",
        "vjp=lambda c, y, g, a, e: [y * g - y * _lastsum(c, g * y)],",
        "softmax VJP as y*g - y*s instead of y*(g - s)",
        "operation order in a VJP",
    ),
    Mutant(
        "log_softmax_saved_exp",
        "runtime/kernels/softmax.py",
        "return c.arr(y), c.div(e, s)",
        'return c.arr(y), c.unary("exp", y)',
        "log_softmax saves exp(y) instead of e/s for its VJP",
        "operation order in a VJP",
    ),
    Mutant(
        "linear_bias_grad_reversed",
        "runtime/kernels/linalg.py",
        "c.fold0(g2) if needs[2] else None",
        "c.fold0(g2[::-1]) if needs[2] else None",
        "linear's bias cotangent folds the rows in reverse order",
        "reduction order",
    ),
    Mutant(
        "mask_vjp_leaks",
        "runtime/kernels/attention.py",
        "vjp=lambda c, s, g, a, e: [_mask_lin(c, g, a)],",
        "vjp=lambda c, s, g, a, e: [g],",
        "mask_neg_inf passes the cotangent through masked positions",
        "model-scale op",
    ),
    Mutant(
        "mul_vjp_copy_paste",
        _EW,
        "vjp_s=lambda c, a, b, g: (g * b, a * g),",
        "vjp_s=lambda c, a, b, g: (g * b, b * g),",
        "mul's second cotangent uses b instead of a (invisible for mul(x, x))",
        "wrong operand",
    ),
    # ---------------------------------------------------------------- first contribution / zeros
    Mutant(
        "scatter_first_plus_zero",
        "runtime/kernels/builders.py",
        "rows[j] = t[k, ...] if rows[j] is None else rows[j] + t[k, ...]",
        "rows[j] = c.zeros(tuple(t.shape[1:])) + t[k, ...] if rows[j] is None "
        "else rows[j] + t[k, ...]",
        "scatter (index_select VJP, scatter_add) adds its first contribution to +0",
        "first contribution stored as is",
    ),
    Mutant(
        "gather_vjp_first_plus_zero",
        "runtime/kernels/index.py",
        "placed if r == 0 else out + placed",
        "out + placed",
        "gather's VJP adds its first contribution to +0 (conv2d / pools use gather)",
        "first contribution stored as is",
    ),
    Mutant(
        "composite_keeps_minus_zero",
        _TABLE,
        "ct[j] = ctx.arr(ctx.zeros(g.shapes[j]) + c) if ct[j] is None else ct[j] + c",
        "ct[j] = ctx.arr(c) if ct[j] is None else ct[j] + c",
        "a composite's body VJP stores the first contribution as is (spec starts from +0)",
        "first contribution stored as is",
    ),
    Mutant(
        "tape_first_plus_zero",
        _TAPE,
        "                    grads[pid] = contrib\n",
        "                    grads[pid] = self.ctx.zeros(tuple(v.shape)) + contrib\n",
        "the tape adds the first contribution into a slot to +0 instead of storing it as is",
        "first contribution stored as is",
    ),
    # ---------------------------------------------------------------- tape / fan-in / lowering
    Mutant(
        "tape_inplace_accumulate",
        _TAPE,
        "new = old + contrib",
        "new = old.__iadd__(contrib) if old.flags.writeable else old + contrib",
        "the tape accumulates into the stored array in place (aliased cotangents change)",
        "in-place accumulation",
    ),
    Mutant(
        "tape_no_fanin_fold",
        _TAPE,
        "if len(set(arg_ids)) == len(arg_ids) and len(per_arg) == len(arg_ids):",
        "if len(per_arg) == len(arg_ids):",
        "the tape emits one pair per argument for repeated arguments (no fan-in fold)",
        "repeated arguments",
    ),
    Mutant(
        "tape_frozen_receives",
        _TAPE,
        "                if not target.requires_grad:\n                    continue\n",
        "",
        "reverse passes add contributions into frozen nodes",
        "frozen nodes",
    ),
    Mutant(
        "fanin_last_wins",
        _TABLE,
        "out[a] = g if a not in out else out[a] + g",
        "out[a] = g",
        "the fan-in fold keeps only the last cotangent of a repeated argument",
        "repeated arguments",
    ),
    Mutant(
        "lower_fanin_reversed",
        "runtime/engine/lower.py",
        "contrib = fold_fanin(args, per_arg)",
        "contrib = fold_fanin(args[::-1], per_arg[::-1])",
        "lowering folds a repeated argument's cotangents in reverse argument order",
        "repeated arguments",
    ),
    # ---------------------------------------------------------------- folds, matmul, unbroadcast
    # (context.py: helper i19 may move these lines into compiled kernels; re-target then)
    Mutant(
        "ordered_fold_pairwise",
        _CTX,
        "return self.arr(np.add.accumulate(x, axis=0, dtype=self.dt)[-1])",
        "return self.arr(np.sum(x, axis=0, dtype=self.dt))",
        "the ordered fold uses NumPy's pairwise sum (differs from the left fold for n > 8)",
        "reduction order",
    ),
    Mutant(
        "unbroadcast_axis_order",
        _CTX,
        "t = self.xp.permute_dims(g, (*red, *keep))",
        "t = self.xp.permute_dims(g, (*red[::-1], *keep))",
        "unbroadcast folds several reduced axes in reversed axis order",
        "multi-axis broadcast reduction order",
    ),
    Mutant(
        "unbroadcast_low_precision",
        _CTX,
        "return self.xp.reshape(self.fold0(t), shape)",
        "return self.xp.reshape(self.fold0(t) if self.ordered or not self.numpy_fast "
        "else self.arr(np.sum(t, axis=0, dtype=np.float16).astype(self.dt)), shape)",
        "fast profile: a broadcast operand's cotangent is reduced in float16",
        "lower-precision accumulation in a fast VJP",
    ),
    Mutant(
        "ordered_matmul_blas_f64",
        _CTX,
        "        if not self.ordered:\n            y = self.arr(",
        '        if not self.ordered or self.dtype == "float64":\n            y = self.arr(',
        "ordered float64 matmul takes the BLAS path instead of the k-loop",
        "matmul k-loop",
    ),
    # ---------------------------------------------------------------- transcendentals
    Mutant(
        "crmath_exp_wrong_range",
        "runtime/engine/crmath.py",
        "ufunc = wide(fn)",
        "ufunc = (lambda v, f=wide(fn): np.where((v > 5) & (v < 8), f(v) * (1 + 2.0**-18), "
        "f(v))) if fn == 'exp' else wide(fn)",
        "ordered exp is off by 2**-18 relative on (5, 8) only",
        "transcendental wrong on one range",
    ),
    Mutant(
        "exp_kernel_shift_negative",
        _TR,
        'f=lambda c, x, a: c.unary("exp", x),',
        'f=lambda c, x, a: c.xp.where(x < c.const(-6), c.unary("exp", x + c.const(1) / '
        'c.const(64)), c.unary("exp", x)),',
        "exp's kernel evaluates exp(x + 1/64) for x < -6 (both profiles)",
        "transcendental wrong on one range",
    ),
    # ---------------------------------------------------------------- forward mode (JVPs)
    Mutant(
        "mul_jvp_copy_paste",
        _EW,
        "jvp_s=lambda c, a, b, da, db: da * b + a * db,",
        "jvp_s=lambda c, a, b, da, db: da * b + db * b,",
        "mul's tangent as da*b + db*b (the second product's operand copied from the first)",
        "forward-mode rule",
    ),
    Mutant(
        "matmul_jvp_one_term",
        "runtime/kernels/linalg.py",
        "return c.matmul(dA, B) + c.matmul(A, dB)",
        "return c.matmul(dA, B)",
        "matmul's tangent drops the A @ dB term of the product rule",
        "forward-mode rule",
    ),
    Mutant(
        "softmax_jvp_unweighted",
        "runtime/kernels/softmax.py",
        "jvp=lambda c, y, dxs, a, e: y * (dxs[0] - _lastsum(c, y * dxs[0])),",
        "jvp=lambda c, y, dxs, a, e: y * (dxs[0] - _lastsum(c, dxs[0])),",
        "softmax's tangent subtracts the plain sum of dx instead of the y-weighted one",
        "forward-mode rule",
    ),
    Mutant(
        "reduce_max_jvp_last",
        "runtime/kernels/reduce.py",
        "out = ctx.xp.where(j == k, d[..., k], out)",
        "out = ctx.xp.where(j <= k, d[..., k], out)",
        "reduce_max's tangent is taken from the last element of the lane, not the arg-max",
        "forward-mode rule",
    ),
    Mutant(
        "linear_jvp_no_bias",
        "runtime/kernels/linalg.py",
        "y = (_lin(c, dx, w) + _lin(c, x, dw)) + db",
        "y = _lin(c, dx, w) + _lin(c, x, dw)",
        "linear's tangent ignores the bias tangent",
        "forward-mode rule",
    ),
    Mutant(
        "session_jvp_tangents_reversed",
        _TAPE,
        "t = self.ctx.arr(k.jvp(self.ctx, node.saved, ts, node.attrs, node.env))",
        "t = self.ctx.arr(k.jvp(self.ctx, node.saved, ts[::-1], node.attrs, node.env))",
        "the Session's forward mode hands a node its parents' tangents in reverse order",
        "forward-mode rule",
    ),
    # ---------------------------------------------------------------- fast profile
    Mutant(
        "fast_fold_float16",
        _CTX,
        "return self.arr(np.sum(x, axis=0, dtype=self.dt))",
        "return self.arr(np.sum(x, axis=0, dtype=np.float16).astype(self.dt))",
        "fast profile: every fold (sums, softmax rows, broadcast cotangents) accumulates in "
        "float16",
        "lower-precision accumulation in a fast VJP",
    ),
    Mutant(
        "fast_matmul_float32",
        _CTX,
        "y = self.arr(np.matmul(a, b) if self.numpy_fast else self.xp.matmul(a, b))",
        "y = self.arr(np.matmul(a.astype(np.float32), b.astype(np.float32)) if "
        "self.numpy_fast else self.xp.matmul(a, b))",
        "fast profile: matmul (forward and every VJP/JVP product) computed in float32",
        "lower-precision accumulation in a fast VJP",
    ),
    # ---------------------------------------------------------------- compiled kernels
    Mutant(
        "compiled_fastmath",
        "runtime/engine/compiled_kernels.py",
        '"fastmath": False',
        '"fastmath": True',
        "the compiled ordered loops are built with fastmath (FMA contraction, reassociation, "
        "no NaN/inf guarantees)",
        "compiled kernel",
    ),
    Mutant(
        "compiled_fold_from_plus_zero",
        "runtime/engine/compiled_kernels.py",
        "out[a, b] = x[a, 0, b]",
        "out[a, b] = x[a, 0, b] + 0.0",
        "the compiled fold starts from +0 + x[0] (a -0 first element becomes +0)",
        "compiled kernel",
    ),
    # ---------------------------------------------------------------- held-out set
    # Written after the suite's generators and properties were built, to test whether the
    # suite catches bugs it was not aimed at (docs/MUTATION.md).
    Mutant(
        "abs_grad_at_zero_pass",
        "runtime/kernels/elementwise.py",
        "return c.xp.where(zero < x, t, where(c, x < zero, -t, x.shape))",
        "return c.xp.where(zero <= x, t, where(c, x < zero, -t, x.shape))",
        "abs' taken as 1 at x = 0 (the cotangent passes at the kink)",
        "kink at a boundary",
    ),
    Mutant(
        "tanh_vjp_distributed",
        "runtime/kernels/transcendental.py",
        "push=lambda c, x, y, t, a: t * (c.const(1) - y * y),",
        "push=lambda c, x, y, t, a: t - t * (y * y),",
        "tanh' as t - t*(y*y) instead of t*(1 - y*y)",
        "operation order in a VJP",
    ),
    Mutant(
        "log_vjp_reciprocal",
        "runtime/kernels/transcendental.py",
        "push=lambda c, x, y, t, a: c.div(t, x),",
        "push=lambda c, x, y, t, a: t * c.div(c.const(1), x),",
        "log's cotangent as t*(1/x) instead of t/x",
        "operation order in a VJP",
    ),
    Mutant(
        "reduce_sum_vjp_last_axis",
        "runtime/kernels/reduce.py",
        'vjp=lambda c, s, g, a, e: [c.xp.broadcast_to(c.xp.expand_dims(g, axis=a["axis"]), s)],',
        "vjp=lambda c, s, g, a, e: [c.xp.broadcast_to(c.xp.expand_dims(g, axis=-1), s)],",
        "reduce_sum's cotangent is expanded along the last axis, not the reduced one",
        "wrong axis",
    ),
    Mutant(
        "reduce_max_later_nan",
        "runtime/kernels/reduce.py",
        "take = ~ctx.isnan(m) & (ctx.isnan(v) | (m < v))",
        "take = ctx.isnan(v) | (m < v)",
        "reduce_max lets a later NaN replace an earlier one (the cotangent goes to the last NaN)",
        "NaN propagation",
    ),
    Mutant(
        "reduce_max_tie_le",
        "runtime/kernels/reduce.py",
        "take = ~ctx.isnan(m) & (ctx.isnan(v) | (m < v))",
        "take = ~ctx.isnan(m) & (ctx.isnan(v) | (m <= v))",
        "reduce_max's comparison m <= v: a tie moves the arg-max to the later element",
        "tie rule",
    ),
    Mutant(
        "select_vjp_off_by_one",
        "runtime/kernels/index.py",
        "return [pad_rows(c, c.xp.reshape(g, (1, *shape[1:])), shape, i)]",
        "return [pad_rows(c, c.xp.reshape(g, (1, *shape[1:])), shape, max(i - 1, 0))]",
        "select's cotangent lands one row too early",
        "index arithmetic",
    ),
    Mutant(
        "gather_vjp_first_added",
        "runtime/kernels/index.py",
        "out = xp.where(device_array(ctx, hit), placed if r == 0 else out + placed, out)",
        "out = xp.where(device_array(ctx, hit), out + placed, out)",
        "gather's VJP adds every contribution to +0 (the first is not stored as is)",
        "first contribution stored as is",
    ),
    Mutant(
        "scatter_reverse_fold",
        "runtime/kernels/builders.py",
        "for k, j in enumerate(indices):\n        rows[j] = t[k, ...] if rows[j] is None",
        "for k, j in reversed(list(enumerate(indices))):\n        rows[j] = t[k, ...] if rows[j] "
        "is None",
        "scatter folds a row's contributions in reverse index order",
        "reduction order",
    ),
    Mutant(
        "slice_vjp_at_zero",
        "runtime/kernels/shape.py",
        'vjp=lambda c, s, g, a, e: [pad_rows(c, g, s, a["start"])],',
        "vjp=lambda c, s, g, a, e: [pad_rows(c, g, s, 0)],",
        "slice's cotangent is padded at row 0 instead of at its start",
        "index arithmetic",
    ),
    Mutant(
        "softmax_vjp_distributed_y",
        "runtime/kernels/softmax.py",
        "vjp=lambda c, y, g, a, e: [y * (g - _lastsum(c, g * y))],",
        "vjp=lambda c, y, g, a, e: [y * g - y * _lastsum(c, g * y)],",
        "softmax VJP as y*g - y*sum(g*y) (distributed, other products)",
        "operation order in a VJP",
    ),
    Mutant(
        "log_softmax_vjp_weighted",
        "runtime/kernels/softmax.py",
        "vjp=lambda c, p, g, a, e: [g - p * _lastsum(c, g)],",
        "vjp=lambda c, p, g, a, e: [g - _lastsum(c, p * g)],",
        "log_softmax VJP as g - sum(p*g) instead of g - p*sum(g)",
        "wrong rule",
    ),
    Mutant(
        "linear_bias_grad_mean",
        "runtime/kernels/linalg.py",
        "return [gx, gw, c.fold0(g2) if needs[2] else None]",
        "return [gx, gw, c.div(c.fold0(g2), c.const(g2.shape[0])) if needs[2] else None]",
        "linear's bias cotangent is averaged over the rows instead of summed",
        "wrong rule",
    ),
    Mutant(
        "unbroadcast_skips_length_2",
        "runtime/engine/context.py",
        "off + i for i, d in enumerate(shape) if d == 1 and g.shape[off + i] != 1",
        "off + i for i, d in enumerate(shape) if d == 1 and g.shape[off + i] > 2",
        "unbroadcast reduces only broadcast axes longer than 2",
        "multi-axis broadcast reduction",
    ),
    Mutant(
        "const_double_rounding",
        "runtime/engine/context.py",
        "c = from_spec(Tensor((), (self.domain.from_rational(q),)), self.dtype)",
        "c = np.asarray(float(q), dtype=self.dt)",
        "kernel constants rounded through binary64 (double rounding into 16-bit formats)",
        "rounding of constants",
    ),
    Mutant(
        "tape_lazy_zero_keeps_minus_zero",
        "runtime/engine/tape.py",
        "grads[j] = z if old is None else arr(old + z)",
        "grads[j] = z if old is None else old",
        "the lazy zeros of a lowered tape leave -0 slots as -0 (dense + 0 would give +0)",
        "signed zero in accumulation",
    ),
    Mutant(
        "lower_no_fanin_fold",
        "runtime/engine/lower.py",
        "contrib = fold_fanin(args, per_arg)",
        "contrib = {a: c for a, c in zip(args, per_arg)}",
        "lowering keeps the last cotangent of a repeated argument (no fan-in fold)",
        "repeated arguments",
    ),
    Mutant(
        "div_jvp_factored",
        "runtime/kernels/elementwise.py",
        "jvp_s=lambda c, a, b, da, db: c.div(da, b) - db * c.div(c.div(a, b), b),",
        "jvp_s=lambda c, a, b, da, db: c.div(da - db * c.div(a, b), b),",
        "div's tangent as (da - db*(a/b))/b instead of da/b - db*((a/b)/b)",
        "operation order in a JVP",
    ),
    Mutant(
        "maximum_tangent_tie_first",
        "runtime/kernels/elementwise.py",
        "xp.where(a == b, (da + db) * c.const(Fraction(1, 2)), z)",
        "xp.where(a == b, da, z)",
        "maximum's tangent on a tie is da, not (da + db)/2",
        "tie rule",
    ),
    Mutant(
        "sigmoid_other_formula",
        "runtime/kernels/transcendental.py",
        'f=lambda c, x, a: c.div(c.const(1), c.const(1) + c.unary("exp", -x)),',
        'f=lambda c, x, a: c.div(c.unary("exp", x), c.const(1) + c.unary("exp", x)),',
        "sigmoid computed as exp(x)/(1 + exp(x)) instead of 1/(1 + exp(-x))",
        "operation order in a forward",
    ),
    # ---------------------------------------------------------------- Session
    Mutant(
        "session_sgd_alias_last",
        "runtime/session/params.py",
        "g = ctx.arr(g + garr[leaf])",
        "g = ctx.arr(garr[leaf])",
        "sgd_step_all keeps only the last gradient of leaves that alias one parameter",
        "Session state",
    ),
    Mutant(
        "session_reset_keeps_generation",
        "runtime/session/core.py",
        "self.generation += 1",
        "self.generation += 0",
        "reset_tape does not invalidate old handles",
        "Session state",
    ),
    Mutant(
        "session_no_rollback",
        "runtime/session/core.py",
        "            return self._record(name, ids, attrs)\n"
        "        except BaseException:\n"
        "            self._rollback(mark)\n"
        "            raise\n",
        "            return self._record(name, ids, attrs)\n        except BaseException:\n"
        "            raise\n",
        "a failed Session op leaves its partial nodes on the tape",
        "Session state",
    ),
    # ---------------------------------------------------------------- N-d pools, pad
    Mutant(
        "composite_key_drops_flags",
        _TABLE,
        "key = tuple(sorted(attrs.items()))",
        "key = tuple(sorted((k, v) for k, v in attrs.items() if v is not True))",
        "the composite-body cache key drops attributes set to True, so a ceil_mode pool "
        "runs the floor-mode body (and count_include_pad=True is read as its default)",
        "attributes lost",
    ),
    Mutant(
        "gather_vjp_ranks_reversed",
        "runtime/kernels/index.py",
        'for r, (pos, src, hit) in enumerate(plan["ranks"]):',
        'for r, (pos, src, hit) in enumerate(reversed(plan["ranks"])):',
        "gather's VJP folds the repeated contributions of a target from the last to the "
        "first (pad's replicate/reflect/circular edges, overlapping adaptive windows, "
        "stride-1 convolutions)",
        "reduction order",
    ),
    Mutant(
        "leaky_relu_grad_at_zero",
        _EW,
        'return c.xp.where(c.const(0) < x, t, c.const(a["negative_slope"]) * t)',
        'return c.xp.where(c.const(0) <= x, t, c.const(a["negative_slope"]) * t)',
        "leaky_relu passes the whole cotangent at x = 0 (JAX's choice) instead of the slope",
        "kink at a boundary",
    ),
    Mutant(
        "sign_minus_zero",
        _EW,
        "pos = xp.where(zero < x, c.const(1), c.zeros(tuple(x.shape)))",
        "pos = xp.where(zero < x, c.const(1), x * zero)",
        "sign(-0) = -0 (x * 0) instead of +0",
        "signed zero in a forward",
    ),
    Mutant(
        "elu_grad_at_zero",
        _TR,
        'return c.xp.where(c.const(0) < x, t, t * (c.const(a["alpha"]) * c.unary("exp", x)))',
        'return c.xp.where(c.const(0) <= x, t, t * (c.const(a["alpha"]) * c.unary("exp", x)))',
        "elu's derivative at x = 0 taken from the right (1) instead of alpha",
        "kink at a boundary",
    ),
    Mutant(
        "erf_vjp_float32_constant",
        _TR,
        'push=lambda c, x, y, t, a: t * (c.const(ERF_C) * c.unary("exp", -(x * x))),',
        'push=lambda c, x, y, t, a: t * (c.const(float(np.float32(ERF_C))) * c.unary("exp", '
        "-(x * x))),",
        "erf's derivative constant 2/sqrt(pi) held in single precision",
        "rounding of constants",
    ),
    Mutant(
        "celu_reciprocal",
        _TR,
        'return c.xp.where(c.const(0) < x, x, al * c.unary("expm1", c.div(x, al)))',
        'return c.xp.where(c.const(0) < x, x, al * c.unary("expm1", x * c.div(c.const(1), al)))',
        "celu multiplies by a rounded 1/alpha instead of dividing by alpha",
        "operation order in a forward",
    ),
    Mutant(
        "prelu_grad_at_zero",
        "runtime/kernels/piecewise.py",
        "    pos = c.const(0) < x\n    gx = c.arr(c.xp.where(pos, g, wb * g))",
        "    pos = c.const(0) <= x\n    gx = c.arr(c.xp.where(pos, g, wb * g))",
        "prelu's cotangents at x = 0 taken from the right (g to x, 0 to the weight) instead "
        "of the weight branch (PyTorch's)",
        "kink at a boundary",
    ),
    Mutant(
        "where_cotangent_to_both",
        "runtime/kernels/piecewise.py",
        "c.unbroadcast(c.arr(c.xp.where(m, z, g)), sb)",
        "c.unbroadcast(c.arr(c.xp.where(m, g, g)), sb)",
        "where sends the cotangent to the unpicked side too",
        "mask ignored in a derivative",
    ),
    Mutant(
        "pow_grad_divides",
        _TR,
        "return t * (c.const(e) * c.pow(x, c.const(e - 1)))",
        "return t * (c.const(e) * c.div(c.pow(x, c.const(e)), x))",
        "pow's derivative as e·x**e/x (one more rounding; NaN at x = 0) instead of e·x**(e-1)",
        "operation order in a derivative",
    ),
    Mutant(
        "pow_tensor_db_at_zero_base",
        _TR,
        "return c.xp.where((a == zero) & (b >= zero), c.zeros(tuple(v.shape)), v)",
        "return c.xp.where((a == zero) & (b > zero), c.zeros(tuple(v.shape)), v)",
        "pow_tensor's derivative to b at 0**0 is g·(1·log 0) = -inf·g instead of 0 (PyTorch's)",
        "kink at a boundary",
    ),
    # ---------------------------------------------------------------- cumsum
    Mutant(
        "cumsum_vjp_same_direction",
        "runtime/kernels/reduce.py",
        "vjp=lambda c, s, g, a, e: [_cumsum(c, g, *_cs(a, flip=True))],",
        "vjp=lambda c, s, g, a, e: [_cumsum(c, g, *_cs(a))],",
        "cumsum's VJP runs the cumulative sum in the forward direction instead of the "
        "reverse cumulative sum",
        "wrong VJP rule",
    ),
    Mutant(
        "cumsum_exclusive_by_subtraction",
        "runtime/kernels/reduce.py",
        "        y = xp.concat([head, xp.take(y, xp.arange(n - 1), axis=dim)], axis=dim)",
        "        y = y - x",
        "exclusive cumsum as the inclusive sums minus x (a rounded subtraction, and x_0 - x_0 "
        "= +0 where the spec's fold has the earlier sum) instead of the shifted sums",
        "operation order in a forward",
    ),
    Mutant(
        "cumsum_exclusive_head_minus_zero",
        "runtime/kernels/reduce.py",
        "        head = ctx.zeros((*x.shape[:dim], 1, *x.shape[dim + 1 :]))",
        "        head = -ctx.zeros((*x.shape[:dim], 1, *x.shape[dim + 1 :]))",
        "exclusive cumsum starts each lane with -0 instead of the empty fold's +0",
        "signed zero in a forward",
    ),
    Mutant(
        "onnx_export_cumsum_drops_reverse",
        "runtime/interop/onnx_export.py",
        'flags = {k: int(bool(a.get(k))) for k in ("exclusive", "reverse")}',
        'flags = {k: int(bool(a.get(k))) for k in ("exclusive",)}',
        "to_onnx writes CumSum without its reverse attribute (the export is judged by the "
        "onnxruntime engine's run, not by the default suite)",
        "attributes lost",
        suite=("--engine", "onnxruntime", "--ops", "cumsum"),
    ),
    # ---------------------------------------------------------------- spec.vector vs spec
    Mutant(
        "vector_matmul_wide_accumulator",
        "spec/vector/folds.py",
        "        acc = F.add(acc, F.mul(A[..., :, p : p + 1], B[..., p : p + 1, :]))",
        "        acc = acc + F.mul(A[..., :, p : p + 1], B[..., p : p + 1, :])",
        "spec.vector's matmul k-loop keeps binary64 partial sums (bfloat16, float16)",
        "operation order in a forward",
    ),
    Mutant(
        "vector_gather_vjp_reversed",
        "spec/vector/folds.py",
        "    for r, (src, tgt) in enumerate(plan.steps):",
        "    for r, (src, tgt) in enumerate(plan.steps[::-1]):",
        "spec.vector's gather VJP folds each target's sources in decreasing position order",
        "fold order in a VJP",
    ),
    Mutant(
        "vector_round_truncates",
        "spec/vector/formats.py",
        "    r = np.ldexp(np.rint(np.ldexp(x, -q)), q)",
        "    r = np.ldexp(np.trunc(np.ldexp(x, -q)), q)",
        "spec.vector rounds bfloat16/float16 results toward zero instead of to nearest-even",
        "rounding",
    ),
    Mutant(
        "vector_round_no_subnormal_quantum",
        "spec/vector/formats.py",
        "    q = np.maximum(e - precision, emin - 1)",
        "    q = e - precision",
        "spec.vector rounds bfloat16/float16 subnormals to full precision (no quantum)",
        "rounding",
    ),
    Mutant(
        "vector_zero_add_skipped",
        "spec/vector/evaluate.py",
        "        first_after = max(0, j - n_in + 1)",
        "        first_after = n_nodes",
        "spec.vector's reverse pass drops the last run of zero additions (-0 stays -0)",
        "signed zero in a VJP",
    ),
    Mutant(
        "vector_maximum_tie_full",
        "spec/vector/elementwise.py",
        "        ga = np.where(a_wins, g, np.where(b_wins, 0.0, np.where(tie, h, 0.0)))",
        "        ga = np.where(a_wins, g, np.where(b_wins, 0.0, np.where(tie, g, 0.0)))",
        "spec.vector's maximum/minimum give the first operand the whole cotangent on a tie",
        "tie rule",
    ),
    Mutant(
        "vector_reduce_max_last_tie",
        "spec/vector/folds.py",
        "        take = ~np.isnan(m) & (np.isnan(v) | (m < v))",
        "        take = ~np.isnan(m) & (np.isnan(v) | (m <= v))",
        "spec.vector's reduce_max picks the last maximal element instead of the first",
        "tie rule",
    ),
    Mutant(
        "vector_crmath_undecided_keep_approximation",
        "spec/vector/crmath.py",
        "            flat_out[i] = float(fn(D.from_float(float(flat_x[i]))))",
        "            flat_out[i] = float(y.reshape(-1)[i])",
        "spec.vector's crmath keeps the binary64 approximation where its bound cannot decide",
        "correct rounding",
    ),
)


def by_id(ids: str | None) -> list[Mutant]:
    """The mutants named in a comma list (all of them for None); unknown ids raise."""
    if not ids:
        return list(CATALOGUE)
    table = {m.id: m for m in CATALOGUE}
    out = []
    for i in ids.split(","):
        if i not in table:
            raise KeyError(f"unknown mutant id {i!r}; see python -m conformance.mutate --list")
        out.append(table[i])
    return out


if len({m.id for m in CATALOGUE}) != len(CATALOGUE):  # pragma: no cover - data error
    raise ImportError("conformance.mutate: duplicate mutant ids")
