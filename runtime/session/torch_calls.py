"""Session methods whose call follows `torch.nn.functional` where the op table's order
differs: a name taken from PyTorch has PyTorch's defaults and positional order.

Invariants:
- `TORCH_METHODS` maps an op name to the Session method that takes PyTorch's signature and
  records the table op (`Session.op(name, ...)` keeps the table's order: tensor arguments,
  then attributes). Each method validates its arguments before anything is recorded, and
  the constants it adds are dropped again when the op fails (all or nothing).
- `batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
  momentum=0.1, eps=None)` is `F.batch_norm`: evaluation mode (the default) is the table's
  `batch_norm_eval`, training mode the table's `batch_norm` (batch statistics; running
  statistics must be None since none are updated).
- `group_norm(input, num_groups, weight=None, bias=None, eps=None)` and
  `instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
  use_input_stats=True, momentum=0.1, eps=None)` are `F.group_norm` / `F.instance_norm`:
  a weight of None is ones (C,), a bias of None zeros (C,), recorded as frozen constants
  (`Session.frozen_const`: eager a frozen leaf, typed graph a `const` node). eps None is
  the table's 1/100000 (PyTorch's 1e-5), any other value the table's exact rational
  attribute. Running statistics are not kept: `instance_norm` refuses `running_mean`,
  `running_var` and `use_input_stats=False` (`TorchLeanError`), never ignores them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from spec.errors import TorchLeanError

from .handles import TensorRef

__all__ = ["TORCH_METHODS"]


def _channels(op: str, x: Any) -> int:
    if not isinstance(x, TensorRef):
        raise TorchLeanError(f"{op}: input 0 must be a TensorRef, got {type(x).__name__}")
    if len(x.shape) < 2:
        raise TorchLeanError(f"{op}: input 0 must be (N, C, ...), got shape {x.shape}")
    return x.shape[1]


def _affine(s: Any, op: str, x: TensorRef, weight: Any, bias: Any) -> tuple[Any, Any]:
    """(γ, β) with None as ones / zeros of (C,) in the session's dtype, frozen constants."""
    c = _channels(op, x)
    dtype = object if s.dtype == "exact" else s.dtype
    one = 1 if s.dtype == "exact" else 1.0
    w = s.frozen_const(np.full((c,), one, dtype=dtype)) if weight is None else weight
    b = s.frozen_const(np.full((c,), one * 0, dtype=dtype)) if bias is None else bias
    return w, b


def _eps(eps: Any) -> dict[str, Any]:
    return {} if eps is None else {"eps": eps}


def group_norm(
    self: Any, input: Any, num_groups: Any, weight: Any = None, bias: Any = None, eps: Any = None
) -> TensorRef:
    """`F.group_norm(input, num_groups, weight=None, bias=None, eps=1e-5)`: the table's
    `group_norm` with weight None as ones and bias None as zeros (C,)."""
    if isinstance(num_groups, bool) or not isinstance(num_groups, (int, np.integer)):
        raise TorchLeanError(
            f"group_norm: num_groups (argument 1, F.group_norm's order: input, num_groups, "
            f"weight, bias, eps) must be an int, got {type(num_groups).__name__}"
        )
    _channels("group_norm", input)
    self._check(input, "group_norm: input 0")
    with self.all_or_nothing():
        w, b = _affine(self, "group_norm", input, weight, bias)
        return self.op("group_norm", input, w, b, num_groups=int(num_groups), **_eps(eps))


def instance_norm(
    self: Any,
    input: Any,
    running_mean: Any = None,
    running_var: Any = None,
    weight: Any = None,
    bias: Any = None,
    use_input_stats: bool = True,
    momentum: float = 0.1,
    eps: Any = None,
) -> TensorRef:
    """`F.instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
    use_input_stats=True, momentum=0.1, eps=1e-5)` with input statistics: the table's
    `instance_norm` with weight None as ones and bias None as zeros (C,). Running
    statistics are not kept (refused when given; `momentum` only updates them)."""
    if running_mean is not None or running_var is not None or use_input_stats is not True:
        raise TorchLeanError(
            "instance_norm: running statistics are not kept (running_mean and running_var "
            "must be None, use_input_stats True); pass weight= and bias= by keyword "
            "(F.instance_norm's order: input, running_mean, running_var, weight, bias, ...)"
        )
    _channels("instance_norm", input)
    self._check(input, "instance_norm: input 0")
    with self.all_or_nothing():
        w, b = _affine(self, "instance_norm", input, weight, bias)
        return self.op("instance_norm", input, w, b, **_eps(eps))


def batch_norm(
    self: Any,
    input: Any,
    running_mean: Any,
    running_var: Any,
    weight: Any = None,
    bias: Any = None,
    training: bool = False,
    momentum: float = 0.1,
    eps: Any = None,
) -> TensorRef:
    """`F.batch_norm(input, running_mean, running_var, weight=None, bias=None,
    training=False, momentum=0.1, eps=1e-5)`. Evaluation (`training=False`, F's default):
    the table's `batch_norm_eval` with the given running statistics. Training: the table's
    `batch_norm` (batch statistics), which updates no running statistics: they must be
    None, and eps the table's 1e-5 (else `TorchLeanError`, never ignored)."""
    if training is True:
        if running_mean is not None or running_var is not None or eps is not None:
            raise TorchLeanError(
                "batch_norm(training=True): running statistics are not updated and eps is "
                "the table's 1e-5; pass running_mean=None, running_var=None and no eps"
            )
    elif training is not False:
        raise TorchLeanError(f"batch_norm: training must be a bool, got {training!r}")
    _channels("batch_norm", input)
    self._check(input, "batch_norm: input 0")
    with self.all_or_nothing():
        w, b = _affine(self, "batch_norm", input, weight, bias)
        if training:
            return self.op("batch_norm", input, w, b)
        return self.op("batch_norm_eval", input, running_mean, running_var, w, b, **_eps(eps))


TORCH_METHODS: dict[str, Callable[..., TensorRef]] = {
    "batch_norm": batch_norm,
    "group_norm": group_norm,
    "instance_norm": instance_norm,
}
