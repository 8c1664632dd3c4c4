"""Which pieces of each op of the table are missing in some layer (a half-added op).

Invariants:
- The pieces an op needs follow from its `OpDef` alone (its kind and its math-function
  record). A primitive needs samples (an ordinary point first), a hand-written runtime
  kernel, a fast-profile bound, a graph builder, a place in the draw order
  (`conformance.graphs.SAMPLING_ORDER`, or `DERIVED_ORDER` for a derived builder) and a
  proof law. A primitive that is one math function (`OpDef.math`) gets its bound, graph
  builder (for a domain of the real line or (lo, ∞) with lo <= 0), law and engine entries
  derived from its record, and needs a complete record: a ULP budget for every dtype of
  `spec.mathfns.BUDGET_DTYPES` (a missing one is named, never read as 0) and a wide
  evaluation for `runtime.engine.crmath` (a NumPy spelling present here, or `python=`). A
  composite needs only its table entry with samples: its kernel is derived from its body
  (`runtime.kernels.table.add_composite_kernels`), its graph builder from its samples
  (`conformance.graphs.core.derived_builder`, unless one is hand-written) and its law from
  its inlined body at its exact samples (`proofs.laws.derived`, unless one is written); it
  has no bound of its own. A derived piece is named missing only when the op has samples
  (without them, the missing samples are the one line). No list of op names is written
  here.
- `missing_pieces` reads the layers' tables when it is called, after importing every layer,
  so it sees exactly what importing the packages registered; it reports, never raises.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from conformance.bounds import BOUNDS
from conformance.graphs import DERIVED_ORDER, SAMPLING_ORDER
from conformance.graphs.core import BUILDERS
from runtime.kernels import KERNELS
from spec.mathfns import BUDGET_DTYPES, numpy_name
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


def _has_law(op: OpDef) -> bool:
    return op.name in LAWS


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
        ("primitive",),
        "register(name=..., build=...) in conformance/graphs/F.py",
        lambda op: op.name in BUILDERS,
    ),
    Piece(
        "SAMPLING_ORDER entry",
        ("primitive",),
        "appended to SAMPLING_ORDER in conformance/graphs/core.py",
        lambda op: op.name in SAMPLING_ORDER or op.name in DERIVED_ORDER,
    ),
    Piece("proof law", ("primitive",), "law(op=..., ...) in proofs/laws/F.py", _has_law),
    *(
        Piece(
            f"ULP budget for {dt}",
            ("primitive",),
            f"ulps={{..., {dt!r}: K}} in its MathFn record (math= of its register in "
            "spec/ops/F.py)",
            lambda op, dt=dt: op.math is None or dt in op.math.ulps,
        )
        for dt in BUDGET_DTYPES
    ),
    Piece(
        "wide evaluation for crmath",
        ("primitive",),
        "numpy=(...) naming a NumPy function of this NumPy, or python= naming a math "
        "function, in its MathFn record (math= of its register in spec/ops/F.py)",
        lambda op: op.math is None or numpy_name(op.math) is not None or bool(op.math.python),
    ),
    Piece(
        "derived graph builder",
        ("composite",),
        "derived from its samples: give one whose arguments and result have at most "
        "conformance.graphs.MAX_ELEMENTS elements",
        lambda op: op.name in BUILDERS or not op.samples,
    ),
    Piece(
        "derived proof law",
        ("composite",),
        "derived from its samples: give one whose values are all exact (Fractions)",
        lambda op: _has_law(op) or not op.samples,
    ),
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
