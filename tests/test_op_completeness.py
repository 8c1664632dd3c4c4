"""Every op of the table has every piece of every layer, and a half-added op is named with
each piece it lacks (`proofs.completeness`, pieces derived from the op's kind).

The added ops are registered in a fresh process right after `spec.ops` is imported, before
the other layers, exactly as a new entry of a family module would be: a primitive with
nothing but its spec rule, a composite with its body and samples (complete: every other
piece is derived from its table entry), and a composite without samples. A throwaway
composite registered the same way is drawn by the conformance suite and has a law that
holds, with no other file touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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
    name="whole_comp", family="pool", arity=1, body=lambda b, xs, a: b.node("neg", xs[0]),
    doc="a composite with samples", samples=(sample(arg((2,), Fraction(1), Fraction(2))),),
)
composite(
    name="half_comp", family="pool", arity=1, body=lambda b, xs, a: b.node("neg", xs[0]),
    doc="a composite without samples",
)
{register}
try:
    from proofs.completeness import missing_pieces
except ImportError as e:
    print(json.dumps({"import_error": str(e)}))
    sys.exit()
out = {"missing": missing_pieces(["half_prim", "whole_comp", "half_comp"])}
"""

_THROWAWAY = """
from spec.ops.table import AttrSpec


def body(b, xs, a):  # x * x + c * y, c an attribute
    sq = b.node("mul", xs[0], xs[0])
    return b.node("add", sq, b.node("scale", xs[1], c=a["c"]))


composite(
    name="throwaway", family="elementwise", arity=2, body=body, doc="x*x + c*y",
    attrs=(AttrSpec("c", "rational"),),
    samples=(
        sample(arg((3,), 1, -2, Fraction(1, 2)), arg((), 3), attrs={"c": Fraction(1, 3)}),
        sample(arg((2, 2), 1, 2, -1, 0), arg((2,), 1, -1), attrs={"c": Fraction(-2)}),
    ),
)
"""

_THROWAWAY_RUN = """
from dataclasses import replace
import conformance.graphs as G
from conformance.suite import default_properties, run_property
from proofs.laws import DERIVED, check_obligation
from proofs.records import CheckContext

seen = {"graphs": 0, "with_op": 0}
rows = {}
for prop in default_properties(["exact", "float32"], ["ordered"]):
    if prop.name != "link":
        continue
    def counting(case, check=prop.check):
        seen["graphs"] += 1
        seen["with_op"] += any(n.op == "throwaway" for n in case.graph.nodes)
        return check(case)
    row = run_property(replace(prop, ops=("throwaway",), check=counting), 0, per_op=4)
    rows[prop.dtype] = [row.cases, row.failed, row.ops_covered]
out["throwaway"] = {
    "order": [G.GRAPH_OPS[-1], "throwaway" in G.SAMPLING_ORDER, list(G.DERIVED_ORDER)],
    "rows": rows,
    "seen": seen,
    "derived_laws": list(DERIVED),
    "laws": {
        ob: check_obligation("throwaway", ob, CheckContext()).passed
        for ob in ("adjoint", "derivative", "forward")
    },
    "missing": missing_pieces(["throwaway"]),
}
"""


def _added(family: str, register: str = "", run: str = "") -> dict[str, Any]:
    script = _HALF_ADDED.replace("{register}", register) + run + "\nprint(json.dumps(out))\n"
    out = subprocess.run(
        [sys.executable, "-c", script, family],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def added() -> dict[str, Any]:
    """One fresh process: the half-added ops and the throwaway composite."""
    return _added("elementwise", _THROWAWAY, _THROWAWAY_RUN)


def test_a_half_added_op_is_named_with_each_missing_piece(added: dict[str, Any]) -> None:
    assert added["missing"] == [
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
        # whole_comp: kernel, graph builder and law are derived from its table entry;
        # half_comp lacks only its samples (which its builder and law derive from)
        "op half_comp (composite, family pool): no samples (samples=(...) of its "
        "register(...) in spec/ops/F.py, an ordinary point first, F = pool)",
    ]


def test_a_composite_needs_only_its_table_entry(added: dict[str, Any]) -> None:
    """A throwaway composite (only its `composite(...)` entry, in memory) comes after every
    op of SAMPLING_ORDER, is drawn by the suite's link property over exact rationals and
    float32 (focused cases hold it and pass), gets a derived law whose three obligations
    hold, and lacks no piece."""
    got = added["throwaway"]
    assert got["order"] == ["throwaway", False, ["whole_comp", "throwaway"]]
    assert got["rows"] == {"exact": [4, 0, 1], "float32": [4, 0, 1]}
    assert got["seen"]["graphs"] == 8 and got["seen"]["with_op"] >= 1
    assert got["derived_laws"] == ["whole_comp", "throwaway"]
    assert got["laws"] == {"adjoint": True, "derivative": True, "forward": True}
    assert got["missing"] == []


def test_a_primitive_in_a_family_of_composites_names_the_missing_family_module() -> None:
    """`pool` holds composites only, so it has no kernel module; a primitive added to it
    makes loading the kernels fail with the module it needs (no silent default)."""
    got = _added("pool")
    assert got == {
        "import_error": "runtime.kernels: the op table needs the family module "
        "runtime.kernels.pool (family 'pool' holds ops this layer must register), but there "
        "is none"
    }


def test_every_piece_applies_to_some_kind() -> None:
    kinds = {k for p in PIECES for k in p.kinds}
    assert kinds == {"primitive", "composite"}
    assert len({p.name for p in PIECES}) == len(PIECES)
