"""The demos in runtime/examples train: the loss falls and the held-out score beats chance
by a wide margin (a few dozen SGD steps on deterministic synthetic data)."""

from __future__ import annotations

import numpy as np

from runtime.examples import cnn, transformer


def test_cnn_demo_learns() -> None:
    r = cnn.train(steps=110)
    assert np.mean(r["losses"][-10:]) < 0.8 * np.mean(r["losses"][:10])
    assert r["test_accuracy"] > 0.6  # chance is 0.25


def test_transformer_demo_learns() -> None:
    r = transformer.train(steps=120)
    assert np.mean(r["losses"][-10:]) < 0.5 * np.mean(r["losses"][:10])
    assert r["token_accuracy"] > 0.6  # chance is 0.2


def test_demo_data_is_deterministic_and_labelled() -> None:
    x1, t1 = cnn.make_data(8, seed=3)
    x2, t2 = cnn.make_data(8, seed=3)
    assert np.array_equal(x1, x2) and np.array_equal(t1, t2)
    assert x1.shape == (8, 1, 8, 8) and t1.sum(axis=1).tolist() == [1.0] * 8
    tok, tgt = transformer.make_data(2, seed=0)
    assert tgt.argmax(axis=1).reshape(2, -1)[:, 1:].tolist() == tok[:, :-1].tolist()
