"""The network as verification sees it: one `Stage` per evaluation-mode layer, named by
the spec op it executes, and its canonical JSON (the model hash and the certificate's
"network").

Invariants:
- `LAYER_STAGES` maps a `runtime.nn` layer type to the builder of its stage (or to
  a skip for a layer that is the identity in evaluation mode: Dropout). A layer's stage is
  found through its type's MRO, so a subclass is treated as its base (as an isinstance
  test would); a layer type without an entry raises `unavailable`.
- A stage's `op` is the spec op name ("linear", "relu", "tanh", "sigmoid", "gelu",
  "batch_norm", "layer_norm"); its parameters are exact (Fractions of the stored values),
  and `bits` holds the stored values as bit patterns in the dtype (p/q for "exact").
- The certificate format (torchlean_output_bounds_v1) names BatchNorm1d "bn" and LayerNorm
  "ln": `CERT_NAMES` maps op names to those labels, and `Stage.label` is what the network
  JSON, the CROWN witness and error messages print. The network JSON (and so the model
  hash) is byte-identical to what the format has always contained.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from runtime.nn import GELU, BatchNorm1d, Dropout, LayerNorm, Linear, ReLU, Sigmoid, Tanh

from .core import frac_str, sha, unavailable

__all__ = [
    "CERT_NAMES",
    "DTYPES",
    "LAYER_STAGES",
    "Stage",
    "model_hash",
    "network_json",
    "stages",
]

CERT_NAMES = {"batch_norm": "bn", "layer_norm": "ln"}  # other ops keep their name
DTYPES = ("float64", "float32", "bfloat16", "float16", "exact")


@dataclass(frozen=True)
class Stage:
    """One evaluation-mode layer: the spec op it executes and exact parameters (Fractions)."""

    op: str  # linear | relu | tanh | sigmoid | gelu | batch_norm | layer_norm
    weight: tuple[tuple[Fraction, ...], ...] = ()
    bias: tuple[Fraction, ...] = ()
    mean: tuple[Fraction, ...] = ()
    var: tuple[Fraction, ...] = ()
    eps: Fraction = Fraction(0)
    bits: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def label(self) -> str:
        """The stage's name in certificates and messages."""
        return CERT_NAMES.get(self.op, self.op)


def _bits(a: np.ndarray, dtype: str) -> list[Any]:
    """Bit patterns of an array's values (row-major, nested like the array); p/q for exact."""
    arr = np.asarray(a)
    if dtype == "exact":
        return np.vectorize(lambda v: f"{Fraction(v).numerator}/{Fraction(v).denominator}",
                            otypes=[object])(arr).tolist()  # fmt: skip
    width = {"float64": np.uint64, "float32": np.uint32, "bfloat16": np.uint16,
             "float16": np.uint16}[dtype]  # fmt: skip
    digits = np.dtype(width).itemsize * 2
    return np.vectorize(lambda v: f"0x{int(v):0{digits}x}", otypes=[object])(
        arr.view(width)
    ).tolist()


def _exact(a: np.ndarray) -> list[Any]:
    arr = np.asarray(a)
    if arr.dtype == object:
        return np.vectorize(Fraction, otypes=[object])(arr).tolist()
    return np.vectorize(lambda v: Fraction(float(v)), otypes=[object])(arr).tolist()


StageBuilder = Callable[[Any, list[Any], str], "Stage | None"]


def _linear(layer: Any, st: list[Any], dtype: str) -> Stage:
    w, b = st
    return Stage(
        "linear",
        weight=tuple(tuple(r) for r in _exact(w)),
        bias=tuple(_exact(b)),
        bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
    )


def _elementwise(op: str) -> StageBuilder:
    def build(layer: Any, st: list[Any], dtype: str) -> Stage:
        return Stage(op)

    return build


def _batch_norm(layer: Any, st: list[Any], dtype: str) -> Stage:
    w, b, rm, rv, _ = st
    return Stage(
        "batch_norm",
        weight=(tuple(_exact(w)),),
        bias=tuple(_exact(b)),
        mean=tuple(_exact(rm)),
        var=tuple(_exact(rv)),
        eps=Fraction(layer.eps),
        bits={
            "weight": _bits(w, dtype),
            "bias": _bits(b, dtype),
            "running_mean": _bits(rm, dtype),
            "running_var": _bits(rv, dtype),
        },
    )


def _layer_norm(layer: Any, st: list[Any], dtype: str) -> Stage:
    w, b = st
    return Stage(
        "layer_norm",
        weight=(tuple(_exact(w)),),
        bias=tuple(_exact(b)),
        eps=Fraction(layer.eps),
        bits={"weight": _bits(w, dtype), "bias": _bits(b, dtype)},
    )


def _skip(layer: Any, st: list[Any], dtype: str) -> None:
    """No stage: the layer is the identity in evaluation mode."""
    return None


LAYER_STAGES: dict[type, StageBuilder] = {
    Linear: _linear,
    ReLU: _elementwise("relu"),
    Tanh: _elementwise("tanh"),
    Sigmoid: _elementwise("sigmoid"),
    GELU: _elementwise("gelu"),
    BatchNorm1d: _batch_norm,
    LayerNorm: _layer_norm,
    Dropout: _skip,
}


def _builder(layer: Any) -> StageBuilder:
    for cls in type(layer).__mro__:
        if cls in LAYER_STAGES:
            return LAYER_STAGES[cls]
    raise unavailable(f"{type(layer).__name__} layers ({layer!r})")


def stages(result: Any) -> list[Stage]:
    """The stages of `result`'s network in evaluation mode (raises `unavailable` for a
    typed result, another dtype or an unsupported layer)."""
    if getattr(result, "typed", False):
        raise unavailable("results of open_typed sessions (typed boundary values)")
    dtype = result.dtype
    if dtype not in DTYPES:
        raise unavailable(f"dtype {dtype!r}")
    state = result.state()  # copies of the stored arrays (same values, dtypes)
    out: list[Stage] = []
    for layer, occ in zip(result.model.layers, result.model.occurrences(), strict=True):
        st = [state[k] for k in occ]
        stage = _builder(layer)(layer, st, dtype)
        if stage is not None:
            out.append(stage)
    return out


def network_json(result: Any) -> dict[str, Any]:
    """The network as evaluated, canonical JSON: dtype and one entry per stage."""
    out = []
    for st in stages(result):
        e: dict[str, Any] = {"op": st.label}
        e.update(st.bits)
        if st.op in ("batch_norm", "layer_norm"):
            e["eps"] = frac_str(st.eps)
        out.append(e)
    return {"dtype": result.dtype, "stages": out}


def model_hash(result: Any) -> str:
    """sha256 over the canonical network JSON (architecture and state bits)."""
    return sha(network_json(result))
