"""`spec.rng_arrays.splitmix64_array` equals `spec.rng.splitmix64` element by element (the
array evaluators draw through it), including the wrap-around at 2**64."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from spec.rng import splitmix64
from spec.rng_arrays import splitmix64_array


@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=32))
def test_array_steps_equal_the_scalar_ones(xs: list[int]) -> None:
    with np.errstate(over="ignore"):
        got = splitmix64_array(np, np.array(xs, dtype=np.uint64))
    assert [int(v) for v in got] == [splitmix64(x) for x in xs]


def test_golden_first_output_of_seed_zero() -> None:
    # Vigna's reference SplitMix64 stream from state 0: first output 0xE220A8397B1DCDAF
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    with np.errstate(over="ignore"):
        assert int(splitmix64_array(np, np.zeros(1, np.uint64))[0]) == 0xE220A8397B1DCDAF
