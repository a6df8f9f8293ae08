"""One read of an existing audit store from a command: open it (never creating an SQLite file),
run the work, close it. Store errors stay ``AuditStoreError`` for the caller to report."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.ports.audit import AuditStore

__all__ = ["read_store"]

T = TypeVar("T")


def read_store(url: str, work: Callable[[AuditStore], Awaitable[T]]) -> T:
    async def main() -> T:
        store = await open_audit_store(url, create=False)
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())
