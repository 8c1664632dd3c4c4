"""A one-block Transformer trained with Session ops only: `python -m runtime.examples.transformer`.

Invariants:
- Task: sequences of L = 6 tokens over a vocabulary of 5 from a seeded NumPy generator;
  the target at position i is the token at position i - 1 (position 0: itself), so the
  model must attend to the previous position (causal attention plus learned positions).
- Model: embedding (token ids as an attribute) + positional parameter → causal
  multi_head_attention (2 heads) → residual → layer_norm → linear → cross_entropy over
  all positions; plain SGD via `Session.sgd_step_all`.
- `train(steps)` returns the losses and the token accuracy on fresh sequences.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from runtime.session import Session

__all__ = ["make_data", "train"]

VOCAB, LENGTH, EMB = 5, 6, 8


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Token ids (n, L) and one-hot targets (n*L, V): target[i] = token[i - 1]."""
    rng = np.random.default_rng(seed)
    tok = rng.integers(0, VOCAB, (n, LENGTH))
    tgt = np.concatenate([tok[:, :1], tok[:, :-1]], axis=1)
    return tok, np.eye(VOCAB, dtype=np.float32)[tgt.reshape(-1)]


def _forward(s: Session, ps: dict[str, Any], tok: np.ndarray) -> Any:
    u = {k: s.use(p) for k, p in ps.items()}
    n = tok.shape[0]
    x = s.embedding(u["table"], indices=tok.reshape(-1).tolist(), shape=tok.shape)
    x = s.add(x, u["pos"])
    a = s.multi_head_attention(x, x, x, u["wq"], u["wk"], u["wv"], u["wo"], heads=2, causal=1)
    h = s.layer_norm(s.add(x, a), u["g"], u["b"])
    logits = s.linear(s.reshape(h, shape=(n * LENGTH, EMB)), u["wout"], u["bout"])
    return logits


def train(steps: int = 300, batch: int = 16, lr: float = 0.5) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    s = Session(dtype="float32")

    def mat(*shape: int, scale: float) -> np.ndarray:
        return (rng.normal(size=shape) * scale).astype(np.float32)

    ps = {
        "table": s.param(mat(VOCAB, EMB, scale=1.0)),
        "pos": s.param(mat(LENGTH, EMB, scale=1.0)),
        **{k: s.param(mat(EMB, EMB, scale=EMB**-0.5)) for k in ("wq", "wk", "wv", "wo")},
        "g": s.param(np.ones(EMB, dtype=np.float32)),
        "b": s.param(np.zeros(EMB, dtype=np.float32)),
        "wout": s.param(mat(VOCAB, EMB, scale=EMB**-0.5)),
        "bout": s.param(np.zeros(VOCAB, dtype=np.float32)),
    }
    losses = []
    for step in range(steps):
        tok, tgt = make_data(batch, seed=1000 + step)
        s.reset_tape()
        loss = s.cross_entropy(_forward(s, ps, tok), s.input(tgt, requires_grad=False))
        s.sgd_step_all(lr, s.backward_scalar_dense_all(loss))
        losses.append(float(s.get_value(loss)))
    tok, tgt = make_data(128, seed=7)
    s.reset_tape()
    logits = np.asarray(s.get_value(_forward(s, ps, tok)))
    acc = float(np.mean(logits.argmax(axis=1) == tgt.argmax(axis=1)))
    return {"losses": losses, "token_accuracy": acc}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    steps = int(args[0]) if args else 300
    r = train(steps)
    first, last = np.mean(r["losses"][:10]), np.mean(r["losses"][-10:])
    print(
        f"transformer: {steps} SGD steps, loss {first:.3f} -> {last:.3f}, token accuracy "
        f"{r['token_accuracy']:.1%} (vocabulary {VOCAB}, chance {1 / VOCAB:.0%})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
