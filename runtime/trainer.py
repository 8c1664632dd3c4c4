"""The public import path `runtime.trainer`: the names of `runtime.training.trainer`, the same
objects (README examples import from here)."""

from .training.trainer import *  # noqa: F403
from .training.trainer import __all__ as __all__
