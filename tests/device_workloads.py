"""Training workloads run on two devices by the CUDA tests (`test_cuda.py` on a GPU,
`test_cuda_glue.py` with the NumPy stand-in): each returns the bits of everything the run
exposes, so the tests compare devices bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np


def train_bits(device: str) -> list[Any]:
    """Five Adam steps (batches of two, dropout, BatchNorm1d buffers), as bits."""
    from runtime.nn import BatchNorm1d, Dropout, Linear, Sequential, Tanh
    from runtime.optim import Adam
    from runtime.trainer import Trainer

    data = [([0.5 * i, 1.0 - i, 0.25], [float(i % 2)]) for i in range(4)]
    model = Sequential(Linear(3, 5), BatchNorm1d(5), Tanh(), Dropout(0.25), Linear(5, 1))
    run = Trainer(
        model, "mse", Adam(0.05), dtype="float32", device=device, kernels="ordered", seed=4
    ).open()
    losses = [run.step([data[i % 4], data[(i + 1) % 4]], batch=True, loss=True) for i in range(5)]
    return [np.asarray(losses, dtype=np.float64).tobytes()] + [a.tobytes() for a in run.state()]


def model_bits(device: str) -> list[bytes]:
    """A CNN (Conv2d, BatchNorm2d, MaxPool2d, Flatten, Linear) and a token model
    (Embedding, causal MultiHeadAttention, Linear): three steps each, as bits."""
    from runtime.nn import (
        BatchNorm2d,
        Conv2d,
        Embedding,
        Flatten,
        Linear,
        MaxPool2d,
        MultiHeadAttention,
        ReLU,
        Sequential,
    )
    from runtime.optim import SGD
    from runtime.trainer import Trainer

    rng = np.random.default_rng(5)
    imgs = [
        (rng.uniform(0, 1, (1, 6, 6)).tolist(), [1.0, 0.0] if i % 2 else [0.0, 1.0])
        for i in range(4)
    ]
    cnn = Sequential(
        Conv2d(1, 2, 3, padding=1), BatchNorm2d(2), ReLU(), MaxPool2d(2), Flatten(), Linear(18, 2)
    )
    eye = np.eye(5)
    toks = [([0.0, 1.0, 2.0], eye[[1, 2, 3]].tolist()), ([3.0, 4.0, 0.0], eye[[4, 0, 1]].tolist())]
    tok = Sequential(Embedding(5, 4), MultiHeadAttention(4, 2, causal=True), Linear(4, 5))
    out: list[bytes] = []
    for model, data in ((cnn, imgs), (tok, toks)):
        run = Trainer(
            model,
            "cross_entropy",
            SGD(0.1),
            dtype="float32",
            device=device,
            kernels="ordered",
            seed=6,
        ).open()
        for i in range(3):
            run.step([data[i % len(data)], data[(i + 1) % len(data)]], batch=True)
        out += [a.tobytes() for a in run.state()]
    return out
