"""An event's copies and times. A copy (``replaced``, ``via``) is ``dataclasses.replace``;
times in its JSON are RFC 3339 in UTC with ``Z``, whatever offset (or none) the datetime had,
and the same text when the same datetime is written again (the gateway writes one
delivery's receipt time once per event, and keeps the last text)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation

offsets = st.none() | st.integers(min_value=-14 * 60, max_value=14 * 60).map(
    lambda m: timezone(timedelta(minutes=m)) if m else UTC
)
times = st.builds(
    lambda d, tz: d.replace(tzinfo=tz),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2999, 1, 1)),
    offsets,
)


def expected(d: datetime) -> str:
    utc = d.replace(tzinfo=UTC) if d.tzinfo is None else d.astimezone(UTC)
    return utc.isoformat().replace("+00:00", "Z")


@settings(max_examples=400)
@given(st.lists(times, min_size=1, max_size=6), st.data())
def test_times_are_utc_with_z_and_repeats_give_the_same_text(values, data):
    # written in an order that repeats some objects back to back and some apart
    order = data.draw(st.lists(st.sampled_from(values), min_size=1, max_size=12))
    for d in order:
        e = ChangeEvent(
            id="e", source="s", type="t", provider=EventSource.AWS,
            operation=Operation.OTHER, time=d, received_at=d,
        )  # fmt: skip
        doc = e.to_json()
        assert doc["time"] == doc["receivedAt"] == expected(d)
        assert doc["time"].endswith("Z")


fields_ = st.fixed_dictionaries(
    {},
    optional={
        "cluster": st.none() | st.text(max_size=5),
        "pool": st.none() | st.text(max_size=5),
        "route": st.none() | st.sampled_from(["aws", "cloudevents"]),
        "flags": st.lists(st.sampled_from(list(EventFlag)), max_size=3).map(tuple),
        "id": st.text(min_size=1, max_size=5),
        "received_at": st.none() | times,
        "detail": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    },
)


@settings(max_examples=300)
@given(fields_, fields_)
def test_a_copy_is_dataclasses_replace_with_its_key_computed_anew(first, changes):
    """``ChangeEvent.replaced`` (the gateway's copy, made without the frozen ``__init__``)
    is ``dataclasses.replace``: equal fields and a key for the new route."""
    e = ChangeEvent(
        id="e", source="s", type="t", provider=EventSource.AWS, operation=Operation.OTHER
    ).replaced(**first)
    _ = e.key  # the original's key is cached: the copy must not inherit it
    copy, reference = e.replaced(**changes), dataclasses.replace(e, **changes)
    assert copy == reference
    assert copy.key == reference.key
    assert copy.to_json() == reference.to_json()


def test_replacing_a_field_that_does_not_exist_is_a_type_error():
    e = ChangeEvent(
        id="e", source="s", type="t", provider=EventSource.AWS, operation=Operation.OTHER
    )
    with pytest.raises(TypeError, match="nope"):
        e.replaced(nope=1)
