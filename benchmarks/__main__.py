"""`python -m benchmarks`: runtime overheads and the ordered/fast slowdown.

Every figure is a median over repeated runs measured in this same process, and is reported
as a ratio against a peer measured in the same run (PyTorch CPU eager autograd when it is
installed, else the plain NumPy computation of the same values), so the numbers survive a
noisy shared machine better than absolute times. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from runtime.lower import lower
from runtime.tape import Tape
from spec.graph import Graph, GraphBuilder


def _median(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm up
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _chain_tape(n_ops: int, dtype: str) -> Callable[[], Any]:
    x0 = np.linspace(-1, 1, 4).astype(np.float32 if dtype == "float32" else np.float64)

    def run() -> Any:
        t = Tape()
        if dtype != "float32":
            from runtime.context import KernelContext

            t = Tape(KernelContext(dtype))
        i = t.leaf(x0)
        for k in range(n_ops):
            i = t.op("tanh" if k % 2 else "neg", [i])
        s = t.op("sum", [i])
        return t.backward_dense_all(s, t.ctx.const(1))

    return run


def _chain_numpy(n_ops: int) -> Callable[[], Any]:
    x0 = np.linspace(-1, 1, 4).astype(np.float32)

    def run() -> Any:
        x, ys = x0, []
        for k in range(n_ops):
            x = np.tanh(x) if k % 2 else -x
            ys.append(x)
        g = np.ones_like(x)
        for k in range(n_ops - 1, -1, -1):
            g = g * (1 - ys[k] * ys[k]) if k % 2 else -g
        return g

    return run


def mlp_graph(batch: int = 128, sizes: tuple[int, ...] = (784, 512, 512, 10)) -> Graph:
    b = GraphBuilder()
    x = b.input((batch, sizes[0]))
    t = b.input((batch, sizes[-1]))
    params = []
    for i in range(len(sizes) - 1):
        params.append((b.input((sizes[i + 1], sizes[i])), b.input((sizes[i + 1],))))
    h = x
    for i, (w, bias) in enumerate(params):
        h = b.node("linear", h, w, bias)
        if i < len(params) - 1:
            h = b.node("relu", h)
    b.node("mse_loss", h, t)
    return b.build()


def _mlp_inputs(g: Graph, dtype: Any) -> list[Any]:
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(s) * 0.05).astype(dtype) for s in g.inputs]


def _mlp_step(g: Graph, xs: list[Any], dtype: str, kernels: str) -> Callable[[], Any]:
    """Eager tape: frozen data leaves, trainable parameter leaves, sparse backward."""
    from runtime.context import KernelContext

    ctx = KernelContext(dtype, kernels)

    def run() -> Any:
        tape = Tape(ctx)
        ids = [tape.leaf(x, requires_grad=i >= 2) for i, x in enumerate(xs)]
        for node in g.nodes:
            ids.append(tape.op(node.op, [ids[a] for a in node.args], **dict(node.attrs)))
        return tape.backward_dense(ids[-1], ctx.const(1))

    return run


def _mlp_lowered(g: Graph, xs: list[Any], dtype: str, kernels: str) -> Callable[[], Any]:
    """lower() + backward_dense_from: TorchLean's dense compile_aux_data semantics."""

    def run() -> Any:
        tape = lower(g, xs, dtype=dtype, kernels=kernels)
        seeds = [tape.ctx.zeros(tuple(n.value.shape)) for n in tape.nodes]
        seeds[-1] = tape.ctx.const(1)
        return tape.backward_dense_from(seeds)

    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=None, help="write results to this JSON file")
    a = p.parse_args(argv)
    res: dict[str, Any] = {}
    n = 100
    ours = _median(_chain_tape(n, "float32"), a.repeat * 4)
    peer = _median(_chain_numpy(n), a.repeat * 4)
    res["chain100_tape_s"] = ours
    res["chain100_numpy_s"] = peer
    res["per_op_overhead_us"] = (ours - peer) / (2 * n + 1) * 1e6
    print(
        f"100-op eager chain on (4,): tape {ours * 1e3:.2f} ms, hand-written NumPy "
        f"{peer * 1e3:.2f} ms, ratio {ours / peer:.1f}x, "
        f"overhead {res['per_op_overhead_us']:.1f} us per op (fwd+bwd)"
    )
    g = mlp_graph()
    for dt, npdt in (("float32", np.float32), ("float64", np.float64)):
        xs = _mlp_inputs(g, npdt)
        fast = _median(_mlp_step(g, xs, dt, "fast"), a.repeat)
        ordered = _median(_mlp_step(g, xs, dt, "ordered"), max(1, a.repeat // 2))
        lowered = _median(_mlp_lowered(g, xs, dt, "fast"), max(1, a.repeat // 2))
        res[f"mlp_{dt}_fast_s"] = fast
        res[f"mlp_{dt}_ordered_s"] = ordered
        res[f"mlp_{dt}_lowered_fast_s"] = lowered
        print(
            f"MLP 784-512-512-10 batch 128 {dt} (eager tape, fwd+bwd): fast "
            f"{fast * 1e3:.1f} ms, ordered {ordered * 1e3:.1f} ms, ordered/fast "
            f"{ordered / fast:.1f}x; lowered dense backward (fast) {lowered * 1e3:.1f} ms"
        )
    try:
        import torch  # noqa: F401
    except ImportError:
        print("PyTorch is not installed: peer ratios against PyTorch skipped", file=sys.stderr)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
