"""`link.model_graphs_bitwise`: the link check on a small CNN and a one-block Transformer.

Invariants:
- Two fixed graphs built from the model-scale ops: `cnn_graph` (conv2d with bias and
  padding → relu → max_pool2d → avg_pool2d → reshape → linear → a loss) and
  `transformer_graph` (causal 2-head multi_head_attention → residual → layer_norm →
  linear → gelu → residual → mean). The CNN's loss is mse_loss over rationals (every op
  algebraic) and cross_entropy over IEEE formats.
- For each (graph, dtype) and each input draw k (inputs from a fixed NumPy generator,
  the full seed from the spec RNG with seed k), `runtime.session.link.link_check` compares
  the runtime's values and `backward_dense_from(lower(g))` with spec's `eval_graph` and
  `backprop_all_ctx`: exactly for rationals, bit for bit (ordered kernels) for binary32,
  bfloat16, float16 and binary64. Quick mode draws `QUICK_DRAWS` inputs, full mode
  `FULL_DRAWS`. Any mismatch fails the theorem and is reported with its graph text.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from spec.graph import Graph, GraphBuilder
from spec.tensor import Tensor

from .records import CheckContext, CheckResult, Scope, Theorem
from .witnesses import graph_witnesses

__all__ = ["FULL_DRAWS", "QUICK_DRAWS", "cnn_graph", "theorems", "transformer_graph"]

QUICK_DRAWS = 2
FULL_DRAWS = 10
DTYPES = ("exact", "float32", "bfloat16", "float16", "float64")


def cnn_graph(loss: str = "cross_entropy") -> Graph:
    """x (1, 1, 5, 5) → conv2d 3x3 pad 1 (2 channels) → relu → max_pool2d 2x2 →
    avg_pool2d 1x1 → reshape (1, 8) → linear (3 classes) → loss against a (1, 3) target."""
    b = GraphBuilder()
    x, w1, b1 = b.input((1, 1, 5, 5)), b.input((2, 1, 3, 3)), b.input((2,))
    w2, bias, t = b.input((3, 8)), b.input((3,)), b.input((1, 3))
    h = b.node("relu", b.node("conv2d", x, w1, b1, padding=(1, 1)))
    h = b.node("max_pool2d", h, kernel_size=(2, 2), stride=(2, 2))
    h = b.node("avg_pool2d", h, kernel_size=(1, 1))
    h = b.node("reshape", h, shape=(1, 8))
    b.node(loss, b.node("linear", h, w2, bias), t)
    return b.build()


def transformer_graph() -> Graph:
    """x (3, 4) → causal 2-head self-attention → x + a → layer_norm → linear → gelu →
    residual → mean."""
    b = GraphBuilder()
    x = b.input((3, 4))
    ws = [b.input((4, 4)) for _ in range(4)]
    g1, b1, w_ff, b_ff = b.input((4,)), b.input((4,)), b.input((4, 4)), b.input((4,))
    a = b.node("multi_head_attention", x, x, x, *ws, heads=2, causal=1)
    h = b.node("layer_norm", b.node("add", x, a), g1, b1)
    f = b.node("gelu", b.node("linear", h, w_ff, b_ff))
    b.node("mean", b.node("add", h, f))
    return b.build()


def _inputs(g: Graph, dtype: str, k: int) -> list[Tensor]:
    from runtime.backends import DTYPE_DOMAIN

    D = DTYPE_DOMAIN[dtype]
    rng = np.random.default_rng(1000 + k)
    out = []
    for s in g.inputs:
        n = int(np.prod(s))
        if dtype == "exact":
            vals = [D.from_rational(Fraction(int(v), 4)) for v in rng.integers(-8, 9, n)]
        else:
            vals = [D.from_float(float(v)) for v in rng.normal(size=n)]
        out.append(Tensor(s, tuple(vals)))
    return out


def _check(ctx: CheckContext) -> CheckResult:
    from runtime.session.link import link_check

    draws = QUICK_DRAWS if ctx.quick else FULL_DRAWS
    rows: list[dict[str, Any]] = []
    cases = failed = 0
    for name in ("cnn", "transformer"):
        for dtype in DTYPES:
            if name == "transformer" and dtype == "exact":
                continue  # softmax, sqrt and tanh are not rational
            g = cnn_graph("mse_loss" if dtype == "exact" else "cross_entropy")
            if name == "transformer":
                g = transformer_graph()
            for k in range(draws):
                cases += 1
                ok, text = link_check(g, _inputs(g, dtype, k), [], dtype, k)
                if not ok:
                    failed += 1
                    rows.append({"graph": name, "dtype": dtype, "draw": k, "mismatch": text})
        ctx.report("link.model_graphs_bitwise", 1 if name == "cnn" else 2, 2)
    counts = {"cases": cases, "cases_passed": cases - failed, "cases_failed": failed}
    return CheckResult(failed == 0 and cases > 0, counts, {"failures": rows[:3]})


def theorems() -> list[Theorem]:
    return [
        Theorem(
            name="link.model_graphs_bitwise",
            statement=(
                "On a small CNN (conv2d, relu, max_pool2d, avg_pool2d, linear, loss) and a "
                "one-block Transformer (causal multi_head_attention, residual, layer_norm, "
                "linear, gelu, mean), the runtime's values and backward_dense_from cotangents "
                "of lower(g) equal spec's eval_graph and backprop_all_ctx: exactly over "
                "rationals (the CNN with mse_loss) and bit for bit with the ordered kernels in "
                "binary32, bfloat16, float16 and binary64, with a full pseudo-random seed."
            ),
            formula="backward_dense_from(lower(g, x), s) = backprop_all_ctx(g, x, s) "
            "for g ∈ {cnn, transformer}",
            scope=Scope(
                ("conv2d", "max_pool2d", "avg_pool2d", "multi_head_attention", "layer_norm"),
                ("rational", "binary32", "bfloat16", "float16", "binary64"),
                "cnn: x (1, 1, 5, 5), 2 channels, 3 classes; transformer: x (3, 4), 2 heads",
                f"two fixed graphs; {QUICK_DRAWS} input draws per (graph, dtype) quick, "
                f"{FULL_DRAWS} full",
            ),
            evidence=("random cases",),
            bounds=f"{QUICK_DRAWS} quick / {FULL_DRAWS} full input draws per (graph, dtype)",
            witness=graph_witnesses()["link.model_graphs_bitwise"],
            time_limit=(240.0, 900.0),
            check=_check,
            status="checked",
            sources=("spec", "runtime", "proofs"),
        )
    ]
