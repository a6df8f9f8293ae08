"""The shared guard state port: one policy history for every worker replica on one store.

The policy guards (``core.policy``: cooldown, coalescing, flap, blast radius) and the
requests waiting for approval are a history of decisions, and that history is the audit log's
decision records and approval/cancellation notes. ``guarded`` opens the one transaction in
which a replica (1) reads what the others recorded since it last looked, (2) decides from
that state (pure, in ``core``), and (3) appends its decisions — serialised with every other
guarded write on the store, so no two replicas decide from the same stale counts and an
action is either counted *and* on record, or neither (a worker killed mid-transaction leaves
nothing behind).

``GuardedWrite.claim`` is a unique key taken in the same transaction: the first replica to
claim a name (``approve:<decision id>``) holds it for good; the others are told who did.

Implementation: ``adapters/storage/audit_sql.py`` (the chain head's row lock in PostgreSQL,
``BEGIN IMMEDIATE`` in SQLite; claims in ``guard_claims``, migration 0004). Errors are the
audit store's (``ports.audit.AuditStoreError``).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from fleetwarden.core.audit import AuditDraft, AuditRecord

__all__ = ["Claim", "GuardedWrite", "SharedGuards"]


@dataclass(frozen=True, slots=True)
class Claim:
    """Who holds a unique name, since when; ``new``: taken by this very call."""

    name: str
    holder: str
    at: datetime
    new: bool


class GuardedWrite(Protocol):
    """One open guarded transaction (see the module docstring)."""

    @property
    def news(self) -> Sequence[AuditRecord]:
        """The decision, note and outcome records stored after ``after_seq``, oldest first."""
        ...

    @property
    def head(self) -> int:
        """The chain head's seq, moved by this transaction's appends."""
        ...

    async def append(self, drafts: Sequence[AuditDraft]) -> list[bool]:
        """``AuditStore.append_new`` inside this transaction: stored at its commit or not at all."""
        ...

    async def claim(self, name: str, holder: str) -> Claim:
        """Take ``name`` for ``holder`` unless someone holds it; the holder either way."""
        ...


@runtime_checkable
class SharedGuards(Protocol):
    def guarded(self, *, after_seq: int) -> AbstractAsyncContextManager[GuardedWrite]:
        """A transaction holding the store's policy lock; committed when the block ends
        normally, rolled back (nothing appended, nothing claimed) when it raises."""
        ...

    async def head_seq(self) -> int:
        """The chain head's seq now (0 for an empty store)."""
        ...
