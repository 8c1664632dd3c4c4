"""Falsifiers: for every theorem a small defect that its check must catch.

Invariants:
- A witness's `apply()` monkeypatches one thing (a spec rule, a kernel, the runtime's
  fan-in fold or accumulation) in the process it runs in; `proofs.runner` runs it only in a
  forked worker of its own, so the caller's tables never change.
- Per-op obligations: `op.<name>.forward` is falsified by adding 1 to the first entry of the
  spec forward, `op.<name>.derivative` by adding 1 to the first entry of the spec JVP, and
  `op.<name>.adjoint` by adding 1 to the first entry of the first argument's spec VJP (the
  JVP for a nullary op). Each is a changed rule that the obligation, and only a check that
  reads that rule, can see.
- `python -m proofs check --witnesses` shows each theorem failing on its witness; the
  ordinary run shows it passing without.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from spec.domains import Domain
from spec.tensor import Tensor

from .records import Witness

__all__ = [
    "bump_first",
    "fold_fanin_last_wins",
    "graph_witnesses",
    "kernel_scaled",
    "op_witness",
]


def bump_first(D: Domain, t: Tensor) -> Tensor:
    """t with 1 added to its first entry (unchanged when t is empty)."""
    if not t.data:
        return t
    return Tensor(t.shape, (D.add(t.data[0], D.from_rational(1)), *t.data[1:]))


def _patch_op(name: str, **fns: Any) -> None:
    from spec.ops import OPS

    OPS[name] = dataclasses.replace(OPS[name], **fns)


def _forward_defect(name: str) -> None:
    from spec.ops import OPS

    f = OPS[name].forward
    _patch_op(name, forward=lambda D, xs, a, env: bump_first(D, f(D, xs, a, env)))


def _jvp_defect(name: str) -> None:
    from spec.ops import OPS

    j = OPS[name].jvp
    _patch_op(name, jvp=lambda D, xs, dxs, a, env: bump_first(D, j(D, xs, dxs, a, env)))


def _vjp_defect(name: str) -> None:
    from spec.ops import OPS

    op = OPS[name]
    if op.arity == 0:
        _jvp_defect(name)
        return
    v = op.vjp

    def vjp(D: Domain, xs: list[Tensor], g: Tensor, a: Any, env: Any) -> list[Tensor]:
        out = list(v(D, xs, g, a, env))
        if out:
            out[0] = bump_first(D, out[0])
        return out

    _patch_op(name, vjp=vjp)


_OP_DEFECTS = {
    "forward": ("spec forward of {op} + 1 at the first entry", _forward_defect),
    "derivative": ("spec JVP of {op} + 1 at the first entry", _jvp_defect),
    "adjoint": ("spec VJP of {op} (first argument) + 1 at the first entry", _vjp_defect),
}


def op_witness(op: str, obligation: str) -> Witness:
    text, fn = _OP_DEFECTS[obligation]
    return Witness(text.format(op=op), lambda: fn(op))


# --------------------------------------------------------------------------- runtime defects


def fold_fanin_last_wins() -> None:
    """The runtime's fan-in fold keeps only the last cotangent of a repeated argument."""
    import runtime.engine.lower as L

    def fold(args: Any, per_arg: Any) -> dict[int, Any]:
        return dict(zip(args, per_arg, strict=True))

    L.fold_fanin = fold  # type: ignore[assignment]


def kernel_scaled(op: str, part: str, factor: Fraction) -> None:
    """Multiply a runtime kernel's forward value (part 'forward') or each VJP cotangent
    ('vjp') by `factor`."""
    from runtime.kernels import KERNELS

    k = KERNELS[op]
    if part == "forward":

        def forward(ctx: Any, xs: Any, a: Any, env: Any) -> Any:
            y, saved = k.forward(ctx, xs, a, env)
            return ctx.arr(y) * ctx.const(factor), saved

        KERNELS[op] = dataclasses.replace(k, forward=forward)
    else:

        def vjp(ctx: Any, saved: Any, g: Any, a: Any, env: Any) -> Any:
            return [ctx.arr(c) * ctx.const(factor) for c in k.vjp(ctx, saved, g, a, env)]

        KERNELS[op] = dataclasses.replace(k, vjp=vjp, vjp_some=None)


def _kernel_swap_sub() -> None:
    from runtime.kernels import KERNELS

    k = KERNELS["sub"]
    KERNELS["sub"] = dataclasses.replace(
        k, forward=lambda ctx, xs, a, env: k.forward(ctx, list(reversed(xs)), a, env)
    )


def _kernel_vjp_plus_one() -> None:
    from runtime.kernels import KERNELS

    k = KERNELS["mul"]

    def vjp(ctx: Any, saved: Any, g: Any, a: Any, env: Any) -> Any:
        return [ctx.arr(c) + ctx.const(1) for c in k.vjp(ctx, saved, g, a, env)]

    KERNELS["mul"] = dataclasses.replace(k, vjp=vjp, vjp_some=None)


def _spec_mul_vjp_doubled() -> None:
    from spec.ops import OPS

    v = OPS["mul"].vjp
    _patch_op(
        "mul",
        vjp=lambda D, xs, g, a, env: [
            t.map(lambda x: D.mul(D.from_rational(2), x)) for t in v(D, xs, g, a, env)
        ],
    )


def _dense_all_doubles_output() -> None:
    from runtime.engine.tape import Tape

    orig = Tape.backward_dense_all

    def backward_dense_all(self: Any, out: int, seed: Any, hook: Any = None) -> list[Any]:
        grads = orig(self, out, seed, hook)
        grads[out] = grads[out] + grads[out]
        return grads

    Tape.backward_dense_all = backward_dense_all  # type: ignore[method-assign]


def _without_shrinking() -> None:
    """Witness runs of the conformance properties stop at the first failing case: the
    harness's shrink phase is replaced by a second generate phase (shrinking a failure the
    witness caused only costs time)."""
    from conformance.suite import set_shrinking  # the suite is loaded only by witness runs

    set_shrinking(False)


def _float_defect() -> None:
    kernel_scaled("add", "forward", Fraction(129, 128))
    _without_shrinking()


def graph_witnesses() -> dict[str, Witness]:
    """The witness of every theorem that is not a per-op obligation."""
    w = Witness
    return {
        "link.backward_dense_from_lower_eq_backprop_all_ctx": w(
            "runtime fold_fanin keeps only the last cotangent of a repeated argument",
            fold_fanin_last_wins,
        ),
        "link.lower_values_eq_eval_graph": w("runtime sub kernel computes b - a", _kernel_swap_sub),
        "graph.backprop_correct": w("spec VJP of mul doubled", _spec_mul_vjp_doubled),
        "tape.lowered_zero_preserving": w(
            "runtime mul kernel VJP adds 1 to each cotangent", _kernel_vjp_plus_one
        ),
        "tape.backward_dense_all_eq_from_one_hot": w(
            "Tape.backward_dense_all doubles the output's own gradient",
            _dense_all_doubles_output,
        ),
        "link.kernels_eq_spec_rules": w(
            "runtime mul kernel VJP doubled", lambda: kernel_scaled("mul", "vjp", Fraction(2))
        ),
        "float.ordered_bitwise": w(
            "runtime add kernel result multiplied by 129/128 (a changed kernel)",
            _float_defect,
        ),
        "link.model_graphs_bitwise": w(
            "runtime linear kernel result multiplied by 129/128 (a changed kernel)",
            lambda: kernel_scaled("linear", "forward", Fraction(129, 128)),
        ),
    }
