"""A small CNN trained with Session ops only: `python -m runtime.examples.cnn`.

Invariants:
- Data: synthetic 8x8 grey images of four stroke classes (horizontal bar, vertical bar,
  main diagonal, anti-diagonal) at random positions with noise, from a seeded NumPy
  generator: the same dataset on every run, nothing downloaded.
- Model: conv2d 3x3 (pad 1, 4 channels) → relu → max_pool2d 2x2 → conv2d 3x3 (pad 1,
  8 channels) → relu → avg_pool2d 2x2 → reshape → linear → cross_entropy; plain SGD via
  `Session.sgd_step_all`. Every op is a Session method of the op table.
- `train(steps)` returns the losses and the test accuracy; `main` prints them.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from runtime.session import Session

__all__ = ["make_data", "train"]

CLASSES = 4


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n images (n, 1, 8, 8) float32 and one-hot labels (n, 4)."""
    rng = np.random.default_rng(seed)
    xs = rng.normal(0.0, 0.2, (n, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, CLASSES, n)
    for k, c in enumerate(labels):
        i, j = rng.integers(1, 7, 2)
        if c == 0:
            xs[k, 0, i, :] += 1.0
        elif c == 1:
            xs[k, 0, :, j] += 1.0
        elif c == 2:
            xs[k, 0, np.arange(8), np.arange(8)] += 1.0
        else:
            xs[k, 0, np.arange(8), 7 - np.arange(8)] += 1.0
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


def train(steps: int = 150, batch: int = 32, lr: float = 0.1) -> dict[str, Any]:
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
    xs, ts = make_data(1024, seed=1)
    losses = []
    for step in range(steps):
        k = (step * batch) % len(xs)
        s.reset_tape()
        x, t = s.input(xs[k : k + batch]), s.input(ts[k : k + batch])
        loss = s.cross_entropy(_forward(s, ps, x), t)
        s.sgd_step_all(lr, s.backward_scalar_dense_all(loss))
        losses.append(float(s.get_value(loss)))
    xt, tt = make_data(256, seed=2)
    s.reset_tape()
    logits = np.asarray(s.get_value(_forward(s, ps, s.input(xt))))
    acc = float(np.mean(logits.argmax(axis=1) == tt.argmax(axis=1)))
    return {"losses": losses, "test_accuracy": acc}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    steps = int(args[0]) if args else 150
    r = train(steps)
    first, last = np.mean(r["losses"][:10]), np.mean(r["losses"][-10:])
    print(
        f"cnn: {steps} SGD steps, loss {first:.3f} -> {last:.3f}, "
        f"test accuracy {r['test_accuracy']:.1%} (4 classes, chance 25%)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
