"""`torch-compile`: each op's forward, VJP and JVP compiled by `torch.compile` (inductor on the
CPU), cached by op, attributes, shapes and dtypes; a broken compiled op is caught and named.
Compiling is slow, so this stays at two ops and four programs."""

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


class BrokenTanhCompiled(TorchCompileEngine):
    """Compiled PyTorch with tanh replaced by 1.25 * tanh (sqrt left honest)."""

    name = "torch-compile-broken-tanh"
    ops: ClassVar[dict[str, Any]] = {
        **TorchCompileEngine.ops,
        "tanh": lambda x: torch.tanh(x) * 1.25,
    }


def _engine() -> BrokenTanhCompiled:
    try:
        return BrokenTanhCompiled()
    except EngineUnavailable as e:
        pytest.skip(str(e))


def bits32(*b: int) -> Tensor:
    return Tensor((len(b),), tuple(BINARY32.from_bits(v) for v in b))


def test_compiled_ops_judged_cached_and_a_broken_one_named() -> None:
    eng = _engine()
    # the input: eager float32 sqrt(0x403504f3) on the measuring machine is
    # 0x3fd744fc, the correctly rounded value 0x3fd744fd; the compiled program must round
    # correctly (IEEE sqrt), eager is judged on what it returns
    x, one = bits32(0x403504F3), bits32(0x3F800000)
    res = check_node(eng, "float32", "sqrt", {}, [x], one, [one])
    assert res.wrong is None and res.jvp_refused is None and "jvp" in res.max_ulp
    assert res.output is not None and BINARY32.to_bits(res.output.data[0]) == 0x3FD744FD
    eager = check_node(TorchEngine(), "float32", "sqrt", {}, [x], one)
    assert eager.output is not None
    if BINARY32.to_bits(eager.output.data[0]) == 0x3FD744FC:
        assert eager.wrong is not None and "sqrt forward" in eager.wrong
    # cached: the same op, attributes, shape and dtype reuse the programs; another shape not
    stats0 = eng.cache.stats()
    check_node(eng, "float32", "sqrt", {}, [bits32(0x40000000)], one)
    assert eng.cache.stats()["reused"] == stats0["reused"] + 1
    assert eng.cache.stats()["compiled"] == stats0["compiled"]
    bad = check_node(eng, "float32", "tanh", {}, [bits32(0x3F000000, 0x3F800000)],
                     bits32(0x3F800000, 0x3F800000))  # fmt: skip
    assert bad.wrong is not None and bad.wrong.startswith("tanh forward")
    # two new programs: tanh's, and mul's for the flush probe (run once an element is
    # beyond budget, to ask whether the engine flushes subnormals)
    assert eng.cache.stats()["compiled"] == stats0["compiled"] + 2
    assert "float32" in vars(eng)["flush_probes"]
    assert eng.describe()["backend"] == "inductor"
