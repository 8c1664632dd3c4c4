"""public import path of runtime.training.trainer"""

from .training.trainer import (
    Result,
    Trainer,
    TrainingSession,
    pairwise_mean,
    save_loss_curve,
)

__all__ = [
    "Result",
    "Trainer",
    "TrainingSession",
    "pairwise_mean",
    "save_loss_curve",
]
