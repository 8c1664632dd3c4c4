"""Decoder-only language models on the torch route, and the constructs they need:
`aten._assert_tensor_metadata` (a no-op check), cross entropy with `ignore_index`
targets, GPT-2 and Llama in small configurations against PyTorch float64 (values and
every parameter gradient, tied embeddings included) with the float32 link check."""

from __future__ import annotations

import math

import numpy as np
import pytest

from runtime.interop.aten_models import MODEL_RULES
from runtime.interop.core import Emitter, InvalidModelError


def test_assert_tensor_metadata_emits_nothing_and_checks_the_shape() -> None:
    E = Emitter()
    x = E.input((2, 3))
    rule = MODEL_RULES["aten._assert_tensor_metadata"]
    assert rule(E, x, [2, 3], None, "float64", device="cpu") is None
    assert rule(E, x) is None
    assert len(E.build().nodes) == 0
    with pytest.raises(InvalidModelError, match=r"asserts \(3, 2\)"):
        rule(E, x, [3, 2])


def test_zoo_source_flag_refuses_unknown_sources_and_models(capsys: pytest.CaptureFixture) -> None:
    from conformance.zoo import main

    assert main(["--source", "nope"]) == 2
    assert main(["--source", "timm", "no_such_model"]) == 2
    assert main(["--source", "transformers", "--route", "sideways"]) == 2
    err = capsys.readouterr().err
    assert err.count("python -m conformance.zoo:") == 3 and "no_such_model" in err


def test_scaled_error_is_cancellation_aware() -> None:
    from conformance.zoo_sources import FLOOR, scaled_error

    noise = np.array([1e-17, -2e-17])  # a gradient that is 0 in real arithmetic
    assert scaled_error(np.zeros(2), noise, 1.0) == pytest.approx(2e-17 / FLOOR)
    assert scaled_error([1.0, 2.0], [1.0, 2.5], 1e9) == pytest.approx(0.5 / (FLOOR * 1e9))
    assert scaled_error([1.0, 2.0], [1.0, 2.5], 1.0) == pytest.approx(0.2)
    assert scaled_error(np.zeros(3), np.zeros(2), 1.0) == float("inf")


torch = pytest.importorskip("torch", reason="torch is not installed")
from runtime.interop import from_torch  # noqa: E402


def test_to_device_check_is_dropped() -> None:
    class ToCpu(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x.to("cpu", torch.float64)) * 2

    x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    ep = torch.export.export(ToCpu(), (x,))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("_assert_tensor_metadata" in t for t in targets), targets
    imp = from_torch(ToCpu(), (x,))
    assert "tanh" in [n.op for n in imp.graph.nodes] and len(imp.graph.nodes) <= 3
    outs, grads = imp.run()
    np.testing.assert_array_equal(outs[0], 2 * np.tanh([0.5, -1.0]))
    np.testing.assert_allclose(grads["x"], 2 * (1 - np.tanh([0.5, -1.0]) ** 2), rtol=1e-15)


def test_cross_entropy_ignore_index_hand_worked() -> None:
    class CE(torch.nn.Module):
        def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.cross_entropy(x, t)

    x = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0]], dtype=torch.float64)
    t = torch.tensor([0, 0, -100])
    imp = from_torch(CE(), (x, t))
    outs, grads = imp.run()
    s1 = 1 / (1 + math.exp(-1))  # softmax of [1, 0] at class 0
    # mean over the two kept rows; the ignored row has no loss and no gradient
    assert outs[0] == pytest.approx((math.log(2) + math.log(1 + math.exp(-1))) / 2, rel=1e-15)
    want = np.array([[-0.25, 0.25], [(s1 - 1) / 2, (1 - s1) / 2], [0.0, 0.0]])
    np.testing.assert_allclose(grads["x"], want, rtol=1e-15, atol=1e-17)


def _lm_rows(name: str) -> dict[str, object]:
    pytest.importorskip("transformers", reason="transformers is not installed")
    from conformance.zoo_sources import check_source_model

    return check_source_model("transformers", name, route="torch", link=True)


@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("name", ["gpt2_tiny", "llama_tiny"])
def test_language_model_matches_pytorch_and_links(name: str) -> None:
    row = _lm_rows(name)
    assert row["result"] == "pass", row
    assert row["val"] <= 1e-9 and row["grad"] <= 1e-9
    found, total = row["grads_compared"]
    assert found == total and total > 0
    assert row["tied"] == 1  # the output layer is the token embedding
    assert row["link_f32"] == "holds"


@pytest.mark.filterwarnings("ignore")
def test_llama_float32_parts_are_what_the_reference_mode_removes() -> None:
    """Llama computes RMSNorm, rotary angles and the attention softmax in float32 on
    purpose; stock PyTorch float64 therefore differs from the import by float32
    rounding, and `exact_reference_mode` (casts as float64) removes all of it."""
    transformers = pytest.importorskip("transformers", reason="transformers is not installed")
    from conformance.zoo_sources import LM_ZOO, exact_reference_mode, library

    library("transformers")
    torch.manual_seed(0)
    m = LM_ZOO["llama_tiny"].build(transformers).double().eval()
    (ids,) = LM_ZOO["llama_tiny"].inputs(torch)
    imp = from_torch(m, (ids,))
    outs, _ = imp.run()
    stock = float(m(ids))
    with exact_reference_mode():
        exact = float(m(ids))
    assert abs(float(outs[0]) - exact) <= 1e-14 * abs(exact)
    assert abs(float(outs[0]) - stock) > 1e-13 * abs(exact)  # float32 rounding, not ours
