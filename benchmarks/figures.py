"""The measured figures 1-5 of `python -m benchmarks` (figure 6 is `benchmarks.model_ops`).

Invariants:
- Each `fig_*` takes the run's configuration (`cli.config`) and returns a plain dict of
  measurements (JSON-serialisable: numbers, strings, lists, dicts), the record that the
  report (`benchmarks.report`), the plot and `--json` are made from.
- Contenders of one figure are timed interleaved (`harness.interleaved`); ratios to PyTorch
  are paired per round and None when PyTorch is not measured.
- Peers and heavy modules are imported inside the figure that uses them, so `--help` and a
  run with `--only` import no more than they need. Nothing here asserts on time.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from .harness import interleaved, median_rows, paired_ratio

__all__ = [
    "fig_chain",
    "fig_conformance",
    "fig_memory",
    "fig_mlp",
    "fig_ordered",
    "matmul_costs",
    "torch_saved_bytes",
]


def fig_chain(cfg: dict[str, Any], peers: list[Any]) -> dict[str, Any]:
    from .workloads import our_chain, tape_chain

    n = cfg["chain_n"]
    contenders = {"ours": our_chain(n), "ours_tape": tape_chain(n)}
    labels = {
        "ours": "torchlean Session (eager)",
        "ours_tape": "torchlean Tape (engine only, no Session)",
    }
    for p in peers:
        contenders[p.key] = p.chain(n)
        labels[p.key] = p.chain_label or p.label
    t = interleaved(contenders, cfg["chain_rounds"])
    ref = "torch" if "torch" in contenders else None
    rows = median_rows(t, labels, ref, lambda med: {"per_op_us": med / n * 1e6})
    return {"n_ops": n, "shape": [4], "rounds": cfg["chain_rounds"], "rows": rows}


def fig_mlp(cfg: dict[str, Any], peers: list[Any], dtype: str) -> dict[str, Any]:
    from .workloads import mlp_init, numpy_mlp, our_mlp

    init = mlp_init(cfg["sizes"], cfg["batch"], dtype)
    contenders = {
        "ours": our_mlp(init, "eager")[0],
        "ours_typed": our_mlp(init, "typed_graph")[0],
        "numpy": numpy_mlp(init),
    }
    labels = {
        "ours": "torchlean Session (eager)",
        "ours_typed": "torchlean Session (typed graph)",
        "numpy": "NumPy, hand-written gradients (BLAS floor)",
    }
    skipped = {}
    sizes = cfg["sizes"]
    scalar_ops = 2 * cfg["batch"] * sum(a * b for a, b in itertools.pairwise(sizes))
    for p in peers:
        if p.mlp_skip:
            skipped[p.key] = p.mlp_skip.format(scalar_ops=f"{scalar_ops:.1e}")
            continue
        contenders[p.key] = p.mlp(init)
        labels[p.key] = p.mlp_label or p.label
    t = interleaved(contenders, cfg["mlp_rounds"])
    rows = median_rows(t, labels, "torch" if "torch" in contenders else None)
    return {
        "dtype": dtype,
        "sizes": list(cfg["sizes"]),
        "batch": cfg["batch"],
        "rounds": cfg["mlp_rounds"],
        "rows": rows,
        "skipped": skipped,
    }


def fig_ordered(cfg: dict[str, Any], dtype: str) -> dict[str, Any]:
    from .workloads import mlp_init, our_mlp

    init = mlp_init(cfg["sizes"], cfg["batch"], dtype)
    runs = {k: our_mlp(init, "eager", k) for k in ("fast", "ordered")}
    t = interleaved({k: r[0] for k, r in runs.items()}, cfg["ordered_rounds"])
    out: dict[str, Any] = {
        "dtype": dtype,
        "rounds": cfg["ordered_rounds"],
        "fast_s": t.median("fast"),
        "ordered_s": t.median("ordered"),
        "ratio": paired_ratio(t, "ordered", "fast"),
    }
    # Where the time goes: one more step of each with the context's matmul timed.
    for k, (step, session) in runs.items():
        ctx = session.ctx
        spent = [0.0]
        inner = ctx.matmul

        def timed(a: Any, b: Any, inner: Any = inner, spent: list[float] = spent) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(a, b)
            finally:
                spent[0] += time.perf_counter() - t0

        ctx.matmul = timed
        t0 = time.perf_counter()
        step()
        total = time.perf_counter() - t0
        del ctx.matmul
        out[f"{k}_matmul_share"] = spent[0] / total
    out["first_layer"] = matmul_costs(init, cfg["ordered_rounds"])
    return out


def matmul_costs(init: Any, rounds: int) -> dict[str, Any]:
    """The first layer's x @ W^T alone: BLAS (fast) against the ordered k-loop (compiled,
    when numba serves the dtype, and the NumPy reference loop), in ns per multiply-add
    pair, next to the cost of one NumPy pass over the (m, n) accumulator (the NumPy k-loop
    makes two per step: the rounded products, then the rounded sums)."""
    import numpy as np

    from runtime.engine.context import KernelContext

    x, w = init.x, init.params[0][0]
    wt = w.T
    m, k = x.shape
    n = w.shape[0]
    fast, ordered = KernelContext(init.dtype, "fast"), KernelContext(init.dtype, "ordered")
    reference = KernelContext(init.dtype, "ordered", compiled=False)  # the NumPy k-loop
    acc = np.ones((m, n), dtype=x.dtype)
    tmp = np.empty_like(acc)
    col, row = x[:, :1], wt[:1, :]
    t = interleaved(
        {
            "fast": lambda: fast.matmul(x, wt),
            "ordered": lambda: ordered.matmul(x, wt),
            "reference": lambda: reference.matmul(x, wt),
            "add_pass": lambda: np.add(acc, tmp, out=tmp),
            "mul_pass": lambda: np.multiply(col, row, out=tmp),
        },
        rounds,
    )
    pairs = m * k * n
    return {
        "shape": [m, k, n],
        "fast_ns_per_pair": t.median("fast") / pairs * 1e9,
        "ordered_ns_per_pair": t.median("ordered") / pairs * 1e9,
        "ordered_compiled": bool(ordered.compiled),
        "reference_ns_per_pair": t.median("reference") / pairs * 1e9,
        "add_pass_ns_per_element": t.median("add_pass") / (m * n) * 1e9,
        "mul_pass_ns_per_element": t.median("mul_pass") / (m * n) * 1e9,
    }


def fig_conformance(cfg: dict[str, Any]) -> dict[str, Any]:
    """Cases per second of the suite's properties, run as `python -m conformance` runs them
    in one process (`run_properties`: properties that draw the same cases share each
    draw), per dtype; the time in each property's check is measured apart."""
    import dataclasses

    from conformance.suite import default_properties, run_properties

    out: dict[str, Any] = {"max_examples": cfg["conf_examples"], "dtypes": {}}
    for dt in cfg["conf_dtypes"]:
        props = default_properties([dt], ["fast", "ordered"])
        spent = [[0.0] for _ in props]

        def timed(inner: Any, cell: list[float]) -> Any:
            def check(case: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return inner(case)
                finally:
                    cell[0] += time.perf_counter() - t0

            return check

        timed_props = [
            dataclasses.replace(p, check=timed(p.check, cell))
            for p, cell in zip(props, spent, strict=True)
        ]
        got = run_properties(timed_props, cfg["conf_examples"], seed=None)
        rows = [
            {
                "property": prop.name,
                "kernels": prop.kernels,
                "cases": row.cases,
                "failed": row.failed,
                "seconds": row.seconds,
                "check_seconds": cell[0],
                "cases_per_s": row.cases / row.seconds if row.seconds else 0.0,
            }
            for prop, row, cell in zip(props, got, spent, strict=True)
        ]
        cases = sum(r["cases"] for r in rows)
        secs = sum(r["seconds"] for r in rows)
        out["dtypes"][dt] = {
            "properties": rows,
            "cases": cases,
            "seconds": secs,
            "check_seconds": sum(r["check_seconds"] for r in rows),
            "cases_per_s": cases / secs if secs else 0.0,
        }
    return out


def fig_memory(cfg: dict[str, Any], have_torch: bool) -> dict[str, Any]:
    from runtime import Session

    from .memory import buffer_bytes, tape_bytes
    from .workloads import mlp_init

    init = mlp_init(cfg["sizes"], cfg["batch"], "float32")
    s = Session(mode="eager", dtype="float32")
    params = [(s.param(w), s.param(b)) for w, b in init.params]
    x, t = s.input(init.x, requires_grad=False), s.input(init.t, requires_grad=False)
    needed = [x.id, t.id]
    h = x
    for i, (wp, bp) in enumerate(params):
        w = s.use(wp)
        needed += [h.id, w.id]  # linear reads x and W
        h = s.linear(h, w, s.use(bp))
        if i < len(params) - 1:
            needed.append(h.id)  # relu reads its input
            h = s.relu(h)
    needed.append(h.id)  # mse_loss reads the prediction (and the target, above)
    s.mse_loss(h, t)
    held, n_arrays = tape_bytes(s.tape)
    need = buffer_bytes(s.tape.nodes[i].value for i in set(needed))
    out: dict[str, Any] = {
        "dtype": "float32",
        "tape_bytes": held,
        "tape_arrays": n_arrays,
        "needed_bytes": need,
        "ratio": held / need,
        "tape_nodes": len(s.tape),
    }
    if have_torch:
        out["torch_saved_bytes"] = torch_saved_bytes(init)
        out["torch_ratio"] = out["torch_saved_bytes"] / need
    return out


def torch_saved_bytes(init: Any) -> int:
    """Bytes of the distinct storages PyTorch's autograd saves for the same step (inputs
    and parameters included when saved), via saved_tensors_hooks."""
    import torch
    import torch.nn.functional as F

    ps = [torch.tensor(a, requires_grad=True) for w, b in init.params for a in (w, b)]
    x, t = torch.from_numpy(init.x), torch.from_numpy(init.t)
    seen: dict[int, int] = {}

    def pack(tensor: Any) -> Any:
        st = tensor.untyped_storage()
        seen[st.data_ptr()] = st.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda v: v):
        h = x
        n = len(init.params)
        for i in range(n):
            h = F.linear(h, ps[2 * i], ps[2 * i + 1])
            if i < n - 1:
                h = torch.relu(h)
        loss = F.mse_loss(h, t)
    torch.autograd.grad(loss, ps)
    return sum(seen.values())
