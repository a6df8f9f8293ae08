"""The one clock (issue 12): ``FixedClock`` and ``SystemClock`` read one instant three ways:
``now()`` (aware UTC), ``time()`` (Unix seconds) and ``monotonic()`` (never backwards)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.ports.sources import SYSTEM_CLOCK, FixedClock, SystemClock

MICROSECOND = timedelta(microseconds=1)

# --------------------------------------------------------------------------- the clocks

instants = st.datetimes(
    min_value=datetime(1971, 1, 2),
    max_value=datetime(2200, 1, 1),
    timezones=st.builds(
        timezone, st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
    ),
)
steps = st.one_of(
    st.floats(min_value=0, max_value=10 * 365 * 86400, allow_nan=False),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3650)),
)


@given(at=instants, ticks=st.floats(min_value=-1e9, max_value=1e9, allow_nan=False))
def test_a_fixed_clock_reads_one_instant_as_utc_and_as_unix_seconds(at, ticks):
    clock = FixedClock(at, ticks)
    now = clock.now()
    assert now.tzinfo is UTC and now == at  # the same instant, told in UTC
    assert now.timestamp() == clock.time()
    assert abs(datetime.fromtimestamp(clock.time(), UTC) - now) <= MICROSECOND
    assert clock.monotonic() == ticks


@given(at=instants, moves=st.lists(steps, max_size=20))
def test_advancing_moves_wall_and_monotonic_time_alike_and_never_back(at, moves):
    clock = FixedClock(at)
    for step in moves:
        before = (clock.now(), clock.time(), clock.monotonic())
        returned = clock.advance(step)
        delta = step if isinstance(step, timedelta) else timedelta(seconds=step)
        assert returned == clock.now() == before[0] + delta
        assert clock.monotonic() >= before[2]
        assert clock.monotonic() - before[2] == pytest.approx(delta.total_seconds(), abs=1e-5)
        assert clock.time() - before[1] == pytest.approx(delta.total_seconds(), abs=1e-5)


@given(at=instants, back=st.floats(min_value=1e-6, max_value=1e6))
def test_a_fixed_clock_refuses_to_run_backwards(at, back):
    clock = FixedClock(at, 5.0)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(-back)
    with pytest.raises(ValueError, match="negative"):
        clock.advance(seconds=1, minutes=-1)
    assert (clock.now(), clock.monotonic()) == (at, 5.0)  # untouched


def test_a_fixed_clock_steps_in_units_and_its_wall_may_be_set_alone():
    clock = FixedClock(datetime(2026, 1, 1, tzinfo=UTC))
    assert clock.advance(minutes=1, seconds=30) == datetime(2026, 1, 1, 0, 1, 30, tzinfo=UTC)
    assert clock.monotonic() == 90.0
    clock.at = datetime(2025, 12, 31, tzinfo=UTC)  # the wall clock stepped back (NTP)
    assert clock.monotonic() == 90.0  # durations do not see it


def test_a_fixed_clock_refuses_a_naive_instant():
    with pytest.raises(ValueError, match="no timezone"):
        FixedClock(datetime(2026, 1, 1))


@given(st.integers(min_value=2, max_value=50))
def test_the_system_clock_reads_one_instant_and_its_monotonic_never_decreases(n):
    clock = SystemClock()
    assert isinstance(SYSTEM_CLOCK, SystemClock)
    readings = []
    for _ in range(n):
        before = clock.time()
        now = clock.now()
        after = clock.time()
        assert now.tzinfo is UTC
        # the same instant as Unix seconds: between the readings around it, to the
        # microsecond a datetime keeps (floored) and the quarter microsecond a float keeps here
        assert before - 2e-6 <= now.timestamp() <= after + 2e-6
        readings.append(clock.monotonic())
    assert readings == sorted(readings)
    assert abs(clock.monotonic() - time.monotonic()) < 1.0  # the machine's monotonic clock
