"""``fleetwarden audit``: the audit store adapter opened for one read (``app/auditing.py``
has the URL, times, anchors and the export). SQLAlchemy and Alembic are imported only when a
store is opened: they add half a second to every other command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from fleetwarden.adapters.storage.audit_sql import SqlAuditStore

__all__ = ["with_store"]

T = TypeVar("T")


def with_store(url: str, work: Callable[[SqlAuditStore], Awaitable[T]]) -> T:
    """Open the store (read-only use: never create an SQLite file; migrations still run on an
    existing store that is behind), run ``work``, close. Raises ``AuditStoreError``."""
    from fleetwarden.adapters.storage.audit_sql import open_audit_store

    async def main() -> T:
        store = await open_audit_store(url, create=False)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())
