"""Sending change events to the notification sinks that follow them (``notify: [{events:
true}]``), from the audit store's event outbox.

An event becomes due to each such sink in the transaction that first stores it
(``app/recording.py``), so a sink is never told about an event the store lacks, and a replayed
event (already stored) is not due again. ``EventRelay.run`` keeps one loop per sink: read the
oldest due events, send them as one batch, then mark them sent. A failed send is retried with
jittered back-off, in order; the events stay due meanwhile (across restarts too). Replicas
sharing a store take turns per sink (``AuditStore.sender_lock``): one sends, the others wait.

Exactly once, and its limit: the mark is written after the receiver answered 2xx, so a crash
between the two sends that batch again. Every item carries the event's ``key`` (and the batch
an ``X-Fleetwarden-Delivery`` id) for the receiver to drop such a repeat; no HTTP receiver can
be told "exactly once" without it.

``checkpoint("after-send")`` runs between the answer and the mark (a no-op outside tests).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from fleetwarden.app.recording import Checkpoint, no_checkpoint
from fleetwarden.logs import get_logger
from fleetwarden.ports.audit import AuditStore, AuditStoreError
from fleetwarden.ports.notify import Backoff, NotifyError

__all__ = ["EventFeed", "EventRelay"]

log = get_logger(__name__)


class EventFeed(Protocol):
    """A sink that takes change events: ``(key, canonical event JSON)`` pairs, in order, as
    one message. Raises ``NotifyError`` and nothing else."""

    @property
    def name(self) -> str: ...

    async def send_events(self, events: Sequence[tuple[str, Mapping[str, Any]]]) -> None: ...

    async def aclose(self) -> None: ...


class EventRelay:
    def __init__(
        self,
        store: AuditStore,
        feeds: Sequence[EventFeed],
        *,
        batch: int = 100,
        poll: float = 1.0,
        backoff_cap: float = 30.0,
        checkpoint: Checkpoint = no_checkpoint,
    ) -> None:
        self.store, self.feeds, self.batch, self.poll = store, list(feeds), batch, poll
        self.backoff_cap, self.checkpoint = backoff_cap, checkpoint
        self._wake = {f.name: asyncio.Event() for f in self.feeds}
        self.sent = 0  # events marked sent, all sinks
        self.failures = 0  # batches that failed (each is retried)

    def wake(self) -> None:
        """New events are due: look now rather than at the next poll."""
        for event in self._wake.values():
            event.set()

    async def run(self) -> None:
        """Until cancelled: one loop per sink, so a sink that is down delays only itself."""
        async with asyncio.TaskGroup() as tg:
            for feed in self.feeds:
                tg.create_task(self._run(feed), name=f"relay:{feed.name}")

    async def _run(self, feed: EventFeed) -> None:
        backoff = Backoff(base=0.5, cap=self.backoff_cap)
        wake = self._wake[feed.name]
        while True:
            wake.clear()
            try:
                sent = await self.send_due(feed)
            except (NotifyError, AuditStoreError) as exc:
                self.failures += 1
                delay = backoff.next()
                log.warning(
                    "event relay failed", sink=feed.name, retry_in=round(delay, 1), error=str(exc)
                )
                await asyncio.sleep(delay)
                continue
            backoff.reset()
            if sent < self.batch:  # caught up: wait for new events (or poll: other replicas)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.poll):
                        await wake.wait()

    async def send_due(self, feed: EventFeed) -> int:
        """One round: the oldest due events of ``feed``, sent and marked; how many (0 also
        when another replica is sending to this sink now)."""
        async with self.store.sender_lock(feed.name) as mine:
            return await self._send_due(feed) if mine else 0

    async def _send_due(self, feed: EventFeed) -> int:
        due = await self.store.fetch_due(feed.name, limit=self.batch)
        items = [(r.key, r.payload.get("event", r.payload)) for r in due if r.key is not None]
        if not items:
            return 0
        await feed.send_events(items)
        self.checkpoint("after-send")
        await self.store.mark_sent(feed.name, [key for key, _ in items])
        self.sent += len(items)
        return len(items)
