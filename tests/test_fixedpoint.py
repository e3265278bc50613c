"""Tests of mpcnet.fixedpoint: per-column scale exponents, encoding limits, round trips."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from mpcnet.errors import InputError, RangeError
from mpcnet.fixedpoint import AUTO_BITS, MAX_ROWS, VALUE_BITS, auto_exponents, decode, encode


def test_constants_state_the_split_test_bound() -> None:
    assert (VALUE_BITS, AUTO_BITS) == (38, 31)
    assert 2 * MAX_ROWS * 2**VALUE_BITS == 2**63


def test_auto_exponents_known_values() -> None:
    values = np.array(
        [
            [1.0, 0.0, -8.2e10, 1.8e-13, 0.75],
            [0.5, 0.0, 3.0, -1.0e-13, 0.1],
        ]
    )
    exps = auto_exponents(values)
    assert exps.dtype == np.int64
    # 1.0 = 0.5 * 2**1 -> 31 - 1; all-zero -> 0; 8.2e10 < 2**37; 1.8e-13 < 2**-42; 0.75 < 2**0
    assert exps.tolist() == [30, 0, 31 - 37, 31 + 42, 31]


def test_auto_exponent_steps_down_when_rounding_reaches_the_limit() -> None:
    just_below_one = np.nextafter(1.0, 0.0)  # times 2**31 rounds up to exactly 2**31
    exps = auto_exponents(np.array([[just_below_one]]))
    assert exps.tolist() == [30]
    assert abs(int(encode(np.array([[just_below_one]]), exps)[0, 0])) < 2**AUTO_BITS


@settings(max_examples=60, deadline=None)
@given(
    hnp.arrays(
        np.float64,
        hnp.array_shapes(min_dims=2, max_dims=2, max_side=8),
        elements=st.floats(-1e15, 1e15, allow_nan=False, allow_infinity=False, width=64),
    )
)
def test_round_trip_within_half_a_unit(values: np.ndarray) -> None:
    exps = auto_exponents(values)
    ints = encode(values, exps)
    assert ints.dtype == np.int64
    assert np.all(np.abs(ints) < 2**AUTO_BITS)
    nonzero = np.abs(values).max(axis=0) > 0
    assert np.all(np.abs(ints).max(axis=0)[nonzero] >= 2 ** (AUTO_BITS - 2))
    back = decode(ints, exps)
    assert np.all(np.abs(back - values) <= np.ldexp(0.5, -exps))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-(2**VALUE_BITS) + 1, 2**VALUE_BITS - 1), min_size=1, max_size=6),
    st.integers(-20, 80),
)
def test_exact_values_round_trip_exactly(ints: list[int], exp: int) -> None:
    column = np.array(ints, dtype=np.int64)[:, None]
    values = decode(column, np.array([exp]))
    assert encode(values, np.array([exp])).tolist() == column.tolist()


def test_rounding_is_half_to_even() -> None:
    ints = encode(np.array([[0.5, 1.5, -2.5, 0.25]]).T, np.array([0]))
    assert ints.ravel().tolist() == [0, 2, -2, 0]


def test_value_limit_is_two_to_the_thirty_eight() -> None:
    ok = np.array([[2.0**38 - 1], [-(2.0**38) + 1]])
    assert encode(ok, np.array([0])).ravel().tolist() == [2**38 - 1, -(2**38) + 1]
    with pytest.raises(RangeError) as err:
        encode(np.array([[1.0, 2.0], [3.0, -(2.0**38)]]), np.array([0, 0]), ["a", "b"])
    msg = str(err.value)
    assert "row 2" in msg and "column 'b'" in msg and "2**38" in msg
    assert "exponent 0" in msg and "at most -1" in msg


def test_out_of_range_after_scaling_names_exponent() -> None:
    values = np.array([[1.0], [600.0]])
    exps = auto_exponents(values) + 10  # 600 * 2**exp now exceeds 2**38
    with pytest.raises(RangeError, match=r"row 2, column 1 \(1-based\).*exponent"):
        encode(values, exps)


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_is_refused(bad: float) -> None:
    values = np.array([[1.0, 2.0], [3.0, bad]])
    with pytest.raises(InputError, match=r"row 2, column 'y'"):
        encode(values, np.array([0, 0]), ["x", "y"])
    with pytest.raises(InputError, match=r"row 2, column 'y'"):
        auto_exponents(values, ["x", "y"])


def test_shape_errors() -> None:
    with pytest.raises(InputError):
        encode(np.array([1.0, 2.0]), np.array([0]))
    with pytest.raises(InputError):
        encode(np.array([[1.0, 2.0]]), np.array([0]))
    with pytest.raises(InputError):
        encode(np.array([[1.0]]), np.array([0.5]))
    with pytest.raises(InputError):
        decode(np.array([[1, 2]]), np.array([0]))


def test_range_error_prints_a_plain_number() -> None:
    with pytest.raises(RangeError) as info:
        encode(np.array([[1.0], [2186869.63]]), np.array([30]), ["dose"])
    msg = str(info.value)
    assert "value 2186869.63 encodes" in msg and "np." not in msg, msg
