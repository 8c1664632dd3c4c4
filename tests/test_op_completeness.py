"""Every op of the table has every piece of every layer, and a half-added op is named with
each piece it lacks (`proofs.completeness`, pieces derived from the op's kind and record).

The added ops are registered in a fresh process right after `spec.ops` is imported, before
the other layers, exactly as a new entry of a family module would be. `test_adding_an_op`
follows docs/ARCHITECTURE.md's recipe ("How to add an op") to the letter: a composite
with one table entry and an elementwise math primitive with its table entry, its kernel
and its math-function record, nothing else; both are drawn by the suite, bounded, lawful,
judged by torch and JAX, and complete.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proofs.completeness import PIECES, missing_pieces
from spec.mathfns import BUDGET_DTYPES

ROOT = Path(__file__).resolve().parent.parent


def test_every_op_of_the_table_is_complete() -> None:
    assert missing_pieces() == []


def _fresh(script: str, *argv: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", script, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


_HALF_ADDED = """
import json, sys
from fractions import Fraction
import sympy
from spec.mathfns import MathFn
from spec.ops.builders import composite, elementwise1
from spec.ops.table import arg, sample

elementwise1(
    name="half_prim", family=sys.argv[1], f=lambda D, x, a: x,
    push=lambda D, x, y, t, a: t, reads="", doc="a half-added primitive",
)
composite(
    name="whole_comp", family="pool", arity=1, body=lambda b, xs, a: b.node("neg", xs[0]),
    doc="a composite with samples", samples=(sample(arg((2,), Fraction(1), Fraction(2))),),
)
composite(
    name="half_comp", family="pool", arity=1, body=lambda b, xs, a: b.node("neg", xs[0]),
    doc="a composite without samples",
)
elementwise1(
    name="half_math", family="transcendental", reads="x",
    math=MathFn(
        name="half_math", mpfr="asinh", sympy=sympy.asinh,
        derivative=lambda x: 1 / sympy.sqrt(1 + x**2), mpmath="asinh",
        numpy=("no_such_function",), array_api="asinh", ulps={"float64": 4.0},
    ),
    push=lambda D, x, y, t, a: t, doc="a math primitive with a half record",
    samples=(sample(arg((2,), 1, 2)),),
)
try:
    from proofs.completeness import missing_pieces
except ImportError as e:
    print(json.dumps({"import_error": str(e)}))
    sys.exit()
names = ["half_prim", "whole_comp", "half_comp", "half_math"]
print(json.dumps({"missing": missing_pieces(names)}))
"""


@pytest.fixture(scope="module")
def half_added() -> dict[str, Any]:
    return _fresh(_HALF_ADDED, "elementwise")


def _line(op: str, kind: str, family: str, piece: str) -> str:
    where = next(p.where for p in PIECES if p.name == piece)
    return f"op {op} ({kind}, family {family}): no {piece} ({where}, F = {family})"


def test_a_half_added_op_is_named_with_each_missing_piece(half_added: dict[str, Any]) -> None:
    prim = [
        "samples",
        "runtime kernel",
        "fast-profile bound",
        "graph builder",
        "SAMPLING_ORDER entry",
        "proof law",
    ]
    math = [f"ULP budget for {dt}" for dt in BUDGET_DTYPES if dt != "float64"]
    assert half_added["missing"] == [
        *(_line("half_prim", "primitive", "elementwise", p) for p in prim),
        # whole_comp: kernel, graph builder and law are derived from its table entry;
        # half_comp lacks only its samples (which its builder and law derive from)
        _line("half_comp", "composite", "pool", "samples"),
        # half_math: bound, builder, draw order and law derive from its record, which
        # lacks three budgets and a wide evaluation
        _line("half_math", "primitive", "transcendental", "runtime kernel"),
        *(_line("half_math", "primitive", "transcendental", p) for p in math),
        _line("half_math", "primitive", "transcendental", "wide evaluation for crmath"),
    ]
    assert "ULP budget for float32" in half_added["missing"][-4]
    assert "ulps={..., 'float32': K}" in half_added["missing"][-4]


def test_a_primitive_in_a_family_of_composites_names_the_missing_family_module() -> None:
    """`pool` holds composites only, so it has no kernel module; a primitive added to it
    makes loading the kernels fail with the module it needs (no silent default)."""
    got = _fresh(_HALF_ADDED, "pool")
    assert got == {
        "import_error": "runtime.kernels: the op table needs the family module "
        "runtime.kernels.pool (family 'pool' holds ops this layer must register), but there "
        "is none"
    }


def test_every_piece_applies_to_some_kind() -> None:
    kinds = {k for p in PIECES for k in p.kinds}
    assert kinds == {"primitive", "composite"}
    assert len({p.name for p in PIECES}) == len(PIECES)


# The recipe of docs/ARCHITECTURE.md, "How to add an op", as one fresh process: the three
# pieces below are everything that is written (table entries, one kernel, one record).
ADD_OPS = """
from fractions import Fraction
import sympy
from spec.mathfns import MathFn
from spec.ops.builders import composite, elementwise1, second_arg, second_point
from spec.ops.table import arg, sample

# spec/ops/transcendental.py: the math-function record and the primitive's table entry
ATAN = MathFn(
    name="atan",
    mpfr="atan",
    sympy=sympy.atan,
    derivative=lambda x: 1 / (1 + x**2),
    mpmath="atan",
    numpy=("arctan", "atan"),
    array_api="atan",
    ulps={"float64": 4.0, "float32": 4.0, "bfloat16": 1.0, "float16": 1.0},
    hard=(-1e30, 1e-30, 1e30),
    exact={Fraction(0): Fraction(0)},
    engines={"torch": "atan", "jax": "numpy.arctan", "autograd": "arctan"},
)
elementwise1(
    name="atan",
    family="transcendental",
    math=ATAN,
    reads="x",
    algebraic=False,
    push=lambda D, x, y, t, a: D.div(t, D.add(D.one(), D.mul(x, x))),
    doc="atan(x), correctly rounded; derivative div(t, add(1, mul(x, x)))",
    samples=(sample(arg((3,), -1, Fraction(1, 2), 2)), second_point(second_arg())),
)

# spec/ops/elementwise.py: the composite's table entry
composite(
    name="square",
    family="elementwise",
    arity=1,
    body=lambda b, xs, a: b.node("mul", xs[0], xs[0]),
    tags=frozenset({"elementwise"}),
    doc="mul(x, x)",
    samples=(sample(arg((3,), -1, Fraction(1, 2), 2)), second_point(second_arg())),
)

# runtime/kernels/transcendental.py: the primitive's kernel (there family=__name__)
from runtime.kernels.builders import unary_kernel

unary_kernel(
    family="runtime.kernels.transcendental",
    name="atan",
    reads="x",
    f=lambda c, x, a: c.unary("atan", x),
    push=lambda c, x, y, t, a: c.div(t, c.const(1) + x * x),
)
"""

_CHECK_ADDED = """
import json
from dataclasses import replace

import conformance.graphs as G
from conformance.bounds import BOUNDS
from conformance.engines.run import run_engine
from conformance.suite import default_properties, run_property
from proofs.completeness import missing_pieces
from proofs.laws import DERIVED, check_obligation
from proofs.records import CheckContext

NEW = ("atan", "square")
out = {"order": list(G.GRAPH_OPS[-2:]), "derived": list(G.DERIVED_ORDER)}
seen = {}
rows = {}
for prop in default_properties(["float32"], ["ordered", "fast"]):
    if prop.name not in ("link", "node_bounds"):
        continue
    def counting(case, check=prop.check, name=prop.name):
        for op in NEW:
            key = name + ":" + op
            seen[key] = seen.get(key, 0) + any(n.op == op for n in case.graph.nodes)
        return check(case)
    row = run_property(replace(prop, ops=NEW, check=counting), 0, per_op=4)
    rows[prop.name] = [row.failed, row.ops_covered]
out["rows"], out["seen"] = rows, seen
out["bound"] = "atan" in BOUNDS
OBLIGATIONS = ("adjoint", "derivative", "forward")
out["laws"] = {
    op: [check_obligation(op, ob, CheckContext()).passed for ob in OBLIGATIONS] for op in NEW
}
out["derived_laws"] = [op for op in DERIVED if op in NEW]
out["missing"] = missing_pieces(list(NEW))
out["engines"] = {}
for mod, cls in (("torch_engine", "TorchEngine"), ("jax_engine", "JaxEngine")):
    import importlib
    try:
        engine = getattr(importlib.import_module("conformance.engines." + mod), cls)()
    except Exception as e:
        out["engines"][mod] = "unavailable: " + str(e)
        continue
    run = run_engine(engine, ["float32"], list(NEW), max_examples=6, per_op=1, shrink_seconds=5)
    rows = [r for r in run.ops if r.op in NEW]
    out["engines"][mod] = {r.op: [r.covered, r.cases > 0, r.failures] for r in rows}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def added() -> dict[str, Any]:
    pytest.importorskip("torch", reason="torch judges the added ops")
    return _fresh(ADD_OPS + _CHECK_ADDED)


def test_adding_an_op_draws_it(added: dict[str, Any]) -> None:
    """Both ops come after every op of SAMPLING_ORDER, in table order, and the suite's link
    (ordered, bitwise) and node_bounds (fast) properties draw graphs holding them, pass."""
    assert added["order"] == ["atan", "square"] == added["derived"][-2:]
    assert added["rows"] == {"link": [0, 2], "node_bounds": [0, 2]}
    assert all(n >= 1 for n in added["seen"].values()) and len(added["seen"]) == 4


def test_adding_an_op_bounds_and_laws_it(added: dict[str, Any]) -> None:
    assert added["bound"] is True  # derived from the record: K·ulp(y)
    assert added["derived_laws"] == ["atan", "square"]
    assert added["laws"] == {"atan": [True] * 3, "square": [True] * 3}


def test_adding_an_op_is_judged_by_torch_and_jax(added: dict[str, Any]) -> None:
    judged = {"atan": [True, True, 0], "square": [True, True, 0]}
    assert added["engines"]["torch_engine"] == judged
    jax = added["engines"]["jax_engine"]
    if isinstance(jax, str):
        pytest.skip(f"jax: {jax}")
    assert jax == judged


def test_adding_an_op_leaves_nothing_missing(added: dict[str, Any]) -> None:
    assert added["missing"] == []


def test_the_recipe_is_the_test() -> None:
    """docs/ARCHITECTURE.md's recipe quotes `ADD_OPS` verbatim."""
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert ADD_OPS.strip() in doc
