"""Runtime dtypes, the `Backend` record and the NumPy backend.

Invariants:
- A `Backend` names its array namespace (array-api-compat), its device and its
  capabilities; kernels only talk to `backend.xp` (plus NumPy-only fast paths that are
  guarded by `backend.is_numpy` and tested to give identical bits).
- Three kinds of backend: NumPy (every dtype, exact and symbolic included), CuPy
  (`runtime.backends.cuda`, device "cuda") and any array-API namespace plugged in by
  import path (`get_backend("module:attr")`, e.g. `array_api_strict`; see
  `runtime.backends.registry`). A backend moves arrays to and from the host (`to_host`,
  `from_host`; NumPy arrays on the host), so spec tensors, constants and checks go through
  the host and never through a silent cast. A backend may supply its own `ordered` fold and
  matmul (CuPy does, as device kernels); without them the generic ones (one array
  operation per reduction step) are used.
- Runtime dtypes are "float64", "float32", "bfloat16" (ml_dtypes), "float16" and "exact";
  "exact" runs the same kernels on NumPy object arrays of `fractions.Fraction`,
  and "symbolic" on object arrays of sympy expressions (used by `proofs/`).
- Each runtime dtype corresponds to one spec domain (`DTYPE_DOMAIN`); `to_spec` and
  `from_spec` convert losslessly between arrays and spec tensors (IEEE values by bit
  pattern, so -0, subnormals and infinities survive; NaN maps to the domain's NaN class).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import array_api_compat
import gmpy2
import ml_dtypes
import numpy as np

from spec.domains import (
    BFLOAT16,
    BINARY32,
    FLOAT16,
    FLOAT64,
    RATIONAL,
    SYMBOLIC,
    Domain,
    IEEEDomain,
)
from spec.errors import DomainError, ShapeError, TorchLeanError
from spec.tensor import Tensor

__all__ = [
    "DTYPES",
    "DTYPE_DOMAIN",
    "NUMPY",
    "OBJECT_DTYPES",
    "Backend",
    "convert_host",
    "from_spec",
    "np_dtype",
    "round_f64",
    "to_spec",
]

DTYPES = ("float64", "float32", "bfloat16", "float16", "exact", "symbolic")
OBJECT_DTYPES = ("exact", "symbolic")
DTYPE_DOMAIN: dict[str, Domain] = {
    "float64": FLOAT64,
    "float32": BINARY32,
    "bfloat16": BFLOAT16,
    "float16": FLOAT16,
    "exact": RATIONAL,
    "symbolic": SYMBOLIC,
}
_NP_DTYPES: dict[str, Any] = {
    "float64": np.dtype(np.float64),
    "float32": np.dtype(np.float32),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float16": np.dtype(np.float16),
    "exact": np.dtype(object),
    "symbolic": np.dtype(object),
}
_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _check_dtype(dtype: str) -> str:
    if dtype not in _NP_DTYPES:
        raise TorchLeanError(f"unknown runtime dtype {dtype!r}; choose one of {list(DTYPES)}")
    return dtype


def np_dtype(dtype: str) -> Any:
    return _NP_DTYPES[_check_dtype(dtype)]


def _np_identity(a: Any) -> Any:
    return a


@dataclass(frozen=True)
class Backend:
    """An array backend: namespace, device, capabilities and host transfers.

    `array_type` is the class of the backend's arrays; `dtype_map` maps runtime dtype names
    to the namespace's dtype objects; `to_host_fn` / `from_host_fn` move arrays to and from
    NumPy; `ordered_fold(x)` (sum over axis 0, left fold) and `ordered_matmul(a, b)` (the
    k-loop) are optional device implementations of the `ordered` profile's reductions,
    each bit-identical to the generic ones in `runtime.engine.context`, returning None for a
    dtype they have no kernel for (the generic ones then run); `guard(profile)` (optional)
    raises when the backend cannot honour a profile right now (e.g. TF32 enabled)."""

    name: str
    xp: Any
    device: str
    dtypes: tuple[str, ...]
    is_numpy: bool = False
    capabilities: frozenset[str] = field(default_factory=frozenset)
    array_type: Any = np.ndarray
    dtype_map: Any = None
    to_host_fn: Any = np.asarray
    from_host_fn: Any = _np_identity
    ordered_fold: Any = None
    ordered_matmul: Any = None
    guard: Any = None
    info: Any = None

    def dtype(self, dtype: str) -> Any:
        if _check_dtype(dtype) not in self.dtypes:
            raise TorchLeanError(
                f"backend {self.name!r} does not support dtype {dtype!r} "
                f"(it supports {list(self.dtypes)})"
            )
        return (self.dtype_map or _NP_DTYPES)[dtype]

    def to_host(self, a: Any) -> Any:
        """A NumPy copy (or view) of a backend array; NumPy arrays pass through."""
        if isinstance(a, np.ndarray):
            return a
        return self.to_host_fn(a)

    def from_host(self, a: Any) -> Any:
        """A NumPy array as a backend array of the same dtype (bits preserved)."""
        return self.from_host_fn(np.asarray(a))

    def from_spec(self, t: Tensor, dtype: str) -> Any:
        """A spec tensor as a backend array (lossless)."""
        return self.from_host(from_spec(t, dtype))

    def to_spec(self, a: Any, dtype: str) -> Tensor:
        """A backend array as a spec tensor (lossless)."""
        return to_spec(self.to_host(a), dtype)

    def asarray(self, value: Any, dtype: str, what: str = "value") -> Any:
        """`value` as an array of `dtype`; numbers are converted with one rounding
        (`convert_host`), arrays of another dtype are refused; errors name `what`."""
        dt = self.dtype(dtype)
        if not self.is_numpy:
            if isinstance(value, self.array_type):
                return _same_dtype(value, dt, dtype, what)
            # host values (NumPy arrays, numbers) are checked / rounded by the NumPy path
            return self.from_host(NUMPY.asarray(value, dtype, what))
        if isinstance(value, np.ndarray):
            if dtype == "exact" and value.dtype == dt:
                for v in value.reshape(-1):
                    if _KINDS.get(type(v)) not in ("int", "fraction") or isinstance(v, bool):
                        raise DomainError(
                            f"{what}: an exact-dtype array holds exact rationals (int, "
                            f"Fraction) only, got {type(v).__name__} {v!r:.40}"
                        )
            return _same_dtype(value, dt, dtype, what)
        if dtype == "symbolic":
            return np.array(value, dtype=object)
        return convert_host(value, dtype, what)


def _elements(value: Any, what: str) -> Any:
    """`value` (a number or nested lists/tuples of numbers) as a NumPy object array; a
    ragged nesting or an element that is not a real number raises naming `what`."""
    if value is None:
        raise DomainError(f"{what}: expected a real number or nested lists of them, got None")
    try:
        arr = np.array(value, dtype=object)
    except (ValueError, TypeError, RecursionError) as e:
        raise ShapeError(f"{what}: not a rectangular array of numbers ({e})") from None
    for v in arr.reshape(-1):
        _element_kind(v, what)
    return arr


def _element_kind(v: Any, what: str) -> str:
    """'float' (a binary64 value, exact in float64), 'int' or 'fraction'; else raises."""
    t = type(v)
    kind = _KINDS.get(t)
    if kind is not None:
        return kind
    if isinstance(v, np.generic) and v.dtype.kind in "fiub":
        return "float" if v.dtype.kind == "f" else "int"
    if isinstance(v, (list, tuple)):
        raise ShapeError(f"{what}: ragged nested sequence (rows of different lengths)")
    if isinstance(v, np.ndarray):
        raise ShapeError(f"{what}: nested arrays of different shapes")
    if isinstance(v, (bool, int, float, Fraction)):  # subclasses
        return "fraction"
    raise DomainError(
        f"{what}: expected a real number (int, float, Fraction), got {t.__name__} {v!r:.60}"
    )


_KINDS = {float: "float", int: "int", bool: "int", Fraction: "fraction"}
_F64_EXACT_INT = 2**53


def convert_host(value: Any, dtype: str, what: str = "value") -> Any:
    """`value` (numbers or nested lists of numbers) as a NumPy array of `dtype`, each
    element rounded **once** (nearest-even) from its exact value: floats are exact binary64
    values; ints and Fractions are exact rationals, rounded by MPFR straight into the
    format (never through float64). "exact": exact rationals (non-finite floats refused).
    An int or Fraction whose correctly rounded value overflows the format raises
    `DomainError` (a float keeps IEEE overflow to +-inf). Ragged nestings, None, strings,
    complex numbers and other objects raise naming `what`."""
    arr = _elements(value, what)
    flat = arr.reshape(-1)
    if dtype == "exact":
        out = np.empty(arr.shape, dtype=object)
        oflat = out.reshape(-1)
        for i, v in enumerate(flat):
            if _element_kind(v, what) == "float" and not np.isfinite(v):
                raise DomainError(f"{what}: exact dtype cannot hold {v!r}")
            oflat[i] = Fraction(v) if not isinstance(v, np.generic) else Fraction(v.item())
        return out
    kinds = {_element_kind(v, what) for v in flat}
    if "fraction" not in kinds and (
        "int" not in kinds or all(abs(int(v)) <= _F64_EXACT_INT for v in flat)
    ):
        # every element is exact in float64: one rounding float64 -> dtype
        out = round_f64(np.asarray(flat.astype(np.float64)).reshape(arr.shape), dtype)
        if "int" in kinds and not np.all(np.isfinite(out)):
            for v, o in zip(flat, out.reshape(-1), strict=True):
                if _element_kind(v, what) == "int" and not np.isfinite(o):
                    raise _overflow(what, Fraction(int(v)), dtype)
        return out
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    vals = []
    for v in flat:
        if _element_kind(v, what) == "float":
            vals.append(D.from_float(float(v)))
            continue
        q = Fraction(v.item() if isinstance(v, np.generic) else v)
        x = D.from_rational(q)
        if not gmpy2.is_finite(x):
            raise _overflow(what, q, dtype)
        vals.append(x)
    return from_spec(Tensor(tuple(int(d) for d in arr.shape), tuple(vals)), dtype)


def _overflow(what: str, q: Fraction, dtype: str) -> DomainError:
    return DomainError(
        f"{what}: {_short(q)} is out of range for {dtype} (its correctly rounded value "
        "overflows to infinity)"
    )


def _short(q: Fraction) -> str:
    text = str(q)
    return text if len(text) <= 40 else f"{text[:20]}...({len(text)} digits)"


def _same_dtype(value: Any, dt: Any, dtype: str, what: str = "value") -> Any:
    if value.dtype != dt:
        raise TorchLeanError(
            f"{what}: array of dtype {value.dtype} given where {dtype} is expected "
            "(convert explicitly; no silent casts)"
        )
    return value


def round_f64(x: Any, dtype: str) -> Any:
    """A float64 array rounded once (nearest-even) into `dtype`.

    NumPy's float64 -> float32/float16 casts round once. ml_dtypes casts float64 ->
    bfloat16 through float32 (double rounding), so for bfloat16 the float32 value is
    corrected when it landed exactly on a bfloat16 midpoint (low 16 bits 0x8000) without
    being exact: the true value then lies strictly on one side of the midpoint.
    """
    x = np.asarray(x)
    if dtype != "bfloat16":
        with np.errstate(over="ignore"):  # overflow to +-inf is the IEEE result, not an error
            return x.astype(np_dtype(dtype))
    with np.errstate(over="ignore"):
        f = x.astype(np.float32)
    bits = f.view(np.uint32)
    hi = (bits >> np.uint32(16)).astype(np.uint16)
    tie = ((bits & np.uint32(0xFFFF)) == np.uint32(0x8000)) & (f.astype(np.float64) != x)
    tie &= np.isfinite(x)
    away = np.abs(x) > np.abs(f.astype(np.float64))
    out = f.astype(np_dtype("bfloat16")).view(np.uint16).copy()
    out[tie] = np.where(away[tie], hi[tie] + np.uint16(1), hi[tie])
    return out.view(np_dtype("bfloat16"))


NUMPY = Backend(
    name="numpy",
    xp=array_api_compat.array_namespace(np.zeros(1)),
    device="cpu",
    dtypes=DTYPES,
    is_numpy=True,
    capabilities=frozenset({"exact", "object_arrays", "longdouble"}),
)


def to_spec(arr: Any, dtype: str) -> Tensor:
    """An array as a spec tensor in the dtype's domain (lossless)."""
    a = np.asarray(arr)
    shape = tuple(int(d) for d in a.shape)
    if dtype == "exact":
        return Tensor(shape, tuple(Fraction(v) for v in a.reshape(-1)))
    if dtype == "symbolic":
        return Tensor(shape, tuple(a.reshape(-1)))
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    if a.dtype != np_dtype(dtype):
        raise DomainError(f"to_spec: array dtype {a.dtype} is not {dtype}")
    bits = np.ascontiguousarray(a).view(_UINT[a.dtype.itemsize]).reshape(-1)
    return Tensor(shape, tuple(D.from_bits(int(b)) for b in bits))


def from_spec(t: Tensor, dtype: str) -> Any:
    """A spec tensor (in the dtype's domain) as a NumPy array (lossless)."""
    if dtype in OBJECT_DTYPES:
        out = np.empty(len(t.data), dtype=object)
        for i, v in enumerate(t.data):
            out[i] = Fraction(v) if dtype == "exact" else v
        return out.reshape(t.shape)
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    dt = np_dtype(dtype)
    bits = np.array([D.to_bits(v) for v in t.data], dtype=_UINT[dt.itemsize])
    return bits.view(dt).reshape(t.shape)
