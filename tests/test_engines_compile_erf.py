"""docs/ENGINES.md's eager-vs-compiled erf finding, pinned by its reproducer: float32
erf(0x3e1bc6e7) is 0x3e2e6dcc in eager PyTorch (within 0.5 ulp of the exact 0.17034071)
and 0x3e2e6dc4 under `torch.compile` (inductor, CPU) with PyTorch 2.13 on the measuring
machine, 7.8 ulp beyond erf's 4-ulp budget, on a tensor of 8 copies of the input (the
kernel's vector path; a 1-element tensor takes its scalar path, which rounds correctly).
One compiled program (a forward of one shape, no autograd); skipped without torch or a
C++ compiler, and skipped, saying so, where this PyTorch's inductor erf rounds this input
within budget."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

torch = pytest.importorskip("torch", reason="pip install torch")

from conformance.engines import EngineUnavailable  # noqa: E402
from conformance.engines.local import check_node  # noqa: E402
from conformance.engines.torch_compile_engine import TorchCompileEngine  # noqa: E402
from conformance.engines.torch_engine import TorchEngine  # noqa: E402
from spec.domains import BINARY32  # noqa: E402
from spec.tensor import Tensor  # noqa: E402


class CompiledErfForward(TorchEngine):
    """erf compiled by `torch.compile` (inductor, fullgraph, one shape), judged forward
    only: the standalone reproducer's call."""

    name = "torch-compile-erf-forward"
    has_vjp = False
    has_jvp = False
    ops: ClassVar[dict[str, Any]] = {"erf": torch.compile(torch.erf, fullgraph=True, dynamic=False)}


def bits32(*b: int) -> Tensor:
    return Tensor((len(b),), tuple(BINARY32.from_bits(v) for v in b))


def test_compiled_erf_reproducer_is_named_and_eager_is_correctly_rounded() -> None:
    try:
        TorchCompileEngine.check_available()  # inductor needs a C++ compiler
    except EngineUnavailable as e:
        pytest.skip(str(e))
    x, one = bits32(*[0x3E1BC6E7] * 8), bits32(*[0x3F800000] * 8)
    eager = check_node(TorchEngine(), "float32", "erf", {}, [x], one, [one])
    assert eager.wrong is None and eager.output is not None
    assert eager.max_ulp["forward"] <= 0.5  # correctly rounded: 0x3e2e6dcc
    assert {BINARY32.to_bits(v) for v in eager.output.data} == {0x3E2E6DCC}
    compiled = check_node(CompiledErfForward(), "float32", "erf", {}, [x], one)
    assert compiled.output is not None
    (got,) = {BINARY32.to_bits(v) for v in compiled.output.data}
    if got == 0x3E2E6DCC:
        pytest.skip("this PyTorch's inductor erf rounds 0x3e1bc6e7 correctly (no finding here)")
    if compiled.wrong is None:
        pytest.skip(f"inductor erf gives {got:#x} here, within erf's 4-ulp budget")
    assert compiled.wrong.startswith("erf forward element 0: engine ")
    if got == 0x3E2E6DC4:  # the value measured with PyTorch 2.13 (docs/ENGINES.md)
        assert compiled.wrong == (
            "erf forward element 0: engine 0.17034059762954712, exact 0.170340714392968, "
            "error 7.836 ulp > budget 4 ulp"
        )
