"""What only the NATS JetStream queue promises, against a real nats-server
(scripts/nats-test-env): broker restarts, kill -9 of the broker, stream sharing by replicas.
The EventQueue contract both backends share is pinned in test_queue_sqlite.py (``queue``
fixture, parametrised over "sqlite" and "nats").
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from fleetwarden.adapters.queue.nats import NatsQueue
from fleetwarden.ports.queue import QueueUnavailable
from tests.adapters.conftest import NatsServer, event, nats_names
from tests.support import nats_env, queue_crash

pytestmark = pytest.mark.live


@pytest.fixture
def private_nats(tmp_path: Path) -> Iterator[NatsServer]:
    """A server of this test's own: it gets killed, and the session's must not be."""
    state_dir = tmp_path / "nats"
    url = nats_env.start_server(state_dir)
    try:
        yield NatsServer(url, state_dir)
    finally:
        nats_env.stop_server(state_dir)


@pytest.fixture
async def opened() -> AsyncIterator[list[NatsQueue]]:
    queues: list[NatsQueue] = []
    try:
        yield queues
    finally:
        for q in queues:
            await q.close()


async def test_an_unreachable_server_is_queue_unavailable_within_connect_timeout(
    opened: list[NatsQueue],
):
    q = NatsQueue("nats://127.0.0.1:1", connect_timeout=1.0)
    opened.append(q)
    t0 = time.monotonic()
    with pytest.raises(QueueUnavailable, match=r"127\.0\.0\.1:1"):
        await q.put_many([event(1)])
    assert time.monotonic() - t0 < 3


async def test_a_resend_within_the_duplicate_window_is_folded_and_counted(
    nats_server: NatsServer, opened: list[NatsQueue]
):
    """JetStream's duplicate window (2 min by default) is the queue's only memory of an event:
    a resend within it is folded (and ``put_many`` says so), even after the ack."""
    q = NatsQueue(nats_server.url, depth_cache=0.0, **nats_names())
    opened.append(q)
    assert await q.put_many([event(1), event(2)]) == 0
    batch = await q.get_batch(2, 2.0)
    await q.ack(batch)
    assert await q.put_many([event(1), event(3)]) == 1
    assert await q.depth() == 1


async def test_depth_counts_waiting_and_unacked_messages(
    nats_server: NatsServer, opened: list[NatsQueue]
):
    q = NatsQueue(nats_server.url, depth_cache=0.0, **nats_names())
    opened.append(q)
    await q.put_many([event(i) for i in range(3)])
    batch = await q.get_batch(1, 2.0)
    assert len(batch) == 1
    assert await q.depth() == 3, "a leased message is still to do"
    await q.ack(batch)
    assert await q.depth() == 2


async def test_replicas_create_the_stream_once_and_bind_one_consumer(
    nats_server: NatsServer, opened: list[NatsQueue]
):
    names = nats_names()
    replicas = [NatsQueue(nats_server.url, depth_cache=0.0, **names) for _ in range(3)]
    opened.extend(replicas)
    # All set up at once: losing the create race must not be an error.
    await asyncio.gather(*(r.depth() for r in replicas))
    await replicas[0].put_many([event(i) for i in range(30)])
    seen: Counter[str] = Counter()

    async def work(r: NatsQueue) -> None:
        while sum(seen.values()) < 30:
            batch = await r.get_batch(3, 0.5)
            seen.update(d.event.id for d in batch)
            await r.ack(batch)

    async with asyncio.timeout(20), asyncio.TaskGroup() as tg:
        for r in replicas:
            tg.create_task(work(r))
    assert len(seen) == 30 and set(seen.values()) == {1}


async def test_a_replica_that_loses_the_stream_create_race_binds_to_the_winner_s(
    nats_server: NatsServer, opened: list[NatsQueue], monkeypatch: pytest.MonkeyPatch
):
    """The race as a real server answered it in CI: the stream was not there when this
    replica looked, another replica created it, and this one's create was refused with
    "subjects overlap with an existing stream" -- not an error: the stream is there."""
    import nats.js.client
    import nats.js.errors

    names = nats_names()
    winner = NatsQueue(nats_server.url, **names)
    opened.append(winner)
    await winner.put_many([event(1)])
    real_info = nats.js.client.JetStreamContext.stream_info
    looked: list[str] = []

    async def not_yet(self: object, name: str, *args: object, **kw: object) -> object:
        if not looked:  # the first look: before the winner's create
            looked.append(name)
            raise nats.js.errors.NotFoundError()
        return await real_info(self, name, *args, **kw)  # type: ignore[arg-type]

    async def overlap(self: object, *args: object, **kw: object) -> object:
        raise nats.js.errors.BadRequestError(
            code=400, err_code=10065, description="subjects overlap with an existing stream"
        )

    monkeypatch.setattr(nats.js.client.JetStreamContext, "stream_info", not_yet)
    monkeypatch.setattr(nats.js.client.JetStreamContext, "add_stream", overlap)
    loser = NatsQueue(nats_server.url, **names)
    opened.append(loser)
    got = await loser.get_batch(1, 5)
    assert looked and [d.event.id for d in got] == ["1"]


async def test_a_subject_another_stream_holds_is_refused_with_the_server_s_reason(
    nats_server: NatsServer, opened: list[NatsQueue]
):
    names = nats_names()
    other = NatsQueue(nats_server.url, **names)
    opened.append(other)
    await other.depth()
    q = NatsQueue(nats_server.url, **{**names, "stream": names["stream"] + "b"})
    opened.append(q)
    with pytest.raises(QueueUnavailable, match="subjects overlap"):
        await q.depth()


async def test_broker_kill9_refuses_puts_then_the_same_queue_recovers_with_its_events(
    private_nats: NatsServer, opened: list[NatsQueue]
):
    q = NatsQueue(private_nats.url, depth_cache=0.0, request_timeout=1.0, **nats_names())
    opened.append(q)
    await q.put_many([event(i) for i in range(5)])
    await asyncio.to_thread(nats_env.kill_server, private_nats.state_dir)

    t0 = time.monotonic()
    with pytest.raises(QueueUnavailable):
        await q.put_many([event(99)])
    assert time.monotonic() - t0 < 5, "refused within the request timeout, not hung"

    await asyncio.to_thread(nats_env.restart_server, private_nats.state_dir)
    async with asyncio.timeout(20):
        while True:  # the client reconnects by itself (every 0.5 s)
            try:
                await q.put_many([event(5)])
                break
            except QueueUnavailable:
                await asyncio.sleep(0.1)
    got: list[str] = []
    async with asyncio.timeout(20):
        while len(set(got) - {"99"}) < 6:
            batch = await q.get_batch(10, 1.0)
            got += [d.event.id for d in batch]
            await q.ack(batch)
    assert {str(i) for i in range(6)} <= set(got), "acknowledged before the crash: kept"


def test_kill9_of_producer_broker_and_consumer_loses_nothing_acknowledged_nats(
    private_nats: NatsServer,
):
    """The producer runs through a broker kill -9 and restart (same store), then is killed
    -9 itself; a consumer is killed -9 after some acks; a fresh one drains the stream:
    every event the producer saw acknowledged is processed, no acked event is delivered
    again, and with dedupe by key nothing is processed twice."""
    names = nats_names()
    backend = ["--nats", private_nats.url]
    backend += ["--stream", names["stream"], "--subject", names["subject"]]
    backend += ["--durable", names["durable"]]

    def broker_crash() -> None:
        nats_env.kill_server(private_nats.state_dir)
        time.sleep(1.5)  # the outage itself: longer than the producer's 1 s request timeout
        nats_env.restart_server(private_nats.state_dir)

    r = queue_crash.run_scenario(backend, during_producer=broker_crash)
    assert r.producer_retries >= 1, "the producer did live through the outage"
    assert len(r.produced) >= 200 and len(r.consumer_acked) >= 100
    assert r.produced - set(r.processed) == set(), "acknowledged events lost"
    assert set(r.consumer_acked) & set(r.redelivered) == set(), "acked events delivered again"
    assert [k for k, n in Counter(r.processed).items() if n > 1] == [], "processed twice"
