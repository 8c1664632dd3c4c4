"""The demos in runtime/examples train: the loss falls and the held-out score beats chance
by a wide margin (a few hundred SGD steps; the CNN on the shipped optdigits rows, the
Transformer on deterministic synthetic data)."""

from __future__ import annotations

import numpy as np

from runtime.examples import cnn, transformer


def test_cnn_demo_learns() -> None:
    r = cnn.train(steps=150)
    assert np.mean(r["losses"][-10:]) < 0.6 * np.mean(r["losses"][:10])
    assert r["test_accuracy"] > 0.4  # chance is 0.1 (10 classes, 100 held-out rows)


def test_transformer_demo_learns() -> None:
    r = transformer.train(steps=120)
    assert np.mean(r["losses"][-10:]) < 0.5 * np.mean(r["losses"][:10])
    assert r["token_accuracy"] > 0.6  # chance is 0.2


def test_optdigits_csv_is_valid_and_covers_all_classes() -> None:
    rows = np.loadtxt(cnn.DATA, delimiter=",", dtype=np.int64, ndmin=2)
    assert rows.shape == (600, 65)
    assert rows[:, :64].min() >= 0 and rows[:, :64].max() <= 16
    assert set(rows[:, 64].tolist()) == set(range(10))
    assert set(rows[: cnn.N_TRAIN, 64].tolist()) == set(range(10))
    assert set(rows[cnn.N_TRAIN :, 64].tolist()) == set(range(10))
    x, t = cnn.load_data()
    assert x.shape == (600, 1, 8, 8) and x.dtype == np.float32
    assert float(x.min()) == 0.0 and float(x.max()) == 1.0
    assert t.shape == (600, 10) and t.sum(axis=1).tolist() == [1.0] * 600
    assert t.argmax(axis=1).tolist() == rows[:, 64].tolist()
    assert np.array_equal(x.reshape(600, 64) * 16, rows[:, :64].astype(np.float32))


def test_transformer_data_is_deterministic_and_labelled() -> None:
    tok, tgt = transformer.make_data(2, seed=0)
    tok2, tgt2 = transformer.make_data(2, seed=0)
    assert np.array_equal(tok, tok2) and np.array_equal(tgt, tgt2)
    assert tgt.argmax(axis=1).reshape(2, -1)[:, 1:].tolist() == tok[:, :-1].tolist()
