"""The PNG plot of a `python -m benchmarks` run (matplotlib, optional).

Invariants:
- `plot` is a function of the measurement record alone: one horizontal bar panel per
  figure present (per-op chain, the MLP step per dtype, ordered/fast), ours in blue and the
  peers in grey, with PyTorch (or the 5x target) as a dashed reference line.
- Without matplotlib, or with none of those figures measured, nothing is written and
  `plot` returns False (the missing package is named on stderr).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .harness import log

__all__ = ["Panel", "panels", "plot"]

# (title, [(label, value)], log scale, reference line (value, label) or None)
Panel = tuple[str, list[tuple[str, float]], bool, tuple[float, str] | None]


def panels(res: dict[str, Any]) -> list[Panel]:
    """The panels the figures of `res` give, top to bottom."""
    out: list[Panel] = []
    if "chain" in res:
        rows = res["chain"]["rows"]
        ref = (rows["torch"]["per_op_us"], "PyTorch") if "torch" in rows else None
        data = [(r["label"], r["per_op_us"]) for r in rows.values()]
        out.append((f"{res['chain']['n_ops']}-op chain on (4,): µs per op", data, True, ref))
    for dt, m in res.get("mlp", {}).items():
        rows = m["rows"]
        ref = (rows["torch"]["median_s"] * 1e3, "PyTorch") if "torch" in rows else None
        data = [(r["label"], r["median_s"] * 1e3) for r in rows.values()]
        out.append((f"MLP SGD step, {dt}: ms per step", data, False, ref))
    if "ordered" in res:
        data = [(f"{dt} ordered / fast", o["ratio"]) for dt, o in res["ordered"].items()]
        out.append(("ordered / fast on the MLP step (target ≤ 3×)", data, False, (3.0, "3×")))
    return out


def plot(res: dict[str, Any], path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import ScalarFormatter
    except ImportError:
        log(
            "benchmarks: matplotlib is not installed: plot skipped (pip install 'torchlean[bench]')"
        )
        return False
    ps = panels(res)
    if not ps:
        return False
    heights = [0.9 + 0.32 * len(p[1]) for p in ps]
    fig, axes = plt.subplots(
        len(ps), 1, figsize=(9, sum(heights)), gridspec_kw={"height_ratios": heights}
    )
    if len(ps) == 1:
        axes = [axes]
    for ax, panel in zip(axes, ps, strict=True):
        _draw(ax, panel, ScalarFormatter)
    fig.suptitle(
        f"torchlean vs peers ({res['started']}, threads: {res['threads']['requested']})", fontsize=9
    )
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def _draw(ax: Any, panel: Panel, formatter: Any) -> None:
    """One panel on the axes `ax`; `formatter` is matplotlib's ScalarFormatter class."""
    title, data, log_scale, ref = panel
    names = [d[0] for d in data]
    vals = [d[1] for d in data]
    colors = ["tab:blue" if "torchlean" in n or "ordered" in n else "tab:gray" for n in names]
    ax.barh(names, vals, color=colors)
    ax.invert_yaxis()
    if log_scale:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(formatter())
    if ref is not None:
        ax.axvline(ref[0], color="tab:red", linestyle="--", linewidth=1)
        ax.text(ref[0], len(vals) - 0.45, f" {ref[1]}", color="tab:red", fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:.3g}", va="center", fontsize=7)
    ax.margins(x=0.12)
