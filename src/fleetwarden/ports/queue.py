"""The durable event queue port: accepted events are stored before they are acknowledged.

Implementations: ``adapters/queue/sqlite.py`` (embedded default, WAL) and
``adapters/queue/nats.py`` (NATS JetStream, for several gateway and worker replicas).
Delivery is at-least-once: a consumer that does not ``ack`` gets the message again after
``ack_wait``; effects must be idempotent by event key (``ChangeEvent.key``). A queue folds an
event put again while the first copy still waits; it keeps no lasting "already processed"
marks (a store restored from a backup must get every event it lacks): deciding that a
delivery is a duplicate is the stores' job.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from fleetwarden.core.events import ChangeEvent

__all__ = ["Delivery", "EventQueue", "QueueFull", "QueueUnavailable"]


class QueueFull(Exception):
    """Over the configured depth limit: the gateway answers 429 with Retry-After."""

    def __init__(self, depth: int, limit: int) -> None:
        self.depth, self.limit = depth, limit
        super().__init__(f"queue depth {depth} is over its limit {limit}")


class QueueUnavailable(Exception):
    """The queue cannot store right now (disk, broker): the gateway answers 503."""


@dataclass(frozen=True, slots=True)
class Delivery:
    event: ChangeEvent
    token: str  # implementation's handle for ack/nack
    attempt: int = 1


class EventQueue(Protocol):
    async def put_many(self, events: Sequence[ChangeEvent]) -> int:
        """Durably store the events (all or none) before returning; the result is how many of
        them were folded into a copy already queued (redeliveries). Raises QueueFull or
        QueueUnavailable."""
        ...

    async def get_batch(self, max_items: int, timeout: float) -> list[Delivery]:
        """Up to ``max_items`` deliveries; waits at most ``timeout`` seconds for the first."""
        ...

    async def ack(self, deliveries: Sequence[Delivery]) -> None: ...

    async def nack(self, deliveries: Sequence[Delivery], *, delay: float = 0.0) -> None: ...

    async def depth(self) -> int:
        """Stored and not yet acknowledged."""
        ...

    async def close(self) -> None: ...
