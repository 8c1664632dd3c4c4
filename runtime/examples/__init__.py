"""Runnable demos of the model-scale Session ops (no layers, no downloads).

`python -m runtime.examples.cnn`: a small CNN on synthetic 8x8 stroke images;
`python -m runtime.examples.transformer`: a one-block Transformer on a toy sequence task.
Both generate their data deterministically (NumPy generator with a fixed seed).
"""

__all__: list[str] = []
