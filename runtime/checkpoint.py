"""The public import path `runtime.checkpoint`: the names of `runtime.training.checkpoint`, the same
objects (README examples import from here)."""

from .training.checkpoint import *  # noqa: F403
from .training.checkpoint import __all__ as __all__
