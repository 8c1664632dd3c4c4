"""backprop_all_ctx adds the later nodes' zero contributions to a value's own cotangent
*before* that value's node runs (a −0 seed becomes +0 first), as its definition says; the
eager link check (runtime lowering) agrees. Worked by hand from the definition."""

from __future__ import annotations

from conformance.link_property import check_link
from spec.domains import BINARY32 as F32
from spec.graph import GraphBuilder, backprop_all_ctx
from spec.tensor import Tensor, TensorPack


def _case():
    b = GraphBuilder()
    x = b.input(())
    b.node("sum", x)
    b.node("sum", x)
    g = b.build()
    mz = F32.from_float(-0.0)
    seed = TensorPack(g.shapes, tuple(Tensor((), (mz,)) for _ in g.shapes))
    return g, [Tensor((), (F32.from_float(0.0),))], seed


def test_zero_added_to_own_cotangent_before_the_node_runs() -> None:
    g, xs, seed = _case()
    ct = backprop_all_ctx(F32, g, xs, seed).tensors
    # %2 adds -0 to %0 (-0) and +0 to %1 (-0 + +0 = +0); %1 then pushes +0 into %0 (+0)
    assert [F32.encode(t.data[0]) for t in ct] == ["0x00000000", "0x00000000", "0x80000000"]


def test_runtime_lowering_agrees() -> None:
    g, xs, seed = _case()
    r = check_link(g, xs, seed, dtype="float32", kernels="ordered")
    assert r.ok, r.first_mismatch
