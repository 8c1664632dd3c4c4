"""The public import path `runtime.optim`: the names of `runtime.training.optim`, the same
objects (README examples import from here)."""

from .training.optim import *  # noqa: F403
from .training.optim import __all__ as __all__
