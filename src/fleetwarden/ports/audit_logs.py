"""The API-server audit log port: a cluster's ``audit.k8s.io/v1`` events as the log grows.

``adapters.audit_logs.AuditLogTail`` implements it over a file the API server writes
(``--audit-log-path``), following rotation; a webhook or a log shipper could too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from fleetwarden.core.actors import AuditEvent

__all__ = ["AuditLogSource"]


class AuditLogSource(Protocol):
    where: str  # the file (or endpoint), for messages

    def poll(self) -> int:
        """Read what was written since the last call (never raises for bad lines: they are
        counted in ``bad``); how many new events."""
        ...

    def about(self, resource: str, name: str, namespace: str | None) -> Sequence[AuditEvent]:
        """The events read so far about one object, oldest first (bounded: the oldest fall
        out, per object and in number of objects)."""
        ...

    def latest(self) -> datetime | None:
        """The ``stageTimestamp`` of the last event read (None: none yet)."""
        ...

    @property
    def bad(self) -> int:
        """Lines that were not audit events, so far."""
        ...
