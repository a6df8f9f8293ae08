"""What the service produces, as it happens, for whoever follows it live (the dashboard's
server-sent events): findings appearing, changing and clearing, lifecycle events, decisions
and other audit records.

``Broadcaster.publish`` is called from the pipeline (``Serving.emit``, the healer's appends)
and never waits: each message gets the next id and goes into a bounded ring (for a client that
reconnects with ``Last-Event-ID``) and into every subscriber's bounded queue. A subscriber whose
queue is full is too slow to follow: it is dropped, and its stream ends with a ``dropped``
notice (the client reconnects and resumes from the ring, or reloads). The pipeline never
blocks on a browser. ``Broadcaster.follow`` is what one follower gets, in order: what it
missed (or a ``reload``), then each new message, with a heartbeat where there is none.

What this module does not do: persist anything (the ring is in memory: after a restart a
client's ``Last-Event-ID`` is older than the ring and it is told to reload), or know HTTP.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Broadcaster", "Follower", "Message", "Subscription"]


@dataclass(frozen=True)
class Message:
    """One published message: its id (1, 2, ... in publish order), kind and JSON data."""

    id: int
    kind: str
    data: Mapping[str, Any]


class Subscription:
    """One follower's queue. Iterate ``await next_message()``; None: dropped (too slow)."""

    def __init__(self, owner: Broadcaster, size: int) -> None:
        self._owner = owner
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue(maxsize=size + 1)
        self.size = size
        self.dropped = False

    def _offer(self, message: Message) -> bool:
        if self._queue.qsize() >= self.size:
            self.dropped = True
            self._queue.put_nowait(None)  # the one slot kept for the notice
            return False
        self._queue.put_nowait(message)
        return True

    async def next_message(self) -> Message | None:
        """The next message; None once this subscription was dropped (``dropped``) or the
        broadcaster closed (the service stops)."""
        return await self._queue.get()

    def empty(self) -> bool:
        return self._queue.empty()

    def close(self) -> None:
        self._owner._subscribers.discard(self)


class Broadcaster:
    """Publish without waiting; subscribers with bounded queues; the last ``ring`` messages
    kept for resuming (see the module docstring)."""

    def __init__(self, *, ring: int = 2000, queue: int = 1000) -> None:
        self._ring: deque[Message] = deque(maxlen=ring)
        self._subscribers: set[Subscription] = set()
        self._queue_size = queue
        self.last_id = 0
        self.dropped = 0  # subscribers dropped for being too slow, since start

    @property
    def subscribers(self) -> int:
        return len(self._subscribers)

    def publish(self, kind: str, data: Mapping[str, Any]) -> Message:
        self.last_id += 1
        message = Message(self.last_id, kind, data)
        self._ring.append(message)
        for sub in list(self._subscribers):
            if not sub._offer(message):
                self._subscribers.discard(sub)
                self.dropped += 1
        return message

    def close(self) -> None:
        """The service stops: every subscription ends (its next message is None)."""
        for sub in list(self._subscribers):
            sub._queue.put_nowait(None)
        self._subscribers.clear()

    def subscribe(self) -> Subscription:
        sub = Subscription(self, self._queue_size)
        self._subscribers.add(sub)
        return sub

    def follow(self, last_id: int | None) -> Follower:
        """A follower that has seen up to ``last_id`` (None: a new one)."""
        return Follower(self, last_id)

    def since(self, last_id: int) -> Iterator[Message] | None:
        """The messages after ``last_id`` still in the ring; None when some of them are gone
        (the ring moved past it, or the id is from before a restart): the client reloads."""
        if last_id >= self.last_id:
            return iter(()) if last_id == self.last_id else None
        oldest = self._ring[0].id if self._ring else self.last_id + 1
        if last_id + 1 < oldest:
            return None
        return (m for m in list(self._ring) if m.id > last_id)


class Follower:
    """One follower of a ``Broadcaster`` (a dashboard's event stream), subscribed before the
    ring is read, in one step: nothing published falls between. ``close`` it when it goes."""

    def __init__(self, live: Broadcaster, last_id: int | None) -> None:
        self.live = live
        self._sub = live.subscribe()
        missed = live.since(last_id) if last_id is not None else iter(())
        self._lost = missed is None
        self._missed = list(missed or ())

    async def messages(self, heartbeat: float) -> AsyncIterator[Message | None]:
        """A ``reload`` message when the ring no longer has what was missed, else the missed
        messages; then each new one, and None after ``heartbeat`` seconds without one. Ends
        with a ``dropped`` message when too slow to follow, or silently when the service
        stops."""
        if self._lost:
            yield Message(self.live.last_id, "reload", {"reason": "missed messages"})
        for old in self._missed:
            yield old
        while True:
            try:
                message = await asyncio.wait_for(self._sub.next_message(), heartbeat)
            except TimeoutError:
                yield None
                continue
            if message is None:  # dropped (too slow), or the service stops
                if self._sub.dropped:
                    notice = {"reason": "too slow to follow: reconnect"}
                    yield Message(self.live.last_id, "dropped", notice)
                return
            yield message

    def close(self) -> None:
        self._sub.close()
