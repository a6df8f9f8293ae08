"""An event's identity is (route, source, id): the route that authenticated it is part of its
key, so a sender on one route can never produce another route's key."""

from __future__ import annotations

import hashlib
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.core.eventrules import flag_unknown
from fleetwarden.core.events import ChangeEvent, EventSource, Operation, dedupe_key


def _event(**fields: object) -> ChangeEvent:
    values: dict = {
        "id": "7bf73129-1428-4cd3-a780-95db273d1602",
        "source": "aws.eks",
        "type": "aws.eks.UpdateNodegroupConfig",
        "provider": EventSource.AWS,
        "operation": Operation.SCALE,
        "cluster": "prod-eu-1",
        "pool": "general",
    }
    values.update(fields)
    return ChangeEvent(**values)


def test_the_same_source_and_id_on_two_routes_are_two_events():
    genuine = _event().via("aws")
    forged = _event(provider=EventSource.CLOUDEVENTS, actor="mallory").via("cloudevents")
    assert genuine.key != forged.key


def test_a_redelivery_on_the_same_route_is_the_same_event():
    assert _event().via("aws").key == _event(actor="someone").via("aws").key


def test_the_route_and_its_key_survive_the_queue_and_flagging():
    event = _event().via("aws")
    again = ChangeEvent.from_json(event.to_json())
    assert (again.route, again.key) == ("aws", event.key)
    assert flag_unknown(event, {}).key == event.key
    assert replace(event, actor="x").key == event.key


def test_an_event_without_a_route_keeps_the_key_older_versions_stored():
    event = _event()
    old = hashlib.sha256(f"{event.source}\0{event.id}".encode()).hexdigest()[:32]
    assert event.route is None and event.key == old
    assert (
        ChangeEvent.from_json({k: v for k, v in event.to_json().items() if k != "route"}) == event
    )


_text = st.text(max_size=6)  # NUL, quotes and lone surrogates included


@given(_text, _text, _text, _text, _text, _text)
def test_different_triples_never_share_a_key(r1, s1, i1, r2, s2, i2):
    if (r1, s1, i1) != (r2, s2, i2):
        assert dedupe_key(s1, i1, route=r1) != dedupe_key(s2, i2, route=r2)
