"""Side by side with auto_LiRPA (opt-in): output-bound widths of our CROWN and alpha-CROWN
against auto_LiRPA's CROWN and alpha-CROWN on the same networks and boxes.

Run (auto_LiRPA installed in a separate venv that sees the project's packages):
    PYTHONPATH=$PWD /work/lirpa-venv/bin/python scripts/lirpa_compare.py [--quick]
Without auto_LiRPA (or torch) it prints a line naming the missing package and exits 0.

Invariants:
- Networks: the README's Iris model (`runtime.examples.mlp --kernels ordered`, 4-8-3 ReLU,
  float32), two more Iris MLPs trained the same way (4-16-16-3 ReLU and tanh), and small
  seeded conv nets (Conv2d / BatchNorm2d / AvgPool2d / MaxPool2d / ReLU / Flatten /
  Linear). The torch
  copy for auto_LiRPA is built from the result's stored state (same values, exactly), in
  float64, except float32 for nets with tanh / sigmoid / MaxPool2d (auto_LiRPA's tanh
  relaxation uses float32 lookup tables and its max pooling fails in float64); the box is
  center +- radius in that dtype.
- Our numbers are the real level (exact real network, outward rounding); a box's width is
  the sum over outputs of upper - lower. The reported ratio is ours / auto_LiRPA's - 1 per
  box (negative: ours narrower); median and worst (largest) over the boxes.
- auto_LiRPA's bounds are not sound in floating point; this compares tightness only.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from typing import Any

import numpy as np

from runtime.examples import mlp
from runtime.nn import (
    AvgPool2d,
    BatchNorm2d,
    Conv2d,
    Flatten,
    Linear,
    MaxPool2d,
    ReLU,
    Sequential,
    Sigmoid,
    Tanh,
)
from runtime.optim import Adam
from runtime.trainer import Result, Trainer
from runtime.verification import verify


def _missing() -> str | None:
    for name in ("torch", "auto_LiRPA"):
        try:
            __import__(name)
        except ImportError:
            return name
    return None


def _train_iris(model: Sequential, steps: int = 300) -> Result:
    data = mlp.load_iris()
    data = [data[(i % 3) * 50 + i // 3] for i in range(len(data))]
    tr = Trainer(model, "cross_entropy", Adam(0.02), dtype="float32", kernels="ordered", seed=0)
    run = tr.open()
    pos = 0
    for _ in range(steps):
        batch = [data[(pos + j) % len(data)] for j in range(10)]
        pos = (pos + 10) % len(data)
        run.step(batch, batch=True, loss=False)
    return run.finish()


def _conv_result(model: Sequential, seed: int, dtype: str = "float32") -> Result:
    """Seeded weights ~ N(0, 1/4) (BatchNorm: running variances in [0.5, 2])."""
    from runtime.backends import get_backend

    rng = np.random.default_rng(seed)
    state: list[Any] = []
    for layer in model.layers:
        if isinstance(layer, BatchNorm2d):
            c = layer.c
            state += [rng.uniform(0.5, 1.5, c), rng.normal(size=c) * 0.1]
            state += [rng.normal(size=c) * 0.1, rng.uniform(0.5, 2, c), np.asarray(0.0)]
        else:
            state += [rng.normal(size=sp.shape) / 2 for sp in layer.state_specs()]
    np_dt = get_backend("numpy").dtype(dtype)
    return Result(model, "mse", dtype, "eager", "ordered", False,
                  [np.asarray(a, dtype=np_dt) for a in state])  # fmt: skip


def networks(quick: bool) -> list[tuple[str, Any, list[np.ndarray], float]]:
    """(name, a function building the result, centers, radius) per network."""
    iris = [np.asarray(x) for x, _ in mlp.load_iris()]
    pick = iris[:: 25 if quick else 10]
    out: list[tuple[str, Any, list[np.ndarray], float]] = [
        ("iris 4-8-3 relu (README)",
         lambda: mlp.main(["--kernels", "ordered"], out=io.StringIO()), pick, 0.25)]  # fmt: skip
    out.append(("iris 4-16-16-3 relu", lambda: _train_iris(Sequential(
        Linear(4, 16), ReLU(), Linear(16, 16), ReLU(), Linear(16, 3))), pick, 0.25))  # fmt: skip
    out.append(("iris 4-16-16-3 tanh", lambda: _train_iris(Sequential(
        Linear(4, 16), Tanh(), Linear(16, 16), Tanh(), Linear(16, 3))), pick, 0.25))  # fmt: skip
    rng = np.random.default_rng(7)
    n = 3 if quick else 8
    cnn1 = Sequential(Conv2d(1, 3, 3, padding=1), BatchNorm2d(3), ReLU(), AvgPool2d(2),
                      Conv2d(3, 4, 2), ReLU(), Flatten(), Linear(4, 3))  # fmt: skip
    out.append(("conv 1x4x4 (bn, avgpool)", lambda: _conv_result(cnn1, 0),
                 [rng.uniform(0, 1, (1, 4, 4)) for _ in range(n)], 0.05))  # fmt: skip
    cnn2 = Sequential(Conv2d(1, 4, 3, stride=2, padding=1), ReLU(), Conv2d(4, 4, 3, padding=1),
                      ReLU(), Flatten(), Linear(36, 10), ReLU(), Linear(10, 3))  # fmt: skip
    out.append(("conv 1x6x6 (2 convs)", lambda: _conv_result(cnn2, 1),
                 [rng.uniform(0, 1, (1, 6, 6)) for _ in range(n)], 0.03))  # fmt: skip
    cnn3 = Sequential(Conv2d(1, 3, 3, padding=1), ReLU(), MaxPool2d(2), Conv2d(3, 4, 2),
                      ReLU(), Flatten(), Linear(16, 3))  # fmt: skip
    out.append(("conv 1x6x6 (maxpool)", lambda: _conv_result(cnn3, 2),
                 [rng.uniform(0, 1, (1, 6, 6)) for _ in range(n)], 0.03))  # fmt: skip
    return out


def torch_model(res: Result) -> tuple[Any, Any]:
    """The result's network as a torch module (eval mode) and its torch dtype."""
    import torch
    from torch import nn

    f32 = any(isinstance(la, (Tanh, Sigmoid, MaxPool2d)) for la in res.model.layers)
    dt = torch.float32 if f32 else torch.float64
    state = res.state()
    mods: list[Any] = []
    for layer, occ in zip(res.model.layers, res.model.occurrences(), strict=True):
        st = [torch.tensor(np.asarray(state[k], dtype=np.float64), dtype=dt) for k in occ]
        m = _torch_layer(layer, st, nn)
        if st and not isinstance(layer, BatchNorm2d):
            with torch.no_grad():
                for p, v in zip(m.parameters(), st, strict=True):
                    p.copy_(v)
        mods.append(m)
    return nn.Sequential(*mods).to(dt).eval(), dt


def _torch_layer(layer: Any, st: list[Any], nn: Any) -> Any:
    if isinstance(layer, Linear):
        return nn.Linear(layer.in_features, layer.out_features)
    if isinstance(layer, Conv2d):
        a = layer.attrs
        return nn.Conv2d(layer.cin, layer.cout, layer.k, stride=a["stride"], padding=a["padding"],
                         dilation=a["dilation"], groups=a["groups"], bias=layer.bias)  # fmt: skip
    if isinstance(layer, BatchNorm2d):
        bn = nn.BatchNorm2d(layer.c, eps=float(layer.eps))
        with __import__("torch").no_grad():
            bn.weight.copy_(st[0])
            bn.bias.copy_(st[1])
            bn.running_mean.copy_(st[2])
            bn.running_var.copy_(st[3])
        return bn
    if isinstance(layer, AvgPool2d):
        a = layer.attrs
        return nn.AvgPool2d(a["kernel_size"], a["stride"], a["padding"], count_include_pad=True)
    if isinstance(layer, MaxPool2d):
        a = layer.attrs
        return nn.MaxPool2d(a["kernel_size"], a["stride"], a["padding"])
    simple = {ReLU: nn.ReLU, Tanh: nn.Tanh, Sigmoid: nn.Sigmoid, Flatten: nn.Flatten}
    return simple[type(layer)]()


def lirpa_widths(model: Any, dt: Any, center: np.ndarray, radius: float) -> dict[str, float]:
    """auto_LiRPA's CROWN and alpha-CROWN total widths on the box (defaults but 100 steps)."""
    import torch
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm

    x = torch.tensor(center[None], dtype=dt)
    pool = any(isinstance(m, torch.nn.MaxPool2d) for m in model.modules())
    opts = {"conv_mode": "matrix"} if pool else {}  # its max pooling needs the matrix mode
    bm = BoundedModule(model, torch.zeros_like(x), bound_opts=opts, device="cpu", verbose=0)
    bm.set_bound_opts({"optimize_bound_args": {"iteration": 100, "early_stop_patience": 20}})
    out = {}
    for name, method in (("crown", "CROWN"), ("alpha-crown", "alpha-CROWN")):
        with contextlib.redirect_stdout(io.StringIO()):  # its progress lines
            bt = BoundedTensor(x, PerturbationLpNorm(norm=float("inf"), eps=radius))
            lo = bm.compute_bounds(x=(bt,), method=method, bound_upper=False)[0]
            bt = BoundedTensor(x, PerturbationLpNorm(norm=float("inf"), eps=radius))
            hi = bm.compute_bounds(x=(bt,), method=method, bound_lower=False)[1]
        out[name] = float((hi - lo).sum())
    return out


def compare(name: str, res: Result, centers: list[np.ndarray], radius: float) -> dict[str, Any]:
    model, dt = torch_model(res)
    ratios: dict[str, list[float]] = {"crown": [], "alpha-crown": []}
    ours_time = 0.0
    for c in centers:
        theirs = lirpa_widths(model, dt, c, radius)
        for alg in ratios:
            t0 = time.perf_counter()
            w = float(sum(verify(res, c, radius, algorithm=alg).real.widths()))
            ours_time += time.perf_counter() - t0
            ratios[alg].append(w / theirs[alg] - 1)
    return {"name": name, "boxes": len(centers), "radius": radius, "ratios": ratios,
            "seconds": ours_time / (2 * len(centers))}  # fmt: skip


def report(rows: list[dict[str, Any]], out: Any = sys.stdout) -> None:
    print("| network | boxes | radius | CROWN median | CROWN worst | alpha median | alpha worst |",
          file=out)  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|", file=out)
    for r in rows:
        cr, al = r["ratios"]["crown"], r["ratios"]["alpha-crown"]
        print(f"| {r['name']} | {r['boxes']} | {r['radius']} | {statistics.median(cr):+.4%} | "
              f"{max(cr):+.4%} | {statistics.median(al):+.4%} | {max(al):+.4%} |",
              file=out)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="fewer boxes")
    ap.add_argument("--only", default="", help="networks whose name contains this text")
    args = ap.parse_args(argv)
    miss = _missing()
    if miss is not None:
        print(f"skipped: {miss} is not installed (auto_LiRPA side by side is opt-in)")
        return 0
    rows = []
    for name, build, centers, radius in networks(args.quick):
        if args.only not in name:
            continue
        rows.append(compare(name, build(), centers, radius))
        print(f"done: {name}", file=sys.stderr)
    report(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
