"""Every refusal is a `TorchLeanError` that names only relevant ops: walked over
ONNX's backend data (the cases the importer refuses) and over malformed variants of every
backend model (an unknown op type, a dropped input, an attribute of the wrong type, a
float input retyped as string, truncated bytes). A refusal listing unsupported ops may
name only op types the model has, and may suggest only the op itself, one of its listed
synonyms (`SYNONYMS`) or a table op spelled almost the same."""

from __future__ import annotations

import difflib
import os

import pytest

onnx = pytest.importorskip("onnx", reason="needs the onnx package")
from onnx import TensorProto, helper  # noqa: E402

from runtime.interop import ONNX_OPS, UnsupportedOpsError, from_onnx  # noqa: E402
from runtime.interop.core import NEAR_CUTOFF, SYNONYMS  # noqa: E402
from runtime.interop.onnx_backend import SUITES, cases  # noqa: E402
from spec.errors import TorchLeanError  # noqa: E402
from spec.ops import OPS  # noqa: E402

UNARY = {"Relu", "Neg", "Exp", "Abs", "Sigmoid", "Tanh", "Sqrt", "Log", "Sin", "Cos"}
"""Unary float ops swapped for `Floor` (valid ONNX, which the importer does not map)."""
ALL = [c for s in SUITES for c in cases(s)]
BIG = {"test_MaxPool2d_stride_padding_dilation", "test_MaxPool1d_stride_padding_dilation"}


def _snake(name: str) -> str:
    out = []
    for i, ch in enumerate(name):
        if ch.isupper() and i and (name[i - 1].islower() or name[i - 1].isdigit()):
            out.append("_")
        out.append(ch.lower())
    return "".join(out)


def _relevant(src: str, near: str) -> bool:
    """The hand-stated rule a suggestion must meet (checked here, not by calling the
    importer's `nearest_table_op`)."""
    base = _snake(src.split(".")[-1].split(" ")[0])
    if not near:
        return True
    if near not in OPS:
        return False
    if near == base or near in SYNONYMS.get(base, ()):
        return True
    ratio = difflib.SequenceMatcher(None, base, near).ratio()
    return base not in SYNONYMS and ratio >= NEAR_CUTOFF


def _op_types(m) -> set[str]:
    return {n.op_type for n in m.graph.node} | {
        f"{n.domain}.{n.op_type}" for n in m.graph.node if n.domain
    }


def _check_refusal(m, e: BaseException) -> None:
    assert isinstance(e, TorchLeanError), f"{type(e).__name__}: {e}"
    if isinstance(e, UnsupportedOpsError):
        types = _op_types(m)
        for name, (_, near, _) in e.ops.items():
            # a value-level refusal is named "Op (what)" (e.g. statistics outputs)
            assert name.split(" ")[0] in types, (name, sorted(types))
            assert _relevant(name, near), (name, near)


def _try(m) -> None:
    try:
        from_onnx(m)
    except Exception as e:  # every failure must be a TorchLeanError: checked below
        _check_refusal(m, e)


@pytest.mark.parametrize("case", ALL, ids=lambda c: os.path.basename(c))
def test_backend_refusals_name_relevant_ops(case):
    if os.path.basename(case) in BIG:
        pytest.skip("its default input is large (the run is opt-in in test_onnx_backend)")
    _try(onnx.load(os.path.join(case, "model.onnx")))


def _mutants(m):
    """Malformed variants of one model (each a fresh copy)."""

    def copy():
        c = onnx.ModelProto()
        c.CopyFrom(m)
        return c

    if m.graph.node:
        c = copy()
        c.graph.node[0].op_type = "NoSuchOpAnywhere"
        yield "unknown op", c
        c = copy()
        node = c.graph.node[-1]
        if node.input:
            del node.input[-1]
            yield "dropped input", c
        c = copy()
        node = c.graph.node[0]
        node.attribute.append(helper.make_attribute("axis", "not-an-int"))
        yield "bad attribute", c
    unary = [k for k, n in enumerate(m.graph.node) if n.op_type in UNARY]
    if unary and "Floor" not in ONNX_OPS:  # (if the importer ever maps it, skip this one)
        c = copy()
        c.graph.node[unary[0]].op_type = "Floor"
        yield "unmapped op", c
    float_ins = [vi for vi in m.graph.input if vi.type.tensor_type.elem_type == TensorProto.FLOAT]
    if float_ins:
        c = copy()
        name = float_ins[0].name
        for vi in c.graph.input:
            if vi.name == name:
                vi.type.tensor_type.elem_type = TensorProto.STRING
        yield "string input", c
    data = m.SerializeToString()
    yield "truncated", data[: len(data) // 2]


@pytest.mark.parametrize("case", ALL, ids=lambda c: os.path.basename(c))
def test_malformed_variants_are_torchlean_errors(case):
    if os.path.basename(case) in BIG:
        pytest.skip("its default input is large")
    m = onnx.load(os.path.join(case, "model.onnx"))
    for what, bad in _mutants(m):
        try:
            from_onnx(bad)
        except Exception as e:
            assert isinstance(e, TorchLeanError), f"{what}: {type(e).__name__}: {e}"
            if isinstance(bad, onnx.ModelProto):
                _check_refusal(bad, e)
            if what == "unmapped op":
                assert isinstance(e, UnsupportedOpsError) and "Floor" in e.ops, str(e)
                assert e.ops["Floor"][1] == "", e.ops  # no table op is related to it
        else:
            assert what in ("dropped input", "bad attribute"), f"{what} was imported"


def test_the_relevance_rule_rejects_the_old_suggestions():
    """The suggestions once reported (Tile -> silu, Pow -> transpose, Sign -> sin) fail
    the rule this file checks, so the walk above can catch them."""
    assert not _relevant("Tile", "silu")
    assert not _relevant("Pow", "transpose")
    assert _relevant("Sign", "sign") and _relevant("Tile", "") and _relevant("Clip", "clamp")
