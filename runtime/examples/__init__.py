"""Runnable examples; data files ship with the package, nothing is downloaded.

`python -m runtime.examples.mlp`: an MLP trained on the Iris data (`iris.csv`) with the
Trainer; `python -m runtime.examples.cnn`: a small CNN on 600 real 8x8 handwritten digits
from UCI optdigits (`optdigits_600.csv`); `python -m runtime.examples.transformer`: a
one-block Transformer on a toy sequence task generated with a fixed-seed NumPy generator
(the last two use the model-scale Session ops directly). Provenance: `DATA.md`.
"""

__all__: list[str] = []
