"""A small CNN trained with Session ops only: `python -m runtime.examples.cnn`.

Invariants:
- Data: real handwritten digits, `optdigits_600.csv` next to this file: the first 600 rows
  of `optdigits.tra` from the UCI Machine Learning Repository, Optical Recognition of
  Handwritten Digits (Alpaydin & Kaynak, 1998; CC BY 4.0). Each row is 64 pixel counts
  0..16 of an 8x8 image (row-major) then the class 0..9; see `DATA.md`. Pixels are scaled
  by 1/16; the first 500 rows train, the last 100 test. Nothing is downloaded or random
  in the data: the same rows in the same order on every run.
- Model: conv2d 3x3 (pad 1, 4 channels) → relu → max_pool2d 2x2 → conv2d 3x3 (pad 1,
  8 channels) → relu → avg_pool2d 2x2 → reshape → linear (10 classes) → cross_entropy;
  plain SGD via `Session.sgd_step_all` on consecutive batches of the training rows.
  Every op is a Session method of the op table; weights come from a seeded generator.
- `train(steps)` returns the losses and the test accuracy; `main` prints them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from runtime.session import Session

__all__ = ["DATA", "N_TEST", "N_TRAIN", "load_data", "train"]

CLASSES = 10
DATA = Path(__file__).with_name("optdigits_600.csv")
N_TRAIN, N_TEST = 500, 100


def load_data(path: Path = DATA) -> tuple[np.ndarray, np.ndarray]:
    """All rows as images (n, 1, 8, 8) float32 in [0, 1] and one-hot labels (n, 10).

    Raises ValueError on a row that is not 64 pixel counts 0..16 and a label 0..9.
    """
    rows = np.loadtxt(path, delimiter=",", dtype=np.int64, ndmin=2)
    if rows.shape[1] != 65:
        raise ValueError(f"{path.name}: expected 65 fields per row, got {rows.shape[1]}")
    pixels, labels = rows[:, :64], rows[:, 64]
    if pixels.min() < 0 or pixels.max() > 16 or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path.name}: a pixel outside 0..16 or a label outside 0..9")
    xs = (pixels.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    return xs, np.eye(CLASSES, dtype=np.float32)[labels]


def _init(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
    return (rng.normal(size=shape) / np.sqrt(fan_in)).astype(np.float32)


def _forward(s: Session, ps: dict[str, Any], x: Any) -> Any:
    u = {k: s.use(p) for k, p in ps.items()}
    h = s.relu(s.conv2d(x, u["w1"], u["b1"], padding=(1, 1)))
    h = s.max_pool2d(h, kernel_size=(2, 2))
    h = s.relu(s.conv2d(h, u["w2"], u["b2"], padding=(1, 1)))
    h = s.avg_pool2d(h, kernel_size=(2, 2))
    h = s.reshape(h, shape=(h.shape[0], 8 * 2 * 2))
    return s.linear(h, u["w3"], u["b3"])


def train(steps: int = 300, batch: int = 25, lr: float = 0.2) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    s = Session(dtype="float32")
    ps = {
        "w1": s.param(_init(rng, (4, 1, 3, 3), 9)),
        "b1": s.param(np.zeros(4, dtype=np.float32)),
        "w2": s.param(_init(rng, (8, 4, 3, 3), 36)),
        "b2": s.param(np.zeros(8, dtype=np.float32)),
        "w3": s.param(_init(rng, (CLASSES, 32), 32)),
        "b3": s.param(np.zeros(CLASSES, dtype=np.float32)),
    }
    data, onehot = load_data()
    xs, ts = data[:N_TRAIN], onehot[:N_TRAIN]
    xt, tt = data[N_TRAIN : N_TRAIN + N_TEST], onehot[N_TRAIN : N_TRAIN + N_TEST]
    losses = []
    for step in range(steps):
        k = (step * batch) % len(xs)
        s.reset_tape()
        x = s.input(xs[k : k + batch], requires_grad=False)
        t = s.input(ts[k : k + batch], requires_grad=False)
        loss = s.cross_entropy(_forward(s, ps, x), t)
        s.sgd_step_all(lr, s.backward_scalar_dense_all(loss))
        losses.append(float(s.get_value(loss)))
    s.reset_tape()
    logits = np.asarray(s.get_value(_forward(s, ps, s.input(xt))))
    acc = float(np.mean(logits.argmax(axis=1) == tt.argmax(axis=1)))
    return {"losses": losses, "test_accuracy": acc}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    steps = int(args[0]) if args else 300
    r = train(steps)
    first, last = np.mean(r["losses"][:10]), np.mean(r["losses"][-10:])
    print(
        f"cnn: optdigits ({N_TRAIN} train / {N_TEST} test rows), {steps} SGD steps, "
        f"loss {first:.3f} -> {last:.3f}, "
        f"test accuracy {r['test_accuracy']:.1%} (10 classes, chance 10%)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
