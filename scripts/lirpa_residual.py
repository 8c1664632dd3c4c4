"""Side by side with auto_LiRPA on a residual MLP (opt-in): output-bound widths of our IBP,
CROWN and alpha-CROWN against auto_LiRPA's CROWN and alpha-CROWN on the same boxes.

Run (auto_LiRPA installed in a separate venv that sees the project's packages):
    PYTHONPATH=$PWD /work/lirpa-venv/bin/python scripts/lirpa_residual.py [--quick]
Without auto_LiRPA (or torch) it prints a line naming the missing package and exits 0.

Invariants:
- The network: Linear(4, 16), Residual([ReLU, Linear(16, 16), ReLU, Linear(16, 16)]), ReLU,
  Linear(16, 3), trained on Iris (float32, ordered kernels, Adam 0.02, 300 steps of 10).
  The torch copy holds the stored values exactly, in float64; auto_LiRPA's alpha-CROWN
  runs 100 steps (early stop after 20), lower and upper bounds optimised separately.
- Our numbers are the real level (exact real network, outward rounding); a box's width is
  the sum over outputs of upper - lower; ratio = ours / auto_LiRPA's - 1 per box
  (negative: ours narrower), median and worst (largest) over the boxes.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
from typing import Any

import numpy as np

from runtime.examples import mlp
from runtime.nn import Linear, ReLU, Residual, Sequential
from runtime.optim import Adam
from runtime.trainer import Result, Trainer
from runtime.verification import verify


def train() -> Result:
    body = [ReLU(), Linear(16, 16), ReLU(), Linear(16, 16)]
    model = Sequential(Linear(4, 16), Residual(body), ReLU(), Linear(16, 3))
    data = mlp.load_iris()
    data = [data[(i % 3) * 50 + i // 3] for i in range(len(data))]
    run = Trainer(model, "cross_entropy", Adam(0.02), dtype="float32", kernels="ordered",
                  seed=0).open()  # fmt: skip
    for step in range(300):
        batch = [data[(step * 10 + j) % len(data)] for j in range(10)]
        run.step(batch, batch=True, loss=False)
    return run.finish()


def torch_model(res: Result) -> Any:
    """The trained network as a float64 torch module (the same values, exactly)."""
    import torch
    from torch import nn

    s = [torch.tensor(np.asarray(a, dtype=np.float64)) for a in res.state()]

    def lin(w: Any, b: Any) -> Any:
        m = nn.Linear(w.shape[1], w.shape[0]).double()
        with torch.no_grad():
            m.weight.copy_(w)
            m.bias.copy_(b)
        return m

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l0, self.l1, self.l2, self.l3 = (lin(s[i], s[i + 1]) for i in range(0, 8, 2))

        def forward(self, x: Any) -> Any:
            h = self.l0(x)
            y = h + self.l2(torch.relu(self.l1(torch.relu(h))))
            return self.l3(torch.relu(y))

    return Net().eval()


def lirpa(model: Any, center: np.ndarray, radius: float) -> dict[str, float]:
    import torch
    from auto_LiRPA import BoundedModule, BoundedTensor, PerturbationLpNorm

    x = torch.tensor(center[None], dtype=torch.float64)
    bm = BoundedModule(model, torch.zeros_like(x), device="cpu", verbose=0)
    bm.set_bound_opts({"optimize_bound_args": {"iteration": 100, "early_stop_patience": 20}})
    out = {}
    for name, method in (("crown", "CROWN"), ("alpha-crown", "alpha-CROWN")):
        with contextlib.redirect_stdout(io.StringIO()):
            bt = BoundedTensor(x, PerturbationLpNorm(norm=float("inf"), eps=radius))
            lo = bm.compute_bounds(x=(bt,), method=method, bound_upper=False)[0]
            bt = BoundedTensor(x, PerturbationLpNorm(norm=float("inf"), eps=radius))
            hi = bm.compute_bounds(x=(bt,), method=method, bound_lower=False)[1]
        out[name] = float((hi - lo).detach().sum())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="every 25th Iris sample")
    ap.add_argument("--radius", type=float, default=0.25)
    args = ap.parse_args(argv)
    for name in ("torch", "auto_LiRPA"):
        try:
            __import__(name)
        except ImportError:
            print(f"skipped: {name} is not installed (auto_LiRPA side by side is opt-in)")
            return 0
    res = train()
    model = torch_model(res)
    xs = [np.asarray(x) for x, _ in mlp.load_iris()][:: 25 if args.quick else 10]
    import torch

    with torch.no_grad():  # the torch copy computes our network (float64 vs float32)
        ys = model(torch.tensor(np.array(xs), dtype=torch.float64)).numpy()
    gap = max(float(np.abs(y - np.asarray(res.predict(x), dtype=np.float64)).max())
              for x, y in zip(xs, ys, strict=True))  # fmt: skip
    print(f"max |torch float64 - predict float32| at the centers: {gap:.2e}", file=sys.stderr)
    ratios: dict[str, list[float]] = {"crown": [], "alpha-crown": []}
    ibp: list[float] = []
    for c in xs:
        theirs = lirpa(model, c, args.radius)
        got = {a: sum(verify(res, c, args.radius, algorithm=a).real.widths())
               for a in ("ibp", "crown", "alpha-crown")}  # fmt: skip
        ibp.append(got["ibp"] / theirs["crown"] - 1)
        for a in ratios:
            ratios[a].append(got[a] / theirs[a] - 1)
    print("| boxes | radius | IBP / their CROWN median | CROWN median | CROWN worst "
          "| alpha median | alpha worst |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|---:|")
    cr, al = ratios["crown"], ratios["alpha-crown"]
    print(f"| {len(xs)} | {args.radius} | {statistics.median(ibp):+.2%} | "
          f"{statistics.median(cr):+.4%} | {max(cr):+.4%} | {statistics.median(al):+.4%} | "
          f"{max(al):+.4%} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
