"""Durable event queues behind ``ports.queue.EventQueue``.

``sqlite.SqliteQueue`` is the embedded default (one process owns one SQLite file);
``nats.NatsQueue`` stores events in a NATS JetStream stream shared by several gateway and
worker replicas.  Both acknowledge a ``put_many`` only once the events are durably stored,
deliver at least once, and recognise a re-sent event by ``ChangeEvent.key``.
They carry events; they never interpret them (no decisions here).
"""

from __future__ import annotations

__all__: list[str] = []
