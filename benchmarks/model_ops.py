"""Benchmark figure 6: model-scale ops against PyTorch CPU (skipped, and named, when absent).

Two workloads, forward + backward of the sum of the output, float32:
- a conv layer: conv2d(x, w, b, padding=1) with x (N, C_in, H, W), w (C_out, C_in, 3, 3);
- an attention block: multi_head_attention(x, x, x, wq, wk, wv, wo) over x (B, L, E),
  causal, then layer_norm(x + attention).
Ours runs the eager Session with the `fast` kernels and, separately, the `ordered` ones
(bit-exact to spec). conv2d is the spec's composite (gather im2col + matmul), not a
dedicated convolution kernel. Nothing here asserts on time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .harness import fmt_ratio, fmt_time, interleaved, median_rows, paired_ratio, table

__all__ = ["fig_model", "markdown_model"]

Step = Callable[[], Any]


def _conv_data(n: int, c: int, hw: int, co: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((n, c, hw, hw)).astype(np.float32),
        "w": (rng.standard_normal((co, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32),
        "b": np.zeros(co, dtype=np.float32),
    }


def _attn_data(b: int, length: int, e: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    d = {"x": rng.standard_normal((b, length, e)).astype(np.float32)}
    for k in ("wq", "wk", "wv", "wo"):
        d[k] = (rng.standard_normal((e, e)) / np.sqrt(e)).astype(np.float32)
    d["g"] = np.ones(e, dtype=np.float32)
    d["beta"] = np.zeros(e, dtype=np.float32)
    return d


def _ours_conv(d: dict[str, np.ndarray], kernels: str) -> Step:
    from runtime.session import Session

    def run() -> Any:
        s = Session(dtype="float32", kernels=kernels)
        x, w, b = (s.input(d[k], requires_grad=True) for k in ("x", "w", "b"))
        return s.backward_scalar_dense_all(s.sum(s.conv2d(x, w, b, padding=(1, 1))))

    return run


def _ours_attn(d: dict[str, np.ndarray], heads: int, kernels: str) -> Step:
    from runtime.session import Session

    def run() -> Any:
        s = Session(dtype="float32", kernels=kernels)
        r = {k: s.input(v, requires_grad=True) for k, v in d.items()}
        x = r["x"]
        a = s.multi_head_attention(
            x, x, x, r["wq"], r["wk"], r["wv"], r["wo"], heads=heads, causal=1
        )
        y = s.layer_norm(s.add(x, a), r["g"], r["beta"])
        return s.backward_scalar_dense_all(s.sum(y))

    return run


def _torch_conv(d: dict[str, np.ndarray]) -> Step:
    import torch
    import torch.nn.functional as F

    ts = {k: torch.from_numpy(v).requires_grad_() for k, v in d.items()}

    def run() -> Any:
        y = F.conv2d(ts["x"], ts["w"], ts["b"], padding=1)
        return torch.autograd.grad(y.sum(), list(ts.values()))

    return run


def _torch_attn(d: dict[str, np.ndarray], heads: int) -> Step:
    import torch
    import torch.nn.functional as F

    ts = {k: torch.from_numpy(v).requires_grad_() for k, v in d.items()}

    def run() -> Any:
        x = ts["x"]
        b, length, e = x.shape

        def split(t: Any) -> Any:
            return t.reshape(b, length, heads, e // heads).transpose(1, 2)

        q, k, v = (split(x @ ts[w].T) for w in ("wq", "wk", "wv"))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        a = o.transpose(1, 2).reshape(b, length, e) @ ts["wo"].T
        y = F.layer_norm(x + a, (e,), ts["g"], ts["beta"])
        return torch.autograd.grad(y.sum(), list(ts.values()))

    return run


def fig_model(cfg: dict[str, Any], have_torch: bool) -> dict[str, Any]:
    """Median step times of both workloads for ours (fast, ordered) and PyTorch."""
    n, c, hw, co = cfg["conv"]
    b, length, e, heads = cfg["attn"]
    rounds = cfg["model_rounds"]
    out: dict[str, Any] = {"rounds": rounds, "workloads": {}}
    cd, ad = _conv_data(n, c, hw, co), _attn_data(b, length, e)
    work = {
        "conv": (
            f"conv2d 3x3 pad 1: x ({n}, {c}, {hw}, {hw}), w ({co}, {c}, 3, 3), + bias",
            {"ours": _ours_conv(cd, "fast"), "ours_ordered": _ours_conv(cd, "ordered")},
            _torch_conv(cd) if have_torch else None,
        ),
        "attention": (
            f"multi-head self-attention (causal, {heads} heads) + residual + layer_norm: "
            f"x ({b}, {length}, {e})",
            {
                "ours": _ours_attn(ad, heads, "fast"),
                "ours_ordered": _ours_attn(ad, heads, "ordered"),
            },
            _torch_attn(ad, heads) if have_torch else None,
        ),
    }
    labels = {
        "ours": "torchlean Session (eager, fast)",
        "ours_ordered": "torchlean Session (eager, ordered: bit-exact to spec)",
        "torch": "PyTorch CPU",
    }
    for key, (what, contenders, torch_step) in work.items():
        if torch_step is not None:
            contenders = {**contenders, "torch": torch_step}
        t = interleaved(contenders, rounds)
        rows = median_rows(t, labels, "torch" if torch_step else None)
        out["workloads"][key] = {
            "what": what,
            "rows": rows,
            "ordered_over_fast": paired_ratio(t, "ours_ordered", "ours"),
        }
    if not have_torch:
        out["skipped"] = "PyTorch is not installed: no reference column (pip install torch)"
    return out


def markdown_model(m: dict[str, Any]) -> list[str]:
    L = [
        f"### 6. Model-scale ops: forward + backward, float32 (median of {m['rounds']} "
        "interleaved rounds)",
        "",
    ]
    rows = []
    for w in m["workloads"].values():
        for r in w["rows"].values():
            rows.append(
                [w["what"], r["label"], fmt_time(r["median_s"]), fmt_ratio(r["ratio_to_torch"])]
            )
    L.append(table(["workload", "implementation", "step", "× PyTorch"], rows))
    L.append("")
    L.append(
        table(
            ["workload", "ordered / fast (paired)"],
            [[k, fmt_ratio(w["ordered_over_fast"])] for k, w in m["workloads"].items()],
        )
    )
    if "skipped" in m:
        L.append(f"\nPyTorch skipped: {m['skipped']}.")
    L.append("")
    return L
