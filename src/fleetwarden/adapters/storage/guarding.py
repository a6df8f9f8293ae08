"""The SQL store's shared guard state: ``ports.guards`` on ``audit_sql.SqlAuditStore``.

``SqlAuditStore.guarded(after_seq=N)`` is a write transaction that locks the chain head first,
as an append does, then reads the decision records and notes after seq N: a worker replica
decides from them and appends its decisions in the same transaction (``SqlGuardedWrite``), so
replicas decide one after another from the whole history.  The head's row lock is the policy
lock: one lock for appends and guards, so a decision can never slip between a read and a
write.  In PostgreSQL the wait for it is bounded (``lock_timeout``): a replica that hangs
holding it makes the others' guarded writes fail, not wait for ever.

``claim`` inserts a unique name into ``guard_claims`` (migration 0004; ``INSERT ... ON
CONFLICT DO NOTHING``) and answers who holds it: an approval runs on the one replica that
claimed it.  A replica killed mid-transaction leaves neither records nor claims (PostgreSQL
aborts the transaction of a dropped connection; SQLite ignores an uncommitted WAL).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from fleetwarden.core import audit
from fleetwarden.core.audit import AuditDraft, AuditRecord
from fleetwarden.ports.guards import Claim

if TYPE_CHECKING:
    from fleetwarden.adapters.storage.audit_sql import SqlAuditStore

__all__ = ["SqlGuardedWrite", "claims", "take_claim"]

# Mirrors migrations/versions/0004_guard_claims.py (the migrations own the schema).
claims = sa.Table(
    "guard_claims",
    sa.MetaData(),
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("holder", sa.String(255), nullable=False),
    sa.Column("at", sa.String(32), nullable=False),
)


async def take_claim(
    conn: AsyncConnection, name: str, holder: str, now: datetime, *, postgres: bool
) -> Claim:
    """Insert the claim unless the name is taken; who holds it, either way."""
    dialect = postgresql if postgres else sqlite
    inserted = await conn.execute(
        dialect.insert(claims)
        .values(name=name, holder=holder, at=audit.format_time(now))
        .on_conflict_do_nothing(index_elements=["name"])
    )
    row = (
        await conn.execute(sa.select(claims.c.holder, claims.c.at).where(claims.c.name == name))
    ).one()
    return Claim(name, str(row.holder), audit.parse_time(row.at), inserted.rowcount == 1)


class SqlGuardedWrite:
    """``ports.guards.GuardedWrite`` on one open transaction of ``SqlAuditStore.guarded``."""

    def __init__(
        self,
        store: SqlAuditStore,
        conn: AsyncConnection,
        at: tuple[int, str],
        news: list[AuditRecord],
    ) -> None:
        self._store, self._conn, self._at, self._news = store, conn, at, news

    @property
    def news(self) -> Sequence[AuditRecord]:
        return self._news

    @property
    def head(self) -> int:
        return self._at[0]

    async def append(self, drafts: Sequence[AuditDraft]) -> list[bool]:
        if not drafts:
            return []
        with self._store._errors("appending audit records"):
            _, fresh, self._at = await self._store._insert(self._conn, self._at, drafts, ())
        return fresh

    async def claim(self, name: str, holder: str) -> Claim:
        with self._store._errors(f"claiming {name}"):
            return await take_claim(
                self._conn, name, holder, self._store._clock.now(), postgres=self._store._postgres
            )
