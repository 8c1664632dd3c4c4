"""Which pieces of each op of the table are missing in some layer (a half-added op).

Invariants:
- The pieces an op needs follow from its `OpDef` alone (its kind): every op needs samples
  (an ordinary point first), a runtime kernel, a graph builder, a place in
  `conformance.graphs.SAMPLING_ORDER` and a proof law; a primitive's kernel is hand-written
  by its family module and a primitive also needs a fast-profile bound; a composite's
  kernel is derived from its body (`runtime.kernels.table.add_composite_kernels`) and it has
  no bound of its own. No list of op names is written here.
- `missing_pieces` reads the layers' tables when it is called, after importing every layer,
  so it sees exactly what importing the packages registered; it reports, never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from conformance.bounds import BOUNDS
from conformance.graphs import SAMPLING_ORDER
from conformance.graphs.core import BUILDERS
from runtime.kernels import KERNELS
from spec.ops import OPS, OpDef

from .laws import LAWS

__all__ = ["PIECES", "Piece", "missing_pieces"]


@dataclass(frozen=True)
class Piece:
    """One piece an op of one of `kinds` needs: `where` says where it is added, `present`
    whether the op has it."""

    name: str
    kinds: tuple[str, ...]
    where: str
    present: Callable[[OpDef], bool]


def _has_samples(op: OpDef) -> bool:
    return bool(op.samples) and op.samples[0].kind == "ordinary"


def _has_hand_kernel(op: OpDef) -> bool:
    k = KERNELS.get(op.name)
    return k is not None and k.family == op.family


BOTH = ("primitive", "composite")

PIECES = (
    Piece(
        "samples",
        BOTH,
        "samples=(...) of its register(...) in spec/ops/F.py, an ordinary point first",
        _has_samples,
    ),
    Piece(
        "runtime kernel",
        ("primitive",),
        "register(family=__name__, name=...) in runtime/kernels/F.py",
        _has_hand_kernel,
    ),
    Piece(
        "composite kernel",
        ("composite",),
        "derived from the body by runtime.kernels (nothing to write)",
        lambda op: op.name in KERNELS,
    ),
    Piece(
        "fast-profile bound",
        ("primitive",),
        "register(name=..., bound=...) in conformance/bounds/F.py",
        lambda op: op.name in BOUNDS,
    ),
    Piece(
        "graph builder",
        BOTH,
        "register(name=..., build=...) in conformance/graphs/F.py",
        lambda op: op.name in BUILDERS,
    ),
    Piece(
        "SAMPLING_ORDER entry",
        BOTH,
        "appended to SAMPLING_ORDER in conformance/graphs/core.py",
        lambda op: op.name in SAMPLING_ORDER,
    ),
    Piece("proof law", BOTH, "law(op=..., ...) in proofs/laws/F.py", lambda op: op.name in LAWS),
)
"""Every piece of every layer, by the op kinds that need it."""


def missing_pieces(names: Iterable[str] | None = None) -> list[str]:
    """One line per missing piece of the ops `names` (default: the whole table), in table
    order: `op <name> (<kind>, family <F>): no <piece> (<where>, F = <F>)`."""
    wanted = list(OPS) if names is None else list(names)
    out = []
    for name in wanted:
        op = OPS[name]
        for piece in PIECES:
            if op.kind in piece.kinds and not piece.present(op):
                out.append(
                    f"op {name} ({op.kind}, family {op.family}): no {piece.name} "
                    f"({piece.where}, F = {op.family})"
                )
    return out
