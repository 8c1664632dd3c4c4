"""Small per-op plots for the HTML reports, as PNG `data:` URIs (matplotlib, optional).

Invariants:
- `available()` is False when matplotlib cannot be imported; every plot function then
  returns None and the pages say that they hold tables only (`NO_PLOTS`).
- Plots use matplotlib's object API on an Agg canvas (no pyplot, no global state, no
  display) and are saved as 16-colour PNGs without metadata, so the same points give the
  same bytes.
- A plot shows what its caller measured and nothing else: `ratio_strip` the worst
  error / budget of each (property, kernels) per dtype with the budget line at 1;
  `ulp_bars` the max ulp per dtype and direction with the engine's base budget marked.
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Sequence
from typing import Any

__all__ = ["NO_PLOTS", "available", "ratio_strip", "ulp_bars"]

NO_PLOTS = (
    "matplotlib is not installed: this page has the tables only "
    "(pip install matplotlib for the per-op plots)"
)

_DTYPES = ("exact", "float64", "float32", "bfloat16", "float16")


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(w: float = 2.6, h: float = 1.3) -> Any:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=72)
    FigureCanvasAgg(fig)
    return fig


def _uri(fig: Any) -> str:
    """The figure as a 16-colour PNG (a plot has a handful of colours; a tenth of the bytes
    of the RGBA image) in a `data:` URI."""
    from PIL import Image

    fig.canvas.draw()
    w, h = fig.canvas.get_width_height()
    img = Image.frombuffer("RGBA", (w, h), bytes(fig.canvas.buffer_rgba()), "raw", "RGBA", 0, 1)
    buf = io.BytesIO()
    img.convert("RGB").quantize(colors=16).save(buf, format="PNG", optimize=True)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _finite(v: float, cap: float) -> float:
    return cap if not math.isfinite(v) else min(v, cap)


def _order(dtypes: Sequence[str]) -> list[str]:
    return sorted(set(dtypes), key=lambda d: (_DTYPES.index(d) if d in _DTYPES else 99, d))


def ratio_strip(points: Sequence[tuple[str, float, bool]]) -> str | None:
    """(dtype, worst error / budget, failed) points: one column per dtype, the budget line
    at 1, failures in red; None without matplotlib or points."""
    if not points or not available():
        return None
    fig = _figure()
    ax = fig.add_axes((0.16, 0.24, 0.8, 0.7))
    cols = _order([d for d, _, _ in points])
    top = max(1.25, *(_finite(v, 10.0) * 1.1 for _, v, _ in points))
    for d, v, failed in points:
        x = cols.index(d)
        ax.plot([x], [_finite(v, top)], "o", ms=3, color="#b00020" if failed else "#1f5fa8")
    ax.axhline(1.0, color="#b00020", lw=0.8, ls="--")
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(0, top)
    ax.set_xticks(range(len(cols)), [c.replace("float", "f") for c in cols], fontsize=6)
    ax.tick_params(axis="y", labelsize=6)
    return _uri(fig)


def ulp_bars(values: Sequence[tuple[str, str, float]], budget: float | None) -> str | None:
    """(dtype, direction, max ulp) bars, grouped by dtype, with the base budget as a line;
    None without matplotlib or values."""
    if not values or not available():
        return None
    fig = _figure()
    ax = fig.add_axes((0.16, 0.24, 0.8, 0.7))
    cols = _order([d for d, _, _ in values])
    dirs = ["forward", "backward", "jvp"]
    colors = {"forward": "#1f5fa8", "backward": "#e08a00", "jvp": "#3a9a48"}
    top = max([1.0] + [_finite(v, 1e6) for _, _, v in values] + [budget or 0.0]) * 1.15
    for d, direction, v in values:
        x = cols.index(d) + (dirs.index(direction) - 1) * 0.27
        ax.bar([x], [_finite(v, top)], width=0.25, color=colors[direction])
    if budget is not None:
        ax.axhline(budget, color="#b00020", lw=0.8, ls="--")
    ax.set_xlim(-0.6, len(cols) - 0.4)
    ax.set_ylim(0, top)
    ax.set_xticks(range(len(cols)), [c.replace("float", "f") for c in cols], fontsize=6)
    ax.tick_params(axis="y", labelsize=6)
    return _uri(fig)
