"""The audit store port: an append-only, hash-chained log of ``core.audit`` records.

Implementation: ``adapters/storage/audit_sql.py`` (SQLAlchemy; SQLite embedded, PostgreSQL
for several replicas).  Appends are serialised across every writer of one store, so the chain
never forks; a draft whose ``key`` is already stored is not stored again (the existing record
is returned), which makes at-least-once workers safe: the key is the dedupe mark, stored by the
same transaction as the record it guards.  Stores never update or delete records.

The event outbox: ``append_new(..., deliver_to=sinks)`` makes each *new* event record due to
those notification sinks in the same transaction; ``fetch_due`` / ``mark_sent`` are the
sender's side (``app/relaying.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol, runtime_checkable

from fleetwarden.core.audit import AuditDraft, AuditKind, AuditRecord, VerifyResult

__all__ = [
    "AuditConflict",
    "AuditSchemaError",
    "AuditStore",
    "AuditStoreError",
    "AuditUnavailable",
]


class AuditStoreError(Exception):
    """Base of the audit store's errors; the message says what to do."""


class AuditUnavailable(AuditStoreError):
    """The store cannot be reached or written (bad URL, server down, disk, locks)."""


class AuditSchemaError(AuditStoreError):
    """The store's schema is missing or newer than this fleetwarden knows."""


class AuditConflict(AuditStoreError):
    """A draft's explicit id is already taken by another record."""


@runtime_checkable  # isinstance() checks the methods are there (not their types)
class AuditStore(Protocol):
    async def append_many(self, drafts: Sequence[AuditDraft]) -> list[AuditRecord]:
        """Redact, chain and store the drafts in one transaction (all or none).

        Returns one record per draft, in order: the new record, or the stored one for a draft
        whose ``key`` was stored before (also within the same batch).
        """
        ...

    async def append_new(
        self, drafts: Sequence[AuditDraft], *, deliver_to: Sequence[str] = ()
    ) -> list[bool]:
        """``append_many``, answering per draft whether it became a new record (False: its
        key was stored before, or earlier in the batch). Each new ``event`` record is due to
        every sink in ``deliver_to`` from the same transaction on."""
        ...

    async def fetch_due(self, sink: str, *, limit: int = 100) -> list[AuditRecord]:
        """The event records still due to ``sink``, oldest first."""
        ...

    async def mark_sent(self, sink: str, keys: Sequence[str]) -> None:
        """``sink`` has the events of these keys: they are no longer due to it."""
        ...

    def sender_lock(self, sink: str) -> AbstractAsyncContextManager[bool]:
        """Whether this process may send ``sink``'s due events for the block: one sender per
        sink among all the processes that use the store."""
        ...

    async def query(
        self,
        *,
        cluster: str | None = None,
        pool: str | None = None,
        actor: str | None = None,
        kind: AuditKind | Sequence[AuditKind] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        ref: str | None = None,
        payload_contains: str | None = None,
        before_seq: int | None = None,
        limit: int = 100,
    ) -> list[AuditRecord]:
        """Matching records, newest first: ``since`` inclusive, ``until`` exclusive, ``ref``
        a record id the result must reference, ``payload_contains`` a substring of the
        payload's canonical JSON; ``before_seq`` pages backwards."""
        ...

    def iterate(
        self, *, after_seq: int = 0, until_seq: int | None = None
    ) -> AsyncIterator[AuditRecord]:
        """Every record in seq order (read in pages, so it scales to millions)."""
        ...

    async def last(self) -> tuple[int, str] | None:
        """The chain head ``(seq, hash)``; None while the store is empty."""
        ...

    async def verify(self, *, anchors: Mapping[int, str] | None = None) -> VerifyResult:
        """Re-hash the whole chain; the result names the first bad record."""
        ...

    async def close(self) -> None: ...
