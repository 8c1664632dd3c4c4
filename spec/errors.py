"""The one exception hierarchy of torchlean.

Invariant: every error raised on purpose by `spec`, `runtime`, `proofs` or `conformance`
is an instance of `TorchLeanError`. Messages name the op, the input index, what was
expected and what was found, and the check that failed.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "DomainError",
    "GraphError",
    "HookError",
    "ShapeError",
    "StaleHandleError",
    "TorchLeanError",
    "op_error",
]


class TorchLeanError(Exception):
    """Base class of every torchlean error."""


class ShapeError(TorchLeanError, ValueError):
    """A shape does not satisfy an op's shape rule or an API's shape contract."""


class GraphError(TorchLeanError, ValueError):
    """A graph or tape is malformed: bad ids, unknown ops, bad attributes, bad env."""


class StaleHandleError(TorchLeanError):
    """A handle from another session, or from an earlier generation of this one."""


class HookError(TorchLeanError):
    """A gradient hook broke its contract (changed a shape or a dtype)."""


class CheckpointError(TorchLeanError):
    """A checkpoint file failed validation."""


class DomainError(TorchLeanError, ArithmeticError):
    """A scalar domain cannot perform an operation (e.g. exp over exact rationals)."""


def op_error(
    cls: type[TorchLeanError],
    op: str,
    check: str,
    *,
    index: int | None = None,
    expected: object = None,
    got: object = None,
) -> TorchLeanError:
    """Build an error whose message names the op, input index, expected/got and check."""
    parts = [op]
    if index is not None:
        parts.append(f"input {index}")
    msg = ": ".join(parts) + f": {check}"
    if expected is not None or got is not None:
        msg += f" (expected {expected}, got {got})"
    return cls(msg)
