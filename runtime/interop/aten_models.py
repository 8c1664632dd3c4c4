"""ATen rules for constructs of real models (timm, transformers) that are compositions
of table ops, plus the no-op checks `torch.export` leaves in a program.

Invariants:
- A no-op check (`aten._assert_tensor_metadata`, from `.to(device)` / `.to(dtype)`) has
  no users and emits nothing; the shape it asserts is checked against the value's shape
  at import time (a mismatch is the model's error), its dtype and device are not modelled
  (casts between float dtypes are identities: the whole graph runs in one dtype).
- Every other rule builds its value from table ops only (no new primitive): vector norms
  as sqrt of a sum of squares, group norm as the layer-norm body per (n, group), nearest
  upsampling as `index_select` per axis.
- Nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .core import Emitter, InvalidModelError

__all__ = ["MODEL_RULES"]

Rule = Callable[..., Any]


def _assert_tensor_metadata(
    E: Emitter,
    a: Any,
    size: Any = None,
    stride: Any = None,
    dtype: Any = None,
    *,
    device: Any = None,
    layout: Any = None,
) -> None:
    if size is not None and tuple(int(d) for d in size) != tuple(E.shape(a)):
        raise InvalidModelError(
            f"aten._assert_tensor_metadata: the value has shape {tuple(E.shape(a))}, "
            f"the program asserts {tuple(size)}"
        )
    return None


MODEL_RULES: dict[str, Rule] = {
    "aten._assert_tensor_metadata": _assert_tensor_metadata,
}
"""ATen op packet -> rule, merged into `aten.ATEN`."""
