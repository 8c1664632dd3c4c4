"""The ATen importer's modes: training-mode ops read in eval semantics on request, and the
decomposition boundary (the packets kept whole when torch decomposes a program).

Invariants: `TRAINING_AS_EVAL` rules are used only with `eval=True`; `boundary()` is
every packet of `aten.ATEN` whose table ops exist (`REQUIRES`), so a guarded rule whose
table op is missing is left to torch's decomposition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .aten import ATEN, STATS, Poison, Rule, batch_norm, native_batch_norm
from .aten_guard import has_attrs
from .aten_models import no_running_stats
from .core import Emitter

__all__ = ["REQUIRES", "TRAINING_AS_EVAL", "boundary", "is_training_node"]


def _bn_functional_as_eval(
    E: Emitter, x: Any, w: Any, b: Any, mean: Any, var: Any, training: bool, m: Any, eps: float
) -> tuple[Any, ...]:
    """Training-mode batch norm read in eval semantics (on request): the running
    statistics normalise; the updated statistics are not modelled."""
    p = Poison("aten._native_batch_norm_legit_functional (statistics outputs)", STATS)
    return E.batch_norm_eval(x, w, b, mean, var, eps), p, p, p, p


# packet -> (position, keyword) of its training flag
_TRAIN_FLAG: dict[str, tuple[int, str]] = {
    "aten.dropout": (2, "train"),
    "aten.feature_dropout": (2, "train"),
    "aten.native_dropout": (2, "train"),
    "aten.batch_norm": (5, "training"),
    "aten.native_batch_norm": (5, "training"),
    "aten._native_batch_norm_legit_functional": (5, "training"),
    "aten._native_batch_norm_legit": (5, "training"),
}


def is_training_node(packet: str, args: Sequence[Any], kwargs: dict[str, Any]) -> bool:
    """Is this node a training-mode dropout (p > 0) or batch norm?"""
    if "batch_norm" in packet and no_running_stats(packet, args, kwargs):
        return False  # batch statistics of its own input in every mode, no state
    pos, kw = _TRAIN_FLAG[packet]
    flag = kwargs.get(kw, args[pos] if len(args) > pos else False)
    if "dropout" in packet:
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        return bool(flag) and bool(p)
    return bool(flag)


TRAINING_AS_EVAL: dict[str, Rule] = {
    "aten.dropout": lambda E, x, *a, **k: x,
    "aten.feature_dropout": lambda E, x, *a, **k: x,
    "aten.native_dropout": lambda E, x, *a, **k: (x, Poison("aten.native_dropout (mask)")),
    "aten.batch_norm": lambda E, x, w, b, mean, var, t, m, eps, *_: batch_norm(
        E, x, w, b, mean, var, False, m, eps
    ),
    "aten.native_batch_norm": lambda E, x, w, b, mean, var, t, m, eps: native_batch_norm(
        E, x, w, b, mean, var, False, m, eps
    ),
    "aten._native_batch_norm_legit_functional": _bn_functional_as_eval,
}
"""With `eval=True`: the training-mode ops read in eval semantics (packet -> rule);
`_native_batch_norm_legit` with running statistics in training mode stays refused (without
running statistics it is not a training node: `aten_models.batch_stats_norm`)."""


# the table ops a guarded rule needs (packet -> (op, attributes)); while the op table lacks
# one, the packet is left out of the decomposition boundary, so torch decomposes it
# (hardswish -> clamp, mul, div) where it can
REQUIRES: dict[str, tuple[str, ...]] = {
    "aten.hardsigmoid": ("hardsigmoid",),
    "aten.hardswish": ("hardswish",),
    "aten.erf": ("erf",),
    "aten.log1p": ("log1p",),
    "aten.expm1": ("expm1",),
    "aten.sign": ("sign",),
    "aten.leaky_relu": ("leaky_relu", "negative_slope"),
    "aten.elu": ("elu", "alpha"),
}


def boundary() -> frozenset[str]:
    """The ATen packets kept whole by the decomposition before import: every packet of
    `ATEN` whose table ops exist (`REQUIRES`)."""
    return frozenset(k for k in ATEN if k not in REQUIRES or has_attrs(*REQUIRES[k]))
