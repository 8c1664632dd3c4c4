"""Train a small MLP on the Iris data that ships with the repository (no downloads).

Invariants:
- The data is `iris.csv` next to this file: the 150-row Iris data of Fisher (1936) as
  distributed by the UCI Machine Learning Repository (`iris.data`, public domain), with a
  header row added. It carries UCI's two known transcription differences from Fisher's
  paper (rows 35 and 38).
- Features are standardised in binary64 (mean and population standard deviation per
  column, computed by left folds in row order); targets are one-hot.
- Everything is deterministic: the same arguments print the same numbers.

Run: `python -m runtime.examples.mlp [--steps N] [--dtype float32] [--seed 0]`.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path
from typing import Any, TextIO

from runtime.nn import Linear, ReLU, Sequential
from runtime.optim import Adam
from runtime.trainer import Result, Trainer

__all__ = ["load_iris", "main"]

DATA = Path(__file__).with_name("iris.csv")
CLASSES = ("Iris-setosa", "Iris-versicolor", "Iris-virginica")


def load_iris(path: Path = DATA) -> list[tuple[list[float], list[float]]]:
    """(standardised features, one-hot target) per row, in file order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))[1:]
    xs = [[float(v) for v in r[:4]] for r in rows]
    n = len(xs)
    means, stds = [], []
    for j in range(4):
        s = 0.0
        for x in xs:
            s = s + x[j]
        mu = s / n
        q = 0.0
        for x in xs:
            q = q + (x[j] - mu) * (x[j] - mu)
        means.append(mu)
        stds.append(math.sqrt(q / n))
    out = []
    for x, r in zip(xs, rows, strict=True):
        feat = [(x[j] - means[j]) / stds[j] for j in range(4)]
        out.append((feat, [1.0 if r[4] == c else 0.0 for c in CLASSES]))
    return out


def _accuracy(res_or_run: Any, data: list[tuple[list[float], list[float]]]) -> float:
    hits = 0
    for x, t in data:
        y = list(res_or_run.predict(x))
        hits += int(y.index(max(y)) == t.index(1.0))
    return hits / len(data)


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> Result:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch", type=int, default=10)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--kernels", default="fast", choices=("fast", "ordered"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    data = load_iris()
    # interleave the classes so that every batch of consecutive samples mixes them
    data = [data[(i % 3) * 50 + i // 3] for i in range(len(data))]
    model = Sequential(Linear(4, 8), ReLU(), Linear(8, 3))
    tr = Trainer(
        model, "cross_entropy", Adam(0.02), dtype=args.dtype, kernels=args.kernels, seed=args.seed
    )
    run = tr.open()
    before = run.eval(data)
    print(f"iris: {len(data)} samples, model {model!r}, {args.dtype}", file=out)
    print(f"loss before: {before:.6f}  accuracy {_accuracy(run, data):.3f}", file=out)
    every = max(1, args.steps // 5)
    pos = 0
    for i in range(args.steps):
        batch = [data[(pos + j) % len(data)] for j in range(args.batch)]
        pos = (pos + args.batch) % len(data)
        lv = run.step(batch, batch=True, loss=(i + 1) % every == 0)
        if lv is not None:
            print(f"step {i + 1:4d}/{args.steps}: batch loss {lv:.6f}", file=out)
    after = run.eval(data)
    res = run.finish(before=before, after=after)
    print(f"loss after:  {after:.6f}  accuracy {_accuracy(res, data):.3f}", file=out)
    print(res.summary(), file=out)
    return res


if __name__ == "__main__":
    main()
