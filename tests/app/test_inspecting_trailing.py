"""The debounce's trailing inspection: an event that arrives while the trailing inspection of
its pool is being acknowledged gets a trailing inspection of its own — it is inspected and
acknowledged within the debounce, not left leased until the queue redelivers it (fake queue
whose acknowledgement is held open; the clock is real, the debounce short)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from fleetwarden.app.inspecting import Inspector, NodeDiffer
from fleetwarden.core.attribution import Attribution
from fleetwarden.core.events import ChangeEvent, EventSource, Operation
from fleetwarden.core.pools import NodePoolSpec
from fleetwarden.core.tracking import FindingTracker
from fleetwarden.ports.queue import Delivery


class HeldQueue:
    """Acknowledgements wait for ``release`` while ``hold`` is set; every ack is kept."""

    def __init__(self) -> None:
        self.acked: list[str] = []
        self.hold = asyncio.Event()
        self.released = asyncio.Event()
        self.waiting = asyncio.Event()

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        if self.hold.is_set():
            self.waiting.set()
            await self.released.wait()
        self.acked += [d.event.id for d in deliveries]

    async def nack(self, deliveries: Sequence[Delivery], *, delay: float = 0.0) -> None:
        raise AssertionError("not expected")


def inspector_of(queue: object, **options: Any) -> Inspector:
    """An inspector of the pool ``prod/general`` (no nodes known) taking from ``queue``."""
    spec = NodePoolSpec(name="general", cluster="prod")
    return Inspector(
        queue,  # type: ignore[arg-type]
        [spec],
        NodeDiffer([spec], lambda _cluster: [], FindingTracker(), lambda _event: None),
        Attribution(),
        **options,
    )


def delivery(i: int) -> Delivery:
    event = ChangeEvent(
        id=f"e{i}", source="test", type="t", provider=EventSource.AWS, operation=Operation.SCALE,
        cluster="prod", pool="general",
    )  # fmt: skip
    return Delivery(event, token=str(i))


async def test_an_event_arriving_during_the_trailing_acknowledgement_is_not_stranded():
    queue = HeldQueue()
    inspector = inspector_of(queue, debounce=0.05)
    await inspector.handle([delivery(1)])  # leading edge: inspected and acked at once
    await inspector.handle([delivery(2)])  # within the debounce: a trailing inspection
    queue.hold.set()
    await asyncio.wait_for(queue.waiting.wait(), 5)  # the trailing ack of e2 is under way
    await inspector.handle([delivery(3)])  # arrives meanwhile
    queue.hold.clear()
    queue.released.set()
    async with asyncio.timeout(5):
        while "e3" not in queue.acked:
            await asyncio.sleep(0.01)
    assert queue.acked == ["e1", "e2", "e3"]
    assert inspector.stats.inspections == 3


class BatchQueue:
    """Hands out ``batches`` one per ``get_batch``, then nothing; counts the calls."""

    def __init__(self, batches: list[list[Delivery]]) -> None:
        self.batches, self.calls = batches, 0
        self.acked: list[str] = []
        self.nacked: list[str] = []
        self.second_lease = asyncio.Event()

    async def get_batch(self, max_items: int, timeout: float) -> list[Delivery]:
        self.calls += 1
        if self.calls == 2:
            self.second_lease.set()
        if self.batches:
            return self.batches.pop(0)
        await asyncio.sleep(timeout)
        return []

    async def ack(self, deliveries: Sequence[Delivery]) -> None:
        self.acked += [d.event.id for d in deliveries]

    async def nack(self, deliveries: Sequence[Delivery], *, delay: float = 0.0) -> None:
        self.nacked += [d.event.id for d in deliveries]


async def test_the_next_batch_is_leased_while_one_is_being_recorded():
    """A worker behind a busy gateway waits for the queue's write lock on each lease: the
    next lease runs while the current batch is recorded, not after it. Here recording the
    first batch cannot end until the second lease has been asked for."""
    queue = BatchQueue([[delivery(1)], [delivery(2)]])
    recorded: list[list[str]] = []

    async def record(events: Sequence[ChangeEvent]) -> list[bool]:
        await asyncio.wait_for(queue.second_lease.wait(), 5)
        recorded.append([e.id for e in events])
        return [True] * len(events)

    inspector = inspector_of(queue, record=record, debounce=0.0)
    worker = asyncio.create_task(inspector.run())
    try:
        for _ in range(500):
            if len(queue.acked) == 2:
                break
            await asyncio.sleep(0.01)
        assert recorded == [["e1"], ["e2"]]
        assert queue.acked == ["e1", "e2"]
    finally:
        worker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await worker


async def test_a_batch_leased_ahead_goes_back_to_the_queue_when_the_worker_stops():
    """The worker stops while it records a batch and holds the next one: that one is handed
    back at once (nack), not left leased until its ack_wait runs out."""
    queue = BatchQueue([[delivery(1)], [delivery(2)]])
    recording = asyncio.Event()

    async def record(events: Sequence[ChangeEvent]) -> list[bool]:
        recording.set()
        await asyncio.Event().wait()  # never ends: the worker is stopped meanwhile
        return [True] * len(events)

    inspector = inspector_of(queue, record=record)
    worker = asyncio.create_task(inspector.run())
    await asyncio.wait_for(recording.wait(), 5)
    await asyncio.wait_for(queue.second_lease.wait(), 5)
    await asyncio.sleep(0)  # the lease ahead completes
    worker.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await worker
    assert queue.nacked == ["e2"]
    assert queue.acked == []
