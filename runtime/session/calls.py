"""Argument handling of Session calls: flags, seeds, RNG rollback, PyTorch-style calls.

Invariants:
- `check_flag` accepts only `bool` (so `grad_enabled="no"` is refused, not truthy);
  `check_seed` accepts only ints (not bool) in [-2**63, 2**64): a float seed is refused,
  never truncated. Both raise `TorchLeanError` subclasses naming the argument.
- `rng_guard(rng)` restores the RNG counter if the guarded call fails in any way (a bad
  shape, a `MemoryError` while the tensor is allocated, a failed const): a failed random
  call never moves the stream.
- `op_arguments` turns PyTorch-style positional attributes into keywords, generically from
  the op table's attribute schema: for an op of fixed arity, positional arguments after
  its tensor arguments fill its attributes in schema order (`reshape(x, (3, 2))`,
  `broadcast_to(x, (2, 3))`, `scale(x, 3)`, `clamp(x, lo, hi)`, `slice(x, 0, 2)`,
  `reduce_sum(x, 0)`, ...). `sum(x, dim)` / `mean(x, dim)` (PyTorch's reduction over one
  dimension, also spelled `dim=`) are the table's `reduce_sum` / `reduce_mean`. An
  attribute given both ways, or too many positionals, raises `GraphError`.
- `matmul_plan` gives `torch.matmul`'s rules for 1-D operands (vector·matrix,
  matrix·vector, vector·vector, batched with a 1-D side) as table ops only: the 1-D side is
  reshaped to a matrix, `matmul` runs, the added dimension is reshaped away. So the spec
  graph, the gradients and the link check are those of ordinary table ops.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from spec.errors import DomainError, GraphError, TorchLeanError
from spec.ops import OPS

__all__ = [
    "DIM_REDUCTIONS",
    "check_flag",
    "check_seed",
    "matmul_plan",
    "matmul_result_shape",
    "op_arguments",
    "rng_guard",
]

DIM_REDUCTIONS = {"sum": "reduce_sum", "mean": "reduce_mean"}
"""A reduction over everything that, given a dimension (PyTorch's `torch.sum(x, dim)`),
is the table's reduction over one axis."""

_SEED_RANGE = (-(2**63), 2**64)


def check_flag(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise TorchLeanError(f"{what} must be a bool (True or False), got {type(v).__name__} {v!r}")
    return v


def check_seed(seed: Any, what: str) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise DomainError(
            f"{what} must be an int, got {type(seed).__name__} {seed!r:.40} (no truncation)"
        )
    lo, hi = _SEED_RANGE
    if not lo <= seed < hi:
        raise DomainError(f"{what} must be in [-2**63, 2**64), got {seed!r:.40}")
    return seed


@contextmanager
def rng_guard(rng: Any) -> Iterator[None]:
    """Restore `rng.counter` if the body raises anything."""
    counter = getattr(rng, "counter", None)
    try:
        yield
    except BaseException:
        if counter is not None:
            rng.counter = counter
        raise


def op_arguments(
    name: str, args: Sequence[Any], attrs: dict[str, Any]
) -> tuple[str, list[Any], dict[str, Any]]:
    """(op name, tensor arguments, attributes) of a call written PyTorch's way."""
    args = list(args)
    if name in DIM_REDUCTIONS and (len(args) > 1 or "dim" in attrs):
        if "dim" in attrs:
            if len(args) > 1:
                raise GraphError(f"{name}: dim given both positionally and by keyword")
            attrs["axis"] = attrs.pop("dim")
        name = DIM_REDUCTIONS[name]
    d = OPS[name]
    if d.arity is None or len(args) <= d.arity:
        return name, args, attrs
    extra = args[d.arity :]
    specs = [a for a in d.attrs if a.name != "env_slot"]
    if len(extra) > len(specs):
        names = ", ".join(a.name for a in specs) or "none"
        raise GraphError(
            f"{name}: takes {d.arity} tensor argument(s) and its attributes ({names}) "
            f"positionally; got {len(args)} positional arguments"
        )
    for spec, v in zip(specs, extra, strict=False):
        if spec.name in attrs:
            raise GraphError(
                f"{name}: attribute {spec.name!r} given both positionally and by keyword"
            )
        attrs[spec.name] = v
    return name, args[: d.arity], attrs


def matmul_plan(
    a_shape: tuple[int, ...], b_shape: tuple[int, ...]
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None] | None:
    """For a 1-D operand, per `torch.matmul`: (matrix shape for a or None, matrix shape for
    b or None); None when neither operand is 1-D, or one is 0-d (`matmul` refuses it)."""
    ra, rb = len(a_shape), len(b_shape)
    if 0 in (ra, rb) or (ra >= 2 and rb >= 2):
        return None
    return ((1, a_shape[0]) if ra == 1 else None), ((b_shape[0], 1) if rb == 1 else None)


def matmul_result_shape(out: tuple[int, ...], a_was_1d: bool, b_was_1d: bool) -> tuple[int, ...]:
    """The matmul result's shape with the dimensions added for 1-D operands removed."""
    shape = list(out)
    if b_was_1d:
        del shape[-1]
    if a_was_1d:
        del shape[-1 if b_was_1d else -2]
    return tuple(shape)
