"""The public import path `runtime.nn`: the layers of `runtime.training.layers` and
`runtime.training.model_layers`, the same objects (README examples import from here)."""

from .training import layers as layers
from .training import model_layers as model_layers
from .training.layers import *  # noqa: F403
from .training.model_layers import *  # noqa: F403

__all__ = [*layers.__all__, *model_layers.__all__]
