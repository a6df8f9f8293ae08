"""PostgreSQL restarted mid-write: ``serve`` with its audit store on a real PostgreSQL and events
posted throughout; the server is crashed (immediate stop: connections cut, no checkpoint, WAL
replayed at the start) and started again while the workers are writing. The gateway keeps
accepting (the queue is not in PostgreSQL); the workers' writes fail, their deliveries come
back, and once the server is up every accepted event is in the audit store exactly once, with
the hash chain intact (real ``serve`` process, PostgreSQL from scripts/pg-test-env)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import pytest

from fleetwarden.adapters.storage.audit_sql import open_audit_store
from fleetwarden.core.audit import AuditKind
from fleetwarden.ports.audit import AuditStoreError
from tests.support import pg_env
from tests.support.chaos_serve import Load, ServeProcess, wait_for

pytestmark = pytest.mark.live


class Store:
    """Reads the audit store from the test, over its own connections."""

    def __init__(self, url: str) -> None:
        self.url = url

    def event_ids(self) -> list[str]:
        return asyncio.run(self._event_ids())

    async def _event_ids(self) -> list[str]:
        store = await open_audit_store(self.url)
        try:
            return [
                rec.payload["event"]["id"]
                async for rec in store.iterate()
                if rec.kind == AuditKind.EVENT
            ]
        finally:
            await store.close()

    def verify(self) -> tuple[bool, int]:
        async def run() -> tuple[bool, int]:
            store = await open_audit_store(self.url)
            try:
                result = await store.verify()
                return result.ok, result.checked
            finally:
                await store.close()

        return asyncio.run(run())

    def count(self) -> int:
        try:
            return len(self.event_ids())
        except AuditStoreError:  # down: not yet
            return -1


def test_postgres_crashed_mid_write_loses_and_duplicates_nothing(tmp_path, figures):
    state = tmp_path / "pg"
    url = pg_env.fresh_database(pg_env.start_server(state), "chaos")
    store = Store(url)
    svc = ServeProcess(tmp_path, {"queuePath": str(tmp_path / "queue.db"), "store": url})
    try:
        svc.start()
        with Load(svc) as load:
            wait_for(lambda: store.count() >= 300, "300 events in the audit store", 60)
            pg_env.crash_server(state)
            crashed = time.monotonic()
            wait_for(lambda: load.answered_since(crashed) >= 100, "100 answers while it is down")
            pg_env.restart_server(state)
            back = time.monotonic()
            stored_at_restart = store.count()
            wait_for(lambda: store.count() > stored_at_restart, "a write after the restart", 60)
            first_write = time.monotonic()
            more = load.count() + 100
            wait_for(lambda: load.count() >= more, "100 more accepted after the restart")
        wait_for(
            lambda: svc.depth() == 0 and set(load.accepted) <= set(store.event_ids()),
            "every accepted event in the audit store",
            timeout=90,
        )
        drained = time.monotonic()
        stored = Counter(store.event_ids())
        lost = [i for i in load.accepted if i not in stored]
        twice = [i for i, n in stored.items() if n > 1]
        ok, checked = store.verify()
        figures(
            faults=f"PostgreSQL crashed (immediate stop) mid-write, started again after "
            f"{back - crashed:.1f}s",
            acknowledged=len(load.accepted),
            lost=len(lost),
            twice=len(twice),
            recover_s=first_write - back,
            notes=f"the gateway kept accepting (answers {dict(load.answers)}); every accepted "
            f"event stored {drained - back:.1f}s after the restart; chain of {checked} records "
            f"{'verifies' if ok else 'BROKEN'}",
        )
        assert not lost, f"{len(lost)} acknowledged events lost, e.g. {lost[:5]}"
        assert not twice, f"{len(twice)} events stored twice, e.g. {twice[:5]}"
        assert ok
        assert set(load.answers) == {"202"}, load.answers
    finally:
        svc.stop()
        pg_env.stop_server(state)
