"""``fleetwarden audit`` and ``report``: the audit store adapter opened for one read
(``app/auditing.py`` has the URL, times, anchors and the export; ``store_url`` binds serve's
default store into it). SQLAlchemy and Alembic are imported only when a store is opened: they
add half a second to every other command."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from fleetwarden.app.auditing import resolve_store_url

if TYPE_CHECKING:
    from fleetwarden.adapters.storage.audit_sql import SqlAuditStore

__all__ = ["store_url", "with_store"]

T = TypeVar("T")


def store_url(store: str | None, config: Path | None) -> str:
    """The store's URL from ``--store`` or ``--config`` (else serve's default store);
    ``ValueError`` names what is wrong."""
    from fleetwarden.app.service_config import default_store  # YAML and JSON Schema: here only

    return resolve_store_url(store, config, default_store=default_store)


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
