"""Every op of the table has every piece of every layer, and a half-added op is named with
each piece it lacks (`proofs.completeness`, pieces derived from the op's kind).

The half-added ops are registered in a fresh process right after `spec.ops` is imported,
before the other layers, exactly as a new entry of a family module would be: a primitive
with nothing but its spec rule, and a composite with its spec rule and samples only.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proofs.completeness import PIECES, missing_pieces

ROOT = Path(__file__).resolve().parent.parent


def test_every_op_of_the_table_is_complete() -> None:
    assert missing_pieces() == []


_HALF_ADDED = """
import json, sys
from fractions import Fraction
from spec.ops.builders import composite, unary
from spec.ops.table import arg, sample

unary(
    name="half_prim", family=sys.argv[1], f=lambda D, x, a: x,
    push=lambda D, x, y, t, a: t, saves="nothing", doc="a half-added primitive",
)
composite(
    name="half_comp", family="pool", arity=1, body=lambda b, xs, a: b.op("neg", [xs[0]]),
    doc="a half-added composite", samples=(sample(arg((2,), Fraction(1), Fraction(2))),),
)
try:
    from proofs.completeness import missing_pieces
except ImportError as e:
    print(json.dumps({"import_error": str(e)}))
else:
    print(json.dumps({"missing": missing_pieces(["half_prim", "half_comp"])}))
"""


def _half_added(family: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", _HALF_ADDED, family],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_a_half_added_op_is_named_with_each_missing_piece() -> None:
    got = _half_added("elementwise")
    assert got == {
        "missing": [
            "op half_prim (primitive, family elementwise): no samples (samples=(...) of its "
            "register(...) in spec/ops/F.py, an ordinary point first, F = elementwise)",
            "op half_prim (primitive, family elementwise): no runtime kernel "
            "(register(family=__name__, name=...) in runtime/kernels/F.py, F = elementwise)",
            "op half_prim (primitive, family elementwise): no fast-profile bound "
            "(register(name=..., bound=...) in conformance/bounds/F.py, F = elementwise)",
            "op half_prim (primitive, family elementwise): no graph builder "
            "(register(name=..., build=...) in conformance/graphs/F.py, F = elementwise)",
            "op half_prim (primitive, family elementwise): no SAMPLING_ORDER entry "
            "(appended to SAMPLING_ORDER in conformance/graphs/core.py, F = elementwise)",
            "op half_prim (primitive, family elementwise): no proof law "
            "(law(op=..., ...) in proofs/laws/F.py, F = elementwise)",
            # the composite's kernel is derived from its body: only the other layers miss
            "op half_comp (composite, family pool): no graph builder "
            "(register(name=..., build=...) in conformance/graphs/F.py, F = pool)",
            "op half_comp (composite, family pool): no SAMPLING_ORDER entry "
            "(appended to SAMPLING_ORDER in conformance/graphs/core.py, F = pool)",
            "op half_comp (composite, family pool): no proof law "
            "(law(op=..., ...) in proofs/laws/F.py, F = pool)",
        ]
    }


def test_a_primitive_in_a_family_of_composites_names_the_missing_family_module() -> None:
    """`pool` holds composites only, so it has no kernel module; a primitive added to it
    makes loading the kernels fail with the module it needs (no silent default)."""
    got = _half_added("pool")
    assert got == {
        "import_error": "runtime.kernels: the op table needs the family module "
        "runtime.kernels.pool (family 'pool' holds ops this layer must register), but there "
        "is none"
    }


def test_every_piece_applies_to_some_kind() -> None:
    kinds = {k for p in PIECES for k in p.kinds}
    assert kinds == {"primitive", "composite"}
    assert len({p.name for p in PIECES}) == len(PIECES)
