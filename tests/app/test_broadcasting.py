"""The live stream's pub/sub (``app.broadcasting``): publishing never waits, a slow follower
is dropped with a notice, and a follower that reconnects gets exactly what it missed from the
ring -- or is told to reload when the ring has moved past it."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from fleetwarden.app.broadcasting import Broadcaster


async def test_subscribers_get_every_message_in_order_with_increasing_ids():
    live = Broadcaster()
    a, b = live.subscribe(), live.subscribe()
    for i in range(5):
        live.publish("finding", {"n": i})
    for sub in (a, b):
        got = [await sub.next_message() for _ in range(5)]
        assert [m.id for m in got if m] == [1, 2, 3, 4, 5]
        assert [m.data["n"] for m in got if m] == [0, 1, 2, 3, 4]


async def test_a_slow_subscriber_is_dropped_and_publishing_never_blocks():
    live = Broadcaster(queue=3)
    slow, fast = live.subscribe(), live.subscribe()
    for i in range(3):
        live.publish("finding", {"n": i})
        assert (await fast.next_message()) is not None
    live.publish("finding", {"n": 3})  # slow's queue is full: dropped, not waited for
    assert slow.dropped and live.dropped == 1 and live.subscribers == 1
    got = [await slow.next_message() for _ in range(4)]
    assert [m.id if m else None for m in got] == [1, 2, 3, None]  # then the notice
    assert (await fast.next_message()).id == 4
    for i in range(100):  # the rest goes on, for the others only (who keep up)
        live.publish("audit", {"n": i})
        assert (await fast.next_message()).id == 5 + i
    assert live.subscribers == 1 and not fast.dropped


async def test_close_ends_every_subscription():
    live = Broadcaster()
    sub = live.subscribe()
    live.close()
    assert await asyncio.wait_for(sub.next_message(), 1) is None
    assert not sub.dropped and live.subscribers == 0


async def test_a_closed_subscription_gets_nothing_more():
    live = Broadcaster()
    sub = live.subscribe()
    sub.close()
    live.publish("finding", {})
    assert live.subscribers == 0 and sub._queue.empty()


@given(
    ring=st.integers(min_value=1, max_value=20),
    published=st.integers(min_value=0, max_value=60),
    last=st.integers(min_value=0, max_value=70),
)
def test_since_is_exactly_the_missed_messages_or_none(ring, published, last):
    live = Broadcaster(ring=ring)
    for i in range(published):
        live.publish("finding", {"n": i})
    got = live.since(last)
    oldest_kept = max(1, published - ring + 1)
    if last > published or (last + 1 < oldest_kept and last < published):
        assert got is None  # from another run, or the ring moved past it: reload
    else:
        assert [m.id for m in got] == list(range(last + 1, published + 1))


async def _take(follower, count: int, heartbeat: float = 0.05) -> list:
    out = []
    async for message in follower.messages(heartbeat):
        out.append(None if message is None else (message.id, message.kind))
        if len(out) == count:
            break
    return out


async def test_a_follower_gets_what_it_missed_then_new_messages_and_heartbeats_between():
    live = Broadcaster()
    for i in range(3):
        live.publish("finding", {"n": i})
    follower = live.follow(1)  # saw message 1
    live.publish("event", {"n": 3})  # after subscribing: comes once, after the missed ones
    assert await _take(follower, 4) == [(2, "finding"), (3, "finding"), (4, "event"), None]
    follower.close()
    assert live.subscribers == 0


async def test_a_follower_the_ring_lost_is_told_to_reload_and_a_slow_one_is_dropped():
    live = Broadcaster(ring=2, queue=2)
    for i in range(5):
        live.publish("finding", {"n": i})
    follower = live.follow(1)  # 2 and 3 are gone from the ring
    for i in range(3):  # one more than its queue holds
        live.publish("finding", {"n": i})
    # the notices carry the head id when they are sent: the client resumes from there
    expected = [(8, "reload"), (6, "finding"), (7, "finding"), (8, "dropped")]
    assert await _take(follower, 4) == expected
    new = live.follow(None)
    live.close()  # the service stops: the stream just ends
    assert await _take(new, 10) == []
