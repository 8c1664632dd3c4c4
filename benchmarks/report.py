"""The Markdown report and the stderr summary of a `python -m benchmarks` run.

Invariants:
- `markdown` is a pure function of the measurement record (`cli.run`'s dict, or the same
  dict read back from `--json`): the same record gives the same text, byte for byte.
- Sections come in a fixed order (environment, targets, figures 1-6), and a figure absent
  from the record (`--only`) leaves its section out; no section reads another's figure.
- `write_markdown` replaces only the text between `BEGIN` and `END` in an existing file
  and otherwise writes a new file holding just the generated block.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .harness import fmt_ratio, fmt_time, table

__all__ = ["BEGIN", "END", "markdown", "summary", "write_markdown"]

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"

Section = Callable[[Any], list[str]]


def markdown(res: dict[str, Any]) -> str:
    """The report body (what goes between the markers) for the run `res`."""
    L = _header(res)
    if res.get("targets"):
        L += _targets(res["targets"])
    for key, section in _SECTIONS:
        if key in res:
            L += section(res[key])
    return "\n".join(L)


def _header(res: dict[str, Any]) -> list[str]:
    return [
        f"Measured {res['started']} with `{res['command']}` "
        f"({res['seconds']:.0f} s{', quick smoke sizes' if res['quick'] else ''}).",
        "",
        _environment(res),
        "",
    ]


def _environment(res: dict[str, Any]) -> str:
    env, th = res["environment"], res["threads"]
    pools = th.get("threadpools")
    if isinstance(pools, list):
        pools_s = ", ".join(f"{p['prefix']} {p['num_threads']}" for p in pools)
    else:
        pools_s = str(pools)
    peers = ", ".join(f"{v['label']} {v['version']}" for v in res["peers"].values()) or "none"
    return table(
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


def _targets(targets: list[dict[str, Any]]) -> list[str]:
    rows = []
    for t in targets:
        met = "–" if t["met"] is None else ("**met**" if t["met"] else "**not met**")
        rows.append([t["target"], fmt_ratio(t["measured"]), f"≤ {t['limit']:g}×", met, t["what"]])
    head = ["target", "measured", "limit", "status", "measured as"]
    return ["### Targets", "", table(head, rows), ""]


def _chain(c: dict[str, Any]) -> list[str]:
    rows = [
        [
            r["label"],
            fmt_time(r["median_s"]),
            f"{r['per_op_us']:.1f} µs",
            fmt_ratio(r["ratio_to_torch"]),
        ]
        for r in c["rows"].values()
    ]
    return [
        f"### 1. Per-op overhead: {c['n_ops']}-op chain on shape (4,), forward + "
        f"backward (median of {c['rounds']} interleaved rounds)",
        "",
        table(["implementation", "chain", "per op", "× PyTorch"], rows),
        "",
    ]


def _mlp(mlp: dict[str, Any]) -> list[str]:
    L: list[str] = []
    for dt, m in mlp.items():
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
    return L


def _ordered(ordered: dict[str, Any]) -> list[str]:
    return [
        "### 3. `ordered` / `fast` on the MLP step (eager Session)",
        "",
        _ordered_steps(ordered),
        "",
        _ordered_first_layer(ordered),
        "",
    ]


def _ordered_steps(ordered: dict[str, Any]) -> str:
    rows = [
        [
            dt,
            fmt_time(o["fast_s"]),
            fmt_time(o["ordered_s"]),
            fmt_ratio(o["ratio"]),
            f"{o['fast_matmul_share']:.0%} / {o['ordered_matmul_share']:.0%}",
        ]
        for dt, o in ordered.items()
    ]
    head = ["dtype", "fast", "ordered", "ordered / fast", "share in matmul (fast / ordered)"]
    return table(head, rows)


def _ordered_first_layer(ordered: dict[str, Any]) -> str:
    rows = []
    for dt, o in ordered.items():
        f = o["first_layer"]
        rows.append(
            [
                dt,
                "×".join(str(d) for d in f["shape"]),
                f"{f['fast_ns_per_pair']:.3f} ns",
                f"{f['ordered_ns_per_pair']:.3f} ns"
                + ("" if f.get("ordered_compiled", False) else " (not compiled)"),
                f"{f['reference_ns_per_pair']:.3f} ns" if "reference_ns_per_pair" in f else "–",
                f"{f['mul_pass_ns_per_element']:.3f} + {f['add_pass_ns_per_element']:.3f} ns",
            ]
        )
    head = [
        "dtype",
        "first layer m×k×n",
        "BLAS per multiply-add",
        "ordered k-loop per multiply-add (compiled)",
        "ordered k-loop, NumPy reference",
        "one NumPy pass per element (outer multiply + add)",
    ]
    return table(head, rows)


def _conformance(c: dict[str, Any]) -> list[str]:
    rows = []
    for dt, d in c["dtypes"].items():
        for p in d["properties"]:
            rows.append(
                [dt, p["property"], p["kernels"], *_throughput(p, f"{p['cases_per_s']:.1f}")]
            )
        rows.append([f"**{dt}**", "all", "", *_throughput(d, f"**{d['cases_per_s']:.1f}**")])
    head = ["dtype", "property", "kernels", "cases", "time", "in the check", "cases/s"]
    return [
        f"### 4. Conformance throughput (`run_properties`, {c['max_examples']} "
        "examples per property, derandomised, one process)",
        "",
        table(head, rows),
        "",
        "*in the check*: the share of the time spent in the property's check (runtime, "
        "spec and comparison); the rest is Hypothesis drawing graphs, inputs and seeds. "
        "Properties that draw the same cases share each draw, and each one's time is its "
        "share of their runs.",
        "",
    ]


def _throughput(d: dict[str, Any], rate: str) -> list[Any]:
    """cases, time, share in the check, rate: the last four cells of a throughput row."""
    share = d["check_seconds"] / d["seconds"] if d["seconds"] else 0.0
    return [d["cases"], f"{d['seconds']:.2f} s", f"{share:.0%}", rate]


def _memory(m: dict[str, Any]) -> list[str]:
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
    return [
        "### 5. Memory held by the tape in the MLP step (float32)",
        "",
        table(["", "bytes", "× needed"], rows),
        "",
    ]


def _model(m: dict[str, Any]) -> list[str]:
    from .model_ops import markdown_model

    return markdown_model(m)


# the figure sections, in report order: (key in the measurement record, writer)
_SECTIONS: tuple[tuple[str, Section], ...] = (
    ("chain", _chain),
    ("mlp", _mlp),
    ("ordered", _ordered),
    ("conformance", _conformance),
    ("memory", _memory),
    ("model", _model),
)


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


def summary(res: dict[str, Any]) -> str:
    L = []
    for t in res.get("targets", []):
        met = "n/a" if t["met"] is None else ("met" if t["met"] else "NOT met")
        L.append(f"{t['target']}: {fmt_ratio(t['measured'])} (limit {t['limit']:g}×) {met}")
    return "\n".join(L)
