import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fabricase.analysis.rates import Delta, counter_delta

U32 = 2**32


@pytest.mark.parametrize(
    ("v0", "v1", "interval", "width", "expected"),
    [
        (0, 57, 10.0, 64, Delta(57, 5.7)),
        (5, 5, 10.0, 64, Delta(0, 0.0)),
        (None, 5, 10.0, 64, Delta(None, None, "missing")),
        (5, None, 10.0, 64, Delta(None, None, "missing")),
        (None, None, None, 64, Delta(None, None, "missing")),
        (0, 10, 0.0, 64, Delta(10, None)),
        (0, 10, None, 64, Delta(10, None)),
        (0, 10, -1.0, 64, Delta(10, None)),
        (0, 10, math.nan, 64, Delta(10, None)),
        # a 32-bit hardware counter behind a 64-bit file, read just before and after it wrapped
        (U32 - 10, 5, 5.0, 64, Delta(15, 3.0, "wrap")),
        (U32 - 1, 0, 1.0, 32, Delta(1, 1.0, "wrap")),
        # went backwards from a value far from any limit: the driver or host restarted
        (1_000_000, 10, 10.0, 64, Delta(None, None, "reset")),
        (U32 + 5, 3, 10.0, 64, Delta(None, None, "reset")),
        (2**31, 2**30, 10.0, 32, Delta(None, None, "reset")),
        # 64-bit counters wrap too (in theory); the same rule applies at their width
        (2**64 - 2, 3, 1.0, 64, Delta(5, 5.0, "wrap")),
        (-1, 3, 1.0, 64, Delta(4, 4.0)),
        (3, -1, 1.0, 64, Delta(None, None, "reset")),
    ],
)
def test_counter_delta(v0, v1, interval, width, expected):
    assert counter_delta(v0, v1, interval, width) == expected


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.floats(min_value=0.001, max_value=1e6))
def test_delta_is_never_negative_and_rate_matches(v0, v1, interval):
    d = counter_delta(v0, v1, interval)
    if d.delta is None:
        assert d.note == "reset" and d.rate is None
    else:
        assert d.delta >= 0
        assert d.rate == pytest.approx(d.delta / interval)
        assert (d.note is None) == (v1 >= v0)
