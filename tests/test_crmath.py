"""runtime.engine.crmath: correctly rounded exp/log/tanh/sin/cos, its safety test, and the sweep.

Oracle: the spec IEEE domains (MPFR, rounded once to nearest-even with subnormals), reached
through `to_spec`/`from_spec`; boundary cases of `unsafe_mask` are worked out by hand.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import conformance.crmath_sweep as crmath_sweep
import conformance.sweep as sweep
from runtime.backends.base import DTYPE_DOMAIN, from_spec, np_dtype, to_spec
from runtime.engine.crmath import ERR_ULPS, FUNCTIONS, cr_apply, unsafe_mask
from spec.domains import BFLOAT16, BINARY32, FLOAT16, FLOAT64, IEEEDomain
from spec.tensor import Tensor

UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(UINT[a.dtype.itemsize])


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Elementwise bit equality with all NaNs equal."""
    return (_bits(a) == _bits(b)) | (
        np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    )


# --------------------------------------------------------------------------- exhaustive 16-bit


@cache
def _all16(dtype: str) -> tuple[np.ndarray, Tensor]:
    x = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(np_dtype(dtype))
    return x, to_spec(x, dtype)


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_exhaustive_16_bit(dtype: str, fn: str) -> None:
    D = DTYPE_DOMAIN[dtype]
    x, t = _all16(dtype)
    got = cr_apply(fn, x, dtype)
    assert got.dtype == np_dtype(dtype) and got.shape == x.shape
    want = from_spec(t.map(getattr(D, fn)), dtype)
    ok = _same(got, want)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (
        f"{fn} {dtype}: {bad.size} wrong, e.g. x bits {[hex(int(b)) for b in bad[:5]]}: got "
        f"{[hex(int(v)) for v in _bits(got)[bad[:5]]]}, want "
        f"{[hex(int(v)) for v in _bits(want)[bad[:5]]]}"
    )


# --------------------------------------------------------------------------- float32 / float64


def _f32_inputs(fn: str) -> st.SearchStrategy[float]:
    s = (
        st.floats(width=32, allow_nan=True, allow_infinity=True, allow_subnormal=True)
        | st.floats(width=32, min_value=-10, max_value=10)
        | st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.0**-149, 3.4028234663852886e38, 1e-30])
    )
    if fn == "exp":  # overflow near 88.72, underflow into subnormals below -87.3
        s = s | st.floats(88.0, 89.0, width=32) | st.floats(-104.0, -86.0, width=32)
    return s


def _f64_inputs(fn: str) -> st.SearchStrategy[float]:
    s = (
        st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True)
        | st.floats(min_value=-10, max_value=10)
        | st.sampled_from([0.0, -0.0, 1.0, 5e-324, 1.7976931348623157e308, 1e300, 1e-300])
    )
    if fn == "exp":  # overflow near 709.78, underflow into subnormals below -708.4
        s = s | st.floats(709.0, 710.0) | st.floats(-746.0, -707.0)
    return s


def _check_against_spec(fn: str, dtype: str, values: list[float]) -> None:
    D = DTYPE_DOMAIN[dtype]
    assert isinstance(D, IEEEDomain)
    x = np.array(values, dtype=np_dtype(dtype))
    got = cr_apply(fn, x, dtype)
    assert got.dtype == x.dtype and got.shape == x.shape
    for v, g in zip(x.tolist(), _bits(got).tolist(), strict=True):
        want = getattr(D, fn)(D.from_float(v))  # v is exactly the float32/float64 element
        if D.is_nan(want):
            assert math.isnan(float(np.array(g, dtype=UINT[x.itemsize]).view(x.dtype)))
        else:
            assert g == D.to_bits(want), (fn, dtype, float(v).hex(), hex(g), hex(D.to_bits(want)))


@pytest.mark.parametrize("fn", FUNCTIONS)
@given(data=st.data())
def test_float32_random(fn: str, data: st.DataObject) -> None:
    vals = data.draw(st.lists(_f32_inputs(fn), min_size=1, max_size=16))
    _check_against_spec(fn, "float32", vals)


@pytest.mark.parametrize("fn", FUNCTIONS)
@given(data=st.data())
def test_float64_random(fn: str, data: st.DataObject) -> None:
    vals = data.draw(st.lists(_f64_inputs(fn), min_size=1, max_size=16))
    _check_against_spec(fn, "float64", vals)


def test_zero_d_input_needing_the_mpfr_fallback() -> None:
    # exp(0.11160580290145072) in long double lies within the error margin of a binary64
    # midpoint, so cr_apply must fall back to MPFR -- for a 0-d array too (this crashed in
    # np.nonzero before).
    v = 0.11160580290145072
    y = np.exp(np.asarray(v, dtype=np.longdouble))
    assert bool(unsafe_mask(y, y.astype(np.float64), FLOAT64))
    got = cr_apply("exp", np.asarray(v), "float64")
    assert got.shape == () and got.dtype == np.float64
    assert float(got) == float(FLOAT64.exp(FLOAT64.from_float(v)))
    got2 = cr_apply("exp", np.array([[v, 0.5], [1.0, v]]), "float64")
    assert got2.shape == (2, 2) and float(got2[1, 1]) == float(got)


# --------------------------------------------------------------------------- unsafe_mask


def _mask(y: float | np.ndarray, D: IEEEDomain, W: type = np.float64) -> bool:
    """unsafe_mask for one wide value y and the correct rounding of y (by spec) as c."""
    ya = np.asarray(y, dtype=W).reshape(1)
    v = ya[0]
    if np.isfinite(v):
        n, d = v.as_integer_ratio()  # exact, also for long double
        c = D.from_rational(Fraction(n, d))
    else:
        c = D.from_float(float(v))
    dt = {BINARY32: "float32", BFLOAT16: "bfloat16", FLOAT16: "float16", FLOAT64: "float64"}[D]
    return bool(unsafe_mask(ya, from_spec(Tensor((1,), (c,)), dt), D)[0])


def test_unsafe_mask_binary32_midpoints() -> None:
    assert ERR_ULPS == 16  # the margins below are worked out for 16 float64 ulps
    mid = 1 + 2.0**-24  # midpoint of 1 and 1 + 2**-23
    u = 2.0**-52  # float64 ulp at [1, 2)
    assert _mask(mid, BINARY32)
    assert _mask(-mid, BINARY32)
    assert _mask(mid + 15 * u, BINARY32) and _mask(mid - 15 * u, BINARY32)
    assert _mask(mid + 16 * u, BINARY32)  # margin reaches the boundary: unsafe
    assert not _mask(mid + 17 * u, BINARY32) and not _mask(mid - 17 * u, BINARY32)
    assert not _mask(1 + 2.0**-23, BINARY32)  # representable: half a quantum from both
    assert not _mask(1.0, BINARY32) and not _mask(1.5, BINARY32) and not _mask(-3.0, BINARY32)
    # just below a binade boundary the quantum halves: 1 - 2**-25 is the midpoint
    assert _mask(1 - 2.0**-25, BINARY32)
    assert not _mask(1 - 2.0**-25 - 17 * 2.0**-53, BINARY32)


def test_unsafe_mask_zero_overflow_and_nan() -> None:
    assert _mask(2.0**-150, BINARY32)  # half the smallest subnormal: rounds to 0 by a tie
    assert not _mask(2.0**-160, BINARY32)  # clearly 0
    assert not _mask(2.0**-149, BINARY32)  # the smallest subnormal itself
    threshold = (2 - 2.0**-24) * 2.0**127  # ties to inf
    assert _mask(threshold, BINARY32) and _mask(-threshold, BINARY32)
    assert not _mask(2.0**129, BINARY32)  # clearly inf
    assert not _mask(3.4028234663852886e38, BINARY32)  # the largest finite value
    assert not _mask(math.inf, BINARY32)
    assert not _mask(math.nan, BINARY32)


def test_unsafe_mask_other_targets() -> None:
    assert _mask(1 + 2.0**-8, BFLOAT16) and not _mask(1 + 2.0**-7, BFLOAT16)
    assert _mask(1 + 2.0**-11, FLOAT16) and not _mask(1 + 2.0**-10, FLOAT16)
    assert _mask(2.0**-25, FLOAT16) and not _mask(2.0**-24, FLOAT16)  # float16 subnormals
    L = np.longdouble
    one = L(1)
    assert _mask(one + L(2) ** -53, FLOAT64, L)  # binary64 midpoint in long double
    assert not _mask(one + L(2) ** -52, FLOAT64, L)


def test_double_rounded_bfloat16_candidate_is_flagged() -> None:
    # y = 1 + 2**-8 + 2**-30: a candidate made by double rounding (1.0) lies outside its
    # own rounding interval and must be flagged; the correct one (1 + 2**-7) is not.
    y = np.array([1 + 2.0**-8 + 2.0**-30])
    wrong = np.array([1.0]).astype(np_dtype("bfloat16"))
    right = np.array([1 + 2.0**-7]).astype(np_dtype("bfloat16"))
    assert bool(unsafe_mask(y, wrong, BFLOAT16)[0])
    assert not bool(unsafe_mask(y, right, BFLOAT16)[0])


# --------------------------------------------------------------------------- the sweep


SWEEP_RANGES = [
    (0x3F800000, 0x3F800000 + 2**16),  # [1, 1.0078): 65536 patterns
    (0x00000000, 0x00000400),  # +0 and subnormals
    (0x80000000, 0x80000400),  # -0 and negative subnormals
    (0x42B17000, 0x42B17400),  # around exp's overflow threshold 88.72
    (0x7F7FFE00, 0x7F800200),  # largest finite, +inf, NaNs
    (0xFF7FFE00, 0xFF800200),  # most negative finite, -inf, NaNs
]


def test_sweep_small_ranges_have_no_disagreements() -> None:
    for start, stop in SWEEP_RANGES:
        res = sweep.run_sweep(FUNCTIONS, start, stop, chunk=2**14)
        assert set(res) == set(FUNCTIONS)
        for s in res.values():
            assert s.elements == stop - start
            assert s.disagreements == 0, (hex(start), s)
            assert s.examples == []


def test_sweep_cli_writes_json(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "sweep.json"
    rc = sweep.main(
        [
            "--fn",
            "exp",
            "--fn",
            "sin",
            "--start",
            "0x3f800000",
            "--stop",
            "0x3f801000",
            "--chunk",
            "1000",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    d = json.loads(out.read_text())
    assert set(d["functions"]) == {"exp", "sin"}
    for s in d["functions"].values():
        assert s["elements"] == 0x1000 and s["disagreements"] == 0
        assert {"cr_fallbacks", "reference_mpfr", "reference_wrong"} <= set(s)
    assert d["range"] == {"start": 0x3F800000, "stop": 0x3F801000, "chunk": 1000}
    assert d["disagreements"] == 0
    text = capsys.readouterr().out
    assert "exp" in text and "disagree" in text


def test_sweep_detects_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    real = crmath_sweep.cr_apply

    def broken(fn: str, x: np.ndarray, dtype: str) -> np.ndarray:
        c = np.array(real(fn, x, dtype), copy=True)
        hit = x.view(np.uint32) == np.uint32(0x3F800123)
        c[hit] = np.nextafter(c[hit], np.float32(np.inf))  # one ulp off
        return c

    monkeypatch.setattr(crmath_sweep, "cr_apply", broken)
    res = sweep.run_sweep(["tanh"], 0x3F800100, 0x3F800200, chunk=64)
    s = res["tanh"]
    assert s.disagreements == 1
    assert s.examples[0]["x_bits"] == "0x3f800123"
    assert (
        sweep.main(
            ["--fn", "tanh", "--start", "0x3f800120", "--stop", "0x3f800130", "--json", "/dev/null"]
        )
        == 1
    )


def test_sweep_mpfr_reference_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # force every reference through MPFR: still no disagreement, and all of them counted
    monkeypatch.setattr(crmath_sweep, "unsafe_mask", lambda y, c, D: np.ones(np.shape(y), bool))
    res = sweep.run_sweep(["log", "cos"], 0x3F800000, 0x3F800100, chunk=100)
    for s in res.values():
        assert s.reference_mpfr == s.elements == 256
        assert s.disagreements == 0


def test_sweep_argument_checks() -> None:
    with pytest.raises(ValueError, match="unknown function"):
        sweep.run_sweep(["sqrt"], 0, 1)
    with pytest.raises(ValueError, match="start <= stop"):
        sweep.run_sweep(["exp"], 5, 4)
    with pytest.raises(ValueError, match="start <= stop"):
        sweep.run_sweep(["exp"], 0, 2**32 + 1)
    assert sweep.parse_int("2**32") == 2**32 and sweep.parse_int("0x10") == 16
