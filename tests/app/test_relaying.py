"""The event relay: events due to a sink (written with their record, real SQLite audit store)
are sent in order, once; a failed send keeps them due; the one repeat left is a crash between
the receiver's answer and the mark."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from fleetwarden.adapters.storage.audit_sql import SqlAuditStore, open_audit_store
from fleetwarden.app.recording import Recorder
from fleetwarden.app.relaying import EventRelay
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.ports.notify import NotifyError


class Feed:
    """A sink that follows events, in memory; ``down`` makes it fail like a dead endpoint."""

    def __init__(self, name: str = "feed") -> None:
        self.name = name
        self.batches: list[list[str]] = []  # event ids per message
        self.down = False
        self.arrived = asyncio.Event()

    async def send_events(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        if self.down:
            raise NotifyError(self.name, "HTTP 503: down", status=503, retryable=True)
        self.batches.append([e["id"] for _, e in events])
        self.arrived.set()

    @property
    def ids(self) -> list[str]:
        return [i for b in self.batches for i in b]


class Crash(BaseException):
    pass


def event(i: int) -> ChangeEvent:
    return ChangeEvent(
        id=f"e{i}",
        source="aws.eks",
        type="aws.eks.UpdateNodegroupConfig",
        provider=EventSource.AWS,
        operation=Operation.SCALE,
        cluster="prod-eu-1",
    ).via("aws")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlAuditStore]:
    s = await open_audit_store(f"sqlite:///{tmp_path / 'audit.db'}")
    yield s
    await s.close()


async def test_due_events_are_sent_in_order_once_and_a_replay_adds_none(store: SqlAuditStore):
    feed, other = Feed(), Feed("other")
    recorder = Recorder(audit=store, deliver_to=("feed", "other"))
    await recorder.record([event(1), event(2)])
    relay = EventRelay(store, [feed, other], batch=10)
    assert await relay.send_due(feed) == 2
    await recorder.record([event(2), event(3)])  # a redelivery of e2 and a new e3
    assert await relay.send_due(feed) == 1
    assert await relay.send_due(feed) == 0
    assert feed.batches == [["e1", "e2"], ["e3"]]
    assert await relay.send_due(other) == 3, "each sink has its own marks"


async def test_a_failed_send_keeps_the_events_due_until_the_sink_answers(store: SqlAuditStore):
    feed = Feed()
    await Recorder(audit=store, deliver_to=("feed",)).record([event(1)])
    relay = EventRelay(store, [feed])
    feed.down = True
    with pytest.raises(NotifyError):
        await relay.send_due(feed)
    feed.down = False
    assert await relay.send_due(feed) == 1
    assert feed.ids == ["e1"]


async def test_a_crash_between_the_answer_and_the_mark_sends_that_batch_again(
    store: SqlAuditStore,
):
    """The at-least-once window no HTTP sink avoids: receivers drop it by the event key."""
    feed = Feed()
    await Recorder(audit=store, deliver_to=("feed",)).record([event(1)])

    def crash(step: str) -> None:
        raise Crash(step)

    with pytest.raises(Crash):
        await EventRelay(store, [feed], checkpoint=crash).send_due(feed)
    assert await EventRelay(store, [feed]).send_due(feed) == 1
    assert feed.ids == ["e1", "e1"]


async def test_the_running_relay_is_woken_by_new_events_and_retries_a_sink_that_was_down(
    store: SqlAuditStore,
):
    feed = Feed()
    feed.down = True
    relay = EventRelay(store, [feed], poll=30.0, backoff_cap=0.05)
    recorder = Recorder(audit=store, deliver_to=("feed",), on_stored=relay.wake)
    task = asyncio.create_task(relay.run())
    try:
        await recorder.record([event(1)])
        async with asyncio.timeout(5):
            while relay.failures == 0:
                await asyncio.sleep(0.01)
        feed.down = False
        async with asyncio.timeout(5):
            await feed.arrived.wait()
        feed.arrived.clear()
        await recorder.record([event(2)])  # woken: long before the 30 s poll
        async with asyncio.timeout(5):
            await feed.arrived.wait()
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert feed.ids == ["e1", "e2"]
