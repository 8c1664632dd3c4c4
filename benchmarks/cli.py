"""`python -m benchmarks`: our runtime against its peers, in one run.

Figures (see docs/BENCHMARKS.md for the targets and the discussion):
1. per-op overhead of the eager Session on tiny tensors (a 100-op chain on shape (4,),
   forward + backward), against PyTorch, HIPS autograd, JAX and micrograd;
2. one training step (forward + backward + SGD) of an MLP 784-512-512-10 at batch 128,
   float32 and float64, eager and typed-graph Session modes, against the peers;
3. the `ordered`/`fast` slowdown on the same MLP step;
4. conformance throughput (cases checked per second, per dtype and property);
5. the bytes the tape holds in the MLP step against the forward values its backward needs;
6. model-scale ops: a conv layer and an attention block, forward + backward, against
   PyTorch CPU (`benchmarks.model_ops`).

Peers are optional: a missing one is skipped with a message on stderr. Results go to stdout
(a summary), to the Markdown report (between the markers in docs/BENCHMARKS.md, or a new
file), to a PNG plot (matplotlib; skipped with a message when it is missing) and, on
request, to JSON. Nothing here asserts on time.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from .harness import (
    environment,
    fmt_ratio,
    fmt_time,
    interleaved,
    limit_threads,
    paired_ratio,
    set_thread_env,
    table,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "docs" / "BENCHMARKS.md"
DEFAULT_PNG = ROOT / "docs" / "benchmarks.png"
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

# Targets (docs/BENCHMARKS.md states and discusses them)
T_PER_OP = 1.0  # per-op eager overhead <= PyTorch's
T_MLP = 1.25  # MLP step <= 1.25x PyTorch CPU at float32 (and faster than HIPS autograd)
T_ORDERED = 5.0  # ordered <= 5x fast on the MLP step
T_MEMORY = 1.2  # tape bytes <= 1.2x the forward values the backward needs


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _config(a: argparse.Namespace) -> dict[str, Any]:
    if a.quick:
        return {
            "chain_n": 20,
            "chain_rounds": 5,
            "sizes": (64, 32, 32, 10),
            "batch": 16,
            "mlp_rounds": 3,
            "ordered_rounds": 2,
            "conf_dtypes": ("exact", "float32"),
            "conf_examples": 3,
            "dtypes": ("float32", "float64"),
            "conv": (2, 3, 8, 4),
            "attn": (2, 8, 8, 2),
            "model_rounds": 2,
        }
    r = a.repeat
    return {
        "chain_n": 100,
        "chain_rounds": 6 * r,
        "sizes": (784, 512, 512, 10),
        "batch": 128,
        "mlp_rounds": 3 * r,
        "ordered_rounds": r,
        "conf_dtypes": ("exact", "float64", "float32", "bfloat16", "float16"),
        "conf_examples": a.conf_examples,
        "dtypes": ("float32", "float64"),
        "conv": (8, 16, 32, 32),
        "attn": (8, 64, 64, 4),
        "model_rounds": r,
    }


# --------------------------------------------------------------------------- peers


def _load_peers(wanted: list[str]) -> tuple[list[Any], dict[str, str]]:
    from .workloads import PEERS

    loaded, skipped = [], {}
    for p in PEERS:
        if p.key not in wanted:
            skipped[p.key] = "not requested (--peers)"
            continue
        try:
            mod = p.load()
        except ImportError as e:
            skipped[p.key] = f"not installed ({e}); install with `{p.install}`"
            _log(f"benchmarks: peer {p.label} skipped: not installed ({p.install})")
            continue
        if p.key == "jax":
            mod.config.update("jax_enable_x64", True)  # float64 arrays stay float64
        loaded.append(p)
    return loaded, skipped


# --------------------------------------------------------------------------- figures


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
    rows = {}
    for k, med in t.medians().items():
        rows[k] = {
            "label": labels[k],
            "median_s": med,
            "per_op_us": med / n * 1e6,
            "ratio_to_torch": paired_ratio(t, k, "torch") if "torch" in contenders else None,
        }
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
    rows = {}
    for k, med in t.medians().items():
        rows[k] = {
            "label": labels[k],
            "median_s": med,
            "ratio_to_torch": paired_ratio(t, k, "torch") if "torch" in contenders else None,
        }
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
    out["first_layer"] = _matmul_costs(init, cfg["ordered_rounds"])
    return out


def _matmul_costs(init: Any, rounds: int) -> dict[str, Any]:
    """The first layer's x @ W^T alone: BLAS (fast) against the ordered k-loop, in ns per
    multiply-add pair, next to the cost of one NumPy pass over the (m, n) accumulator (the
    k-loop makes two per step: the rounded products, then the rounded sums)."""
    import numpy as np

    from runtime.context import KernelContext

    x, w = init.x, init.params[0][0]
    wt = w.T
    m, k = x.shape
    n = w.shape[0]
    fast, ordered = KernelContext(init.dtype, "fast"), KernelContext(init.dtype, "ordered")
    acc = np.ones((m, n), dtype=x.dtype)
    tmp = np.empty_like(acc)
    col, row = x[:, :1], wt[:1, :]
    t = interleaved(
        {
            "fast": lambda: fast.matmul(x, wt),
            "ordered": lambda: ordered.matmul(x, wt),
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
        "add_pass_ns_per_element": t.median("add_pass") / (m * n) * 1e9,
        "mul_pass_ns_per_element": t.median("mul_pass") / (m * n) * 1e9,
    }


def fig_conformance(cfg: dict[str, Any]) -> dict[str, Any]:
    import dataclasses

    from conformance.suite import default_properties, run_property

    out: dict[str, Any] = {"max_examples": cfg["conf_examples"], "dtypes": {}}
    for dt in cfg["conf_dtypes"]:
        rows = []
        for prop in default_properties([dt], ["fast", "ordered"]):
            spent = [0.0]

            def check(case: Any, inner: Any = prop.check, spent: list[float] = spent) -> Any:
                t0 = time.perf_counter()
                try:
                    return inner(case)
                finally:
                    spent[0] += time.perf_counter() - t0

            row = run_property(
                dataclasses.replace(prop, check=check), cfg["conf_examples"], seed=None
            )
            rows.append(
                {
                    "property": prop.name,
                    "kernels": prop.kernels,
                    "cases": row.cases,
                    "failed": row.failed,
                    "seconds": row.seconds,
                    "check_seconds": spent[0],
                    "cases_per_s": row.cases / row.seconds if row.seconds else 0.0,
                }
            )
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
    x, t = s.input(init.x), s.input(init.t)
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
        out["torch_saved_bytes"] = _torch_saved_bytes(init)
        out["torch_ratio"] = out["torch_saved_bytes"] / need
    return out


def _torch_saved_bytes(init: Any) -> int:
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


# --------------------------------------------------------------------------- main


def run(a: argparse.Namespace) -> dict[str, Any]:
    cfg = _config(a)
    threads = limit_threads(a.threads)
    res: dict[str, Any] = {
        "command": "python -m benchmarks " + " ".join(a.argv),
        "quick": a.quick,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "environment": environment(),
    }
    wanted = [p for p in a.peers.split(",") if p] if a.peers != "none" else []
    peers, skipped = _load_peers(wanted)
    threads = limit_threads(a.threads)  # again: the peers brought their own pools
    res["threads"] = threads
    res["peers"] = {p.key: {"label": p.label, "version": p.version} for p in peers}
    res["peers_skipped"] = skipped
    only = (
        set(a.only.split(","))
        if a.only
        else {"chain", "mlp", "ordered", "conformance", "memory", "model"}
    )
    t0 = time.perf_counter()
    if "chain" in only:
        _log("benchmarks: per-op overhead (chain) ...")
        res["chain"] = fig_chain(cfg, peers)
    if "mlp" in only:
        res["mlp"] = {}
        for dt in cfg["dtypes"]:
            _log(f"benchmarks: MLP step {dt} ...")
            res["mlp"][dt] = fig_mlp(cfg, peers, dt)
    if "ordered" in only:
        res["ordered"] = {}
        for dt in cfg["dtypes"]:
            _log(f"benchmarks: ordered/fast {dt} ...")
            res["ordered"][dt] = fig_ordered(cfg, dt)
    if "conformance" in only:
        _log("benchmarks: conformance throughput ...")
        res["conformance"] = fig_conformance(cfg)
    if "memory" in only:
        _log("benchmarks: tape memory ...")
        res["memory"] = fig_memory(cfg, any(p.key == "torch" for p in peers))
    if "model" in only:
        from .model_ops import fig_model

        _log("benchmarks: model-scale ops (conv layer, attention block) ...")
        have_torch = any(p.key == "torch" for p in peers)
        if not have_torch:
            _log("benchmarks: PyTorch absent: model-scale figure without a reference column")
        res["model"] = fig_model(cfg, have_torch)
    res["targets"] = targets(res)
    res["seconds"] = time.perf_counter() - t0
    return res


def targets(res: dict[str, Any]) -> list[dict[str, Any]]:
    out = []

    def add(name: str, measured: float | None, limit: float, what: str) -> None:
        out.append(
            {
                "target": name,
                "measured": measured,
                "limit": limit,
                "met": None if measured is None else measured <= limit,
                "what": what,
            }
        )

    chain = res.get("chain", {}).get("rows", {})
    if chain:
        add(
            "per-op eager overhead ≤ PyTorch's",
            chain["ours"]["ratio_to_torch"],
            T_PER_OP,
            "Session chain time / PyTorch chain time",
        )
    mlp = res.get("mlp", {}).get("float32", {}).get("rows", {})
    if mlp:
        add(
            "MLP step ≤ 1.25× PyTorch (float32)",
            mlp["ours"]["ratio_to_torch"],
            T_MLP,
            "eager Session step / PyTorch step",
        )
        if "autograd" in mlp:
            ag = statistics.median([mlp["ours"]["median_s"] / mlp["autograd"]["median_s"]])
            add(
                "MLP step faster than HIPS autograd (float32)",
                ag,
                1.0,
                "eager Session step / autograd step",
            )
    for dt, o in res.get("ordered", {}).items():
        add(f"ordered ≤ 5× fast ({dt})", o["ratio"], T_ORDERED, "ordered step / fast step")
    mem = res.get("memory")
    if mem:
        add(
            "tape memory ≤ 1.2× needed forward values",
            mem["ratio"],
            T_MEMORY,
            "tape bytes / bytes the backward reads",
        )
    return out


# --------------------------------------------------------------------------- report


def markdown(res: dict[str, Any]) -> str:
    env, th = res["environment"], res["threads"]
    L: list[str] = []
    L.append(
        f"Measured {res['started']} with `{res['command']}` "
        f"({res['seconds']:.0f} s{', quick smoke sizes' if res['quick'] else ''})."
    )
    L.append("")
    pools = th.get("threadpools")
    if isinstance(pools, list):
        pools_s = ", ".join(f"{p['prefix']} {p['num_threads']}" for p in pools)
    else:
        pools_s = str(pools)
    peers = ", ".join(f"{v['label']} {v['version']}" for v in res["peers"].values()) or "none"
    L.append(
        table(
            ["environment", ""],
            [
                [
                    "machine",
                    f"{env.get('cpu', env['machine'])}, {env['cpus']} CPUs, load average at "
                    f"start {env.get('load_average', '?')}",
                ],
                [
                    "Python / NumPy",
                    f"{env['python']} / {env['numpy']} ({env.get('numpy_blas', '?')})",
                ],
                ["peers", peers],
                [
                    "threads",
                    f"requested {th['requested']}; in effect: {pools_s}"
                    + (f"; torch {th['torch_threads']}" if "torch_threads" in th else ""),
                ],
                [
                    "skipped peers",
                    "; ".join(f"{k}: {v}" for k, v in res["peers_skipped"].items()) or "none",
                ],
            ],
        )
    )
    L.append("")
    if res.get("targets"):
        L.append("### Targets")
        L.append("")
        rows = []
        for t in res["targets"]:
            met = "–" if t["met"] is None else ("**met**" if t["met"] else "**not met**")
            rows.append(
                [t["target"], fmt_ratio(t["measured"]), f"≤ {t['limit']:g}×", met, t["what"]]
            )
        L.append(table(["target", "measured", "limit", "status", "measured as"], rows))
        L.append("")
    if "chain" in res:
        c = res["chain"]
        L.append(
            f"### 1. Per-op overhead: {c['n_ops']}-op chain on shape (4,), forward + "
            f"backward (median of {c['rounds']} interleaved rounds)"
        )
        L.append("")
        rows = [
            [
                r["label"],
                fmt_time(r["median_s"]),
                f"{r['per_op_us']:.1f} µs",
                fmt_ratio(r["ratio_to_torch"]),
            ]
            for r in c["rows"].values()
        ]
        L.append(table(["implementation", "chain", "per op", "× PyTorch"], rows))
        L.append("")
    if "mlp" in res:
        for dt, m in res["mlp"].items():
            sizes = "-".join(str(s) for s in m["sizes"])
            L.append(
                f"### 2. MLP {sizes}, batch {m['batch']}, {dt}: one SGD step (median of "
                f"{m['rounds']} interleaved rounds)"
            )
            L.append("")
            rows = [
                [r["label"], fmt_time(r["median_s"]), fmt_ratio(r["ratio_to_torch"])]
                for r in m["rows"].values()
            ]
            L.append(table(["implementation", "step", "× PyTorch"], rows))
            for k, why in m.get("skipped", {}).items():
                L.append(f"\n{k}: {why}.")
            L.append("")
    if "ordered" in res:
        L.append("### 3. `ordered` / `fast` on the MLP step (eager Session)")
        L.append("")
        rows = [
            [
                dt,
                fmt_time(o["fast_s"]),
                fmt_time(o["ordered_s"]),
                fmt_ratio(o["ratio"]),
                f"{o['fast_matmul_share']:.0%} / {o['ordered_matmul_share']:.0%}",
            ]
            for dt, o in res["ordered"].items()
        ]
        head = ["dtype", "fast", "ordered", "ordered / fast", "share in matmul (fast / ordered)"]
        L.append(table(head, rows))
        L.append("")
        rows = []
        for dt, o in res["ordered"].items():
            f = o["first_layer"]
            rows.append(
                [
                    dt,
                    "×".join(str(d) for d in f["shape"]),
                    f"{f['fast_ns_per_pair']:.3f} ns",
                    f"{f['ordered_ns_per_pair']:.3f} ns",
                    f"{f['mul_pass_ns_per_element']:.3f} + {f['add_pass_ns_per_element']:.3f} ns",
                ]
            )
        head = [
            "dtype",
            "first layer m×k×n",
            "BLAS per multiply-add",
            "ordered k-loop per multiply-add",
            "one NumPy pass per element (outer multiply + add)",
        ]
        L.append(table(head, rows))
        L.append("")
    if "conformance" in res:
        c = res["conformance"]
        L.append(
            f"### 4. Conformance throughput (`run_property`, {c['max_examples']} "
            "examples per property, derandomised)"
        )
        L.append("")
        rows = []
        for dt, d in c["dtypes"].items():
            for p in d["properties"]:
                share = p["check_seconds"] / p["seconds"] if p["seconds"] else 0.0
                rows.append(
                    [
                        dt,
                        p["property"],
                        p["kernels"],
                        p["cases"],
                        f"{p['seconds']:.2f} s",
                        f"{share:.0%}",
                        f"{p['cases_per_s']:.1f}",
                    ]
                )
            share = d["check_seconds"] / d["seconds"] if d["seconds"] else 0.0
            rows.append(
                [
                    f"**{dt}**",
                    "all",
                    "",
                    d["cases"],
                    f"{d['seconds']:.2f} s",
                    f"{share:.0%}",
                    f"**{d['cases_per_s']:.1f}**",
                ]
            )
        head = ["dtype", "property", "kernels", "cases", "time", "in the check", "cases/s"]
        L.append(table(head, rows))
        L.append("")
        L.append(
            "*in the check*: the share of the time spent in the property's check (runtime, "
            "spec and comparison); the rest is Hypothesis drawing graphs, inputs and seeds."
        )
        L.append("")
    if "memory" in res:
        m = res["memory"]
        L.append("### 5. Memory held by the tape in the MLP step (float32)")
        L.append("")
        rows = [
            [
                "tape: node values + saved tensors (distinct buffers)",
                f"{m['tape_bytes'] / 2**20:.2f} MiB",
                fmt_ratio(m["ratio"]),
            ],
            [
                "forward values the backward reads (linear x, W; relu x; loss ŷ, t)",
                f"{m['needed_bytes'] / 2**20:.2f} MiB",
                "1.00×",
            ],
        ]
        if "torch_saved_bytes" in m:
            rows.append(
                [
                    "PyTorch: tensors saved for backward (distinct storages)",
                    f"{m['torch_saved_bytes'] / 2**20:.2f} MiB",
                    fmt_ratio(m["torch_ratio"]),
                ]
            )
        L.append(table(["", "bytes", "× needed"], rows))
        L.append("")
    if "model" in res:
        from .model_ops import markdown_model

        L.extend(markdown_model(res["model"]))
    return "\n".join(L)


def write_markdown(path: Path, body: str) -> None:
    block = f"{BEGIN}\n{body}\n{END}"
    if path.exists():
        old = path.read_text()
        if BEGIN in old and END in old:
            head, rest = old.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            path.write_text(head + block + tail)
            return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Benchmarks\n\nGenerated by `python -m benchmarks`.\n\n{block}\n")


def plot(res: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        _log(
            "benchmarks: matplotlib is not installed: plot skipped (pip install 'torchlean[bench]')"
        )
        return False
    # (title, [(label, value)], log scale, reference line (value, label) or None)
    panels: list[tuple[str, list[tuple[str, float]], bool, tuple[float, str] | None]] = []
    if "chain" in res:
        rows = res["chain"]["rows"]
        ref = (rows["torch"]["per_op_us"], "PyTorch") if "torch" in rows else None
        data = [(r["label"], r["per_op_us"]) for r in rows.values()]
        panels.append((f"{res['chain']['n_ops']}-op chain on (4,): µs per op", data, True, ref))
    for dt, m in res.get("mlp", {}).items():
        rows = m["rows"]
        ref = (rows["torch"]["median_s"] * 1e3, "PyTorch") if "torch" in rows else None
        data = [(r["label"], r["median_s"] * 1e3) for r in rows.values()]
        panels.append((f"MLP SGD step, {dt}: ms per step", data, False, ref))
    if "ordered" in res:
        data = [(f"{dt} ordered / fast", o["ratio"]) for dt, o in res["ordered"].items()]
        panels.append(("ordered / fast on the MLP step (target ≤ 5×)", data, False, (5.0, "5×")))
    if not panels:
        return False
    heights = [0.9 + 0.32 * len(p[1]) for p in panels]
    fig, axes = plt.subplots(
        len(panels), 1, figsize=(9, sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    if len(panels) == 1:
        axes = [axes]
    for ax, (title, data, log, ref) in zip(axes, panels, strict=True):
        names = [d[0] for d in data]
        vals = [d[1] for d in data]
        colors = ["tab:blue" if "torchlean" in n or "ordered" in n else "tab:gray" for n in names]
        ax.barh(names, vals, color=colors)
        ax.invert_yaxis()
        if log:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(ScalarFormatter())
        if ref is not None:
            ax.axvline(ref[0], color="tab:red", linestyle="--", linewidth=1)
            ax.text(ref[0], len(vals) - 0.45, f" {ref[1]}", color="tab:red", fontsize=7)
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
        for i, v in enumerate(vals):
            ax.text(v, i, f" {v:.3g}", va="center", fontsize=7)
        ax.margins(x=0.12)
    fig.suptitle(
        f"torchlean vs peers ({res['started']}, threads: {res['threads']['requested']})", fontsize=9
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def summary(res: dict[str, Any]) -> str:
    L = []
    for t in res.get("targets", []):
        met = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT met")
        L.append(f"{t['target']}: {fmt_ratio(t['measured'])} (limit {t['limit']:g}×) {met}")
    return "\n".join(L)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run of everything")
    p.add_argument(
        "--repeat",
        type=int,
        default=7,
        help="rounds scale: chain 6x, MLP 3x, ordered 1x this (default 7)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="BLAS/OpenMP/XLA threads for us and every peer (default 1)",
    )
    p.add_argument(
        "--peers",
        default="torch,autograd,jax,micrograd",
        help="comma list of peers to measure, or 'none'",
    )
    p.add_argument(
        "--only",
        default="",
        help="comma list of figures: chain,mlp,ordered,conformance,memory,model",
    )
    p.add_argument(
        "--conf-examples",
        type=int,
        default=50,
        help="conformance examples per property (default 50)",
    )
    p.add_argument(
        "--out",
        default=None,
        help="Markdown report (default docs/BENCHMARKS.md; none with --quick)",
    )
    p.add_argument(
        "--png", default=None, help="plot (default docs/benchmarks.png; none with --quick)"
    )
    p.add_argument("--json", default=None, help="also write the raw results as JSON")
    a = p.parse_args(argv)
    a.argv = argv
    set_thread_env(a.threads)
    res = run(a)
    out = a.out or (None if a.quick else str(DEFAULT_OUT))
    png = a.png or (None if a.quick else str(DEFAULT_PNG))
    md = markdown(res)
    print(md)
    if out:
        write_markdown(Path(out), md)
        _log(f"benchmarks: report written to {out}")
    if png and plot(res, Path(png)):
        _log(f"benchmarks: plot written to {png}")
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1, default=str))
    _log(summary(res))
    return 0
