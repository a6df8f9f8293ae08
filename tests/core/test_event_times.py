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

from fleetwarden.core.events import ChangeEvent, EventFlag, EventSource, Operation, parse_time

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


aware = st.builds(
    lambda d, m: d.replace(tzinfo=timezone(timedelta(minutes=m)) if m else UTC),
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2999, 1, 1)),
    st.integers(min_value=-14 * 60, max_value=14 * 60),
)


@settings(max_examples=500)
@given(aware, st.integers(min_value=0, max_value=9), st.booleans(), st.sampled_from("Zz"))
def test_parse_time_reads_any_rfc3339_text_as_the_same_instant(d, digits, zulu, z):
    """Whatever the offset and however many fractional digits (Azure sends 7, Kubernetes
    up to 9): the instant written, to the microsecond. The offset's digits after a fraction
    are the offset's, never more of the fraction (``.5+02:00`` was read as 10:00:00.502 UTC,
    two hours off)."""
    fraction = f"{d.microsecond:06d}{'987'}"[:digits]
    offset = d.strftime("%z")
    zone = z if zulu and d.utcoffset() == timedelta(0) else f"{offset[:3]}:{offset[3:]}"
    text = d.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if digits else "") + zone
    parsed = parse_time(text)
    kept = int((fraction + "000000")[:6])
    assert parsed == d.replace(microsecond=kept), text
    assert parsed is not None and parsed.utcoffset() == d.utcoffset()


@pytest.mark.parametrize(
    ("text", "utc"),
    [
        ("2026-11-29T10:00:00.5+02:00", "2026-11-29T08:00:00.500000+00:00"),
        ("2026-11-29T10:00:00.123+05:30", "2026-11-29T04:30:00.123000+00:00"),
        ("2026-11-29T10:00:00.1234567Z", "2026-11-29T10:00:00.123456+00:00"),
        ("2026-11-29T10:00:00-03:00", "2026-11-29T13:00:00+00:00"),
    ],
)
def test_parse_time_keeps_the_offset_after_a_fraction(text, utc):
    parsed = parse_time(text)
    assert parsed is not None and parsed.astimezone(UTC).isoformat() == utc
