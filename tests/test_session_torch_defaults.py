"""A name taken from PyTorch has PyTorch's defaults and positional order: the Session's op
methods against `torch.nn.functional` / `torch` (float64, 1e-12), called with only the
required arguments.

Every op of the table whose name is an `F` or `torch` function is called both ways with
the same required arguments, positionally; ops whose required arguments differ from
PyTorch's by design are listed in `DIFFERENT_SIGNATURE` and named, with their reason, in
docs/ARCHITECTURE.md ("Deliberate differences").
"""

from __future__ import annotations

import inspect
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from runtime.session import Session
from runtime.session.torch_calls import TORCH_METHODS
from spec.ops import OPS

torch = pytest.importorskip("torch", reason="torch is needed to compare with PyTorch")
F = torch.nn.functional

ROOT = Path(__file__).resolve().parent.parent
MODES = ("eager", "typed_graph")

DIFFERENT_SIGNATURE = {
    "concat": "variadic tensors (torch takes one sequence)",
    "transpose": "the matrix transpose of the last two axes (torch names dim0, dim1)",
    "repeat_interleave": "repeats is a static attribute",
    "select": "the index is a static attribute or a NatRef",
    "index_select": "indices are a static attribute",
    "scatter_add": "indices are a static attribute",
    "gather": "indices are a static attribute",
    "layer_norm": "weight and bias are tensor arguments; the last axis only",
    "embedding": "the table first, ids a static attribute",
    "one_hot": "ids a static attribute",
    "where": "the mask is a static attribute",
}
"""Table ops named like a PyTorch function whose required arguments are not PyTorch's."""

SAMPLE_FROM = {"batch_norm": "batch_norm_eval"}
"""A `TORCH_METHODS` op whose F call takes another table op's arguments (running stats)."""

EXTRA_INPUTS = {
    # the table's samples of these give a non-default attribute; plain inputs instead
    "conv1d": [(1, 2, 4), (3, 2, 2), (3,)],
    "conv_transpose1d": [(1, 2, 4), (2, 3, 2), (3,)],
}


def torch_function(name: str) -> Any:
    return getattr(F, name, None) or getattr(torch, name, None)


def walked() -> list[str]:
    return [n for n in OPS if torch_function(n) is not None and n not in DIFFERENT_SIGNATURE]


def _value(v: Any) -> Any:
    if isinstance(v, Fraction):
        return int(v) if v.denominator == 1 else float(v)
    if isinstance(v, tuple):
        return tuple(_value(u) for u in v)
    return v


def required_call(name: str) -> tuple[list[np.ndarray], list[Any]]:
    """(tensor arguments, required attributes in schema order) from the op's first sample
    that gives every required attribute and no non-finite value; float64."""
    if name in EXTRA_INPUTS:
        rng = np.random.default_rng(7)
        return [rng.standard_normal(sh) for sh in EXTRA_INPUTS[name]], []
    d = OPS[SAMPLE_FROM.get(name, name)]
    req = [a.name for a in d.attrs if a.required]
    for sm in d.samples:
        vals = [v for _, vs in sm.args for v in vs]
        if set(req) <= set(sm.attrs) and all(isinstance(v, Fraction) for v in vals):
            xs = [
                np.array([float(v) for v in vs], dtype=np.float64).reshape(sh) for sh, vs in sm.args
            ]
            return xs, [_value(sm.attrs[k]) for k in req]
    raise AssertionError(f"{name}: no sample gives its required attributes")


def n_required(method: Any) -> int:
    params = list(inspect.signature(method).parameters.values())[1:]  # after self
    return sum(p.default is inspect.Parameter.empty for p in params)


@pytest.mark.parametrize("name", walked())
def test_required_arguments_and_defaults_agree_with_pytorch(name: str) -> None:
    xs, attrs = required_call(name)
    if name in TORCH_METHODS:  # F's signature: its required tensors, then attributes
        xs = xs[: n_required(TORCH_METHODS[name]) - len(attrs)]
    s = Session(dtype="float64")
    got = s.get_value(getattr(s, name)(*[s.input(x) for x in xs], *attrs))
    want = torch_function(name)(*[torch.tensor(x) for x in xs], *attrs)
    want = np.asarray(want.detach().numpy())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_every_kept_difference_is_documented() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = doc[doc.index("### Deliberate differences from PyTorch") :]
    section = section[: section.index("\n#", 1)]
    for name in DIFFERENT_SIGNATURE:
        assert f"`{name}`" in section, name
    assert {n for n in OPS if torch_function(n) is not None} >= set(DIFFERENT_SIGNATURE)


def _pair(name: str, xv: np.ndarray, seed: np.ndarray, mode: str) -> tuple[Any, ...]:
    s = Session(mode, dtype="float64")
    x = s.input(xv)
    call = {
        "group_norm": lambda: s.group_norm(x, 2),
        "instance_norm": lambda: s.instance_norm(x),
        "gelu": lambda: s.gelu(x),
    }[name]
    y = call()
    g = s.grad(s.backward_dense_all(y, seed), x)
    tx = torch.tensor(xv, requires_grad=True)
    ty = {"group_norm": lambda: F.group_norm(tx, 2), "instance_norm": lambda: F.instance_norm(tx),
          "gelu": lambda: F.gelu(tx)}[name]()  # fmt: skip
    (tg,) = torch.autograd.grad(ty, tx, torch.tensor(seed))
    return s.get_value(y), ty.detach().numpy(), g, tg.numpy()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", ["group_norm", "instance_norm", "gelu"])
def test_values_and_gradients_equal_pytorch(name: str, mode: str) -> None:
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((2, 4, 3))
    seed = rng.standard_normal((2, 4, 3))
    y, ty, g, tg = _pair(name, xv, seed, mode)
    np.testing.assert_allclose(y, ty, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(g, tg, rtol=1e-12, atol=1e-12)
