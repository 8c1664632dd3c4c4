"""The op table drives every layer: docs, bounds and inlining must cover it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from conformance.bounds import BOUNDS, check_bounds
from conformance.graphs import DEFAULT_FLOAT_OPS, graphs, inputs_for
from spec.doc import op_table_markdown
from spec.domains import BINARY32
from spec.graph import GraphBuilder, eval_graph
from spec.inline import inline
from spec.ops import OPS
from spec.tensor import Tensor

ROOT = Path(__file__).resolve().parent.parent


def test_ops_md_is_generated_from_the_table() -> None:
    assert (ROOT / "docs" / "OPS.md").read_text() == op_table_markdown()


def test_readme_names_every_op() -> None:
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in OPS if name not in readme]
    assert missing == []


def test_every_primitive_op_states_a_fast_bound() -> None:
    missing = [n for n, op in OPS.items() if op.kind == "primitive" and n not in BOUNDS]
    assert missing == []


@st.composite
def _graph_and_inputs(draw):  # type: ignore[no-untyped-def]
    g = draw(graphs(DEFAULT_FLOAT_OPS, max_nodes=5, domain_kind="float"))
    return g, draw(inputs_for(g, BINARY32, specials=True))


@given(_graph_and_inputs())
def test_inline_keeps_values_bit_for_bit(case) -> None:  # type: ignore[no-untyped-def]
    g, xs = case
    gi, vmap = inline(g)
    assert all(OPS[n.op].kind == "primitive" for n in gi.nodes)
    want = eval_graph(BINARY32, g, xs).tensors
    got = eval_graph(BINARY32, gi, xs, check=False).tensors
    for i, t in enumerate(want):
        assert got[vmap[i]].same(BINARY32, t)


def test_bound_check_catches_a_wrong_result(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A fast kernel that is off by more than its bound is reported."""
    import dataclasses

    import runtime.kernels as K

    b = GraphBuilder()
    x = b.input((3,))
    b.node("exp", x)
    g = b.build()
    xs = [Tensor((3,), tuple(BINARY32.from_float(v) for v in (0.5, 1.0, 2.0)))]
    assert check_bounds(g, xs, dtype="float32", kernels="fast").ok
    orig = K.KERNELS["exp"]

    def bad_forward(ctx, xs_, attrs, env):  # type: ignore[no-untyped-def]
        y, saved = orig.forward(ctx, xs_, attrs, env)
        return y * ctx.const(1 + 2**-18), saved  # about 32 ulp off

    monkeypatch.setitem(K.KERNELS, "exp", dataclasses.replace(orig, forward=bad_forward))
    rep = check_bounds(g, xs, dtype="float32", kernels="fast")
    assert not rep.ok
    assert "exp" in (rep.first_violation or "")


def test_every_generated_doc_equals_the_code() -> None:
    """docs/OPS.md, the theorem table, README.md's op count and docs/ARCHITECTURE.md's
    family table are what `python -m proofs readme` writes."""
    from proofs.generated import stale

    assert stale() == []


def test_proofs_readme_writes_the_stale_parts(tmp_path: Path) -> None:
    """The command writes (not only prints): a copy of the docs with a wrong op count and
    family table gets both rewritten, and nothing else changes."""
    import shutil

    from proofs.generated import GENERATED, op_count, write_all

    for g in GENERATED:
        (tmp_path / g.path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / g.path, tmp_path / g.path)
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace(op_count(), "The table holds 103 ops."))
    arch = tmp_path / "docs" / "ARCHITECTURE.md"
    arch.write_text(arch.read_text().replace("| `embed` |", "| `embedding` |"))
    assert write_all(tmp_path) == ["README.md", "docs/ARCHITECTURE.md"]
    for g in GENERATED:
        assert (tmp_path / g.path).read_text() == (ROOT / g.path).read_text(), g.path


def test_proofs_readme_table_is_generated_from_the_registry() -> None:
    from proofs.cli import readme_table

    text = (ROOT / "proofs" / "README.md").read_text()
    begin = text.index("\n", text.index("<!-- theorem-table:begin")) + 1
    end = text.index("<!-- theorem-table:end")
    assert text[begin:end].strip() == readme_table().strip()
