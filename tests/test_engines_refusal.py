"""An adapter's refusal (`base.Unsupported`: no form of the op with these attributes) is
reported as "unsupported", never as a pass or as the engine crashing: tinygrad's pools
have no divisor_override and its transposed convolution takes symmetric padding only."""

from __future__ import annotations

from fractions import Fraction

import pytest

from conformance.engines.base import Unsupported, refusal
from conformance.engines.local import check_node
from conformance.engines.tables import cell
from spec.domains import FLOAT64
from spec.ops import get_op
from spec.tensor import Tensor
from spec.validate import normalize_attrs

tinygrad_engine = pytest.importorskip("conformance.engines.tinygrad_engine")


def _engine() -> object:
    try:
        return tinygrad_engine.TinygradEngine()
    except Exception as e:  # EngineUnavailable: tinygrad not installed
        pytest.skip(str(e))


def f64(shape: tuple[int, ...], *v: float) -> Tensor:
    return Tensor(shape, tuple(FLOAT64.from_float(x) for x in v))


def test_refusal_names_unsupported_and_other_errors_by_type() -> None:
    assert refusal(Unsupported("no such form"), 200) == "unsupported: no such form"
    assert refusal(ValueError("x" * 300), 10) == "ValueError: " + "x" * 10


@pytest.mark.parametrize(
    ("op", "attrs", "args"),
    [
        (
            "avg_pool1d",
            {"kernel_size": (2,), "stride": None, "padding": None, "ceil_mode": False,
             "count_include_pad": True, "divisor_override": 3},
            [f64((1, 1, 4), 1, 2, 3, 4)],
        ),
        (
            "conv_transpose1d",
            {"stride": None, "padding": (0, 1), "output_padding": None, "groups": None,
             "dilation": None},
            [f64((1, 1, 3), 1, 2, 3), f64((1, 1, 2), Fraction(1, 2), 1)],
        ),
    ],
)  # fmt: skip
def test_tinygrad_refusals_are_unsupported_not_passed(op: str, attrs: dict, args: list) -> None:
    eng = _engine()
    attrs = normalize_attrs(op, attrs)
    y = get_op(op).forward(FLOAT64, args, attrs, ())
    g = Tensor(y.shape, tuple(FLOAT64.from_float(1.0) for _ in y.data))
    res = check_node(eng, "float64", op, attrs, args, g)  # type: ignore[arg-type]
    assert res.covered and res.wrong is None
    assert res.refused is not None and res.refused.startswith("unsupported: tinygrad's")
    # the measured table's cell of a row with only refused cases says so (never a number)
    row = {
        "cases": 0,
        "refused": 1,
        "forward_max_ulp": 0.0,
        "backward_max_ulp": 0.0,
        "jvp_max_ulp": None,
        "conventions": [],
        "unconstrained": 0,
        "failures": 0,
    }
    assert cell(row, False) == "refused"
