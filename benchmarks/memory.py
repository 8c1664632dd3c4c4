"""Peak memory of the MLP step: the bytes the tape holds against the forward values that
the backward needs.

- *Tape bytes*: every array reachable from the tape's nodes: each node's value, the
  kernel's `saved` values and attributes it keeps, and whatever its own backward and
  forward-tangent closures keep (through tuples, lists, dicts and nested closures). Arrays
  are counted once per underlying buffer (a view or a broadcast counts as the buffer it
  looks into), because that is the memory held.
- *Needed*: the minimal set the reverse pass reads: the inputs of each linear (x and W; not
  b), of each relu (x) and of the loss (prediction and target), again once per buffer.

The kernel context (shared by every tape of a session, holding a few cached 0-d
constants) is not part of a tape and is not walked.
"""

from __future__ import annotations

import types
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = ["buffer_bytes", "reachable_arrays", "tape_bytes"]


def _buffer(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def buffer_bytes(arrays: Iterable[np.ndarray]) -> int:
    """Total bytes of the distinct buffers behind `arrays`."""
    seen: dict[int, int] = {}
    for a in arrays:
        b = _buffer(a)
        seen[id(b)] = b.nbytes
    return sum(seen.values())


def reachable_arrays(roots: Iterable[Any]) -> list[np.ndarray]:
    """Arrays reachable from `roots` through containers and function closures."""
    from runtime.engine.context import KernelContext

    out: list[np.ndarray] = []
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, np.ndarray):
            out.append(o)
        elif isinstance(o, (tuple, list, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif isinstance(o, types.FunctionType):
            for cell in o.__closure__ or ():
                try:
                    stack.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
        elif isinstance(o, KernelContext):
            continue
    return out


def tape_bytes(tape: Any) -> tuple[int, int]:
    """(bytes of distinct buffers reachable from the tape's nodes, number of arrays)."""
    roots: list[Any] = []
    for n in tape.nodes:
        roots += [n.value, n.rule, n.jvp, n.saved, n.attrs]  # what the node keeps
    arrays = reachable_arrays(roots)
    return buffer_bytes(arrays), len(arrays)
