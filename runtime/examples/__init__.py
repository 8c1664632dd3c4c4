"""Runnable examples; data files ship with the package, nothing is downloaded.

`python -m runtime.examples.mlp`: an MLP trained on the Iris data (`iris.csv`) with the
Trainer; `python -m runtime.examples.cnn`: a small CNN on synthetic 8x8 stroke images;
`python -m runtime.examples.transformer`: a one-block Transformer on a toy sequence task
(the last two use the model-scale Session ops directly and generate their data with a
fixed-seed NumPy generator).
"""

__all__: list[str] = []
